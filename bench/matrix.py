"""Benchmark: the source-level compatibility matrix, 17 releases x 4 profiles, warm caches.

Usage (from the repo root)::

    python bench/matrix.py [--releases '>=0.20.2,<=0.33.0'] [--workers 2] [--repeat 1]

Target (docs/measured.md): at most 30 s on a 2-core machine with warm caches (release trees
extracted in ``~/.cache/patchq/releases``). The release list is resolved first, outside
the timed region (it may ask PyPI). Each timed run is :func:`patchq.compat.matrix.build` (one
plan per release of the union of the profiles' patches, releases in ``--workers``
processes) plus rendering the three files, which is what ``patchq matrix`` does. Prints
the wall time, the sum of per-release times (the serial cost), and the ratio to the
target (< 1 is within it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchq.compat import matrix  # noqa: E402
from patchq.vllmdist import releases

TARGET_S = 30.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", default=">=0.20.2,<=0.33.0")
    ap.add_argument("--profiles", default="base,mtp,dflash,dense")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    versions = [str(v) for v in releases.list_releases(args.releases)]
    for v in versions:  # warm: extracted once, never timed
        releases.release_tree(v)
    profiles = args.profiles.split(",")
    walls = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            doc = matrix.build(versions, profiles, workers=args.workers)
            matrix.write(doc, out)
            walls.append(time.perf_counter() - t0)
    wall = min(walls)
    serial = sum(doc["timing"]["per_release_s"].values())
    cells = sum(len(row) for per in doc["cells"].values() for row in per.values())
    print(f"releases: {len(versions)} ({versions[0]} .. {versions[-1]}); profiles: {len(profiles)}; "
          f"cells: {cells}; workers: {args.workers}")
    print(f"wall: {wall:.2f} s (best of {len(walls)}: {', '.join(f'{w:.2f}' for w in walls)}); "
          f"sum of per-release times: {serial:.2f} s")
    print(f"ratio to the {TARGET_S:.0f} s target: {wall / TARGET_S:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
