"""One call of each int8 lm-head path, for a profiler (Nsight Compute).

Usage (repo root, on the GPU)::

    PYTHONPATH=spark:. ncu --profile-from-start off --set detailed --section WarpStateStats \\
        --section SchedulerStats -c 14 --export int8_ncu -f python spark/bench/int8_ncu.py
    ncu --import int8_ncu.ncu-rep --page details --csv > int8_ncu.csv
    # the wgmma kernel in given configurations (BLOCK_V x BLOCK_B x BLOCK_K x STAGES x
    # num_warps x RS x WS, as bench/int8_wgmma_sweep.py) against bf16 F.linear
    PYTHONPATH=spark:. ncu --profile-from-start off --set detailed -c 3 --export wg -f \\
        python spark/bench/int8_ncu.py --batches 256 --wgmma 128x256x128x2x4x1x2,256x128x128x3x4x1x2

It builds the [248320, 3072] head, warms every path up (so the profiled launches
are not compiles), then runs, once each, between ``cudaProfilerStart`` and ``Stop``:
by default the imma path at B = 64 and 128 (stats, split, two gated MMA launches),
``int8_linear`` at B = 1024 (the shipped wgmma entry) and bf16 ``F.linear`` at
B = 1024; with ``--wgmma``, for each of ``--batches``: each named wgmma configuration,
then bf16 ``F.linear``.
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    """Run the calls; returns 0 (2 without CUDA)."""
    import torch
    import torch.nn.functional as F

    from patchq_runtime import int8_lmhead as m
    from patchq_runtime import int8_wgmma as wg

    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1024")
    ap.add_argument("--wgmma", default="", help="comma-separated wgmma configurations to profile")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("CUDA not available")
        return 2
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    V, H = 248320, 3072
    w = (torch.randn(V, H, device=dev, generator=g) * 0.02).to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    if args.wgmma:
        cfgs = []
        for c in args.wgmma.split(","):
            bv, bb, bk, st, nw, rs, ws = map(int, c.split("x"))
            cfgs.append(dict(BLOCK_V=bv, BLOCK_B=bb, BLOCK_K=bk, STAGES=st, num_warps=nw, RS=rs, WS=ws))
        xs = {int(B): torch.randn(int(B), H, device=dev, generator=g).to(torch.bfloat16)
              for B in args.batches.split(",")}
        outs = {B: torch.empty(B, V, device=dev, dtype=torch.bfloat16) for B in xs}

        def calls():
            for B, x in xs.items():
                for c in cfgs:
                    wg.launch(x, q, s, None, outs[B], c)
                F.linear(x, w)
    else:
        xs = {B: torch.randn(B, H, device=dev, generator=g).to(torch.bfloat16) for B in (64, 128, 1024)}

        def calls():
            m.int8_linear(xs[64], q, s)
            m.int8_linear(xs[128], q, s)
            m.int8_linear(xs[1024], q, s)
            F.linear(xs[1024], w)
    for _ in range(2):
        calls()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    calls()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
