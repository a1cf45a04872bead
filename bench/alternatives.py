"""patchq against the other ways of patching site-packages, on the same files.

    python bench/alternatives.py [--site DIR] [--sets dense,real200,dense40,spread5] [--repeat 3]
                                 [--series-dir DIR] [--baseline DIR] [--json out.json]

Every case patches a fresh hard-linked copy of a pristine ``pip install --no-deps`` of
vLLM 0.23.0 (made outside the timed region) with the same change. Whole processes are
timed (wall, and the child's user+sys CPU from ``wait4``), interleaved round by round
after one untimed warm-up round (``.pyc`` files written there, as pip compiles on
install). The change comes in sets (``--sets``):

* ``dense``: the Spark series' ``dense`` profile (5 patches, 4 files);
* ``real200``: the realistic series of 200 patches (``bench/realistic.py``: statement
  anchors in 200 modules, the series ``bench/scale.py --kind realistic`` times);
* ``dense40``: 40 patches that all edit one module (``bench/synth.py --layout dense``);
* ``spread5``: 5 patches in 5 modules (``bench/synth.py --layout spread``).

Cases, per set:

* ``python -c pass`` of a fresh venv (``python -m venv --without-pip``: no
  editable-install finder, empty site-packages): the unit of the ratios (once a round);
* ``patchq cold apply``: patchq's console script (``bench/scale.py``'s ``CONSOLE_SCRIPT``)
  with a fresh cache directory (release trees and wheels linked from the shared cache;
  no definition index, no plan, no verdict): what the first apply on a new release pays;
* ``patchq apply after check``: the same after ``patchq check --vllm 0.23.0`` of the
  same profile ran (untimed) in that cache directory: what ``apply`` pays after a
  ``check`` or an ``upgrade`` of the same release;
* ``text scripts, one process per patch``: one stdlib script per patch, each finding its
  exact blocks of text and replacing them (the sentinel-script practice patchq replaces;
  written atomically, no fsync), run one after the other;
* ``text scripts, 1 process``: the same replacements in one process;
* ``git apply`` and GNU ``patch -p1`` of the profile's unified diff (``patchq diff``);
* ``quilt push -a``: Debian's quilt with one patch file per patchq patch, in series order
  (``apt-get install quilt``; skipped when not installed).

The text blocks and the quilt patches are derived from patchq's own plans (patch i's
blocks: the texts after patches 1..i against those after 1..i-1, planned per group of
patches that share files), so every case writes the same bytes; the warm-up round checks
that each result equals patchq's. ``--baseline DIR``: also time another checkout of
patchq (``PYTHONPATH=DIR``), interleaved in the same rounds: before/after from one run.
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
sys.path.insert(0, str(REPO / "bench"))

import realistic  # noqa: E402
import scale  # noqa: E402
import synth  # noqa: E402

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

#: set -> (what it is, profile)
SETS = {
    "dense": ("the Spark series' dense profile", "dense"),
    "real200": ("realistic series, 200 patches in 200 modules (bench/realistic.py)", "all"),
    "dense40": ("40 patches in one module (bench/synth.py --layout dense)", "all"),
    "spread5": ("5 patches in 5 modules (bench/synth.py --layout spread)", "all"),
}


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


def _groups(results: list, patches: list) -> list[list[int]]:
    """Indices of the patches that changed files, grouped by the files they share (series order)."""
    parent = list(range(len(patches)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, r in enumerate(results):
        for rel in r.files:
            if rel in owner:
                parent[find(i)] = find(owner[rel])
            else:
                owner[rel] = i
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(results):
        if r.files:
            groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def prepare(site: Path, series_dir: Path | None, profile: str, work: Path) -> dict:
    """The diff, one replacement script per patch and one for all, one quilt patch per
    patch, and patchq's result (module docstring)."""
    from patchq import series as series_mod
    from patchq.plan import diffs, engine
    from patchq.vllmdist import sources

    ser = series_mod.load(series_dir)
    patches = ser.patches_of(profile)
    source = sources.installed(site)
    full = engine.plan(source, patches)
    if not full.ok:
        raise SystemExit(f"{profile}: the plan fails on {site}")
    steps: list[dict[str, str]] = [{} for _ in patches]  # patch i -> the texts it leaves in its files
    for group in _groups(full.results, patches):
        for k in range(len(group)):
            plan = engine.plan(source, [patches[i] for i in group[:k + 1]])
            steps[group[k]] = {rel: plan.patched[rel] for rel in full.results[group[k]].files}
    text = dict(full.pristine)
    scripts, everything, quilt = [], [], []
    for i, after in enumerate(steps):
        edits = []
        before = {rel: text[rel] for rel in after}
        for rel, new in after.items():
            edits += [(rel, o, n) for o, n in blocks(text[rel], new)]
            text[rel] = new
        path = work / f"patch{i + 1}.py"
        path.write_text(_SCRIPT.format(edits=edits), encoding="utf-8")
        scripts.append(path)
        everything += edits
        if after:
            quilt.append((f"{i + 1:04d}-{patches[i].id}.patch", diffs.unified_all(before, after)))
    if text != {**full.pristine, **full.patched}:
        raise SystemExit(f"{profile}: the per-patch steps do not add up to the whole plan")
    combined = work / "all.py"
    combined.write_text(_SCRIPT.format(edits=everything), encoding="utf-8")
    diff = work / "all.diff"
    diff.write_text(diffs.unified_all(full.pristine, full.patched), encoding="utf-8")
    qdir = work / "quilt"
    qdir.mkdir()
    for name, body in quilt:
        (qdir / name).write_text(body, encoding="utf-8")
    (qdir / "series").write_text("".join(name + "\n" for name, _ in quilt), encoding="utf-8")
    return {"scripts": scripts, "combined": combined, "diff": diff, "quilt": qdir,
            "expected": dict(full.patched), "patches": len(patches), "files": len(full.patched)}


