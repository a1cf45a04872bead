"""The Triton kernels that :mod:`patchq_runtime.int8_lmhead` ships, and their launch plan.

``int8_lmhead`` holds the vLLM-facing API, the launch tables and the dispatch; this
module holds the kernels it launches and :func:`kernel_calls`, which turns one launch
configuration into the list of launches. Kernels that only the benchmark's sweep
compares against (a CUDA-core GEMV, the weight-as-A MMA kernel of small batches, the
PTX int8->bf16 conversion) live in ``bench/int8_kernels_dev.py``.

Kernels (``KERNELS`` keys):

``dott``   w8a16, activations as MMA operand A, the int8 weight tile converted to
           bf16/fp16 in registers as operand B, NSUB (1, 2, 4) MMAs of SUB_B rows per
           converted tile. One pass over the weight; at the copy ceiling up to 16 rows.
``gemm``   w8a16 for large batches: ``out^T = W x^T`` with the int8 weight tile as
           operand A of a Hopper wgmma, converted in registers (wgmma takes A from
           registers, B -- the activation tile -- from shared memory), the int8 and
           activation tiles in a ``num_stages``-deep cp.async ring and the wgmma kept
           in flight across K steps so the conversion overlaps the MMA. 2-D grid over
           (weight rows, batch tiles), batch tiles fastest so the programs that run at
           the same time share one weight slab in L2 (it is read from DRAM once).
``stats``, ``split``, ``imma``
           the int8-tensor-core path (17-128 rows): the activation rows are split into
           int8 digit planes and multiplied with the unconverted int8 weight; see
           :func:`kernel_calls` for the plan and ``_PLANES_RULE_L1_OVER_MAX`` in
           ``int8_lmhead`` for the two-plane rule. Outlier channels (a few channels far
           above the row's typical size, as in trained models' final hidden states) are
           taken out of the digit planes and added exactly in the epilogue, so such
           rows keep two planes.

Importing this module imports neither torch nor triton.
"""

from __future__ import annotations

#: Largest hidden size for the "imma" kernel: its int32 accumulators hold at most
#: K * 128 * 127 (digits in [-127, 127], weights in [-128, 127]) < 2^31.
IMMA_MAX_K = 132_000
#: Outlier channel slots of the imma path (per batch: the union over its rows). A
#: batch whose rows need more outlier channels than this is split without them (three
#: planes when the rows need it). Scratch: NC fp32 per padded row + NC int32.
IMMA_OUTLIER_SLOTS = 16
#: A row that fails the two-plane rule marks as outlier channels those with
#: |x| > (sum of |x| over its channels <= sum |x| / L1_OVER_MAX) / OUTLIER_RATIO: its
#: remaining ("dense") part then has max |x| <= its L1 / ~OUTLIER_RATIO, which passes
#: the rule (L1 >= L1_OVER_MAX * max) with room to spare. Gaussian rows mark nothing
#: (no channel beyond ~8 sigma at H = 3072).
OUTLIER_RATIO = 320.0

_KERNELS = None


