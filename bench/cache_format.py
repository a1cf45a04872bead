"""Cached plans and verdicts as JSON instead of pickles (issue 38): what loading them costs.

    python bench/cache_format.py --baseline pickle=DIR [--baseline main=DIR] [--rounds 9] [--json out.json]
    python bench/cache_format.py --baseline main=DIR --startup 40 [--json out.json]

Each checkout (this one, ``json``; each ``--baseline NAME=DIR``, e.g. the commit before the
JSON format and main before issue 38) runs with a cache directory of its own (release trees
and wheels linked from the shared cache: :func:`scale.private_cache`), through the console
script of a clean venv (:class:`scale.Impl`), cases interleaved round by round after one
untimed warm-up round that fills the caches. Cases:

* ``check dense 0.33.0``: ``check --profile dense --vllm 0.33.0 --json`` (the bundled series;
  its verdicts cached);
* ``check real200 0.33.0``: the same for the realistic 200-patch series of
  ``bench/realistic.py`` (profile ``all``);
* ``apply dense, plan cached`` and ``apply real200, plan cached``: ``apply`` on a fresh
  hard-linked copy of a pristine vLLM 0.23.0 (made and removed untimed), its plan taken
  from the plan cache;
* ``load verdicts real200`` and ``load plan real200`` (in process, one interpreter per
  checkout): :func:`patchq.compat.verdictcache.load` of the 200-patch check on 0.33.0 and
  :func:`patchq.plan.plancache._load` of its apply on 0.23.0, each run ``--loads`` times;
  the median CPU time per load in ms.

``--startup N`` times instead the start-up cases (N rounds, two warm-up rounds): the no-op
``apply`` and ``status`` of the 200-patch series applied to a copy of vLLM 0.23.0, ``list``
and ``--help`` (the cache root is now checked before each but ``--help``).

Prints, per case and checkout, the median and minimum wall time, the median CPU time (user +
system of the process: what a loaded machine disturbs least) and the ratios of medians to
the first baseline, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "tests")]

import realistic  # noqa: E402
import scale  # noqa: E402
from conftest import RUNTIME_PTH  # noqa: E402

_LOADS = r"""
import json, statistics, sys, time
from patchq import series as S
from patchq.compat import verdictcache
from patchq.plan import plancache
from patchq.vllmdist import sources
series, site, loads = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = S.load(series)
patches = s.patches_of("all")
src = sources.release_source("0.33.0")
assert verdictcache.load(src, patches)[0] is not None, "no verdict cached"
out = {}
times = []
for _ in range(loads):
    t = time.process_time()
    verdictcache.load(src, patches)
    times.append(time.process_time() - t)
out["load verdicts real200"] = statistics.median(times) * 1000
target = sources.installed(site)
key = plancache.plan_key(target, patches)
assert plancache._load(target, key, target.read_text) is not None, "no plan cached"
times = []
for _ in range(loads):
    target = sources.installed(site)
    t = time.process_time()
    plancache._load(target, key, target.read_text)
    times.append(time.process_time() - t)
