"""How patchq scales with the number of patches: synthetic series of N patches.

    python bench/scale.py [--ns 5,20,50,100,200] [--repeat 3] [--site DIR]
                          [--baseline DIR --baseline-ns 20,200 --baseline-repeat 1]
                          [--big] [--json out.json] [--png out.png]

Series come from ``bench/synth.py`` (each patch inserts one statement at the top of a
distinct function of vLLM 0.23.0; ``spread``: one function per module). Whole processes
are timed (wall, and user+sys CPU of the child from ``wait4``), cases interleaved
round by round after one untimed warm-up round, so machine noise hits all alike; the
table gives min and median per case and N. Cases, for each N:

* ``cold apply`` / ``no-op apply`` / ``status`` / ``revert --all`` on a hard-linked copy
  of a pristine ``pip install --no-deps`` of vLLM 0.23.0 (the apply is cold: its plan is
  deleted from the plan cache first; the definition index is warm after the warm-up
  round), then ``cold apply, plan cached``: the same profile applied again to the
  reverted copy, its plan taken from the cache (:mod:`patchq.plan.plancache`);
* ``check`` on 3 releases (0.23.0, 0.26.0, 0.33.0; one process each, summed);
* ``matrix`` on 8 releases (``--workers 2``).

Once: 40 patches in one module (``dense``: cold apply), the 5-patch matrix on 17
releases x 4 profiles, and with ``--big`` 200 patches x 17 releases. The interpreter
start is ``python -c pass`` of a fresh venv made with ``python -m venv`` (no
editable-install finder, no site-packages): the unit of the ratios; patchq runs in
that interpreter with ``PYTHONPATH`` naming the checkout and this venv's site-packages.

``--baseline DIR``: also time another checkout of patchq (``PYTHONPATH=DIR``, run from a
temporary directory so the checkout under test does not shadow it) for the Ns in
``--baseline-ns``, interleaved with the same rounds: same-run before/after ratios.

``--kind realistic`` (issue 25) times series from ``bench/realistic.py`` instead
(statement-anchored edits of several kinds in methods and functions spread over modules,
fingerprints on 0.23.0; on later releases some anchors drift, move or are gone), each
implementation with a cache directory of its own (``PATCHQ_CACHE_DIR``: release trees and
wheels linked from the shared cache; definition index, plans and verdicts its own).
Cases, for each N (default 5, 50, 100, 200, 400):

* ``check cold 0.33.0``: a fresh cache directory (no definition index, nothing cached:
  the first index build of the release is included);
* ``check warm R`` for R in 0.20.2, 0.23.0, 0.33.0 (the implementation's cache, warm after
  the untimed warm-up round);
* ``matrix 17 warm``: the 17 releases 0.20.2-0.33.0, profile ``all`` (``--workers`` as the
  command defaults);
* each checkout that has the verdict cache: ``check 0.33.0 index-warm``, ``matrix 17 index-warm``
  and ``matrix 18 index-warm`` (0.34.0 too: issue 41's target), the same with
  ``PATCHQ_VERDICT_CACHE=0`` (the definition index warm, no verdict cached: what a changed
  series, a new patchq or a CI run without the verdict cache pays);
* ``cold apply`` (plans deleted first) on a hard-linked pristine copy of vLLM 0.23.0, then,
  2.2 s later (a server start comes after the apply: the files it wrote have settled for
  :mod:`patchq.env.stamp`), ``no-op apply, first`` and ``status, first`` (they hash, and
  stamp) and ``no-op apply`` and ``status`` again; ``list`` and ``--help`` (from their
  stamps), ``--help, first`` and ``list, first`` (a cache directory without stamps: typer
  renders the help, the series is read).

``--cases A,B`` times only those cases (``startup``: the no-op apply, status, list and
``--help`` cases); without ``cold apply`` among them the environment applied in the first
round is kept and the no-op/status stamps are deleted before each ``first`` case. Every
process is patchq's console script (``--entry script``, default: the script pip writes,
whose ``import re`` costs ~0.7 of the interpreter's start here) or ``python -m patchq``
(``--entry module``, what runs before 2026-12-04 used); ``.pyc`` files are written in the
warm-up round (``PYTHONDONTWRITEBYTECODE`` is unset for patchq's processes, as pip compiles
on install). The JSON records the entry and each checkout's commit.

Then the growth ratios (median at N over median at the smallest N) per case::

    python bench/scale.py --kind realistic --ns 5,50,100,200,400 --repeat 3 \
        --baseline <checkout before> --baseline-ns 5,50,100,200 --baseline-repeat 1 --json out.json
    python bench/scale.py --kind realistic --cases startup --ns 5,100,200 --repeat 9 \
        --baseline <checkout before> --baseline-ns 5,100,200 --baseline-repeat 9 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "bench"))
import realistic  # noqa: E402
import synth  # noqa: E402

CHECK_RELEASES = ["0.23.0", "0.26.0", "0.33.0"]
MATRIX_RELEASES = ["0.15.1", "0.17.1", "0.19.1", "0.23.0", "0.24.0", "0.26.0", "0.28.0", "0.33.0"]
#: the 17 releases of the realistic matrix (issue 25; the Spark profiles' range)
REAL_17 = ["0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
           "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"]
REAL_CHECK = ["0.20.2", "0.23.0", "0.33.0"]
#: the 18 releases of issue 41's matrix target: REAL_17 and 0.34.0
REAL_18 = [*REAL_17, "0.34.0"]
RELEASES_17 = ["0.18.1", "0.19.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0",
               "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.33.0"]


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float, int]:
    """(wall s, child CPU s, exit code) of one process, output discarded."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    err = proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1, 7):
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, code


