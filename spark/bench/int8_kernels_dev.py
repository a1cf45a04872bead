"""Bench-only int8 lm-head kernels (not shipped; compared by ``bench/int8_lmhead.py --sweep``).

The shipped kernels live in ``patchq_runtime/int8_kernels.py``. These lost to
them on the H200 and are kept to re-check that on other parts:

``dot``   w8a16 with the weight tile as MMA operand A and the activations as B, the
          whole batch in one tile (Triton 3.6 loads int8 A fragments 2 bytes at a
          time: slower than the shipped ``dott`` for small batches).
``gemv``  CUDA-core FMA kernel, batch of one only (0.194 vs 0.177 ms for ``dott``).
CONVERT=1 (both): this module's PTX int8->bf16 conversion (byte-permute into the
          fp32 2^23 + u, subtract, pack; ~2.75 instructions per element, bf16 only)
          instead of Triton's own (~2); both exact, Triton's was faster everywhere.

``register()`` adds the two kinds to ``int8_kernels.EXTRA_PLANNERS`` so that
``int8_lmhead._launch`` and ``_kernel_calls`` accept configs naming them.
"""

from __future__ import annotations

_KERNELS = None


def build_kernels():
    global _KERNELS
    if _KERNELS is not None:
        return _KERNELS
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["B"])
    def _w8a16_dot_kernel(
        x_ptr, q_ptr, s_ptr, bias_ptr, out_ptr,
        B, V, K, stride_xb, stride_qn, stride_ob,
        HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, CONVERT: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_B: tl.constexpr,
    ):
        # One program: BLOCK_N weight rows x all (<= BLOCK_B) activation rows.
        pid = tl.program_id(0)
        offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        rows = tl.minimum(offs_n, V - 1)  # tail rows re-read the last row; store is masked
        offs_k = tl.arange(0, BLOCK_K)
        offs_b = tl.arange(0, BLOCK_B)
        bmask = offs_b < B
        q_ptrs = q_ptr + rows.to(tl.int64)[:, None] * stride_qn + offs_k[None, :]
        x_ptrs = x_ptr + offs_b[None, :] * stride_xb + offs_k[:, None]  # [BLOCK_K, BLOCK_B]
        acc = tl.zeros((BLOCK_N, BLOCK_B), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            if EVEN_K:
                w = tl.load(q_ptrs)
                xt = tl.load(x_ptrs, mask=bmask[None, :], other=0.0)
            else:
                kmask = (k0 + offs_k) < K
                w = tl.load(q_ptrs, mask=kmask[None, :], other=0)
                xt = tl.load(x_ptrs, mask=kmask[:, None] & bmask[None, :], other=0.0)
            if CONVERT == 1:
                # int8x4 -> bf16x4, exact: bias each byte to u = b + 128, build the
                # fp32 2^23 + u by byte-permute, subtract 2^23 + 128, keep the high
                # halves (exact: |b| <= 128 needs <= 8 significant bits).
                wb = tl.inline_asm_elementwise(
                    asm="""
                    {
                    .reg .b32 pq_u, pq_f0, pq_f1, pq_f2, pq_f3;
                    xor.b32 pq_u, $2, 0x80808080;
                    prmt.b32 pq_f0, pq_u, 0x4B000000, 0x7650;
                    prmt.b32 pq_f1, pq_u, 0x4B000000, 0x7651;
                    prmt.b32 pq_f2, pq_u, 0x4B000000, 0x7652;
                    prmt.b32 pq_f3, pq_u, 0x4B000000, 0x7653;
                    sub.f32 pq_f0, pq_f0, 0f4B000080;
                    sub.f32 pq_f1, pq_f1, 0f4B000080;
                    sub.f32 pq_f2, pq_f2, 0f4B000080;
                    sub.f32 pq_f3, pq_f3, 0f4B000080;
                    prmt.b32 $0, pq_f0, pq_f1, 0x7632;
                    prmt.b32 $1, pq_f2, pq_f3, 0x7632;
                    }
                    """,
                    constraints="=r,=r,r",
                    args=[w],
                    dtype=tl.bfloat16,
                    is_pure=True,
                    pack=4,
                )
            else:
                wb = w.to(xt.dtype)
            acc = tl.dot(wb, xt, acc)
            q_ptrs += BLOCK_K
            x_ptrs += BLOCK_K
        scale = tl.load(s_ptr + rows).to(tl.float32)
        acc = acc * scale[:, None]
        if HAS_BIAS:
            acc = acc + tl.load(bias_ptr + rows).to(tl.float32)[:, None]
        out_ptrs = out_ptr + offs_b[None, :] * stride_ob + offs_n[:, None]
        tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(offs_n < V)[:, None] & bmask[None, :])


    @triton.jit
    def _w8a16_gemv_kernel(
        x_ptr, q_ptr, s_ptr, bias_ptr, out_ptr,
        V, K, stride_qn,
        HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, CONVERT: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ):
        # Batch of one row on CUDA cores: BLOCK_N rows per program, fp32 partial
        # sums kept per (row, k-lane), reduced once at the end.
        pid = tl.program_id(0)
        offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        rows = tl.minimum(offs_n, V - 1)
        offs_k = tl.arange(0, BLOCK_K)
        q_ptrs = q_ptr + rows.to(tl.int64)[:, None] * stride_qn + offs_k[None, :]
        x_ptrs = x_ptr + offs_k
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            if EVEN_K:
                w = tl.load(q_ptrs)
                xv = tl.load(x_ptrs).to(tl.float32)
            else:
                kmask = (k0 + offs_k) < K
                w = tl.load(q_ptrs, mask=kmask[None, :], other=0)
                xv = tl.load(x_ptrs, mask=kmask, other=0.0).to(tl.float32)
            if CONVERT == 1:
                wf = tl.inline_asm_elementwise(
                    asm="""
                    {
                    .reg .b32 pq_u;
                    xor.b32 pq_u, $4, 0x80808080;
                    prmt.b32 $0, pq_u, 0x4B000000, 0x7650;
                    prmt.b32 $1, pq_u, 0x4B000000, 0x7651;
                    prmt.b32 $2, pq_u, 0x4B000000, 0x7652;
                    prmt.b32 $3, pq_u, 0x4B000000, 0x7653;
                    sub.f32 $0, $0, 0f4B000080;
                    sub.f32 $1, $1, 0f4B000080;
                    sub.f32 $2, $2, 0f4B000080;
                    sub.f32 $3, $3, 0f4B000080;
                    }
                    """,
                    constraints="=r,=r,=r,=r,r",
                    args=[w],
                    dtype=tl.float32,
                    is_pure=True,
                    pack=4,
                )
            else:
                wf = w.to(tl.float32)
            acc += wf * xv[None, :]
            q_ptrs += BLOCK_K
            x_ptrs += BLOCK_K
        r = tl.sum(acc, axis=1) * tl.load(s_ptr + rows).to(tl.float32)
        if HAS_BIAS:
            r = r + tl.load(bias_ptr + rows).to(tl.float32)
        tl.store(out_ptr + offs_n, r.to(out_ptr.dtype.element_ty), mask=offs_n < V)


    _KERNELS = {"dot": _w8a16_dot_kernel, "gemv": _w8a16_gemv_kernel}
    return _KERNELS