out["load plan real200"] = statistics.median(times) * 1000
print(json.dumps(out))
"""


def startup(impls: list, work: Path, site: Path, series: Path, rounds: int) -> list[dict]:
    """``--startup``: the no-op ``apply`` and ``status`` of the 200-patch series applied to a
    copy of vLLM 0.23.0 (stamped: settled 2.5 s after the apply), ``list`` and ``--help``,
    interleaved per command; the median CPU and wall time and the minimum wall per checkout."""
    s = str(series)
    caches = {i.name: scale.private_cache(work / f"start-{i.name}") for i in impls}
    copies = {}
    for impl in impls:
        copies[impl.name] = scale.link_copy(site, work / f"start-site-{impl.name}")
        impl.run("apply", "--series", s, "--profile", "all", "--site-packages", str(copies[impl.name]),
                 cache=caches[impl.name])
    time.sleep(2.5)  # the files apply wrote settle: the next no-op and status stamp
    cases = {"no-op apply": lambda c: ("apply", "--series", s, "--profile", "all", "--site-packages", str(c)),
             "status": lambda c: ("status", "--series", s, "--site-packages", str(c)),
             "list": lambda c: ("list", "--series", s), "--help": lambda c: ("--help",)}
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in range(rounds + 2):  # two warm-up rounds: stamps written, .pyc compiled
        for case, args in cases.items():
            for impl in impls:
                wall, cpu, _code = impl.run(*args(copies[impl.name]), cache=caches[impl.name])
                if r >= 2:
                    got.setdefault((case, impl.name), []).append((wall, cpu))
    rows = []
    for case in cases:
        ref = got[(case, impls[1].name)] if len(impls) > 1 else None
        for impl in impls:
            xs = got[(case, impl.name)]
            cpu, wall = statistics.median(c for _w, c in xs), statistics.median(w for w, _c in xs)
            ratio = f"{cpu / statistics.median(c for _w, c in ref):.3f}" if ref else "-"
            rows.append({"case": case, "impl": impl.name, "cpu_median_s": cpu, "median_s": wall,
                         "min_s": min(w for w, _c in xs), "cpu_ratio": ratio})
            print(f"{case:<12} {impl.name:<8} cpu median {cpu * 1e3:6.2f} ms  x{ratio}  wall median "
                  f"{wall * 1e3:6.1f} ms  min {min(w for w, _c in xs) * 1e3:6.1f} ms")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", action="append", default=[], help="NAME=DIR of another patchq checkout")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--loads", type=int, default=50)
    ap.add_argument("--site", help="a pristine site-packages of vLLM 0.23.0 (never written)")
    ap.add_argument("--series-dir", help="where real200/ is (generated when missing)")
    ap.add_argument("--startup", type=int, default=0,
                    help="instead: N rounds of the start-up cases (no-op apply, status, list, --help)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="patchq-cache-format-") as tmp:
        work = Path(tmp)
        python = scale.clean_python(work)
        impls = [scale.Impl("json", REPO, work, python)]
        for spec in args.baseline:
            name, _, path = spec.partition("=")
            impls.append(scale.Impl(name, Path(path).resolve(), work, python))
        if args.site:
            site = Path(args.site)
        else:
            from conftest import build_site

            site = build_site("0.23.0")  # the test suite's cached install
        out = Path(args.series_dir) if args.series_dir else work / "series"
        real = out / "real200"
        series = real / "series" if (real / "series" / "profiles.toml").is_file() else realistic.generate(real, 200)
        if args.startup:
            before = os.getloadavg()
            rows = startup(impls, work, site, series, args.startup)
            print(f"load average before {before[0]:.2f}, after {os.getloadavg()[0]:.2f}; {args.startup} rounds")
            if args.json:
                Path(args.json).write_text(json.dumps({"startup_rounds": args.startup, "load_before": before,
                                                       "load_after": os.getloadavg(), "rows": rows}, indent=1) + "\n")
            return 0
        caches = {i.name: scale.private_cache(work / f"cache-{i.name}") for i in impls}
        load_before = os.getloadavg()
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for r in range(args.rounds + 1):
            for impl in impls:
                cache = caches[impl.name]
                cases = {
                    "check dense 0.33.0": ("check", "--profile", "dense", "--vllm", "0.33.0", "--json"),
                    "check real200 0.33.0": ("check", "--series", str(series), "--profile", "all", "--vllm",
                                             "0.33.0", "--json"),
                }
                for case, cmd in cases.items():
                    wall, cpu, _code = impl.run(*cmd, cache=cache)
                    if r:
                        samples.setdefault((case, impl.name), []).append((wall, cpu))
                for case, extra in (("apply dense, plan cached", ("--profile", "dense")),
                                    ("apply real200, plan cached", ("--series", str(series), "--profile", "all"))):
                    copy = scale.link_copy(site, work / f"site-{impl.name}")
                    (copy / RUNTIME_PTH).write_text(str(REPO / "spark" / "runtime") + "\n")  # dense imports patchq_runtime
                    wall, cpu, _code = impl.run("apply", *extra, "--site-packages", str(copy), cache=cache)
                    shutil.rmtree(copy)
                    if r:
                        samples.setdefault((case, impl.name), []).append((wall, cpu))
        loads: dict[tuple[str, str], float] = {}
        for impl in impls:
            copy = scale.link_copy(site, work / f"site-{impl.name}")
            env = dict(impl.env, PATCHQ_CACHE_DIR=str(caches[impl.name]))
            done = subprocess.run([python, "-c", _LOADS, str(series), str(copy), str(args.loads)], env=env,
                                  cwd=work, capture_output=True, text=True, check=True)
            for case, ms in json.loads(done.stdout).items():
                loads[(case, impl.name)] = ms
            shutil.rmtree(copy)
        load_after = os.getloadavg()
    base = impls[1].name if len(impls) > 1 else None
    rows = []
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {args.rounds} rounds")
    for case in dict.fromkeys(c for c, _ in samples):
        ref = samples.get((case, base)) if base else None
        for impl in impls:
            walls = [w for w, _c in samples[(case, impl.name)]]
            cpus = [c for _w, c in samples[(case, impl.name)]]
            med, cpu = statistics.median(walls), statistics.median(cpus)
            ratio = f"{med / statistics.median(w for w, _c in ref):.3f}" if ref else "-"
            cratio = f"{cpu / statistics.median(c for _w, c in ref):.3f}" if ref else "-"
            rows.append({"case": case, "impl": impl.name, "median_s": med, "min_s": min(walls), "ratio": ratio,
                         "cpu_median_s": cpu, "cpu_ratio": cratio})
            print(f"{case:<28} {impl.name:<8} wall median {med:7.3f} s  min {min(walls):7.3f} s  x{ratio}   "
                  f"cpu median {cpu:7.3f} s  x{cratio}")
    for case in dict.fromkeys(c for c, _ in loads):
        ref = loads.get((case, base)) if base else None
        for impl in impls:
            ms = loads[(case, impl.name)]
            ratio = f"{ms / ref:.3f}" if ref else "-"
            rows.append({"case": case, "impl": impl.name, "median_ms": ms, "ratio": ratio})
            print(f"{case:<28} {impl.name:<8} cpu median {ms:7.2f} ms per load  x{ratio}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "rounds": args.rounds, "loads": args.loads, "load_before": load_before, "load_after": load_after,
            "checkouts": {i.name: i.env["PYTHONPATH"].split(os.pathsep)[0] for i in impls}, "rows": rows,
            "when": time.strftime("%Y-%m-%d %H:%M"),
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
