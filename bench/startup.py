"""Start-up cost of the verbs a server start or a user's first minute pays, as whole processes.

    python bench/startup.py --site DIR [--profile dense] [--patchq PATH] [--repeat 15] [--json PATH]

DIR is a site-packages holding vLLM with the profile applied already (``patchq apply
--profile dense --site-packages DIR`` first). Cases, interleaved round by round (machine
noise hits all alike), wall time of each process:

* ``python -c pass`` of a clean interpreter: a fresh ``python -m venv --without-pip`` (no
  site-packages, no editable-install finder): the unit of the ratios;
* ``patchq apply --profile P`` (a no-op: the stdlib fast path), ``patchq status``,
  ``patchq list``, ``patchq --help`` (typer), ``patchq --version``.

``--patchq`` picks the console script (default: the one beside this interpreter); run it
once for the checkout's editable install and once for a wheel installed in a fresh venv.
The load average is printed before and after (the figures mean little without it).
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


def timed(cmd: list[str], cwd: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", required=True, help="site-packages carrying the profile")
    ap.add_argument("--profile", default="dense")
    ap.add_argument("--patchq", default=str(Path(sys.executable).with_name("patchq")))
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    sp = ["--site-packages", args.site]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", f"{tmp}/clean"], check=True)
        clean = f"{tmp}/clean/bin/python"
        cases = {
            "python -c pass (clean)": [clean, "-c", "pass"],
            "no-op apply": [args.patchq, "apply", "--profile", args.profile, *sp],
            "status": [args.patchq, "status", *sp],
            "list": [args.patchq, "list"],
            "--help": [args.patchq, "--help"],
            "--version": [args.patchq, "--version"],
        }
        load_before = os.getloadavg()
        samples: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeat):
            for name, cmd in cases.items():
                samples[name].append(timed(cmd, tmp))
        load_after = os.getloadavg()
    base = statistics.median(samples["python -c pass (clean)"])
    rows = {k: {"median_s": round(statistics.median(v), 4), "min_s": round(min(v), 4),
                "ratio": round(statistics.median(v) / base, 2)} for k, v in samples.items()}
    report = {"patchq": args.patchq, "repeat": args.repeat, "cpus": os.cpu_count(),
              "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
              "cases": rows}
    print(f"{args.patchq}; {args.repeat} rounds; load {load_before[0]:.1f} -> {load_after[0]:.1f} "
          f"({os.cpu_count()} CPUs)")
    print(f"{'case':<24} {'median':>9} {'min':>9} {'x pass':>7}")
    for k, r in rows.items():
        print(f"{k:<24} {r['median_s']:>8.3f}s {r['min_s']:>8.3f}s {r['ratio']:>7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