def plan(cfg, x2, q, scales, bias, out):
    """Launches for a "dot" or "gemv" config: [(jit function, args, kwargs, grid)]."""
    import torch
    import triton

    kernels = build_kernels()
    B, K = x2.shape
    V = q.shape[0]
    kind = cfg["kernel"]
    BLOCK_N, BLOCK_K = int(cfg["BLOCK_N"]), int(cfg["BLOCK_K"])
    convert = int(cfg.get("CONVERT", 0))
    if convert == 1 and kind != "gemv" and x2.dtype != torch.bfloat16:
        convert = 0  # the PTX conversion of the MMA kernel produces bf16 only
    has_bias = bias is not None
    bias_arg = bias if has_bias else scales  # dummy pointer, never read
    kw = dict(HAS_BIAS=has_bias, EVEN_K=(K % BLOCK_K == 0), BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, CONVERT=convert,
              num_warps=int(cfg["num_warps"]), num_stages=int(cfg["num_stages"]))
    grid = (triton.cdiv(V, BLOCK_N),)
    if kind == "gemv":
        if B != 1:
            raise ValueError("the gemv kernel handles a batch of one row")
        return [(kernels["gemv"], (x2, q, scales, bias_arg, out, V, K, q.stride(0)), kw, grid)]
    block_b = int(cfg.get("BLOCK_B", 0)) or max(16, 1 << (max(B, 1) - 1).bit_length())
    if B > block_b:
        raise ValueError(f"batch {B} > BLOCK_B {block_b}")
    kw["BLOCK_B"] = block_b
    args = (x2, q, scales, bias_arg, out, B, V, K, x2.stride(0), q.stride(0), out.stride(0))
    return [(kernels["dot"], args, kw, grid)]


