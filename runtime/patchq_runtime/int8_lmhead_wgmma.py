"""Hopper (sm90) Gluon kernel for the int8 lm-head: async int8 wgmma over digit planes.

Same math as ``int8_lmhead``'s Triton "imma" kernel (the activations split into NP
int8 digit planes by ``_split_rows_kernel``, the int8 weight tile fed to the int8
tensor cores as it arrived, NP exact int32 accumulators combined in fp32), written
in Gluon (``triton.experimental.gluon``) to control what Triton 3.6 will not do on
its own: Triton's pipeliner keeps a wgmma in flight across loop iterations only for
fp32 accumulators (``WGMMAPipeline.cpp``, "Rule 2.1"), so its int8 kernel waits for
every MMA before issuing the next loads. Here the weight and activation tiles
arrive by TMA into a ``STAGES``-deep ring of shared-memory slots, each slot with its
mbarrier; the MMAs of K step ``k`` are issued asynchronously and only those of step
``k - 1`` are waited for before their slot is refilled, so the tensor cores, the
TMA engine and the epilogue of nothing overlap the way CUTLASS's sm90 mainloop does.

Importing this module imports triton's Gluon; ``int8_lmhead`` imports it lazily and
falls back to the Triton kernel when Gluon is missing (Triton < 3.5) or the shapes
do not suit TMA (row strides must be multiples of 16 bytes).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

__all__ = ["wgmma_kernel", "make_descriptors", "launch_args"]


@gluon.jit(do_not_specialize=["B"])
def wgmma_kernel(
    x_desc, w_desc, xs_ptr, s_ptr, bias_ptr, out_ptr,
    B, V, K, stride_ob,
    HAS_BIAS: gl.constexpr, NP: gl.constexpr, STAGES: gl.constexpr,
    WARPS_N: gl.constexpr, INSTR_N: gl.constexpr, num_warps: gl.constexpr,
):
    """out[b, n] = (sum_j 254^(NP-1-j) * sum_k xq[j, b, k] * q[n, k]) * xs[b] * s[n] (+ bias[n]).

    x_desc: TMA descriptor of the digit planes viewed as [NP * BLOCK_B, K] int8,
    block [BLOCK_B, BLOCK_K]; w_desc: of the int8 weight [V, K], block
    [BLOCK_N, BLOCK_K] (rows past V and columns past K read as zeros). One program
    owns BLOCK_N weight rows and all BLOCK_B activation rows.
    """
    BLOCK_B: gl.constexpr = x_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = x_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = w_desc.block_type.shape[0]
    pid = gl.program_id(0)
    off_n = pid * BLOCK_N

    x_smem = gl.allocate_shared_memory(gl.int8, [STAGES * NP, BLOCK_B, BLOCK_K], x_desc.layout)
    w_smem = gl.allocate_shared_memory(gl.int8, [STAGES, BLOCK_N, BLOCK_K], w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)

    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps // WARPS_N, WARPS_N], instr_shape=[16, INSTR_N, 32])
    acc0 = gl.zeros((BLOCK_B, BLOCK_N), gl.int32, layout=mma_layout)
    acc1 = gl.zeros((BLOCK_B, BLOCK_N), gl.int32, layout=mma_layout)
    acc2 = gl.zeros((BLOCK_B, BLOCK_N), gl.int32, layout=mma_layout)

    num_k = gl.cdiv(K, BLOCK_K)
    nbytes: gl.constexpr = NP * x_desc.block_type.nbytes + w_desc.block_type.nbytes
    for i in gl.static_range(STAGES - 1):
        pred = i < num_k
        mbarrier.expect(ready.index(i), nbytes, pred=pred)
        for j in gl.static_range(NP):
            tma.async_copy_global_to_shared(x_desc, [j * BLOCK_B, i * BLOCK_K], ready.index(i),
                                            x_smem.index(i * NP + j), pred=pred)
        tma.async_copy_global_to_shared(w_desc, [off_n, i * BLOCK_K], ready.index(i), w_smem.index(i), pred=pred)

    for kt in range(num_k):
        s = kt % STAGES
        mbarrier.wait(ready.index(s), (kt // STAGES) & 1)
        wt = w_smem.index(s).permute((1, 0))
        acc0 = warpgroup_mma(x_smem.index(s * NP), wt, acc0, is_async=True)
        if NP >= 2:
            acc1 = warpgroup_mma(x_smem.index(s * NP + 1), wt, acc1, is_async=True)
        if NP >= 3:
            acc2 = warpgroup_mma(x_smem.index(s * NP + 2), wt, acc2, is_async=True)
        # the MMAs of step kt - 1 are done: their slot takes step kt + STAGES - 1
        acc0, acc1, acc2 = warpgroup_mma_wait(num_outstanding=NP, deps=(acc0, acc1, acc2))
        nk = kt + STAGES - 1
        ns = nk % STAGES
        pred = nk < num_k
        mbarrier.expect(ready.index(ns), nbytes, pred=pred)
        for j in gl.static_range(NP):
            tma.async_copy_global_to_shared(x_desc, [j * BLOCK_B, nk * BLOCK_K], ready.index(ns),
                                            x_smem.index(ns * NP + j), pred=pred)
        tma.async_copy_global_to_shared(w_desc, [off_n, nk * BLOCK_K], ready.index(ns), w_smem.index(ns), pred=pred)
    acc0, acc1, acc2 = warpgroup_mma_wait(num_outstanding=0, deps=(acc0, acc1, acc2))
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))

    acc = acc0.to(gl.float32)
    if NP >= 2:
        acc = acc * 254.0 + acc1.to(gl.float32)
    if NP >= 3:
        acc = acc * 254.0 + acc2.to(gl.float32)
    offs_b = gl.arange(0, BLOCK_B, layout=gl.SliceLayout(1, mma_layout))
    offs_n = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma_layout))
    nmask = offs_n < V
    xs = gl.load(xs_ptr + offs_b)
    scale = gl.load(s_ptr + offs_n, mask=nmask, other=0.0).to(gl.float32)
    acc = acc * gl.expand_dims(xs, 1) * gl.expand_dims(scale, 0)
    if HAS_BIAS:
        bias = gl.load(bias_ptr + offs_n, mask=nmask, other=0.0).to(gl.float32)
        acc = acc + gl.expand_dims(bias, 0)
    ptrs = out_ptr + gl.expand_dims(offs_b, 1) * stride_ob + gl.expand_dims(offs_n, 0)
    mask = gl.expand_dims(offs_b < B, 1) & gl.expand_dims(nmask, 0)
    gl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def make_descriptors(xq, q, block_b: int, block_n: int, block_k: int):
    """TMA descriptors for the digit planes ``xq`` ``[NP, BLOCK_B, K]`` and the weight
    ``q`` ``[V, K]`` (both int8, contiguous rows).

    Raises:
        AssertionError: a base pointer is not 16-byte aligned or a row stride is
            not a multiple of 16 bytes (TMA's rules; the caller checks first).
    """
    n_planes, rows, k = xq.shape
    x_layout = gl.NVMMASharedLayout.get_default_for([block_b, block_k], gl.int8)
    w_layout = gl.NVMMASharedLayout.get_default_for([block_n, block_k], gl.int8)
    x_desc = TensorDescriptor(xq, [n_planes * rows, k], [k, 1], [block_b, block_k], x_layout)
    w_desc = TensorDescriptor(q, list(q.shape), [q.stride(0), 1], [block_n, block_k], w_layout)
    return x_desc, w_desc


def launch_args(num_warps: int, block_n: int) -> dict:
    """Warps along N and the wgmma instruction's N for ``num_warps`` over a
    64-row tile: 4 warps per warpgroup along M, warpgroups along N; int8 wgmma
    takes N up to 224, so each warpgroup's share is issued in pieces of <= 128."""
    warps_n = max(1, num_warps // 4)
    return {"WARPS_N": warps_n, "INSTR_N": min(block_n // warps_n, 128)}
