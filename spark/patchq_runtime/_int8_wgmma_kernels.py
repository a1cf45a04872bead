"""Gluon kernels of :mod:`patchq_runtime.int8_wgmma` (imported on first use: this
module imports triton at import time, ``int8_wgmma`` does not)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)


@gluon.jit(do_not_specialize=["B"])
def _w8a16_wgmma_kernel(
    q_desc, x_desc, s_ptr, bias_ptr, out_ptr,
    B, V, stride_ob,
    K: gl.constexpr, HAS_BIAS: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr, RS: gl.constexpr = 0,
):
    BLOCK_V: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_B: gl.constexpr = x_desc.block_type.shape[0]
    act_dtype: gl.constexpr = x_desc.dtype

    # batch tiles fastest: the programs running together share one weight slab in L2
    pid = gl.program_id(0)
    nb = gl.cdiv(B, BLOCK_B)
    off_v = (pid // nb) * BLOCK_V
    off_b = (pid % nb) * BLOCK_B

    mma: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_B, 16])
    # conversion layout: warp w converts weight rows 16w..16w+15, the rows its own
    # warpgroup's wgmma reads (so only the warpgroup's own MMA k-2 guards its rows)
    cv: gl.constexpr = gl.BlockedLayout(
        size_per_thread=[2, BLOCK_K // 4], threads_per_warp=[8, 4], warps_per_cta=[num_warps, 1], order=[1, 0])
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_V, BLOCK_K], act_dtype)
    ra: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)

    q_smem = gl.allocate_shared_memory(gl.int8, [STAGES, BLOCK_V, BLOCK_K], q_desc.layout)
    x_smem = gl.allocate_shared_memory(act_dtype, [STAGES, BLOCK_B, BLOCK_K], x_desc.layout)
    a_smem = gl.allocate_shared_memory(act_dtype, [2 - RS, BLOCK_V, BLOCK_K], a_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)

    num_k: gl.constexpr = (K + BLOCK_K - 1) // BLOCK_K
    AHEAD: gl.constexpr = STAGES - 2
    nbytes: gl.constexpr = q_desc.block_type.nbytes + x_desc.block_type.nbytes
    for i in gl.static_range(AHEAD):
        if i < num_k:
            mbarrier.expect(ready.index(i), nbytes)
            tma.async_copy_global_to_shared(q_desc, [off_v, i * BLOCK_K], ready.index(i), q_smem.index(i))
            tma.async_copy_global_to_shared(x_desc, [off_b, i * BLOCK_K], ready.index(i), x_smem.index(i))

    acc = gl.zeros([BLOCK_V, BLOCK_B], gl.float32, layout=mma)
    for k in range(num_k):
        s = k % STAGES
        mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        if RS:
            ar = q_smem.index(s).load(ra).to(act_dtype)
        else:
            a = q_smem.index(s).load(cv).to(act_dtype)
            # a_smem[k % 2] was last read by this warpgroup's MMA k-2, done at wait(1) of step k-1
            a_smem.index(k % 2).store(a)
            fence_async_shared()
        # every warp is past step k-1: MMA k-2 is done in both warpgroups, so the
        # stage it read (k-2) can be refilled, and a_smem[k % 2] is complete
        gl.thread_barrier()
        kn = k + AHEAD
        sn = kn % STAGES
        pred = kn < num_k
        mbarrier.expect(ready.index(sn), nbytes, pred=pred)
        tma.async_copy_global_to_shared(q_desc, [off_v, kn * BLOCK_K], ready.index(sn), q_smem.index(sn), pred=pred)
        tma.async_copy_global_to_shared(x_desc, [off_b, kn * BLOCK_K], ready.index(sn), x_smem.index(sn), pred=pred)
        if RS:
            # A from registers: wait for it before the next step rewrites them
            acc = warpgroup_mma(ar, x_smem.index(s).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        else:
            acc = warpgroup_mma(a_smem.index(k % 2), x_smem.index(s).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))

    offs_v = off_v + gl.arange(0, BLOCK_V, layout=gl.SliceLayout(1, mma))
    scale = gl.load(s_ptr + offs_v, mask=offs_v < V, other=0.0).to(gl.float32)
    acc = acc * scale[:, None]
    if HAS_BIAS:
        bias = gl.load(bias_ptr + offs_v, mask=offs_v < V, other=0.0).to(gl.float32)
        acc = acc + bias[:, None]
    res = acc.to(out_ptr.dtype.element_ty)
    # weight rows are contiguous in `out`: 16-byte stores along V
    st: gl.constexpr = gl.BlockedLayout(
        size_per_thread=[8, 1], threads_per_warp=[16, 2], warps_per_cta=[1, num_warps], order=[0, 1])
    res = gl.convert_layout(res, st)
    sv = off_v + gl.arange(0, BLOCK_V, layout=gl.SliceLayout(1, st))
    sb = off_b + gl.arange(0, BLOCK_B, layout=gl.SliceLayout(0, st))
    ptrs = out_ptr + sb.to(gl.int64)[None, :] * stride_ob + sv[:, None]
    gl.store(ptrs, res, mask=(sv[:, None] < V) & (sb[None, :] < B))

@gluon.jit
def _ws_producer(q_desc, x_desc, q_smem, x_smem, ready, empty, B, V,
                 K: gl.constexpr, STAGES: gl.constexpr):
    # one warp streams the stages of every tile this program owns (persistent grid:
    # the next tile's loads overlap this tile's epilogue)
    BLOCK_V: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_B: gl.constexpr = x_desc.block_type.shape[0]
    num_k: gl.constexpr = (K + BLOCK_K - 1) // BLOCK_K
    nbytes: gl.constexpr = q_desc.block_type.nbytes + x_desc.block_type.nbytes
    nb = gl.cdiv(B, BLOCK_B)
    num_tiles = gl.cdiv(V, BLOCK_V) * nb
    it = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        off_v = (tile // nb) * BLOCK_V
        off_b = (tile % nb) * BLOCK_B
        for k in range(num_k):
            s = it % STAGES
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1, pred=it >= STAGES)
            mbarrier.expect(ready.index(s), nbytes)
            tma.async_copy_global_to_shared(q_desc, [off_v, k * BLOCK_K], ready.index(s), q_smem.index(s))
            tma.async_copy_global_to_shared(x_desc, [off_b, k * BLOCK_K], ready.index(s), x_smem.index(s))
            it += 1


@gluon.jit
def _ws_epilogue(acc, s_ptr, bias_ptr, out_ptr, off_v, off_b, B, V, stride_ob, HAS_BIAS: gl.constexpr):
    # fp32 scale (and bias), one rounding, 16-byte stores along V (weight rows are
    # contiguous in `out`)
    HALF: gl.constexpr = acc.type.shape[0]
    BLOCK_B: gl.constexpr = acc.type.shape[1]
    st: gl.constexpr = gl.BlockedLayout(
        size_per_thread=[8, 1], threads_per_warp=[8, 4], warps_per_cta=[1, 4], order=[0, 1])
    offs_v = off_v + gl.arange(0, HALF, layout=gl.SliceLayout(1, acc.type.layout))
    scale = gl.load(s_ptr + offs_v, mask=offs_v < V, other=0.0).to(gl.float32)
    acc = acc * scale[:, None]
    if HAS_BIAS:
        bias = gl.load(bias_ptr + offs_v, mask=offs_v < V, other=0.0).to(gl.float32)
        acc = acc + bias[:, None]
    res = gl.convert_layout(acc.to(out_ptr.dtype.element_ty), st)
    sv = off_v + gl.arange(0, HALF, layout=gl.SliceLayout(1, st))
    sb = off_b + gl.arange(0, BLOCK_B, layout=gl.SliceLayout(0, st))
    ptrs = out_ptr + sb.to(gl.int64)[None, :] * stride_ob + sv[:, None]
    gl.store(ptrs, res, mask=(sv[:, None] < V) & (sb[None, :] < B))


@gluon.jit
def _ws_consumer(q_smem, x_smem, a_smem, ready, empty, s_ptr, bias_ptr, out_ptr, B, V, stride_ob,
                 G: gl.constexpr, K: gl.constexpr, HAS_BIAS: gl.constexpr, STAGES: gl.constexpr,
                 RS: gl.constexpr):
    BLOCK_V: gl.constexpr = q_smem.type.shape[1]
    # each of the two consumer warpgroups owns half of the weight tile: 64 rows (one
    # wgmma M step) or 128 (two M steps; measured slower on the H200, bench/README.md)
    HALF: gl.constexpr = BLOCK_V // 2
    BLOCK_K: gl.constexpr = q_smem.type.shape[2]
    BLOCK_B: gl.constexpr = x_smem.type.shape[1]
    act_dtype: gl.constexpr = x_smem.dtype
    num_k: gl.constexpr = (K + BLOCK_K - 1) // BLOCK_K
    mma: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_B, 16])
    ra: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    # RS=0: warp w converts weight rows 16w..16w+15 of the half into a_smem
    cv: gl.constexpr = gl.BlockedLayout(
        size_per_thread=[2, BLOCK_K // 4], threads_per_warp=[8, 4], warps_per_cta=[4, 1], order=[1, 0])
    nb = gl.cdiv(B, BLOCK_B)
    num_tiles = gl.cdiv(V, BLOCK_V) * nb
    it = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        off_v = (tile // nb) * BLOCK_V + G * HALF
        off_b = (tile % nb) * BLOCK_B
        acc = gl.zeros([HALF, BLOCK_B], gl.float32, layout=mma)
        for k in range(num_k):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            if RS:
                # A from registers: wait for the MMA before the next step rewrites them
                a = q_smem.index(s).slice(G * HALF, HALF, dim=0).load(ra).to(act_dtype)
                acc = warpgroup_mma(a, x_smem.index(s).permute((1, 0)), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
                mbarrier.arrive(empty.index(s))
            else:
                # A staged through shared memory (two buffers): the conversion of step
                # k overlaps this warpgroup's MMA k-1. a_smem[it % 2] was last read by
                # MMA it-2, complete at the wait(1) of step it-1
                a = q_smem.index(s).slice(G * HALF, HALF, dim=0).load(cv).to(act_dtype)
                a_smem.index(it % 2).store(a)
                fence_async_shared()
                gl.thread_barrier()
                acc = warpgroup_mma(a_smem.index(it % 2), x_smem.index(s).permute((1, 0)), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
                # MMA it-1 is done: release its stage
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=k > 0)
            it += 1
        if not RS:
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES))
        _ws_epilogue(acc, s_ptr, bias_ptr, out_ptr, off_v, off_b, B, V, stride_ob, HAS_BIAS)


@gluon.jit(do_not_specialize=["B"])
def _w8a16_ws_kernel(
    q_desc, x_desc, s_ptr, bias_ptr, out_ptr,
    B, V, stride_ob,
    K: gl.constexpr, HAS_BIAS: gl.constexpr, STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr,
    RS: gl.constexpr = 1,
):
    # warp-specialized: a TMA producer warp and two consumer warpgroups (BLOCK_V / 2
    # weight rows each: 64 or 128) that run unsynchronized, so one converts while the
    # other multiplies. Tiles are strided over the programs: grid = number of tiles
    # (one each) or, persistent, the number of SMs. RS=1: each consumer converts into
    # registers (the wgmma A operand) and waits for its MMA; RS=0: into two shared-memory
    # buffers of its own, keeping one MMA in flight
    BLOCK_V: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_B: gl.constexpr = x_desc.block_type.shape[0]
    q_smem = gl.allocate_shared_memory(gl.int8, [STAGES, BLOCK_V, BLOCK_K], q_desc.layout)
    x_smem = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BLOCK_B, BLOCK_K], x_desc.layout)
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_V // 2, BLOCK_K], x_desc.dtype)
    a0 = gl.allocate_shared_memory(x_desc.dtype, [2 * (1 - RS), BLOCK_V // 2, BLOCK_K], a_layout)
    a1 = gl.allocate_shared_memory(x_desc.dtype, [2 * (1 - RS), BLOCK_V // 2, BLOCK_K], a_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)
    gl.warp_specialize([
        (_ws_consumer, (q_smem, x_smem, a0, ready, empty, s_ptr, bias_ptr, out_ptr, B, V, stride_ob,
                        0, K, HAS_BIAS, STAGES, RS)),
        (_ws_consumer, (q_smem, x_smem, a1, ready, empty, s_ptr, bias_ptr, out_ptr, B, V, stride_ob,
                        1, K, HAS_BIAS, STAGES, RS)),
        (_ws_producer, (q_desc, x_desc, q_smem, x_smem, ready, empty, B, V, K, STAGES)),
    ], [4, 1], [CONSUMER_REGS, 24])
