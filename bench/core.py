"""Whole-process wall time of patchq's core verbs on a real vLLM install.

    python bench/core.py [--vllm 0.23.0] [--profile dense] [--repeat 7] [--json PATH]

Measures, as separate processes (what ``spark/serve.sh`` pays at every server
start), on a hard-linked copy of a ``pip install --no-deps`` of the vLLM wheel:

* ``python -c pass``: the interpreter start, the unit of the ratios;
* cold apply: ``patchq apply --profile P`` on a pristine copy (plans, writes);
* no-op apply: the same on a copy that already carries P (stdlib fast path);
* status: ``patchq status`` on that copy (stdlib fast path);
* revert: ``patchq revert --all`` on a freshly applied copy.

Wall time is what counts; each run's user+sys CPU time is reported beside it, so a
loaded machine (wall grows, CPU does not) can be told from a slow patchq.

Every case runs ``--repeat`` times (at least 5), interleaved round by round so that
machine noise hits all cases alike; the table gives the median, the minimum, and the
median as a ratio to the interpreter start measured in the same run. Targets
(docs/measured.md): no-op apply and status at most 3x interpreter start, cold apply of dense at most
0.8 s. Exit status: 0 when every target is met, 1 otherwise.

The wheel comes from :func:`patchq.vllmdist.releases.wheel_path` (downloaded only if missing);
the pristine install is made once per run in a temporary directory (``--site DIR``
reuses an existing pristine site-packages instead; it is never written).
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIN_REPEAT = 5
#: case -> (limit, unit): "x" is a ratio to ``python -c pass``, "s" seconds.
TARGETS = {"noop apply": (3.0, "x"), "status": (3.0, "x"), "cold apply": (0.8, "s")}


def patchq_command() -> list[str]:
    """The installed ``patchq`` console script next to this interpreter, else ``-m patchq``."""
    script = Path(sys.executable).with_name("patchq")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "patchq"]


def install(version: str, dest: Path) -> Path:
    """``pip install --no-deps --no-compile --target dest/site-packages <wheel>``."""
    from patchq.vllmdist import releases

    wheel = releases.wheel_path(version)
    site = dest / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                    "--disable-pip-version-check", "--target", str(site), str(wheel)], check=True)
    return site


def link_copy(src: Path, dst: Path) -> Path:
    """A copy of ``src`` made of hard links (uv's layout), like ``cp -al``, with a ``.pth``
    that makes ``patchq_runtime`` importable there (patched vLLM imports it; apply checks)."""
    shutil.copytree(src, dst, copy_function=os.link, symlinks=True)
    (dst / "patchq_runtime_checkout.pth").write_text(str(REPO / "spark") + "\n")
    return dst


def timed(cmd: list[str], expect: int = 0) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+sys) of one process run, output discarded.

    CPU time comes from the child's rusage (``os.wait4``): on a loaded machine wall time
    grows with the run queue, CPU time hardly does, so the two together tell them apart.

    Raises:
        SystemExit: the process exited with another code than ``expect``.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_")}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    err = proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err.decode()[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime


def run(version: str, profile: str, repeat: int, site: Path | None) -> dict:
    """Measure every case; returns the JSON-ready report."""
    pq = patchq_command()
    with tempfile.TemporaryDirectory(prefix="patchq-bench-") as tmp:
        work = Path(tmp)
        pristine = site or install(version, work / "pristine")
        apply_cmd = lambda s: [*pq, "apply", "--profile", profile, "--site-packages", str(s)]
        applied = link_copy(pristine, work / "applied")
        timed(apply_cmd(applied))
        samples: dict[str, list[tuple[float, float]]] = {
            k: [] for k in ("python -c pass", "cold apply", "noop apply", "status", "revert")}
        for i in range(repeat):
            cold = link_copy(pristine, work / f"cold-{i}")
            to_revert = link_copy(pristine, work / f"revert-{i}")
            timed(apply_cmd(to_revert))
            samples["python -c pass"].append(timed([sys.executable, "-c", "pass"]))
            samples["cold apply"].append(timed(apply_cmd(cold)))
            samples["noop apply"].append(timed(apply_cmd(applied)))
            samples["status"].append(timed([*pq, "status", "--site-packages", str(applied)]))
            samples["revert"].append(timed([*pq, "revert", "--all", "--site-packages", str(to_revert)]))
            shutil.rmtree(cold)
            shutil.rmtree(to_revert)
    base = statistics.median(w for w, _ in samples["python -c pass"])
    cases = {}
    for name, runs in samples.items():
        xs = [w for w, _ in runs]
        med = statistics.median(xs)
        row = {"median_s": med, "min_s": min(xs), "ratio": med / base,
               "cpu_median_s": statistics.median(c for _, c in runs), "samples_s": xs,
               "cpu_samples_s": [c for _, c in runs]}
        if name in TARGETS:
            limit, unit = TARGETS[name]
            value = row["ratio"] if unit == "x" else med
            row.update(target=f"<= {limit:g}{unit}", ok=value <= limit)
        cases[name] = row
    return {
        "schema": "patchq.bench.core/1",
        "vllm": version, "profile": profile, "repeat": repeat, "command": " ".join(pq),
        "python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
        "commit": _commit(), "cases": cases,
        "ok": all(r.get("ok", True) for r in cases.values()),
    }


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def table(report: dict) -> str:
    """The report as a plain-text table."""
    lines = [f"vLLM {report['vllm']}, profile {report['profile']}, {report['repeat']} runs each, "
             f"{report['cpus']} CPUs, Python {report['python']}, patchq {report['commit']}",
             f"{'case':<16}{'median':>10}{'min':>10}{'x python':>10}{'cpu':>9}  target",
             "-" * 70]
    for name, r in report["cases"].items():
        verdict = "" if "target" not in r else f"{r['target']:<9} {'ok' if r['ok'] else 'MISSED'}"
        lines.append(f"{name:<16}{r['median_s']:>9.3f}s{r['min_s']:>9.3f}s{r['ratio']:>9.2f}x"
                     f"{r['cpu_median_s']:>8.3f}s  {verdict}")
    lines.append("median/min: wall time; cpu: median user+sys CPU of the process; targets on the median")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm", default="0.23.0", help="vLLM release (wheel from the cache or PyPI)")
    ap.add_argument("--profile", default="dense")
    ap.add_argument("--repeat", type=int, default=7, help=f"runs per case (at least {MIN_REPEAT})")
    ap.add_argument("--site", type=Path, help="an existing pristine site-packages to copy (never written)")
    ap.add_argument("--json", type=Path, dest="json_path", help="also write the report here")
    args = ap.parse_args(argv)
    if args.repeat < MIN_REPEAT:
        ap.error(f"--repeat must be at least {MIN_REPEAT}")
    report = run(args.vllm, args.profile, args.repeat, args.site)
    print(table(report))
    if args.json_path:
        args.json_path.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
