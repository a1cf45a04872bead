"""Deeper matrix levels on CPU: install a vLLM release, apply each profile, import, probe.

vLLM 0.27.x-0.32.x pin torch 2.13.0, whose CPU build this machine's pip installs from a
local wheel (``/opt/wheels``; see ``docs/cpu-import.md``), so those releases
install with their dependencies and their pure-Python modules import without a GPU.
For one release this script:

1. makes a venv ``<venvs>/vllm-<version>`` (kept: a second run reuses it) and installs
   the release's cached wheel (:func:`patchq.vllmdist.releases.wheel_path`) with its dependencies
   through pip (its cache, ``~/.cache/pip``, keeps the dependency wheels: ~5.5 GB,
   ~2 min the first time), then uninstalls ``torchvision``, ``torchaudio`` and
   ``torchcodec`` (their native libraries are built against CUDA torch and break
   ``import vllm`` beside the CPU build), and installs patchq itself without
   dependencies plus ``libcst`` (probes live in ``series/<patch>.py``);
2. ``pristine`` (before any profile): runs every patch's probe on the unpatched release
   (evidence whether upstream already does what the patch intends);
3. for each profile: ``patchq apply --profile P --site-packages <venv>`` (which converges:
   the previous profile's patches are reverted); then, in a fresh interpreter, imports
   every module a patch changed and checks that the imported file carries the patch's
   sentinel (``import`` level); then runs each applied patch's ``probe()`` in its own
   fresh interpreter (``probe`` level);
4. reverts everything and writes ``patchq.levels/1`` JSON (merge it into the matrix with
   ``patchq matrix --levels FILE``)::

       {"schema": "patchq.levels/1", "release": "0.28.0", "python": "3.11.7",
        "torch": "2.13.0+cpu", "install_s": 103.2,
        "apply": {"dense": {"ok": true, "patches": {"unify-kv-page": "ok", ...}}},
        "records": [{"release": "0.28.0", "profile": "dense", "patch": "unify-kv-page",
                     "hash": "12 hex (the patch's hash: the matrix marks records of
                              another hash stale)",
                     "level": "import" | "probe", "result": "ok" | "fail" | "skip",
                     "detail": "...", "seconds": 6.1}, ...]}

Usage::

    python spark/lab/cpu_levels.py 0.28.0 --out levels-0.28.0.json [--profiles base,mtp,dflash,dense]
        [--venvs ~/.cache/patchq/venvs] [--python python3.11] [--timeout 300]

Exit code: 0 when every record is ok or skip, 1 otherwise, 2 when the install fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

SPARK = Path(__file__).resolve().parents[1]  # the Spark series repo (the patchq-spark distribution)
REPO = SPARK.parent  # the patchq checkout holding it
sys.path.insert(0, str(REPO))

from patchq.vllmdist import releases  # noqa: E402

#: Packages whose native libraries are built against CUDA torch (docs/cpu-import.md).
CUDA_ONLY = ("torchvision", "torchaudio", "torchcodec")
MARKER = ".patchq-cpu-levels-v1"

IMPORT_SCRIPT = r"""
import importlib, json, sys, time, traceback
out = {}
for module, sentinel in json.loads(sys.argv[1]):
    t = time.perf_counter()
    try:
        mod = importlib.import_module(module)
        text = open(mod.__file__, encoding="utf-8").read()
        ok = sentinel in text
        out[module] = {"ok": ok, "seconds": round(time.perf_counter() - t, 2),
                       "detail": f"imported {mod.__file__}" if ok else f"{mod.__file__} lacks {sentinel!r}"}
    except BaseException as exc:
        line = traceback.format_exception_only(type(exc), exc)[-1].strip()
        out[module] = {"ok": False, "seconds": round(time.perf_counter() - t, 2), "detail": line}
print("PATCHQ-RESULT " + json.dumps(out))
"""

PROBE_SCRIPT = r"""
import json, sys, time, traceback
from patchq import series
t = time.perf_counter()
try:
    p = series.load(sys.argv[1]).patch(sys.argv[2])
    result = p.probe()
    out = {"ok": True, "detail": json.dumps(result, default=str, sort_keys=True)}