#: The console script pip writes for ``patchq = "patchq.__main__:main"`` (pip 23-25's
#: template, byte for byte apart from the interpreter line): what a user's ``patchq`` runs.
#: Its ``import re`` alone costs about 0.7 of a bare interpreter's start on this machine.
CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from patchq.__main__ import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


class Impl:
    """One patchq to time: this checkout, or a baseline checkout, run by the clean venv's
    interpreter with ``PYTHONPATH=<checkout>:<this venv's site-packages>`` (no
    editable-install finder, no ``.pth`` processing: as a regular install), through
    ``entry``: ``script``, the clean venv's ``bin/patchq`` (:data:`CONSOLE_SCRIPT`, what a
    user runs), or ``module``, ``python -m patchq`` (runpy instead of the script's ``re``).
    ``PYTHONDONTWRITEBYTECODE`` is removed: the warm-up round writes ``.pyc`` files, as
    pip's install compiles them, so the timed rounds run compiled modules."""

    def __init__(self, name: str, root: Path, work: Path, python: str, entry: str = "script") -> None:
        import sysconfig

        self.name = name
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("PATCHQ_") and k != "PYTHONDONTWRITEBYTECODE"}  # as installed: .pyc
        self.env["PYTHONPATH"] = os.pathsep.join([str(root), sysconfig.get_paths()["purelib"]])
        self.cwd = work
        self.cmd = [str(Path(python).parent / "patchq")] if entry == "script" else [python, "-m", "patchq"]
        #: the checkout has the verdict cache, so PATCHQ_VERDICT_CACHE=0 times the index-warm cases
        self.verdict_cache = (root / "patchq" / "compat" / "verdictcache.py").is_file()

    def run(self, *args: str, cache: Path | None = None, **extra: str) -> tuple[float, float, int]:
        env = dict(self.env, **extra)
        if cache is not None:
            env["PATCHQ_CACHE_DIR"] = str(cache)
        return timed([*self.cmd, *args], env, self.cwd)


def private_cache(dest: Path) -> Path:
    """A fresh cache directory whose release trees and wheels are the shared cache's
    (symlinks: nothing is fetched or extracted again); everything else starts empty."""
    from patchq.vllmdist import cache

    if dest.exists():
        shutil.rmtree(dest)
    (dest / "index").mkdir(parents=True)
    for name in ("releases", "wheels"):
        os.symlink(cache.root() / name, dest / name)
    listing = cache.index() / "vllm.json"
    if listing.is_file():
        shutil.copy(listing, dest / "index" / "vllm.json")
    return dest


