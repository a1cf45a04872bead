"""patchq against the other ways of patching site-packages, on the same files.

    python bench/alternatives.py [--site DIR] [--profile dense] [--repeat 7] [--json out.json]

Every case patches a fresh hard-linked copy of a pristine ``pip install --no-deps`` of
vLLM 0.23.0 (made outside the timed region) with the same change: the profile's
patches as patchq applies them. Whole processes are timed (wall, and the child's
user+sys CPU from ``wait4``), interleaved round by round:

* ``python -c pass`` of a fresh venv (``python -m venv --without-pip``: no
  editable-install finder, empty site-packages): the unit of the ratios;
* ``patchq apply`` (cold: nothing applied yet);
* ``text scripts, 5 processes``: one stdlib script per patch, each finding its exact
  blocks of text and replacing them (the sentinel-script practice patchq replaces;
  written atomically, no fsync), run one after the other;
* ``text scripts, 1 process``: the same replacements in one process;
* ``git apply``, GNU ``patch -p1`` and ``quilt push -a`` of the profile's unified diff
  (``patchq diff``), in the copy.

The text blocks are derived from patchq's own plans (patch i's blocks: the texts after
patches 1..i against those after 1..i-1), so every case writes the same bytes; the
script checks that each result equals patchq's. ``quilt`` is skipped when not installed.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_SCRIPT = '''import os, sys
root = sys.argv[1]
for rel, old, new in {edits!r}:
    path = os.path.join(root, rel)
    with open(path, encoding="utf-8", newline="") as fh:
        text = fh.read()
    if text.count(old) != 1:
        sys.exit(f"{{rel}}: block not found once")
    text = text.replace(old, new)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    os.replace(tmp, path)
'''


def timed(cmd: list[str], cwd: Path, env: dict | None = None, stdin: Path | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of one process; raises SystemExit unless it exits 0."""
    t0 = time.perf_counter()
    fh = open(stdin, "rb") if stdin else None
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=fh, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if fh:
        fh.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode()[-1500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def blocks(before: str, after: str) -> list[tuple[str, str]]:
    """(old, new) text blocks turning ``before`` into ``after`` when replaced in order, each
    with the fewest unchanged lines around it (at least 2) that make it occur once."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    for context in range(2, 200):
        out, text, ok = [], before, True
        for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
            i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
            old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
            if text.count(old) != 1:
                ok = False
                break
            text = text.replace(old, new)
            out.append((old, new))
        if ok and text == after:
            return out
    raise SystemExit("no unique text blocks for a change")


def prepare(site: Path, profile: str, work: Path) -> dict:
    """The diff file, one replacement script per patch and one for all, and patchq's result."""
    from patchq import series as series_mod
    from patchq.vllmdist import sources
    from patchq.plan import diffs, engine

    ser = series_mod.load()
    patches = ser.patches_of(profile)
    source = sources.installed(site)
    prev: dict[str, str] = {}
    scripts, everything = [], []
    for i in range(len(patches)):
        plan = engine.plan(source, patches[: i + 1])
        edits = []
        for rel, text in plan.patched.items():
            old = prev.get(rel, plan.pristine[rel])
            if old != text:
                edits += [(rel, o, n) for o, n in blocks(old, text)]
        prev = dict(plan.patched)
        path = work / f"patch{i + 1}.py"
        path.write_text(_SCRIPT.format(edits=edits), encoding="utf-8")
        scripts.append(path)
        everything += edits
    combined = work / "all.py"
    combined.write_text(_SCRIPT.format(edits=everything), encoding="utf-8")
    diff = work / f"{profile}.diff"
    diff.write_text(diffs.unified_all(plan.pristine, plan.patched), encoding="utf-8")
    return {"scripts": scripts, "combined": combined, "diff": diff, "expected": dict(plan.patched)}


def same(copy: Path, expected: dict[str, str]) -> bool:
    """True when every file of ``expected`` in ``copy`` has exactly that text."""
    return all((copy / rel).read_text(encoding="utf-8") == text for rel, text in expected.items())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", help="pristine site-packages of vLLM 0.23.0 (never written)")
    ap.add_argument("--profile", default="dense")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="patchq-alt-") as tmp:
        work = Path(tmp)
        if args.site:
            site = Path(args.site)
        else:
            from patchq.vllmdist import releases

            site = work / "pristine"
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                            "--disable-pip-version-check", "--target", str(site),
                            str(releases.wheel_path("0.23.0"))], check=True)
        prep = prepare(site, args.profile, work)
        venv = work / "clean-venv"
        subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
                        str(venv)], check=True)
        clean = str(venv / "bin" / "python")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PATCHQ_") and k != "PYTHONDONTWRITEBYTECODE"}  # as installed: .pyc
        import sysconfig  # patchq in the clean interpreter: no editable-install finder

        env["PYTHONPATH"] = os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])
        quilt = shutil.which("quilt")
        diff = prep["diff"]

        def fresh(name: str) -> Path:
            dst = work / name
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(site, dst, copy_function=os.link, symlinks=True)
            return dst

        def quilt_setup(copy: Path) -> None:
            (copy / "patches").mkdir()
            shutil.copy(diff, copy / "patches" / diff.name)
            (copy / "patches" / "series").write_text(diff.name + "\n")

        cases = {
            "python -c pass": lambda c: timed([clean, "-c", "pass"], work),
            "patchq apply": lambda c: timed([clean, "-m", "patchq", "apply", "--profile", args.profile,
                                             "--site-packages", str(c)], work, env),
            "text scripts, 5 processes": lambda c: tuple(map(sum, zip(*[
                timed([clean, str(s), str(c)], work) for s in prep["scripts"]]))),
            "text scripts, 1 process": lambda c: timed([clean, str(prep["combined"]), str(c)], work),
            "git apply": lambda c: timed(["git", "apply", str(diff)], c),
            "patch -p1": lambda c: timed(["patch", "-p1", "-s", "-i", str(diff)], c),
        }
        if quilt:
            cases["quilt push -a"] = lambda c: timed(["quilt", "push", "-a", "-q"], c,
                                                     {**os.environ, "QUILT_PATCHES": "patches"})
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for rnd in range(args.repeat + 1):
            for name, run in cases.items():
                copy = fresh("copy")
                if name.startswith("quilt"):
                    quilt_setup(copy)
                got = run(copy)
                if name != "python -c pass" and rnd == 0:
                    exact = same(copy, prep["expected"])
                    print(f"{name}: result {'equals' if exact else 'DIFFERS from'} patchq's")
                if rnd:
                    samples[name].append(got)
        base = statistics.median(w for w, _ in samples["python -c pass"])
        rows = []
        print(f"load {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs; "
              f"{args.repeat} rounds; profile {args.profile} ({len(prep['scripts'])} patches, "
              f"{len(prep['expected'])} files)")
        print(f"{'case':28} {'median':>9} {'min':>9} {'CPU':>8} {'x python':>9}")
        for name, runs in samples.items():
            walls = [w for w, _ in runs]
            row = {"case": name, "median_s": round(statistics.median(walls), 4), "min_s": round(min(walls), 4),
                   "cpu_median_s": round(statistics.median(c for _, c in runs), 4),
                   "x_python": round(statistics.median(walls) / base, 2)}
            rows.append(row)
            print(f"{name:28} {row['median_s']:>8.3f}s {row['min_s']:>8.3f}s {row['cpu_median_s']:>7.3f}s "
                  f"{row['x_python']:>9.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "schema": "patchq.bench.alternatives/1", "profile": args.profile, "repeat": args.repeat,
            "python": platform.python_version(), "cpus": os.cpu_count(), "load_before": load_before,
            "clean_interpreter": "python -c pass in a fresh `python -m venv --without-pip` venv",
            "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