def build_kernels():
    """The jit kernels (built on first use: no triton import at module import)."""
    global _KERNELS
    if _KERNELS is not None:
        return _KERNELS
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["B"])
    def _w8a16_dott_kernel(
        x_ptr, q_ptr, s_ptr, bias_ptr, out_ptr,
        B, V, K, stride_xb, stride_qn, stride_ob,
        HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SUB_B: tl.constexpr, NSUB: tl.constexpr,
    ):
        # Activation rows are the MMA's A operand, the converted weight tile its B
        # operand. The int8 tile arrives in shared memory by 16-byte cp.async
        # (num_stages deep), is converted once per K step, and feeds NSUB (1, 2 or 4)
        # MMAs of SUB_B activation rows each, so a batch of NSUB * SUB_B rows reads the
        # weight once. SUB_B < 64 keeps Triton on mma.sync with both operands in
        # registers; a single SUB_B = 64 tile goes to wgmma (operand B staged through
        # shared memory).
        pid = tl.program_id(0)
        offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        rows = tl.minimum(offs_n, V - 1)  # tail rows re-read the last row; stores are masked
        offs_k = tl.arange(0, BLOCK_K)
        offs_s = tl.arange(0, SUB_B)
        q_ptrs = q_ptr + rows.to(tl.int64)[:, None] * stride_qn + offs_k[None, :]  # [BLOCK_N, BLOCK_K]
        x_ptrs = x_ptr + offs_s[:, None] * stride_xb + offs_k[None, :]  # [SUB_B, BLOCK_K]
        m0 = offs_s < B
        m1 = (offs_s + SUB_B) < B
        m2 = (offs_s + 2 * SUB_B) < B
        m3 = (offs_s + 3 * SUB_B) < B
        acc0 = tl.zeros((SUB_B, BLOCK_N), dtype=tl.float32)
        acc1 = tl.zeros((SUB_B, BLOCK_N), dtype=tl.float32)
        acc2 = tl.zeros((SUB_B, BLOCK_N), dtype=tl.float32)
        acc3 = tl.zeros((SUB_B, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            if EVEN_K:
                kmask = offs_k < BLOCK_K
                w = tl.load(q_ptrs)
            else:
                kmask = (k0 + offs_k) < K
                w = tl.load(q_ptrs, mask=kmask[None, :], other=0)
            wt = tl.trans(w.to(x_ptr.dtype.element_ty))
            x0 = tl.load(x_ptrs, mask=m0[:, None] & kmask[None, :], other=0.0)
            acc0 = tl.dot(x0, wt, acc0)
            if NSUB >= 2:
                x1 = tl.load(x_ptrs + SUB_B * stride_xb, mask=m1[:, None] & kmask[None, :], other=0.0)
                acc1 = tl.dot(x1, wt, acc1)
            if NSUB >= 4:
                x2 = tl.load(x_ptrs + 2 * SUB_B * stride_xb, mask=m2[:, None] & kmask[None, :], other=0.0)
                acc2 = tl.dot(x2, wt, acc2)
                x3 = tl.load(x_ptrs + 3 * SUB_B * stride_xb, mask=m3[:, None] & kmask[None, :], other=0.0)
                acc3 = tl.dot(x3, wt, acc3)
            q_ptrs += BLOCK_K
            x_ptrs += BLOCK_K
        scale = tl.load(s_ptr + rows).to(tl.float32)[None, :]
        if HAS_BIAS:
            bias = tl.load(bias_ptr + rows).to(tl.float32)[None, :]
        else:
            bias = tl.zeros((1, BLOCK_N), dtype=tl.float32)
        nmask = (offs_n < V)[None, :]
        out_ptrs = out_ptr + offs_s[:, None] * stride_ob + offs_n[None, :]
        ty = out_ptr.dtype.element_ty
        tl.store(out_ptrs, (acc0 * scale + bias).to(ty), mask=m0[:, None] & nmask)
        if NSUB >= 2:
            tl.store(out_ptrs + SUB_B * stride_ob, (acc1 * scale + bias).to(ty), mask=m1[:, None] & nmask)
        if NSUB >= 4:
            tl.store(out_ptrs + 2 * SUB_B * stride_ob, (acc2 * scale + bias).to(ty), mask=m2[:, None] & nmask)
            tl.store(out_ptrs + 3 * SUB_B * stride_ob, (acc3 * scale + bias).to(ty), mask=m3[:, None] & nmask)

    @triton.jit(do_not_specialize=["B"])
    def _w8a16_gemm_kernel(
        x_ptr, q_ptr, s_ptr, bias_ptr, out_ptr,
        B, V, K, stride_xb, stride_qn, stride_ob,
        HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_K: tl.constexpr,
    ):
        # out[b, n] for BLOCK_N weight rows x BLOCK_B activation rows, computed as the
        # transposed tile acc[n, b] = sum_k W[n, k] x[b, k]: the weight tile is the MMA's
        # A operand (converted to bf16/fp16 in registers: wgmma reads A from
        # registers), the activation tile its B operand (shared memory). Programs are
        # ordered batch tile fastest: those in flight together share a weight slab.
        pid = tl.program_id(0)
        nb = tl.cdiv(B, BLOCK_B)
        pid_n = pid // nb
        pid_b = pid - pid_n * nb
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
        rows = tl.minimum(offs_n, V - 1)  # tails re-read the last row / activation; stores are masked
        bs = tl.minimum(offs_b, B - 1)
        offs_k = tl.arange(0, BLOCK_K)
        q_ptrs = q_ptr + rows.to(tl.int64)[:, None] * stride_qn + offs_k[None, :]  # [BLOCK_N, BLOCK_K]
        x_ptrs = x_ptr + bs.to(tl.int64)[None, :] * stride_xb + offs_k[:, None]  # [BLOCK_K, BLOCK_B]
        acc = tl.zeros((BLOCK_N, BLOCK_B), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            if EVEN_K:
                w = tl.load(q_ptrs)
                xt = tl.load(x_ptrs)
            else:
                kmask = (k0 + offs_k) < K
                w = tl.load(q_ptrs, mask=kmask[None, :], other=0)
                xt = tl.load(x_ptrs, mask=kmask[:, None], other=0.0)
            acc = tl.dot(w.to(x_ptr.dtype.element_ty), xt, acc)
            q_ptrs += BLOCK_K
            x_ptrs += BLOCK_K
        acc = acc * tl.load(s_ptr + rows).to(tl.float32)[:, None]
        if HAS_BIAS:
            acc = acc + tl.load(bias_ptr + rows).to(tl.float32)[:, None]
        out_ptrs = out_ptr + offs_b.to(tl.int64)[None, :] * stride_ob + offs_n[:, None]
        tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(offs_n < V)[:, None] & (offs_b < B)[None, :])

    @triton.jit(do_not_specialize=["B"])
    def _row_stats_kernel(
        x_ptr, cmap_ptr, B, K, stride_xb,
        CHUNK: tl.constexpr, L1_OVER_MAX: tl.constexpr, OUTLIER_RATIO: tl.constexpr,
    ):
        # One program per activation row. A row that fails the two-plane rule
        # (sum |x| < L1_OVER_MAX * max |x|) marks its outlier channels in the batch's
        # channel map (cmap[k] = 1; all writers store the same value): those with
        # |x| > T, T = (sum of |x| over channels <= sum|x| / L1_OVER_MAX) / OUTLIER_RATIO.
        b = tl.program_id(0)
        offs = tl.arange(0, CHUNK)
        live = b < B
        amax = tl.zeros((CHUNK,), dtype=tl.float32)
        asum = tl.zeros((CHUNK,), dtype=tl.float32)
        for k0 in range(0, K, CHUNK):
            m = ((k0 + offs) < K) & live
            av = tl.abs(tl.load(x_ptr + b * stride_xb + k0 + offs, mask=m, other=0.0).to(tl.float32))
            av = tl.where(av == av, av, 0.0)  # NaN rows mark nothing useful; the split flags them
            amax = tl.maximum(amax, av)
            asum += av
        rmax = tl.max(amax, axis=0)
        rsum = tl.sum(asum, axis=0)
        if rsum < L1_OVER_MAX * rmax:
            lim = rsum / L1_OVER_MAX
            dsum = tl.zeros((CHUNK,), dtype=tl.float32)
            for k0 in range(0, K, CHUNK):
                m = ((k0 + offs) < K) & live
                av = tl.abs(tl.load(x_ptr + b * stride_xb + k0 + offs, mask=m, other=0.0).to(tl.float32))
                dsum += tl.where(av <= lim, av, 0.0)
            thr = tl.sum(dsum, axis=0) / OUTLIER_RATIO
            for k0 in range(0, K, CHUNK):
                m = ((k0 + offs) < K) & live
                av = tl.abs(tl.load(x_ptr + b * stride_xb + k0 + offs, mask=m, other=0.0).to(tl.float32))
                tl.store(cmap_ptr + k0 + offs, tl.full((CHUNK,), 1, tl.int32), mask=m & (av > thr))

    @triton.jit(do_not_specialize=["B"])
    def _split_rows_kernel(
        x_ptr, cmap_ptr, xq_ptr, xs_ptr, need_ptr, xo_ptr, cidx_ptr, ncnt_ptr, B, K, stride_xb,
        NP: tl.constexpr, CHUNK: tl.constexpr, L1_OVER_MAX: tl.constexpr, NC: tl.constexpr,
    ):
        # One program per padded activation row b (rows >= B are written as zeros).
        # If the batch's outlier channels (cmap) number at most NC, they are taken out
        # of every row: xo[b, j] = x[b, cidx[j]] (added exactly by the imma epilogue),
        # and the rest ("dense" part) is split; otherwise the whole row is split and
        # ncnt = 0. The split: NP int8 digits of base 254 against the split part's
        # absmax, x ~= step * sum_j d_j * 254^(NP-1-j), d_j in [-127, 127], step =
        # absmax / (127 * 254^(NP-1)); digit j is rint(r_j / step_j) of the running
        # residual, updated with one fused multiply-add, so |x - x_hat| <= step / 2
        # plus the fp32 roundings of the steps (<= 2^-23 * absmax in all). NaN/Inf rows
        # get xs = NaN; rows with absmax below ~1e-31 get a subnormal step.
        # need[b] = 1 when the split part's sum |x| < L1_OVER_MAX * its absmax: two
        # planes alone would not be accurate enough (see _PLANES_RULE_L1_OVER_MAX).
        b = tl.program_id(0)
        offs = tl.arange(0, CHUNK)
        live = b < B
        cnt = tl.sum(tl.zeros((CHUNK,), dtype=tl.int32), axis=0)
        if NC > 0:
            for k0 in range(0, K, CHUNK):
                cnt += tl.sum(tl.load(cmap_ptr + k0 + offs, mask=(k0 + offs) < K, other=0), axis=0)
        use = (cnt <= NC) & (cnt > 0)
        amax = tl.zeros((CHUNK,), dtype=tl.float32)
        asum = tl.zeros((CHUNK,), dtype=tl.float32)
        bad = tl.zeros((CHUNK,), dtype=tl.int32)
        for k0 in range(0, K, CHUNK):
            mk = (k0 + offs) < K
            v = tl.load(x_ptr + b * stride_xb + k0 + offs, mask=mk & live, other=0.0).to(tl.float32)
            av = tl.abs(v)
            bad = tl.maximum(bad, ((v != v) | (av == float("inf"))).to(tl.int32))
            if NC > 0:
                f = tl.load(cmap_ptr + k0 + offs, mask=mk, other=0) != 0
                av = tl.where(f & use, 0.0, av)
            amax = tl.maximum(amax, av)
            asum += tl.where(av == av, av, 0.0)
        rmax = tl.max(amax, axis=0)
        rsum = tl.sum(asum, axis=0)
        step = rmax / 127.0
        for _j in tl.static_range(NP - 1):
            step = step / 254.0
        isbad = tl.max(bad, axis=0) > 0
        # a zero row, or one so small that its step underflows, gives zero digits
        xs = tl.where(isbad, float("nan"), tl.where(step > 0, step, 0.0))
        tl.store(xs_ptr + b, xs)
        tl.store(need_ptr + b, ((rsum < L1_OVER_MAX * rmax) & (rmax > 0) & (~isbad)).to(tl.int32))
        if NC > 0:
            if b == 0:
                tl.store(ncnt_ptr, tl.where(use, cnt, 0))
        top = rmax / 127.0
        inv_top = tl.where(step > 0, 1.0 / top, 0.0)
        base = tl.sum(tl.zeros((CHUNK,), dtype=tl.int32), axis=0)
        for k0 in range(0, K, CHUNK):
            mk = (k0 + offs) < K
            r = tl.load(x_ptr + b * stride_xb + k0 + offs, mask=mk & live, other=0.0).to(tl.float32)
            r = tl.where(r == r, r, 0.0)
            r = tl.where(tl.abs(r) == float("inf"), 0.0, r)
            if NC > 0:
                fi = tl.load(cmap_ptr + k0 + offs, mask=mk, other=0)
                f = (fi != 0) & use
                pos = base + tl.cumsum(fi, axis=0) - 1
                tl.store(xo_ptr + b * NC + pos, r, mask=f)
                if b == 0:
                    tl.store(cidx_ptr + pos, k0 + offs, mask=f)
                base += tl.sum(fi, axis=0)
                r = tl.where(f, 0.0, r)
            step_j = top
            inv_j = inv_top
            for j in tl.static_range(NP):
                # round half to even: one fp32 rounding of |v| < 2^22 against 1.5 * 2^23
                d = (r * inv_j + 12582912.0) - 12582912.0
                d = tl.minimum(tl.maximum(d, -127.0), 127.0)
                r = tl.fma(-d, step_j, r)
                step_j = step_j / 254.0
                inv_j = inv_j * 254.0
                tl.store(xq_ptr + (j * tl.num_programs(0) + b) * K + k0 + offs, d.to(tl.int8), mask=mk)

    @triton.jit(do_not_specialize=["B"])
    def _w8a16_imma_kernel(
        xq_ptr, xs_ptr, need_ptr, xo_ptr, cidx_ptr, ncnt_ptr, cmap_ptr, q_ptr, s_ptr, bias_ptr, out_ptr,
        B, V, K, stride_qn, stride_ob,
        HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_B: tl.constexpr, NP: tl.constexpr,
        NP_SPLIT: tl.constexpr, STACK: tl.constexpr, GATE: tl.constexpr, NC: tl.constexpr,
        ZERO_CMAP: tl.constexpr, OUT_DOT: tl.constexpr,
    ):
        # w8a16 on the int8 tensor cores: the activations arrive as NP_SPLIT int8
        # digit planes ([NP_SPLIT, BLOCK_B, K], from _split_rows_kernel) of which the
        # first NP are used; the int8 weight tile goes from shared memory straight
        # into the MMA (no conversion), and each plane accumulates exactly in int32
        # (|sum| <= K * 128 * 127 < 2^31 for K <= IMMA_MAX_K). The planes are
        # combined once, in fp32, in the epilogue, plus the outlier channels (NC > 0:
        # ncnt of them, xo[b, j] * q[n, cidx[j]] in fp32). GATE 2 / 3: the launch does
        # its work only if no row / some row of the batch needs the third plane (the
        # two launches of the adaptive mode; GATE 0 always runs).
        offs_b = tl.arange(0, BLOCK_B)
        if ZERO_CMAP:
            # the last launch of a plan clears the outlier-channel map for the next call
            # (the split, its only reader, ran before this launch)
            if tl.program_id(0) == 0:
                offs_c = tl.arange(0, 1024)
                for c0 in range(0, K, 1024):
                    tl.store(cmap_ptr + c0 + offs_c, tl.zeros((1024,), dtype=tl.int32), mask=(c0 + offs_c) < K)
        run = GATE == 0
        if GATE != 0:
            need = tl.max(tl.load(need_ptr + offs_b), axis=0)
            run = (need == 0) if GATE == 2 else (need != 0)
        if run:
            pid = tl.program_id(0)
            offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
            rows = tl.minimum(offs_n, V - 1)  # tail rows re-read the last row; stores are masked
            offs_k = tl.arange(0, BLOCK_K)
            q_ptrs = q_ptr + rows.to(tl.int64)[:, None] * stride_qn + offs_k[None, :]  # [BLOCK_N, BLOCK_K]
            if NC > 0:
                # outlier channels: count and ids loaded before the K loop (their latency hides
                # behind it); the weight columns and values in one round trip after it
                offs_j = tl.arange(0, NC)
                ncnt = tl.load(ncnt_ptr)
                jm = offs_j < ncnt
                cj = tl.load(cidx_ptr + offs_j, mask=jm, other=0)
            plane = BLOCK_B * K
            if STACK:
                # the NP planes as one [NP * BLOCK_B, BLOCK_K] operand: one MMA chain per K step
                offs_pb = tl.arange(0, NP * BLOCK_B)
                a_ptrs = xq_ptr + offs_pb[:, None] * K + offs_k[None, :]
                acc_s = tl.zeros((NP * BLOCK_B, BLOCK_N), dtype=tl.int32)
            else:
                a_ptrs = xq_ptr + offs_b[:, None] * K + offs_k[None, :]  # [BLOCK_B, BLOCK_K], plane 0
            acc0 = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.int32)
            acc1 = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.int32)
            acc2 = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.int32)
            acc3 = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.int32)
            for k0 in range(0, K, BLOCK_K):
                if EVEN_K:
                    w = tl.load(q_ptrs)
                else:
                    kmask = (k0 + offs_k) < K
                    w = tl.load(q_ptrs, mask=kmask[None, :], other=0)
                wt = tl.trans(w)
                if STACK:
                    if EVEN_K:
                        a_s = tl.load(a_ptrs)
                    else:
                        a_s = tl.load(a_ptrs, mask=kmask[None, :], other=0)
                    acc_s = tl.dot(a_s, wt, acc_s, out_dtype=tl.int32)
                else:
                    if EVEN_K:
                        a0 = tl.load(a_ptrs)
                    else:
                        a0 = tl.load(a_ptrs, mask=kmask[None, :], other=0)
                    acc0 = tl.dot(a0, wt, acc0, out_dtype=tl.int32)
                    if NP >= 2:
                        if EVEN_K:
                            a1 = tl.load(a_ptrs + plane)
                        else:
                            a1 = tl.load(a_ptrs + plane, mask=kmask[None, :], other=0)
                        acc1 = tl.dot(a1, wt, acc1, out_dtype=tl.int32)
                    if NP >= 3:
                        if EVEN_K:
                            a2 = tl.load(a_ptrs + 2 * plane)
                        else:
                            a2 = tl.load(a_ptrs + 2 * plane, mask=kmask[None, :], other=0)
                        acc2 = tl.dot(a2, wt, acc2, out_dtype=tl.int32)
                    if NP >= 4:
                        if EVEN_K:
                            a3 = tl.load(a_ptrs + 3 * plane)
                        else:
                            a3 = tl.load(a_ptrs + 3 * plane, mask=kmask[None, :], other=0)
                        acc3 = tl.dot(a3, wt, acc3, out_dtype=tl.int32)
                q_ptrs += BLOCK_K
                a_ptrs += BLOCK_K
            if STACK:
                # plane j weighs 254^(NP-1-j) (exact in fp32 for NP <= 4)
                pj = NP - 1 - tl.arange(0, NP)
                digit_w = tl.where(pj == 0, 1.0, tl.where(pj == 1, 254.0, tl.where(pj == 2, 64516.0, 16387064.0)))
                acc = tl.sum(tl.reshape(acc_s.to(tl.float32), (NP, BLOCK_B, BLOCK_N)) * digit_w[:, None, None],
                             axis=0)
            else:
                acc = acc0.to(tl.float32)
                if NP >= 2:
                    acc = acc * 254.0 + acc1.to(tl.float32)
                if NP >= 3:
                    acc = acc * 254.0 + acc2.to(tl.float32)
                if NP >= 4:
                    acc = acc * 254.0 + acc3.to(tl.float32)
            bmask = offs_b < B
            xs = tl.load(xs_ptr + offs_b)
            for _j in tl.static_range(NP_SPLIT - NP):
                xs = xs * 254.0  # planes past NP dropped: the last used plane's step
            acc = acc * xs[:, None]
            if NC > 0 and OUT_DOT:
                if ncnt > 0:
                    qo = tl.load(q_ptr + rows.to(tl.int64)[None, :] * stride_qn + cj[:, None], mask=jm[:, None],
                                 other=0)  # [NC, BLOCK_N] int8
                    xo = tl.load(xo_ptr + offs_b[:, None] * NC + offs_j[None, :], mask=jm[None, :], other=0.0)
                    # exact products (bf16/fp16 value x int8), fp32 sums: a CUDA-core dot
                    acc += tl.dot(xo, qo.to(tl.float32), input_precision="ieee")
            if NC > 0 and not OUT_DOT:
                # one channel at a time (fewer registers than the dot)
                q_rows = q_ptr + rows.to(tl.int64) * stride_qn
                for j in range(0, ncnt):
                    qc = tl.load(q_rows + tl.load(cidx_ptr + j)).to(tl.float32)
                    xv = tl.load(xo_ptr + offs_b * NC + j)
                    acc += xv[:, None] * qc[None, :]
            acc = acc * tl.load(s_ptr + rows).to(tl.float32)[None, :]
            if HAS_BIAS:
                acc = acc + tl.load(bias_ptr + rows).to(tl.float32)[None, :]
            out_ptrs = out_ptr + offs_b[:, None] * stride_ob + offs_n[None, :]
            tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=bmask[:, None] & (offs_n < V)[None, :])

    _KERNELS = {"dott": _w8a16_dott_kernel, "gemm": _w8a16_gemm_kernel, "imma": _w8a16_imma_kernel,
                "split": _split_rows_kernel, "stats": _row_stats_kernel}
    return _KERNELS


