"""One call of each int8 lm-head path, for a profiler (Nsight Compute).

Usage (repo root, on the GPU)::

    PYTHONPATH=runtime:. ncu --profile-from-start off --set detailed --section WarpStateStats \\
        --section SchedulerStats -c 14 --export int8_ncu -f python3 bench/int8_ncu.py
    ncu --import int8_ncu.ncu-rep --page details --csv > int8_ncu.csv

It builds the [248320, 3072] head, warms every path up (so the profiled launches
are not compiles), then runs, once each: the imma path at B = 64 and 128 (stats,
split, two gated MMA launches), the Gluon wgmma kernel at B = 1024 and bf16
``F.linear`` at B = 1024, in that order, between ``cudaProfilerStart`` and ``Stop``.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run the calls; returns 0 (2 without CUDA)."""
    import torch
    import torch.nn.functional as F

    from patchq_runtime import int8_lmhead as m

    if not torch.cuda.is_available():
        print("CUDA not available")
        return 2
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    V, H = 248320, 3072
    w = (torch.randn(V, H, device=dev, generator=g) * 0.02).to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    xs = {B: torch.randn(B, H, device=dev, generator=g).to(torch.bfloat16) for B in (64, 128, 1024)}
    for _ in range(2):
        for B, x in xs.items():
            m.int8_linear(x, q, s)
        F.linear(xs[1024], w)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    m.int8_linear(xs[64], q, s)
    m.int8_linear(xs[128], q, s)
    m.int8_linear(xs[1024], q, s)
    F.linear(xs[1024], w)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