def same(copy: Path, expected: dict[str, str]) -> bool:
    """True when every file of ``expected`` in ``copy`` has exactly that text."""
    return all((copy / rel).read_text(encoding="utf-8") == text for rel, text in expected.items())


def series_for(name: str, root: Path) -> Path | None:
    """The series directory of a set (None: the checkout's own series), generated under
    ``root`` when missing."""
    if name == "dense":
        return None
    out = root / name
    if (out / "series" / "profiles.toml").is_file():
        return out / "series"
    if name == "real200":
        return realistic.generate(out, 200)
    if name == "dense40":
        return synth.generate(out, 40, "dense")
    return synth.generate(out, 5, "spread")


def summarize(samples: dict, base: float) -> list[dict]:
    rows = []
    quilt = {s: statistics.median(w for w, _ in runs) for (s, case), runs in samples.items() if case == "quilt push -a"}
    for (set_name, case), runs in samples.items():
        walls = [w for w, _ in runs]
        med = statistics.median(walls)
        rows.append({"set": set_name, "case": case, "median_s": round(med, 4), "min_s": round(min(walls), 4),
                     "cpu_median_s": round(statistics.median(c for _, c in runs), 4),
                     "x_python": round(med / base, 2),
                     "x_quilt": round(med / quilt[set_name], 2) if set_name in quilt else None,
                     "samples_s": [round(w, 4) for w in walls], "cpu_samples_s": [round(c, 4) for _, c in runs]})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", help="pristine site-packages of vLLM 0.23.0 (never written)")
    ap.add_argument("--sets", default="dense,real200,dense40,spread5")
    ap.add_argument("--series-dir", help="where real200/, dense40/, spread5/ are (generated when missing)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="another patchq checkout to time beside this one")
    ap.add_argument("--json")
    args = ap.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    unknown = set(sets) - set(SETS)
    if unknown:
        raise SystemExit(f"alternatives.py: not a set: {', '.join(sorted(unknown))} (sets: {', '.join(SETS)})")
    started = time.time()
    load_before = os.getloadavg()
    roots = {"patchq": REPO, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    with tempfile.TemporaryDirectory(prefix="patchq-alt-") as tmp:
        work = Path(tmp)
        site = scale.pristine_site(work, args.site)
        gen = Path(args.series_dir) if args.series_dir else work
        py = scale.clean_python(work)
        impls = [scale.Impl(name, root, work, py) for name, root in roots.items()]
        quilt = shutil.which("quilt")
        prep, series = {}, {}
        for s in sets:
            series[s] = series_for(s, gen)
            (work / s).mkdir()
            prep[s] = prepare(site, series[s], SETS[s][1], work / s)
            print(f"{s}: {prep[s]['patches']} patches, {prep[s]['files']} files", file=sys.stderr, flush=True)

        def fresh(name: str) -> Path:  # patched vLLM imports patchq_runtime (the Spark series)
            copy = scale.link_copy(site, work / name)
            (copy / "patchq_runtime_checkout.pth").write_text(str(REPO / "spark" / "runtime") + "\n")
            return copy

        def apply_args(s: str, copy: Path) -> list[str]:
            out = ["apply", "--profile", SETS[s][1], "--site-packages", str(copy)]
            return out + (["--series", str(series[s])] if series[s] else [])

        def patchq_case(impl: scale.Impl, s: str, copy: Path, after_check: bool) -> tuple[float, float]:
            cache = scale.private_cache(work / f"cache-{impl.name}")
            if after_check:
                check = ["check", "--vllm", "0.23.0", "--profile", SETS[s][1], "--json"]
                impl.run(*check, *(["--series", str(series[s])] if series[s] else []), cache=cache)
            wall, cpu, code = impl.run(*apply_args(s, copy), cache=cache)
            if code != 0:
                raise SystemExit(f"{impl.name} apply of {s} exited {code}")
            return wall, cpu

        def cases(s: str) -> dict:
            p = prep[s]
            out = {}
            for impl in impls:
                tag = "" if impl.name == "patchq" else f" [{impl.name}]"
                out[f"patchq cold apply{tag}"] = lambda c, impl=impl: patchq_case(impl, s, c, False)
                out[f"patchq apply after check{tag}"] = lambda c, impl=impl: patchq_case(impl, s, c, True)
            out["text scripts, one process per patch"] = lambda c: tuple(map(sum, zip(*[
                timed([py, str(f), str(c)], work) for f in p["scripts"]], strict=True)))
            out["text scripts, 1 process"] = lambda c: timed([py, str(p["combined"]), str(c)], work)
            out["git apply"] = lambda c: timed(["git", "apply", str(p["diff"])], c)
            out["patch -p1"] = lambda c: timed(["patch", "-p1", "-s", "-i", str(p["diff"])], c)
            if quilt:
                out["quilt push -a"] = lambda c: timed(["quilt", "push", "-a", "-q"], c,
                                                       {**os.environ, "QUILT_PATCHES": "patches"})
            return out

        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for rnd in range(args.repeat + 1):  # round 0: warm-up (.pyc written, results checked), not recorded
            got = timed([py, "-c", "pass"], work)
            if rnd:
                samples.setdefault(("-", "python -c pass"), []).append(got)
            for s in sets:
                for name, run in cases(s).items():
                    copy = fresh("copy")
                    if name.startswith("quilt"):
                        shutil.copytree(prep[s]["quilt"], copy / "patches")
                    got = run(copy)
                    if rnd == 0:
                        exact = same(copy, prep[s]["expected"])
                        print(f"{s}: {name}: result {'equals' if exact else 'DIFFERS from'} patchq's", file=sys.stderr)
                        if not exact:
                            raise SystemExit(f"{s}: {name} wrote other bytes than patchq's plan")
                    else:
                        samples.setdefault((s, name), []).append(got)
                print(f"round {rnd} {s} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
        base = statistics.median(w for w, _ in samples[("-", "python -c pass")])
        rows = summarize(samples, base)
    load_after = os.getloadavg()
    print(f"load {load_before[0]:.1f} -> {load_after[0]:.1f}; {os.cpu_count()} CPUs; {args.repeat} rounds; "
          f"python -c pass {base * 1000:.1f} ms")
    print(f"{'set':8} {'case':38} {'median':>9} {'min':>9} {'CPU':>8} {'x python':>9} {'x quilt':>8}")
    for r in rows:
        xq = f"{r['x_quilt']:>8.2f}" if r["x_quilt"] is not None else " " * 8
        print(f"{r['set']:8} {r['case']:38} {r['median_s']:>8.3f}s {r['min_s']:>8.3f}s {r['cpu_median_s']:>7.3f}s "
              f"{r['x_python']:>9.2f} {xq}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "schema": "patchq.bench.alternatives/2", "sets": {s: {"what": SETS[s][0], "profile": SETS[s][1],
                                                                 "patches": prep[s]["patches"],
                                                                 "files": prep[s]["files"]} for s in sets},
            "repeat": args.repeat, "python": platform.python_version(), "cpus": os.cpu_count(),
            "load_before": load_before, "load_after": load_after, "seconds": round(time.time() - started, 1),
            "commits": {name: scale.checkout_commit(root) for name, root in roots.items()},
            "clean_interpreter": "python -c pass in a fresh `python -m venv --without-pip` venv",
            "entry": "patchq's console script as pip writes it (bench/scale.py CONSOLE_SCRIPT), .pyc written",
            "argv": sys.argv[1:], "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