def register():
    """Make ``int8_lmhead._launch`` / ``_kernel_calls`` accept "dot" and "gemv"."""
    from patchq_runtime import int8_kernels

    int8_kernels.EXTRA_PLANNERS["dot"] = plan
    int8_kernels.EXTRA_PLANNERS["gemv"] = plan


# ---------------------------------------------------------------------------
# Tile sweep of the shipped "gemm" kernel (and the imma buckets it competes with)
# ---------------------------------------------------------------------------
#: (BLOCK_N, BLOCK_B, BLOCK_K, num_warps, num_stages). Only shapes whose SASS waits
#: for every wgmma before the next K step's A fragments overwrite its registers
#: ("WARPGROUP.DEPBAR.LE gsb0, 0x0" after each). Triton 3.6 leaves 1, 3 or 7 wgmmas
#: in flight for 128x128x64 w8, 128x256x64 w8, 64x256x64 w4, 64x128x128 w4 and the
#: BLOCK_K = 32 shapes while the next step's int8->bf16 fragments are
#: written into the registers those wgmmas read: measured wrong and run-to-run
#: different results (errors up to 25x the fp32 bound at B = 300 / 1000): excluded.
GEMM_CANDIDATES = [
    (128, 128, 128, 8, 3), (256, 128, 64, 8, 3), (256, 128, 64, 8, 4), (128, 64, 128, 4, 4),
    (128, 64, 64, 4, 5), (256, 64, 64, 8, 4), (128, 256, 128, 8, 2), (256, 128, 128, 8, 2),
]
SWEEP_BATCHES = (64, 104, 128, 208, 256, 512, 1024, 2048, 4096)


def heavy_rows(torch, B, H, g, device, n_channels=4):
    """Heavy-tailed hidden states: Gaussian rows plus ``n_channels`` fixed channels
    (the same in every row, as the massive activations of trained models' final
    hidden states) at 20-1000x the row RMS (log-uniform, random sign)."""
    x = torch.randn(B, H, device=device, generator=g)
    gc = torch.Generator(device="cpu").manual_seed(1234)
    chans = torch.randperm(H, generator=gc)[:n_channels].to(device)
    mag = torch.exp(torch.empty(B, n_channels, device=device).uniform_(3.0, 6.9078, generator=g))
    sign = torch.where(torch.rand(B, n_channels, device=device, generator=g) < 0.5, -1.0, 1.0)
    x[:, chans] = mag * sign
    return x