def link_copy(src: Path, dst: Path) -> Path:
    """A hard-linked copy (uv's layout); apply replaces files, never writes through links."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, copy_function=os.link, symlinks=True)
    return dst


def pristine_site(work: Path, explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    from patchq.vllmdist import releases

    wheel = releases.wheel_path("0.23.0")
    site = work / "pristine"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                    "--disable-pip-version-check", "--target", str(site), str(wheel)], check=True)
    return site


def clean_python(work: Path) -> str:
    """A fresh venv's interpreter (no editable-install finder, empty site-packages), with
    patchq's console script beside it (:data:`CONSOLE_SCRIPT`; patchq comes from ``PYTHONPATH``)."""
    venv = work / "clean-venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    script = venv / "bin" / "patchq"
    script.write_text(CONSOLE_SCRIPT.format(python=python), encoding="utf-8")
    script.chmod(0o755)
    return str(python)


def round_cases(impl: Impl, series: Path, n: int, site: Path, work: Path, samples: dict) -> None:
    """One round of every per-N case for ``impl``; appends (wall, cpu) to ``samples``."""
    s = str(series)
    copy = link_copy(site, work / f"site-{impl.name}-{n}")

    def add(case: str, value: tuple) -> None:
        samples.setdefault((impl.name, n, case), []).append(value[:2])

    plan_file = plan_cache_file(series) if impl.name == "patchq" else None
    if plan_file is not None and plan_file.exists():
        plan_file.unlink()  # a cold plan: this profile was never planned on this release
    add("cold apply", impl.run("apply", "--series", s, "--profile", "all", "--site-packages", str(copy)))
    add("no-op apply", impl.run("apply", "--series", s, "--profile", "all", "--site-packages", str(copy)))
    add("status", impl.run("status", "--series", s, "--site-packages", str(copy)))
    add("revert --all", impl.run("revert", "--all", "--series", s, "--site-packages", str(copy)))
    if plan_file is not None:  # the same profile on another environment of the release
        add("cold apply, plan cached", impl.run("apply", "--series", s, "--profile", "all",
                                                "--site-packages", str(copy)))
    shutil.rmtree(copy)
    walls = cpus = 0.0
    for v in CHECK_RELEASES:
        w, c, _ = impl.run("check", "--series", s, "--profile", "all", "--vllm", v, "--json")
        walls, cpus = walls + w, cpus + c
    add("check x3", (walls, cpus))
    out = work / f"matrix-{impl.name}-{n}"
    add("matrix x8", impl.run("matrix", "--series", s, "--profiles", "all", "--releases",
                              ",".join(MATRIX_RELEASES), "--out", str(out), "--json"))


_plan_files: dict[Path, Path] = {}


def plan_cache_file(series: Path) -> Path:
    """Where this checkout's plan cache keeps the plan of profile ``all`` on vLLM 0.23.0."""
    if series not in _plan_files:
        from packaging.version import Version

        from patchq import series as series_mod
        from patchq.plan import plancache
        from patchq.vllmdist import cache

        class _V:  # plan_key needs only the version
            version = Version("0.23.0")

        patches = series_mod.load(series).patches_of("all")
        _plan_files[series] = cache.plans() / f"{plancache.plan_key(_V(), patches)}.pickle"  # type: ignore[arg-type]
    return _plan_files[series]


