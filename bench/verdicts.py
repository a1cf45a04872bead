"""``check`` time before/after the three-way verdicts (issue 23), interleaved in one run.

Runs ``patchq check --profile dense --vllm X --json`` of the Spark series (5 patches)
with two patchq source trees, alternating, ``--rounds`` times per release, each in a
fresh interpreter (the cache warm: the releases are fetched once before timing), and
prints the medians and the ratio new / old. The old tree is a ``git archive`` of
``--base`` (default: the commit the branch started from) unpacked in a temporary
directory and put first on ``PYTHONPATH``.

    python bench/verdicts.py --base 092239c --releases 0.26.0,0.33.0 --rounds 7
    python bench/verdicts.py --series tests/drift/series-0.23/series --releases 0.24.0,0.26.0 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def unpack(commit: str, dest: Path) -> Path:
    """``git archive`` of ``commit`` unpacked under ``dest``."""
    tar = dest / "base.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "-C", str(REPO), "archive", commit], stdout=fh, check=True)
    with tarfile.open(tar) as t:
        t.extractall(dest / "tree")
    return dest / "tree"


def once(tree: Path, version: str, profile: str, series: str | None = None) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    extra = ["--series", series] if series else []
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "patchq", "check", "--profile", profile, "--vllm", version,
                          "--json", *extra], cwd=tree, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    if out.returncode not in (0, 1):
        raise SystemExit(f"{tree}: exit {out.returncode}: {out.stderr[-400:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="092239c")
    ap.add_argument("--releases", default="0.26.0,0.33.0")
    ap.add_argument("--profile", default="dense")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--series", help="another series directory (e.g. tests/drift/series-0.23/series: drifted "
                                     "releases, where the three-way comparison runs)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = unpack(args.base, Path(tmp))
        for v in args.releases.split(","):
            series = str(Path(args.series).resolve()) if args.series else None
            once(REPO, v, args.profile, series)  # warm: fetch, index, plan caches
            once(old, v, args.profile, series)
            times: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(args.rounds):
                times["old"].append(once(old, v, args.profile, series))
                times["new"].append(once(REPO, v, args.profile, series))
            mo, mn = statistics.median(times["old"]), statistics.median(times["new"])
            print(f"vllm {v}: check --profile {args.profile}: old {mo:.3f} s, new {mn:.3f} s (medians of "
                  f"{args.rounds}, interleaved): ratio {mn / mo:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