#: Scratch of the imma path, per (device, stream, planes, BLOCK_B, K, NC): the digit
#: planes (NP_SPLIT * BLOCK_B * K int8), steps and flags (BLOCK_B fp32 + int32), the
#: outlier-channel map (K int32, kept zero between calls: the plan's last launch
#: clears it), outlier values (BLOCK_B * NC fp32), channel list and count. At most
#: ~1.2 MB per (stream, bucket) for the 3072-wide head (3 * 128 * 3072 + 32 KiB).
#: Reused by every call on the same stream (stream order keeps calls apart; under
#: CUDA graphs the captured launches use the same buffers).
_SCRATCH: dict = {}


def _interpreting() -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET", "") == "1"


def _scratch(device, n_split, block_b, K, nc):
    import torch

    stream = torch.cuda.current_stream(device).cuda_stream
    key = (device.index, stream, n_split, block_b, K, nc)
    hit = _SCRATCH.get(key)
    if hit is None:
        def e(shape, dtype):
            return torch.empty(shape, dtype=dtype, device=device)

        hit = (e((n_split, block_b, K), torch.int8), e((block_b,), torch.float32), e((block_b,), torch.int32),
               torch.zeros((K,), dtype=torch.int32, device=device), e((block_b, nc), torch.float32),
               e((nc,), torch.int32), e((1,), torch.int32))
        _SCRATCH[key] = hit
    return hit


