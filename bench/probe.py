"""``patchq probe``'s two costs (issue 36's targets, 2 cores): building a release's CPU
environment on a cold cache, and a warm probe of the five Spark patches.

    python bench/probe.py cold --release 0.34.0 [--json PATH]
    python bench/probe.py warm --releases 0.34.0,0.33.0 [--repeat 3] [--json PATH]

``cold``: ``patchq probe --vllm X --profile dense`` with an empty patchq cache
(``PATCHQ_CACHE_DIR``: a new temporary directory, so the release's Python files are
fetched again) and an empty pip cache (``PIP_CACHE_DIR``); reports the wall time, the
environment's own account (``env.seconds``: torch, resolve, install, scan) and the bytes
fetched (``env.bytes``: ``vllm_tree`` the release's files over HTTP ranges, ``wheel_bytes``
from an index, ``local_bytes`` from local files such as find-links). Targets: ≤ 3 min.
``warm``: the same command on the default cache, its environments built already, round
after round interleaved across releases; median and spread per release. Target: ≤ 30 s.
The 1-minute load average is printed before and after: on a shared machine the figures
mean little without it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def probe(release: str, env: dict[str, str] | None = None) -> tuple[float, dict]:
    """Wall seconds and the ``patchq.probe/1`` document of one ``patchq probe`` of ``dense``."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "patchq", "probe", "--vllm", release, "--profile", "dense",
                           "--series", str(REPO / "spark" / "series"), "--json"], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"patchq probe {release} exited {proc.returncode}: {proc.stderr[-2000:]}") from None
    return wall, doc


def cold(release: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="patchq-bench-cache-") as cache, \
            tempfile.TemporaryDirectory(prefix="patchq-bench-pip-") as pip_cache:
        load0 = os.getloadavg()[0]
        wall, doc = probe(release, {"PATCHQ_CACHE_DIR": cache, "PIP_CACHE_DIR": pip_cache})
        load1 = os.getloadavg()[0]
    env = doc.get("env") or {}
    return {"release": release, "wall_s": round(wall, 1), "exit_code": doc.get("exit_code"),
            "cells": {c["patch"]: c["status"] for c in doc.get("cells", [])}, "torch": env.get("torch"),
            "dists": env.get("dists"), "env_seconds": env.get("seconds"), "bytes": env.get("bytes"),
            "load": [round(load0, 2), round(load1, 2)]}


def warm(releases: list[str], repeat: int) -> dict:
    times: dict[str, list[float]] = {r: [] for r in releases}
    load0 = os.getloadavg()[0]
    for r in releases:  # the first call makes sure the environment is built: not timed
        probe(r)
    for _ in range(repeat):
        for r in releases:
            wall, doc = probe(r)
            if doc.get("exit_code") not in (0, 1):
                raise SystemExit(f"{r}: exit {doc.get('exit_code')}: {doc.get('why')}")
            times[r].append(round(wall, 2))
    return {"repeat": repeat, "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "per_release": {r: {"median_s": round(statistics.median(t), 1), "min_s": min(t), "max_s": max(t),
                                "runs": t} for r, t in times.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cold")
    c.add_argument("--release", default="0.34.0")
    c.add_argument("--json")
    w = sub.add_parser("warm")
    w.add_argument("--releases", default="0.34.0")
    w.add_argument("--repeat", type=int, default=3)
    w.add_argument("--json")
    a = ap.parse_args(argv)
    out = cold(a.release) if a.cmd == "cold" else warm(a.releases.split(","), a.repeat)
    out.update(cmd=a.cmd, host={"cpus": os.cpu_count(), "python": sys.version.split()[0]},
               date=time.strftime("%Y-%m-%d"))
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