def gemm_sweep(argv=None):
    import argparse
    import json
    import os
    import sys
    import time

    import torch
    import torch.nn.functional as F

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import int8_lmhead as bench  # bench/int8_lmhead.py (its timing and precompile helpers)
    from patchq_runtime import int8_lmhead as m

    ap = argparse.ArgumentParser(description="sweep of the gemm kernel's tiles")
    ap.add_argument("--json")
    ap.add_argument("--batches", default=",".join(map(str, SWEEP_BATCHES)))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--table", help="write a launch table (JSON) with the fastest gemm tiles here")
    ap.add_argument("--check", action="store_true", help="run gemm_check instead")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    V, H = bench.V_DEFAULT, bench.H_DEFAULT
    g = torch.Generator(device=dev).manual_seed(0)
    w = (torch.randn(V, H, device=dev, generator=g) * 0.02).to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    batches = [int(b) for b in args.batches.split(",") if b]
    cands = [dict(kernel="gemm", BLOCK_N=a, BLOCK_B=b, BLOCK_K=c, num_warps=d, num_stages=e)
             for a, b, c, d, e in GEMM_CANDIDATES]
    import concurrent.futures as cf
    import multiprocessing as mp

    t0 = time.time()
    with cf.ProcessPoolExecutor(max_workers=args.workers, mp_context=mp.get_context("spawn")) as ex:
        futs = [ex.submit(bench._compile_one, c, 256, V, H, "bfloat16") for c in cands]
        errs = [f.result()[0] for f in futs]
    print(f"precompiled {len(cands)} gemm configs in {time.time() - t0:.1f}s; errors: "
          f"{[e for e in errs if e]}", flush=True)
    res = []
    for B in batches:
        x = torch.randn(B, H, device=dev, generator=g).to(torch.bfloat16)
        out = torch.empty(B, V, device=dev, dtype=torch.bfloat16)
        t16 = bench._time_call(lambda: F.linear(x, w), args.reps, 3)
        row = {"B": B, "bf16_ms": t16, "gemm": []}
        for c in cands:
            try:
                ms = bench._time_call(lambda: m._launch(x, q, s, None, out, c), args.reps, 2)
            except Exception as e:  # noqa: BLE001
                ms = float("inf")
                print(f"  {c}: {type(e).__name__}: {str(e)[:200]}")
            row["gemm"].append({"cfg": c, "ms": ms})
        if B <= 128:
            table = m._configs_for(dev)
            bc = m._bucket_cfg(table, B)
            xh = heavy_rows(torch, B, H, g, dev).to(torch.bfloat16)
            row["imma_gauss_ms"] = bench._time_call(lambda: m._launch(x, q, s, None, out, bc), args.reps, 2)
            row["imma_heavy_ms"] = bench._time_call(lambda: m._launch(xh, q, s, None, out, bc), args.reps, 2)
        best = min(row["gemm"], key=lambda r: r["ms"])
        print(f"B={B:5d} bf16 {t16:.4f} ms | best gemm {best['ms']:.4f} ms ({t16 / best['ms']:.3f}x) "
              f"{best['cfg']}" + (f" | imma gauss {row['imma_gauss_ms']:.4f} heavy {row['imma_heavy_ms']:.4f}"
                                  if "imma_gauss_ms" in row else ""), flush=True)
        for r in sorted(row["gemm"], key=lambda r: r["ms"])[:5]:
            c = r["cfg"]
            print(f"      {r['ms']:.4f} ms {t16 / r['ms']:.3f}x  {c['BLOCK_N']}x{c['BLOCK_B']}x{c['BLOCK_K']} "
                  f"w{c['num_warps']} s{c['num_stages']}")
        res.append(row)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    if args.table:
        # launch table: the shipped buckets + gemm entries from the fastest tile per batch
        table = {k: v for k, v in m.LAUNCH_CONFIGS[m._arch_key(dev)].items() if k != "gemm"}
        entries = []
        for lo, at in ((129, 256), (512, 512), (1024, 1024), (2048, 4096)):
            row = next((r for r in res if r["B"] == at), None)
            if row:
                best = dict(min(row["gemm"], key=lambda r: r["ms"])["cfg"], min_B=lo)
                entries.append(best)
        table["gemm"] = entries
        with open(args.table, "w") as fh:
            json.dump({m._arch_key(dev): table}, fh, indent=1)
        print(f"wrote {args.table}: gemm {entries}")
    return 0




