"""Development sweep of the Gluon w8a16 wgmma kernel (``patchq_runtime.int8_wgmma``).

Usage (repo root, H100/H200)::

    PYTHONPATH=spark:. python spark/bench/int8_wgmma_sweep.py --json out.json
    PYTHONPATH=spark:. python spark/bench/int8_wgmma_sweep.py --configs 128x256x64x4x4x1x1 --batches 256,4096

A configuration is BLOCK_V x BLOCK_B x BLOCK_K x STAGES x num_warps x RS x WS (see
:func:`patchq_runtime.int8_wgmma.launch`); a batch skips tiles far too wide or too
narrow for it.

For each tile configuration it first checks the kernel against the fp32 dequantized
reference on shapes that are not tile multiples (V tail, K tail, B tail, bias), then
times it against bf16 ``F.linear`` on the [248320, 3072] lm-head for each batch
(CUDA events, median, the two interleaved call by call). A development tool: the
winners go into ``LAUNCH_CONFIGS``; nothing here runs at server start.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


CONFIGS = [
    # BLOCK_V, BLOCK_B, BLOCK_K, STAGES, num_warps, RS (A from registers, wait(0)),
    # WS (1: warp-specialized, one program per tile; 2: warp-specialized, persistent)
    (128, 256, 64, 4, 4, 1, 1),
    (128, 256, 128, 2, 4, 1, 2),
    (128, 256, 128, 2, 4, 1, 1),
]


def main(argv=None) -> int:
    """Run the sweep; returns the exit code (0)."""
    import torch
    import torch.nn.functional as F

    from patchq_runtime import int8_lmhead as m
    from patchq_runtime import int8_wgmma as w

    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="32,64,104,128,208,256,1024,4096")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("--configs", default="")
    args = ap.parse_args(argv)
    configs = [tuple(map(int, c.split("x"))) for c in args.configs.split(",") if c] or CONFIGS
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)

    # correctness on awkward shapes
    ok = {}
    for cfg in configs:
        bv, bb, bk, st, nw, rs, ws = cfg
        c = dict(BLOCK_V=bv, BLOCK_B=bb, BLOCK_K=bk, STAGES=st, num_warps=nw, RS=rs, WS=ws)
        worst = 0.0
        for (B, V, K, bias) in ((7, 1000, 208, False), (bb + 3, 777, 3072, True), (2 * bb + 1, 4099, 160, False)):
            x = torch.randn(B, K, device=dev, generator=g).to(torch.bfloat16)
            wt = torch.randn(V, K, device=dev, generator=g) * 0.05
            q, s = m.quantize_rows(wt)
            b = torch.randn(V, device=dev, generator=g).to(torch.bfloat16) if bias else None
            out = torch.empty(B, V, device=dev, dtype=torch.bfloat16)
            try:
                w.launch(x, q, s, b, out, c)
            except Exception as e:  # report and skip the config
                print(f"{cfg}: launch failed: {type(e).__name__}: {str(e)[:400]}", flush=True)
                worst = float("inf")
                break
            ref = (x.float() @ (q.float() * s.float()[:, None]).t()) + (b.float() if b is not None else 0)
            err = ((out.float() - ref).abs() / (ref.abs() + 1e-2)).max().item()
            # bound: one bf16 rounding of the output (2^-8 relative) + fp32 accumulation
            bad = ((out.float() - ref).abs() > (2 ** -8) * ref.abs() + 1e-3 * (x.float().abs() @ (q.float().abs() * s.float()[:, None]).t()) * 2 ** -10).sum().item()
            worst = max(worst, err if not bad else float("inf"))
            if bad or not torch.isfinite(out.float()).all():
                print(f"{cfg}: WRONG at B={B} V={V} K={K}: {bad} elements beyond bound, max rel {err:.3e}", flush=True)
        ok[cfg] = worst != float("inf")
        print(f"{cfg}: correct={ok[cfg]} max rel err {worst:.3e}", flush=True)

    V, H = 248320, 3072
    wt = torch.randn(V, H, device=dev, generator=g, dtype=torch.bfloat16) * 0.02
    q, s = m.quantize_rows(wt)
    start = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    rows = []
    for B in [int(b) for b in args.batches.split(",")]:
        x = torch.randn(B, H, device=dev, generator=g).to(torch.bfloat16)
        out = torch.empty(B, V, device=dev, dtype=torch.bfloat16)
        best = None
        for cfg in configs:
            if not ok.get(cfg):
                continue
            bv, bb, bk, st, nw, rs, ws = cfg
            c = dict(BLOCK_V=bv, BLOCK_B=bb, BLOCK_K=bk, STAGES=st, num_warps=nw, RS=rs, WS=ws)
            if B > 2 * bb and bb < 128 or B <= bb // 4:
                continue
            fns = (lambda: w.launch(x, q, s, None, out, c), lambda: F.linear(x, wt))
            for f in fns:
                f(); f()
            ts = ([], [])
            for _ in range(args.reps):
                for i, f in enumerate(fns):
                    start[i].record(); f(); end[i].record()
                torch.cuda.synchronize()
                for i in range(2):
                    ts[i].append(start[i].elapsed_time(end[i]))
            ti, tb = statistics.median(ts[0]), statistics.median(ts[1])
            tf = 2 * B * H * V / (ti * 1e-3) / 1e12
            rows.append(dict(B=B, cfg=list(cfg), int8_ms=ti, bf16_ms=tb, speedup=tb / ti, tflops=tf))
            print(f"B={B:5d} {cfg}: wgmma {ti:.4f} ms  bf16 {tb:.4f} ms  x{tb / ti:.3f}  {tf:.0f} TFLOP/s", flush=True)
            if best is None or ti < best[0]:
                best = (ti, cfg, tb)
        if best:
            print(f"BEST B={B}: {best[1]} x{best[2] / best[0]:.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(rows=rows, ok={str(k): v for k, v in ok.items()}), fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