def summarize(samples: dict, base: float) -> list[dict]:
    rows = []
    for (impl, n, case), runs in sorted(samples.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        walls = [w for w, _ in runs]
        med = statistics.median(walls)
        rows.append({"impl": impl, "n": n, "case": case, "median_s": round(med, 4), "min_s": round(min(walls), 4),
                     "cpu_median_s": round(statistics.median(c for _, c in runs), 4),
                     "x_python": round(med / base, 2), "per_patch_ms": round(1000 * med / n, 2) if n else None,
                     "runs": len(runs), "samples_s": [round(w, 4) for w in walls]})
    return rows


def plot(rows: list[dict], path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    cases = sorted({r["case"] for r in rows if isinstance(r["n"], int) and r["n"] in (5, 20, 50, 100, 200)})
    fig, axes = plt.subplots(1, len(cases), figsize=(4 * len(cases), 3.6))
    for ax, case in zip(axes, cases, strict=False):
        for impl in sorted({r["impl"] for r in rows}):
            pts = sorted((r["n"], r["median_s"]) for r in rows if r["case"] == case and r["impl"] == impl)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=impl)
        ax.set_title(case)
        ax.set_xlabel("patches")
        ax.set_ylabel("s (median)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def real_round(impl: Impl, series: Path, n: int, site: Path, work: Path, samples: dict, cases: set[str]) -> None:
    """One round of the realistic cases for ``impl`` (module docstring); appends (wall, cpu)."""
    s = str(series)
    warm = work / f"cache-{impl.name}"

    def add(case: str, value: tuple) -> None:
        if case in cases:
            samples.setdefault((impl.name, n, case), []).append(value[:2])

    if "check cold 0.33.0" in cases:
        cold = private_cache(work / f"cold-{impl.name}")
        add("check cold 0.33.0", impl.run("check", "--series", s, "--profile", "all", "--vllm", "0.33.0",
                                          "--json", cache=cold))
        shutil.rmtree(cold)
    for v in REAL_CHECK:
        if f"check warm {v}" in cases:
            add(f"check warm {v}", impl.run("check", "--series", s, "--profile", "all", "--vllm", v, "--json",
                                            cache=warm))
    matrix = ("matrix", "--series", s, "--profiles", "all", "--releases", ",".join(REAL_17),
              "--out", str(work / f"m-{impl.name}-{n}"), "--json")
    if "matrix 17 warm" in cases:
        add("matrix 17 warm", impl.run(*matrix, cache=warm))
    if impl.verdict_cache:  # the index warm, no verdict cached (what a changed series or patchq pays)
        if "check 0.33.0 index-warm" in cases:
            add("check 0.33.0 index-warm", impl.run("check", "--series", s, "--profile", "all", "--vllm", "0.33.0",
                                                    "--json", cache=warm, PATCHQ_VERDICT_CACHE="0"))
        if "matrix 17 index-warm" in cases:
            add("matrix 17 index-warm", impl.run(*matrix, cache=warm, PATCHQ_VERDICT_CACHE="0"))
        if "matrix 18 index-warm" in cases:
            m18 = ("matrix", "--series", s, "--profiles", "all", "--releases", ",".join(REAL_18),
                   "--out", str(work / f"m18-{impl.name}-{n}"), "--json")
            add("matrix 18 index-warm", impl.run(*m18, cache=warm, PATCHQ_VERDICT_CACHE="0"))
    real_startup(impl, s, n, site, work, add, cases)


def real_startup(impl: Impl, s: str, n: int, site: Path, work: Path, add: Callable, cases: set[str]) -> None:
    """The apply and start-up cases of :func:`real_round`. With ``cold apply`` among the
    cases, every round applies to a fresh copy (then waits 2.2 s: a server start comes
    later, and the files apply wrote have settled for :mod:`patchq.env.stamp`); without it,
    the copy applied in the first round is kept and the no-op and status stamps are deleted
    instead, which is the same "first after an apply" state at a fraction of the cost."""
    warm = work / f"cache-{impl.name}"
    copy = work / f"site-{impl.name}-{n}"
    noop = ("apply", "--series", s, "--profile", "all", "--site-packages", str(copy))
    status = ("status", "--series", s, "--site-packages", str(copy))
    if "cold apply" in cases or (cases & set(ENV_CASES) and not copy.exists()):
        link_copy(site, copy)
        shutil.rmtree(warm / "plans", ignore_errors=True)  # a cold plan
        add("cold apply", impl.run(*noop, cache=warm))
        time.sleep(2.2)
    elif cases & set(ENV_CASES):
        drop_stamps(warm, ("noop-apply", "status"))
    if cases & set(ENV_CASES):
        add("no-op apply, first", impl.run(*noop, cache=warm))  # hashes (and stamps)
        add("no-op apply", impl.run(*noop, cache=warm))
        add("status, first", impl.run(*status, cache=warm))
        add("status", impl.run(*status, cache=warm))
    if "cold apply" in cases:
        shutil.rmtree(copy)
    add("list", impl.run("list", "--series", s, cache=warm))
    add("--help", impl.run("--help", cache=warm))
    if cases & {"list, first", "--help, first"}:  # a cache directory without stamps
        fresh = work / f"fresh-{impl.name}"
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir()
        add("--help, first", impl.run("--help", cache=fresh))  # typer renders (the stamp's key names the cache)
        add("list, first", impl.run("list", "--series", s, cache=fresh))


def drop_stamps(cache: Path, commands: tuple[str, ...]) -> None:
    """Delete the stamps in ``cache`` whose key names one of ``commands`` (:mod:`patchq.env.stamp`)."""
    for path in (cache / "stamps").glob("*.stamp"):
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            fh.readline()
            fields = fh.readline().rstrip("\n").split("\t")  # K, then name=value sorted by name
        if any(f"command={c}" in fields for c in commands):
            path.unlink()


#: The cases that need an environment with the series applied.
ENV_CASES = ["no-op apply, first", "no-op apply", "status, first", "status"]
#: ``--cases startup``: what a server start, a shell or a user's first minute pays.
STARTUP_CASES = [*ENV_CASES, "list", "list, first", "--help", "--help, first"]
REAL_CASES = ["check cold 0.33.0", *(f"check warm {v}" for v in REAL_CHECK), "check 0.33.0 index-warm",
              "matrix 17 warm", "matrix 17 index-warm", "matrix 18 index-warm", "cold apply", *STARTUP_CASES]


def growth(rows: list[dict]) -> list[dict]:
    """Per (impl, case): the median at each N over the median at the smallest N."""
    out = []
    by: dict[tuple, dict[int, float]] = {}
    for r in rows:
        by.setdefault((r["impl"], r["case"]), {})[r["n"]] = r["median_s"]
    for (impl, case), per in sorted(by.items()):
        n0 = min(per)
        out.append({"impl": impl, "case": case, "base_n": n0,
                    "ratios": {n: round(v / per[n0], 2) for n, v in sorted(per.items())}})
    return out


def selected_cases(names: str | None, skip: str | None) -> set[str]:
    """``--cases`` (comma-separated, a comma and a space inside a name; ``startup`` for
    :data:`STARTUP_CASES`; default every case) less ``--skip``. Raises SystemExit for a name
    that is not a case."""
    import re

    def split(text: str) -> list[str]:  # a comma and a space belong to a name ("status, first")
        return [name for name in re.split(r",(?! )", text) if name]

    chosen: list[str] = []
    for name in split(names) if names else REAL_CASES:
        chosen += STARTUP_CASES if name == "startup" else [name]
    dropped = set(split(skip or ""))
    unknown = (set(chosen) | dropped) - set(REAL_CASES)
    if unknown:
        raise SystemExit(f"scale.py: not a case: {', '.join(sorted(unknown))} (cases: {', '.join(REAL_CASES)})")
    return set(chosen) - dropped


def checkout_commit(root: Path) -> str:
    """The commit a checkout has out, ``+dirty`` when its tracked files differ from it."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "") if head.returncode == 0 else "?"


def main_realistic(args: argparse.Namespace) -> int:
    """``--kind realistic`` (module docstring)."""
    ns = [int(x) for x in args.ns.split(",")]
    base_ns = [int(x) for x in args.baseline_ns.split(",")] if args.baseline else []
    cases = selected_cases(args.cases, args.skip)
    started = time.time()
    load_before = os.getloadavg()
    roots = {"patchq": REPO, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    with tempfile.TemporaryDirectory(prefix="patchq-scale-") as tmp:
        work = Path(tmp)
        site = pristine_site(work, args.site)
        py = clean_python(work)
        impls = [Impl(name, root, work, py, args.entry) for name, root in roots.items()]
        for impl in impls:
            private_cache(work / f"cache-{impl.name}")
        gen = Path(args.series_dir) if args.series_dir else work
        series = {}
        for n in sorted(set(ns) | set(base_ns)):
            out = gen / f"real{n}"
            series[n] = out / "series" if (out / "series" / "profiles.toml").is_file() else realistic.generate(out, n)
        samples: dict = {}
        pys: list[float] = []
        rounds = max(args.repeat, args.baseline_repeat if args.baseline else 0)
        for rnd in range(rounds + 1):  # round 0: warm-up, not recorded
            keep = samples if rnd else {}
            for n in ns if rnd else sorted(set(ns) | set(base_ns)):
                if rnd:
                    pys.append(timed([py, "-c", "pass"], os.environ.copy(), work)[0])
                if n in ns and rnd <= args.repeat:
                    real_round(impls[0], series[n], n, site, work, keep, cases)
                # the baseline keeps nothing per series: one warm-up at the largest N (the series
                # are nested) builds the definition index every later round reads
                if args.baseline and n in base_ns and rnd <= args.baseline_repeat and (rnd or n == max(base_ns)):
                    real_round(impls[1], series[n], n, site, work, keep, cases)
                print(f"round {rnd} N={n} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
        base = statistics.median(pys)
        rows = summarize(samples, base)
    doc = {
        "schema": "patchq.bench.scale/2", "kind": "realistic", "python": platform.python_version(),
        "cpus": os.cpu_count(), "machine": platform.machine(), "load_before": load_before,
        "load_after": os.getloadavg(), "python_start_median_s": round(base, 4),
        "clean_interpreter": "python -c pass in a fresh `python -m venv --without-pip` venv",
        "entry": {"script": "the console script pip writes (bench/scale.py CONSOLE_SCRIPT), in that venv",
                  "module": "python -m patchq"}[args.entry],
        "bytecode": ".pyc written in the warm-up round (PYTHONDONTWRITEBYTECODE unset), as pip compiles on install",
        "commits": {name: checkout_commit(root) for name, root in roots.items()},
        "argv": sys.argv[1:],
        "rounds": {"patchq": args.repeat, "baseline": args.baseline_repeat if args.baseline else 0},
        "seconds": round(time.time() - started, 1), "rows": rows, "growth": growth(rows),
    }
    print(f"python -c pass (clean venv): median {base * 1000:.1f} ms; load {load_before[0]:.1f} -> "
          f"{doc['load_after'][0]:.1f}; {os.cpu_count()} CPUs")
    print(f"{'impl':9} {'N':>4} {'case':20} {'median':>9} {'min':>9} {'CPU':>8} {'x py':>8}")
    for r in rows:
        print(f"{r['impl']:9} {r['n']:>4} {r['case']:20} {r['median_s']:>8.3f}s {r['min_s']:>8.3f}s "
              f"{r['cpu_median_s']:>7.2f}s {r['x_python']:>8.2f}")
    print("growth (median at N / median at the smallest N):")
    for g in doc["growth"]:
        print(f"{g['impl']:9} {g['case']:20} " + "  ".join(f"N={n}: {v}" for n, v in g["ratios"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ns", default="5,20,50,100,200")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--site", help="an existing pristine site-packages of vLLM 0.23.0 (never written)")
    ap.add_argument("--baseline", help="another patchq checkout to time beside this one")
    ap.add_argument("--baseline-ns", default="20,200")
    ap.add_argument("--baseline-repeat", type=int, default=1)
    ap.add_argument("--big", action="store_true", help="also 200 patches x 17 releases")
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--kind", choices=("synth", "realistic"), default="synth")
    ap.add_argument("--series-dir", help="realistic: where the series real<N>/ are (generated when missing)")
    ap.add_argument("--skip", help="realistic: comma-separated cases to leave out")
    ap.add_argument("--cases", help="realistic: comma-separated cases to time ('startup': the start-up cases)")
    ap.add_argument("--entry", choices=("script", "module"), default="script",
                    help="patchq's console script (what a user runs; default) or python -m patchq")
    args = ap.parse_args()
    if args.kind == "realistic":
        if args.ns == "5,20,50,100,200":
            args.ns = "5,50,100,200,400"
        return main_realistic(args)
    ns = [int(x) for x in args.ns.split(",")]
    base_ns = [int(x) for x in args.baseline_ns.split(",")] if args.baseline else []
    started = time.time()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="patchq-scale-") as tmp:
        work = Path(tmp)
        site = pristine_site(work, args.site)
        py = clean_python(work)
        impls = [Impl("patchq", REPO, work, py, args.entry)] + (
            [Impl("baseline", Path(args.baseline).resolve(), work, py, args.entry)] if args.baseline else [])
        series = {n: synth.generate(work / f"synth{n}", n) for n in sorted(set(ns) | set(base_ns) | {5})}
        dense = synth.generate(work / "dense40", 40, "dense")
        samples: dict = {}
        pys = []
        rounds = max(args.repeat, args.baseline_repeat if args.baseline else 0)
        for rnd in range(rounds + 1):  # round 0: warm-up, not recorded
            keep = samples if rnd else {}
            for n in ns:
                pys.append(timed([py, "-c", "pass"], os.environ.copy(), work)[0]) if rnd else None
                if rnd <= args.repeat:
                    round_cases(impls[0], series[n], n, site, work, keep)
                if args.baseline and n in base_ns and rnd <= args.baseline_repeat:
                    round_cases(impls[1], series[n], n, site, work, keep)
            for impl in impls if rnd <= args.baseline_repeat else impls[:1]:
                copy = link_copy(site, work / f"dense-{impl.name}")
                keep.setdefault((impl.name, 40, "cold apply, 40 in one module"), []).append(
                    impl.run("apply", "--series", str(dense), "--profile", "all", "--site-packages", str(copy))[:2])
                shutil.rmtree(copy)
                keep.setdefault((impl.name, 5, "matrix 17 releases x 4 profiles"), []).append(impl.run(
                    "matrix", "--series", str(series[5]), "--profiles", "p1,p2,p3,p4", "--releases",
                    ",".join(RELEASES_17), "--out", str(work / "m5"), "--json")[:2])
                if args.big and 200 in series and impl.name == "patchq":
                    keep.setdefault((impl.name, 200, "matrix 17 releases"), []).append(impl.run(
                        "matrix", "--series", str(series[200]), "--profiles", "all", "--releases",
                        ",".join(RELEASES_17), "--out", str(work / "m200"), "--json")[:2])
        base = statistics.median(pys)
        rows = summarize(samples, base)
    doc = {
        "schema": "patchq.bench.scale/1", "python": platform.python_version(), "cpus": os.cpu_count(),
        "machine": platform.machine(), "load_before": load_before, "load_after": os.getloadavg(),
        "python_start_median_s": round(base, 4), "python_start_min_s": round(min(pys), 4),
        "clean_interpreter": "python -c pass in a fresh `python -m venv --without-pip` venv",
        "seconds": round(time.time() - started, 1), "rows": rows,
    }
    print(f"python -c pass (clean venv): median {base * 1000:.1f} ms, min {min(pys) * 1000:.1f} ms; "
          f"load {load_before[0]:.1f} -> {doc['load_after'][0]:.1f}; {os.cpu_count()} CPUs")
    print(f"{'impl':9} {'N':>4} {'case':32} {'median':>9} {'min':>9} {'CPU':>8} {'x py':>7} {'ms/patch':>9}")
    for r in rows:
        print(f"{r['impl']:9} {r['n']:>4} {r['case']:32} {r['median_s']:>8.3f}s {r['min_s']:>8.3f}s "
              f"{r['cpu_median_s']:>7.2f}s {r['x_python']:>7.2f} {r['per_patch_ms'] or 0:>9.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if args.png and plot(rows, args.png):
        print(f"plot: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