except BaseException as exc:
    out = {"ok": False, "detail": traceback.format_exception_only(type(exc), exc)[-1].strip()}
out["seconds"] = round(time.perf_counter() - t, 2)
print("PATCHQ-RESULT " + json.dumps(out))
"""


def run(cmd: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a command, capturing output (never raises on a non-zero exit)."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def tail(text: str, n: int = 3) -> str:
    return " | ".join(line for line in text.strip().splitlines()[-n:])


def result_of(proc: subprocess.CompletedProcess) -> dict | None:
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("PATCHQ-RESULT "):
            return json.loads(line[len("PATCHQ-RESULT "):])
    return None


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def site_packages(venv: Path) -> Path:
    py = run([str(venv_python(venv)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60)
    return Path(py.stdout.strip())


def install(version: str, venv: Path, python: str) -> float:
    """Create the venv and install the release (skipped when the marker says it is done).

    Returns:
        Seconds spent (0 when reused). Raises RuntimeError with pip's last lines on failure.
    """
    if (venv / MARKER).is_file():
        return 0.0
    t0 = time.perf_counter()
    if venv.exists():
        shutil.rmtree(venv)
    proc = run([python, "-m", "venv", str(venv)], 120)
    if proc.returncode:
        raise RuntimeError(f"venv failed: {tail(proc.stderr)}")
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
    wheel = releases.wheel_path(version)  # the cached release wheel (downloads once)
    steps = [
        pip + [str(wheel)],
        [str(venv_python(venv)), "-m", "pip", "uninstall", "-y", *CUDA_ONLY],
        pip + ["libcst"],
        pip + ["--no-deps", "-e", str(REPO)],
        pip + ["--no-deps", "-e", str(SPARK)],  # patchq_runtime, which the patched vLLM imports
    ]
    for cmd in steps:
        proc = run(cmd, 1800)
        if proc.returncode and "uninstall" not in cmd:
            raise RuntimeError(f"{' '.join(cmd[2:5])} failed: {tail(proc.stderr or proc.stdout, 5)}")
    (venv / MARKER).write_text(version + "\n")
    return time.perf_counter() - t0


def patchq_cli(args: list[str], timeout: float) -> tuple[int, dict | None, str]:
    proc = run([sys.executable, "-m", "patchq", *args], timeout)
    try:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    except ValueError:
        return proc.returncode, None, proc.stderr or proc.stdout


def module_of(relpath: str) -> str:
    mod = relpath[:-3].replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def probes(py: Path, patch_ids: list[str], release: str, profile: str, timeout: float, env: dict,
           with_probe: set[str], hashes: dict[str, str]) -> list[dict]:
    """One probe record per patch that defines a probe (each in a fresh interpreter)."""
    recs = []
    for pid in patch_ids:
        if pid not in with_probe:
            continue
        t0 = time.perf_counter()
        try:
            proc = run([str(py), "-c", PROBE_SCRIPT, str(SPARK / "series"), pid], timeout, env)
            res = result_of(proc) or {"ok": False, "detail": tail(proc.stderr)}
        except subprocess.TimeoutExpired:
            res = {"ok": False, "detail": f"probe timed out after {timeout} s"}
        recs.append({"release": release, "profile": profile, "patch": pid, "hash": hashes[pid], "level": "probe",
                     "result": "ok" if res["ok"] else "fail", "detail": res["detail"],
                     "seconds": round(time.perf_counter() - t0, 2)})
    return recs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("release")
    ap.add_argument("--out", required=True)
    ap.add_argument("--profiles", default="base,mtp,dflash,dense")
    ap.add_argument("--venvs", default=str(releases.cache_dir() / "venvs"))
    ap.add_argument("--python", default="python3.11")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args(argv)

    from patchq import series as series_mod

    series = series_mod.load(SPARK / "series")
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    venv = Path(args.venvs).expanduser() / f"vllm-{releases.version_key(args.release)}"
    doc: dict = {"schema": "patchq.levels/1", "release": args.release, "python": None, "torch": None,
                 "install_s": None, "apply": {}, "records": []}
    try:
        doc["install_s"] = round(install(args.release, venv, args.python), 1)
    except (RuntimeError, subprocess.TimeoutExpired, releases.ReleaseError) as exc:
        doc["error"] = f"install failed: {exc}"
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
        print(doc["error"], file=sys.stderr)
        return 2
    py = venv_python(venv)
    sp = site_packages(venv)
    env = dict(os.environ, VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONDONTWRITEBYTECODE="1")
    vers = run([str(py), "-c", "import platform, importlib.metadata as m; "
                "print(platform.python_version(), m.version('torch'))"], 60)
    doc["python"], doc["torch"] = (vers.stdout.split() + [None, None])[:2]

    all_ids = []
    for name in profiles:
        all_ids += [p for p in series.profile(name).patches if p not in all_ids]
    with_probe = {pid for pid in all_ids if series.patch(pid).probe is not None}

    patchq_cli(["revert", "--all", "--site-packages", str(sp), "--json"], args.timeout)
    hashes = {pid: series.patch(pid).hash for pid in all_ids}
    doc["records"] += probes(py, all_ids, args.release, "pristine", args.timeout, env, with_probe, hashes)

    for name in profiles:
        code, applied, err = patchq_cli(["apply", "--profile", name, "--site-packages", str(sp), "--json"],
                                        args.timeout)
        rows = (applied or {}).get("patches", [])
        doc["apply"][name] = {"ok": code == 0, "exit_code": code, "error": (applied or {}).get("error") or
                              (err.strip()[-300:] if code else None),
                              "patches": {r["id"]: r["status"] for r in rows}}
        ok_rows = [r for r in rows if r["status"] == "ok"] if code == 0 else []
        modules = sorted({(module_of(f), f"patchq:{r['id']}:") for r in ok_rows for f in r["files"]})
        imported: dict = {}
        if modules:
            t0 = time.perf_counter()
            try:
                proc = run([str(py), "-c", IMPORT_SCRIPT, json.dumps(modules)], args.timeout, env)
                imported = result_of(proc) or {m: {"ok": False, "detail": tail(proc.stderr)} for m, _ in modules}
            except subprocess.TimeoutExpired:
                imported = {m: {"ok": False, "detail": f"import timed out after {args.timeout} s"} for m, _ in modules}
            print(f"{name}: imported {len(modules)} module(s) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        for pid in series.profile(name).patches:
            row = next((r for r in rows if r["id"] == pid), None)
            if row is None or row["status"] != "ok" or code != 0:
                why = f"not applied: {row['status']} {row.get('reason', '')}" if row else "apply failed"
                doc["records"].append({"release": args.release, "profile": name, "patch": pid,
                                       "hash": hashes[pid], "level": "import",
                                       "result": "skip" if code == 0 else "fail", "detail": why.strip()})
                continue
            mods = [module_of(f) for f in row["files"]]
            bad = [f"{m}: {imported.get(m, {}).get('detail', 'not run')}" for m in mods
                   if not imported.get(m, {}).get("ok")]
            doc["records"].append({
                "release": args.release, "profile": name, "patch": pid, "hash": hashes[pid], "level": "import",
                "result": "fail" if bad else "ok",
                "detail": "; ".join(bad) if bad else "imported " + ", ".join(mods) + " (sentinel present)",
                "seconds": max((imported.get(m, {}).get("seconds", 0) for m in mods), default=0)})
        applied_ids = [r["id"] for r in ok_rows]
        doc["records"] += probes(py, applied_ids, args.release, name, args.timeout, env, with_probe, hashes)

    patchq_cli(["revert", "--all", "--site-packages", str(sp), "--json"], args.timeout)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    bad = [r for r in doc["records"] if r["result"] not in ("ok", "skip") and r["profile"] != "pristine"]
    for r in doc["records"]:
        print(f"{r['profile']:9} {r['patch']:15} {r['level']:6} {r['result']:4} {r['detail'][:140]}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