#: Extra kernel kinds (name -> planner) registered by the benchmark's development
#: module (bench/int8_kernels_dev.py); never populated in serving.
EXTRA_PLANNERS: dict = {}


def kernel_calls(cfg: dict, x2, q, scales, bias, out, alloc=None, l1_over_max: float = 256.0):
    """The launches for one batch (tile): a list of (jit function, args, kwargs, grid).

    One launch for "dott" (the whole batch in one tile of ``BLOCK_B`` rows) and "gemm"
    (any batch: a grid over weight-row and batch tiles). For "imma" (4 launches): the
    row statistics (which mark outlier channels in the channel map), the digit split,
    then the int8 MMA kernel (two gated variants of it when NP is "auto"; the last one
    clears the channel map). Its scratch is :data:`_SCRATCH` (per device, stream and
    bucket) on CUDA, else ``alloc(shape, dtype)`` per call (default ``torch.empty``;
    the benchmark's precompile passes stand-ins): ``NP_SPLIT * BLOCK_B * K`` int8
    digits, ``BLOCK_B`` fp32 steps and int32 flags, ``K`` int32 channel map,
    ``BLOCK_B * NC`` fp32 outlier values, ``NC`` + 1 int32 (channel list and count).

    Raises:
        ValueError: unknown kernel name; a batch larger than the config's tile; for
            "imma", a hidden size above :data:`IMMA_MAX_K`, an NP other than 1-4 or
            "auto", or STACK=1 with a plane count that is not a power of two.
    """
    import triton

    kind = cfg.get("kernel", "dott")
    if kind in EXTRA_PLANNERS:
        return EXTRA_PLANNERS[kind](cfg, x2, q, scales, bias, out)
    kernels = build_kernels()
    B, K = x2.shape
    V = q.shape[0]
    BLOCK_N = int(cfg["BLOCK_N"])
    BLOCK_K = int(cfg["BLOCK_K"])
    has_bias = bias is not None
    bias_arg = bias if has_bias else scales  # dummy pointer, never read
    if kind not in ("dott", "imma", "gemm"):
        raise ValueError(f"unknown kernel {kind!r} in launch config")
    nw, ns = int(cfg["num_warps"]), int(cfg["num_stages"])
    if kind == "gemm":
        bb = int(cfg["BLOCK_B"])
        args = (x2, q, scales, bias_arg, out, B, V, K, x2.stride(0), q.stride(0), out.stride(0))
        kw = dict(HAS_BIAS=has_bias, EVEN_K=(K % BLOCK_K == 0), BLOCK_N=BLOCK_N, BLOCK_B=bb, BLOCK_K=BLOCK_K,
                  num_warps=nw, num_stages=ns)
        return [(kernels["gemm"], args, kw, (triton.cdiv(V, BLOCK_N) * triton.cdiv(max(B, 1), bb),))]
    block_b = int(cfg.get("BLOCK_B", 0)) or max(16, 1 << (max(B, 1) - 1).bit_length())
    if B > block_b:
        raise ValueError(f"batch {B} > BLOCK_B {block_b}")
    if kind == "dott":
        sub_b = min(int(cfg.get("SUB_B", block_b)), block_b)
        nsub = block_b // sub_b
        if nsub not in (1, 2, 4) or nsub * sub_b != block_b:
            raise ValueError(f"BLOCK_B {block_b} is not 1, 2 or 4 tiles of SUB_B {sub_b}")
        kw = dict(HAS_BIAS=has_bias, EVEN_K=(K % BLOCK_K == 0), BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                  SUB_B=sub_b, NSUB=nsub, num_warps=nw, num_stages=ns)
        args = (x2, q, scales, bias_arg, out, B, V, K, x2.stride(0), q.stride(0), out.stride(0))
        return [(kernels["dott"], args, kw, (triton.cdiv(V, BLOCK_N),))]
    # imma
    import torch

    if K > IMMA_MAX_K:
        raise ValueError(f"hidden size {K} > {IMMA_MAX_K}: int32 accumulation could overflow")
    planes = cfg.get("NP", 3)
    adaptive = planes == "auto"
    n_split = 3 if adaptive else int(planes)
    if n_split not in (1, 2, 3, 4):
        raise ValueError(f"NP {planes!r} is not 1..4 or 'auto'")
    nc = int(cfg.get("NC", IMMA_OUTLIER_SLOTS))
    persistent = alloc is None and getattr(x2, "is_cuda", False) and not _interpreting()
    if alloc is None:
        def alloc(shape, dtype):
            return torch.empty(shape, dtype=dtype, device=x2.device)
    if persistent:
        xq, xs, need, cmap, xo, cidx, ncnt = _scratch(x2.device, n_split, block_b, K, max(nc, 1))
    else:
        xq = alloc((n_split, block_b, K), torch.int8)
        xs = alloc((block_b,), torch.float32)
        need = alloc((block_b,), torch.int32)
        cmap = alloc((K,), torch.int32)
        if hasattr(cmap, "zero_"):
            cmap.zero_()
        xo = alloc((block_b, max(nc, 1)), torch.float32)
        cidx = alloc((max(nc, 1),), torch.int32)
        ncnt = alloc((1,), torch.int32)
    chunk = min(4096, 1 << (max(K, 16) - 1).bit_length())  # a whole row per pass up to 4096 channels
    if nc not in (0, 16, 32):
        raise ValueError(f"NC {nc} is not 0, 16 or 32 (the outlier dot needs a power of two >= 16)")
    calls = []
    if nc > 0:
        calls.append((kernels["stats"], (x2, cmap, B, K, x2.stride(0)),
                      dict(CHUNK=chunk, L1_OVER_MAX=l1_over_max, OUTLIER_RATIO=OUTLIER_RATIO, num_warps=4),
                      (block_b,)))
    calls.append((kernels["split"], (x2, cmap, xq, xs, need, xo, cidx, ncnt, B, K, x2.stride(0)),
                  dict(NP=n_split, CHUNK=chunk, L1_OVER_MAX=l1_over_max, NC=nc, num_warps=4), (block_b,)))
    variants = [(n_split, 0, cfg)]
    if adaptive:
        cfg3 = dict(cfg, STACK=0)  # the 3-plane variant: cfg's tile unless NP3 says otherwise
        cfg3.update(cfg.get("NP3", {}))
        variants = [(2, 2, cfg), (3, 3, cfg3)]
    for i, (n_planes, gate, vcfg) in enumerate(variants):
        stack = int(vcfg.get("STACK", 0))
        if stack not in (0, 1) or (stack and n_planes not in (1, 2, 4)):
            raise ValueError(f"STACK={stack} with NP={n_planes}: STACK=1 needs NP 1, 2 or 4 "
                             "(a power-of-two operand)")
        bn, bk = int(vcfg["BLOCK_N"]), int(vcfg["BLOCK_K"])
        args = (xq, xs, need, xo, cidx, ncnt, cmap, q, scales, bias_arg, out, B, V, K, q.stride(0), out.stride(0))
        kwv = dict(HAS_BIAS=has_bias, EVEN_K=(K % bk == 0), BLOCK_N=bn, BLOCK_K=bk, BLOCK_B=block_b,
                   NP=n_planes, NP_SPLIT=n_split, STACK=stack, GATE=gate, NC=nc,
                   ZERO_CMAP=(nc > 0 and i == len(variants) - 1), OUT_DOT=int(vcfg.get("OUT_DOT", 0)),
                   num_warps=int(vcfg["num_warps"]), num_stages=int(vcfg["num_stages"]))
        calls.append((kernels["imma"], args, kwv, (triton.cdiv(V, bn),)))
    return calls