def gemm_check(argv=None):
    """Accuracy and run-to-run equality of every gemm candidate at batches with more
    than one batch tile, against the fp32 dequantized reference (the tests' bound)."""
    import torch

    from patchq_runtime import int8_lmhead as m

    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    V, H = 248320, 3072
    g = torch.Generator(device=dev).manual_seed(0)
    w = (torch.randn(V, H, device=dev, generator=g) * 0.02).to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    del w
    for B in (300, 1000):
        x = torch.randn(B, H, device=dev, generator=g).to(torch.bfloat16)
        ref = m.int8_linear_reference(x, q, s, out_dtype=torch.float32)
        absmag = m.int8_linear_reference(x.abs(), q.abs(), s, None, out_dtype=torch.float32)
        tol = ref.abs() * 2.0**-8 * (1 + 2.0**-7) + 2.1 * H * 2.0**-24 * absmag + 2.0**-21 * ref.abs() + 1e-30
        del absmag
        for a, b, c, d, e in GEMM_CANDIDATES:
            cfg = dict(kernel="gemm", BLOCK_N=a, BLOCK_B=b, BLOCK_K=c, num_warps=d, num_stages=e)
            outs = []
            for _ in range(3):
                out = torch.full((B, V), float("nan"), device=dev, dtype=torch.bfloat16)
                m._launch(x, q, s, None, out, cfg)
                outs.append(out)
            ratio = max(((o.float() - ref).abs() / tol).max().item() for o in outs)
            same = all(torch.equal(outs[0], o) for o in outs[1:])
            print(f"check B={B} {a}x{b}x{c} w{d} s{e}: max err/bound {ratio:.3f} runs equal {same}", flush=True)
            del outs


def imma_probe(argv=None):
    """The imma buckets' tile variants on Gaussian and heavy-tailed rows, timed as
    eager calls and as CUDA-graph replays (the latter without host launch cost)."""
    import os
    import sys

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import int8_lmhead as bench
    from patchq_runtime import int8_lmhead as m

    dev = torch.device("cuda")
    V, H = bench.V_DEFAULT, bench.H_DEFAULT
    g = torch.Generator(device=dev).manual_seed(0)
    q, s = m.quantize_rows((torch.randn(V, H, device=dev, generator=g) * 0.02).to(torch.bfloat16))
    table = m._configs_for(dev)
    np3 = {"BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3, "STACK": 0}
    variants = {
        32: [dict(table["32"]), dict(table["32"], OUT_DOT=0)],
        64: [dict(table["64"]), dict(table["64"], OUT_DOT=0), dict(table["64"], NC=0)],
        128: [dict(table["128"]), dict(table["128"], OUT_DOT=0), dict(table["128"], NC=0)],
    }
    for B, cfgs in variants.items():
        for Bx in {32: (26, 32), 64: (52, 64), 128: (104, 128)}[B]:
            xg = torch.randn(Bx, H, device=dev, generator=g).to(torch.bfloat16)
            xh = heavy_rows(torch, Bx, H, g, dev).to(torch.bfloat16)
            out = torch.empty(Bx, V, device=dev, dtype=torch.bfloat16)
            for cfg in cfgs:
                c = dict(cfg, BLOCK_B=B)
                t = []
                for x in (xg, xh):
                    t.append(bench._time_call(lambda: m._launch(x, q, s, None, out, c), 20, 5))
                    t.append(bench._graph_time(lambda: m._launch(x, q, s, None, out, c), 20, 5))
                short = {k: v for k, v in cfg.items() if k not in ("kernel",)}
                print(f"imma B={Bx:4d} gauss eager {t[0]:.4f} graph {t[1]:.4f} | heavy eager {t[2]:.4f} "
                      f"graph {t[3]:.4f} | {short}", flush=True)


if __name__ == "__main__":
    import sys

    if "--imma" in sys.argv:
        sys.exit(imma_probe())
    sys.exit(gemm_check() if "--check" in sys.argv else gemm_sweep())
