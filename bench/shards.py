"""The compatibility matrix as one job and as CI shards (``ci/matrix_merge.py``), same series.

    python bench/shards.py --series DIR [--releases 0.20.2,...,0.33.0] [--shards 4] [--workers 2]
                           [--verdicts cold|warm] [--json out.json]

Runs ``patchq matrix`` over the releases in one process tree (``--workers``), then the same
releases dealt into ``--shards`` lists by ``ci/matrix_merge.py shards`` (each list one
``patchq matrix`` with the same ``--workers``, one after the other here: on CI each is a job
of its own on its own runner), then ``ci/matrix_merge.py merge``. Prints each run's wall
and CPU (user+sys of the process and its children) and the CI critical path: the slowest
shard plus the merge. ``--verdicts cold`` (default) sets ``PATCHQ_VERDICT_CACHE=0``: what a
CI run pays, whose cache keeps release trees and the definition index but no verdicts.
The merged ``matrix.json`` must equal the single job's (``generated`` and ``timing``
aside): checked, exit 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RELEASES = ("0.20.2,0.21.0,0.22.0,0.22.1,0.23.0,0.24.0,0.25.0,0.25.1,0.26.0,0.27.0,0.27.1,0.28.0,0.29.0,"
            "0.30.0,0.31.0,0.32.0,0.33.0")


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s of the process and its children) of one command (exit 0 or 1)."""
    t0 = time.perf_counter()
    before = os.times()
    proc = subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    after = os.times()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return time.perf_counter() - t0, (after.children_user - before.children_user
                                      + after.children_system - before.children_system)


def _strip(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("generated", "timing")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", required=True)
    ap.add_argument("--releases", default=RELEASES)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--verdicts", choices=("cold", "warm"), default="cold")
    ap.add_argument("--json")
    args = ap.parse_args()
    env = dict(os.environ, PATCHQ_PROGRESS="0")
    if args.verdicts == "cold":
        env["PATCHQ_VERDICT_CACHE"] = "0"
    pq = [sys.executable, "-m", "patchq"]
    base = ["matrix", "--series", args.series, "--profiles", "all", "--workers", str(args.workers), "--json"]
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        whole = timed([*pq, *base, "--releases", args.releases, "--out", str(out / "whole")], env)
        lists = json.loads(subprocess.run([sys.executable, "ci/matrix_merge.py", "shards", "--releases",
                                           args.releases, "--count", str(args.shards)], cwd=REPO, env=env,
                                          check=True, capture_output=True, text=True).stdout)
        shards = []
        for i, rel in enumerate(lists):
            shards.append((rel, *timed([*pq, *base, "--releases", rel, "--out", str(out / f"s{i}")], env)))
        merge = timed([sys.executable, "ci/matrix_merge.py", "merge", str(out / "merged"),
                       *(str(out / f"s{i}" / "matrix.json") for i in range(len(lists)))], env)
        same = _strip(json.loads((out / "whole" / "matrix.json").read_text())) == \
            _strip(json.loads((out / "merged" / "matrix.json").read_text()))
    doc = {"load_before": load, "load_after": os.getloadavg(), "cpus": os.cpu_count(), "workers": args.workers,
           "verdicts": args.verdicts, "whole": {"wall_s": round(whole[0], 2), "cpu_s": round(whole[1], 2)},
           "shards": [{"releases": r, "wall_s": round(w, 2), "cpu_s": round(c, 2)} for r, w, c in shards],
           "merge": {"wall_s": round(merge[0], 2), "cpu_s": round(merge[1], 2)},
           "critical_path_s": round(max(w for _, w, _ in shards) + merge[0], 2), "merged_equals_whole": same}
    print(f"load {load[0]:.1f} -> {doc['load_after'][0]:.1f}; {os.cpu_count()} CPUs; --workers {args.workers}; "
          f"verdicts {args.verdicts}")
    print(f"one job: {whole[0]:.1f} s wall, {whole[1]:.1f} s CPU")
    for r, w, c in shards:
        print(f"shard {r}: {w:.1f} s wall, {c:.1f} s CPU")
    print(f"merge: {merge[0]:.2f} s; CI critical path (slowest shard + merge): {doc['critical_path_s']} s; "
          f"merged == one job: {same}")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