#: Compiled kernels by (jit function, argument specialization, constexprs): the
#: launch fast path (bounded: one entry per kernel variant and argument alignment).
_COMPILED: dict = {}


def _spec(a):
    if hasattr(a, "data_ptr"):
        return (a.dtype, a.data_ptr() % 16 == 0)
    if isinstance(a, bool) or not isinstance(a, int):
        return type(a)
    return (a % 16 == 0, a == 1)


def run_call(fn, grid, args, kw) -> None:
    """Launch one planned call. The first launch of a (kernel, specialization) goes
    through Triton's jit launcher (compiling it if needed); later ones call the
    compiled kernel's launcher directly with the same arguments the jit path passes,
    skipping the jit's per-launch argument binding (tens of microseconds of host time
    per launch, which the multi-launch imma path would otherwise pay 4-5 times)."""
    from triton import knobs
    from triton.runtime import driver

    key = (fn, tuple(_spec(a) for a in args), tuple(sorted(kw.items())))
    kernel = _COMPILED.get(key)
    if kernel is None:
        kernel = fn[grid](*args, **kw)
        if kernel is not None and not hasattr(kernel, "result"):
            _COMPILED[key] = kernel
        return
    names = fn.arg_names
    full = list(args) + [kw[n] for n in names[len(args):]]
    stream = driver.active.get_current_stream(driver.active.get_current_device())
    _run(kernel, tuple(grid) + (1, 1), stream, full, knobs)


