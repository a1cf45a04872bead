"""Reliability benchmark: thousands of damaged-state, kill -9 and concurrent cases.

Usage: ``python bench/reliability.py [--cases N] [--kills K] [--concurrent C] [--seed S]
[--minutes M] [--show]``

Builds one real vLLM 0.23.0 site-packages (the test suite's cached install, hard-linked
into a temp directory), applies the stack fixture's ``full`` (tests/testing/stack.py), and runs:

* ``--status-cases`` cheap cases: damaged state, then ``status`` only (in-process);
* ``--cases`` damaged/hostile state cases in-process (``tests/testing/reliability.py``:
  bit flips, truncation, wrong JSON types, paths escaping site-packages, other versions,
  symlinks, directories where files belong, foreign edits, fake transactions, a
  force-reinstall), each followed by 1-3 random commands and ``revert --all --force``;
* ``--kills`` kill -9 cases (subprocesses: SIGKILL at a random instant, or after the
  n-th file write) of apply, revert and a profile switch;
* ``--concurrent`` cases of three patchq processes on one environment at once.

Prints the counts: cases, commands, tracebacks, wrong exit codes, exit 0 with a wrong
report, bytes lost (a target module not at RECORD after ``revert --all --force``),
writes outside site-packages; ``--show`` prints the first failures. ``--minutes`` stops
each of the two in-process phases early when its time is up. Exit 1 when any count but cases is non-zero.

``--safety N`` runs instead N cases of each class of ``tests/testing/safety_suite.py`` (a user's
own files, caches, the runtime hook, planted configs, hostile input; each case in a fresh
offline world, no release needed; ``--classes a,b`` picks classes, ``--minutes`` bounds
each class) and prints per class: trials, commands, exit-70s, hangs, wrong exits, lies,
bytes lost, writes outside. Issue 38's classes (``tests/testing/safety_bounds.py``: bounded
TOML, import input, serve's exec, the trust rule of every file, recovery without the
series, the hook race, ...) register themselves among them. Root is needed by
``full-disk`` and ``read-only`` (a tmpfs in ``unshare -m``; skipped and counted so
without it), by the ``chown`` trials of ``trust`` and ``recovery`` (uid 65534; skipped, or
another damage, without it) and by ``planted`` (it cannot run without it).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from testing import reliability as rel  # noqa: E402
from conftest import RUNTIME_PTH, build_site  # noqa: E402
from support import link_copy  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--status-cases", type=int, default=2000)
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--concurrent", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=None, help="stop the state cases after this long")
    ap.add_argument("--show", action="store_true", help="print the first failures")
    ap.add_argument("--safety", type=int, default=0, help="N cases per class of tests/testing/safety_suite.py instead")
    ap.add_argument("--classes", default="", help="with --safety: comma-separated classes (default: all)")
    args = ap.parse_args(argv)
    if args.safety:
        return safety(args)

    with tempfile.TemporaryDirectory(prefix="patchq-reliability-") as tmp:
        site = Path(tmp) / "site-packages"
        link_copy(build_site("0.23.0"), site)
        (site / RUNTIME_PTH).write_text(str(ROOT / "tests" / "testing" / "stack") + "\n")  # its stack_runtime
        bed = rel.make_bed(site)
        rng = random.Random(args.seed)
        rows = []
        for name, count, fn in (("status", args.status_cases, rel.status_case), ("state", args.cases, rel.state_case),
                                ("kill -9", args.kills, rel.kill_case),
                                ("concurrent", args.concurrent, rel.concurrent_case)):
            tally, t0 = rel.Tally(), time.perf_counter()
            for _ in range(count):
                fn(bed, rng, tally)
                if name in ("status", "state") and args.minutes and time.perf_counter() - t0 > args.minutes * 60:
                    break
            rows.append((name, tally, time.perf_counter() - t0))
        total = rel.Tally()
        for name, tally, seconds in rows:
            print(f"{name:<11} {tally.line()}  ({seconds:.0f} s)")
            total.merge(tally)
        print(f"{'total':<11} {total.line()}")
        if args.show:
            for f in total.failures[:20]:
                print("  " + f)
        return 0 if total.clean else 1


def safety(args) -> int:
    """``--safety N``: the classes of ``tests/testing/safety_suite.py`` (module docstring)."""
    from testing import safety_suite as suite

    names = [c for c in args.classes.split(",") if c] or list(suite.CLASSES)
    total = suite.Tally()
    for name in names:
        t0 = time.perf_counter()
        tally = suite.run_class(name, args.safety, args.seed, minutes=args.minutes)
        print(f"{name:<10} {tally.line()}  ({time.perf_counter() - t0:.0f} s)", flush=True)
        total.merge(tally)
    print(f"{'total':<10} {total.line()}")
    if args.show:
        for f in total.failures[:20]:
            print("  " + f)
    return 0 if total.clean else 1


if __name__ == "__main__":
    sys.exit(main())
