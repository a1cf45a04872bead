"""The import and probe levels of the Spark series on every release: the committed evidence.

``run`` calls ``patchq probe --vllm X --all --pristine --json`` for each release, the
newest first, one after another (a release whose file exists is skipped: a run resumes;
each builds the release's CPU environment the first time, in patchq's cache), and writes ``<out>/probe-<X>.json`` (``patchq.probe/1``: a levels file ``patchq matrix --levels``
merges). A release whose environment cannot be had is recorded all the same (its cells *not
probeable*, with the reason). A second pass (``--warm``) times the warm probe of the
``dense`` profile alone. ``table`` prints the per-release table from those files: torch (its
pin, exact or nearest), the environment (distributions, build seconds, bytes fetched),
imports (modules that imported of those applied), cases (passed / failed / skipped) and the
warm time.

Usage::

    python lab/probe_table.py run --releases '>=0.15.1,<=0.34.0' --out lab/evidence/probe [--warm]
    python lab/probe_table.py table lab/evidence/probe
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run(releases: list[str], out: Path, warm: bool) -> int:
    """Probe every release (``--all --pristine``), then (``warm``) time ``dense`` again."""
    out.mkdir(parents=True, exist_ok=True)
    worst = 0
    for rel in releases:
        if (out / f"probe-{rel}.json").is_file() or (out / f".probe-{rel}.running").exists():
            continue  # done by an earlier run (resume), or by another runner now
        (out / f".probe-{rel}.running").write_text("")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "patchq", "probe", "--vllm", rel, "--all", "--pristine",
                               "--series", str(REPO / "series"), "--json"], capture_output=True, text=True)
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = {"release": rel, "error": (proc.stderr or proc.stdout).strip()[-2000:], "exit_code": proc.returncode}
        doc["wall_s"] = round(time.perf_counter() - t0, 1)
        if warm and doc.get("probeable"):
            t1 = time.perf_counter()
            again = subprocess.run([sys.executable, "-m", "patchq", "probe", "--vllm", rel, "--profile", "dense",
                                    "--series", str(REPO / "series"), "--json"], capture_output=True, text=True)
            doc["warm_dense_s"] = round(time.perf_counter() - t1, 1)
            doc["warm_dense_exit"] = again.returncode
        (out / f"probe-{rel}.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / f".probe-{rel}.running").unlink()
        worst = max(worst, proc.returncode)
        print(f"{rel}: exit {proc.returncode} in {doc['wall_s']} s", file=sys.stderr, flush=True)
    return worst


def row(doc: dict) -> str:
    """One Markdown table row of a ``patchq.probe/1`` document."""
    rel = doc.get("release", "?")
    if "error" in doc:
        return f"| {rel} | – | – | – | – | – | error: {doc['error'][:120]} |"
    env = doc.get("env") or {}
    torch = env.get("torch") or {}
    tcol = f"{torch.get('version', '–')}" + ("" if torch.get("exact", True) else f" (nearest; pin {torch.get('pin')})")
    recs = [r for r in doc.get("records", []) if r.get("profile") != "pristine"]
    imports = [r for r in recs if r["level"] == "import" and r["result"] != "skip"]
    imported = sum(r["result"] == "ok" for r in imports)
    cases = [c for r in recs if r["level"] == "probe" for c in r.get("cases", [])]
    passed = sum(c["result"] == "ok" for c in cases)
    failed = sum(c["result"] == "fail" for c in cases)
    skipped = sum(c["result"] == "skip" for c in cases)
    b = env.get("bytes") or {}
    mb = (b.get("wheel_bytes", 0) + b.get("vllm_tree", 0)) / 1e6
    build = sum((env.get("seconds") or {}).values())
    if not doc.get("probeable", False):
        return f"| {rel} | {tcol} | not probeable | – | – | – | {doc.get('why', '')[:160]} |"
    return (f"| {rel} | {tcol} | {env.get('dists')} dists, {build:.0f} s, {mb:.0f} MB | {imported}/{len(imports)} | "
            f"{passed} passed, {failed} failed, {skipped} skipped | {doc.get('warm_dense_s', '–')} s | "
            f"exit {doc.get('exit_code')} |")


def table(folder: Path) -> str:
    """The per-release table of every ``probe-*.json`` in ``folder``, oldest release first."""
    from packaging.version import Version

    docs = [json.loads(p.read_text()) for p in folder.glob("probe-*.json")]
    docs.sort(key=lambda d: Version(str(d.get("release", "0"))))
    head = ["| release | torch | environment (built once) | imported | cases (all profiles) | warm dense | |",
            "|---|---|---|---|---|---|---|"]
    return "\n".join(head + [row(d) for d in docs]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--releases", required=True)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--warm", action="store_true")
    r.add_argument("--oldest-first", action="store_true", help="a second runner beside one going newest first")
    t = sub.add_parser("table")
    t.add_argument("folder", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "table":
        print(table(a.folder), end="")
        return 0
    from patchq.vllmdist import releases

    found = [str(v) for v in releases.list_releases(a.releases)]
    if not a.oldest_first:
        found.reverse()  # the newest first
    return run(found, a.out, a.warm)


if __name__ == "__main__":
    sys.exit(main())