def _run(kernel, g, stream, full, knobs) -> None:
    # what JITFunction.run does after binding: the launch hooks (a profiler's, or the
    # one PyTorch installs) get the kernel's launch metadata as they would there
    enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    meta = kernel.launch_metadata(g, stream, *full) if enter is not None else None
    kernel.run(g[0], g[1], g[2], stream, kernel.function, kernel.packed_metadata, meta, enter, leave, *full)


#: Launch plans of :func:`launch_planned`, per (config object id, shapes, strides,
#: dtypes, weight pointers, device, stream, alignments): the compiled kernels with
#: their argument lists. One entry per distinct batch size and lm-head seen (a few
#: hundred bytes each).
_PLANS: dict = {}


def launch_planned(cfg_key, cfg: dict, x2, q, scales, bias, out, l1_over_max: float = 256.0) -> None:
    """:func:`launch` with the whole plan cached: after the first call for a key, a call
    only substitutes the activation, output and bias tensors into the cached argument
    lists and calls each compiled kernel's launcher (the planning, scratch lookup and
    jit argument binding cost ~0.1-0.3 ms of host time per call otherwise, which the
    4-launch imma path cannot hide behind ~0.2 ms of GPU time). ``cfg_key`` must
    identify ``cfg`` for the life of the process (the launch table's own objects)."""
    import torch
    from triton import knobs

    if _interpreting() or not x2.is_cuda:
        launch(x2, q, scales, bias, out, cfg, l1_over_max)
        return
    dev = x2.device
    stream = torch.cuda.current_stream(dev).cuda_stream
    key = (cfg_key, tuple(x2.shape), x2.stride(0), x2.dtype, q.data_ptr(), tuple(q.shape), scales.data_ptr(),
           None if bias is None else bias.dtype, out.stride(0), dev.index, stream, x2.data_ptr() % 16,
           out.data_ptr() % 16, 0 if bias is None else bias.data_ptr() % 16, l1_over_max)
    plan = _PLANS.get(key)
    if plan is None:
        entries = []
        for fn, args, kw, grid in kernel_calls(cfg, x2, q, scales, bias, out, l1_over_max=l1_over_max):
            run_call(fn, grid, args, kw)
            ck = _COMPILED.get((fn, tuple(_spec(a) for a in args), tuple(sorted(kw.items()))))
            slots = [(i, w) for i, a in enumerate(args) for w, t in enumerate((x2, out, bias, q, scales))
                     if t is not None and a is t]
            slots = list({i: (i, w) for i, w in slots}.values())  # one source per position
            full = list(args) + [kw[n] for n in fn.arg_names[len(args):]]
            for i, _w in slots:
                full[i] = None  # no reference to this call's tensors (nor the weight) in the plan
            entries.append((ck, tuple(grid) + (1, 1), full, slots))
        if all(e[0] is not None for e in entries):
            _PLANS[key] = entries
        return
    vals = (x2, out, bias, q, scales)
    for ck, g, full, slots in plan:
        for i, w in slots:
            full[i] = vals[w]
        _run(ck, g, stream, full, knobs)
        for i, _w in slots:
            full[i] = None


def launch(x2, q, scales, bias, out, cfg: dict, l1_over_max: float = 256.0) -> None:
    """Launch ``x2`` [B, K] -> ``out`` [B, V] with config ``cfg``."""
    for fn, args, kw, grid in kernel_calls(cfg, x2, q, scales, bias, out, l1_over_max=l1_over_max):
        run_call(fn, grid, args, kw)
