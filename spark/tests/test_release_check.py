"""The Spark series through ci/release_check.py (a thin caller of ``patchq upgrade``): carried to a
synthetic vLLM 0.33.1 whose drift is one kind per Spark patch (``release_fixture.py``), and to
0.33.0, which it carries already.

The end-to-end test builds 0.33.1 from the real cached 0.33.0 wheel, serves it from a loopback
PEP 503 index, and runs the pipeline in a subprocess with a private patchq cache
(``PATCHQ_CACHE_DIR``) whose release trees are links to the shared cache's (warm: nothing but
0.33.1 is downloaded, and the shared cache never sees 0.33.1), on a git copy of the series.
The pipeline's own tests (exit codes, the workflows, the sharded matrix) are the tool's
(``tests/e2e/test_release_check.py`` of the patchq checkout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import release_fixture as rf

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

SPARK = Path(__file__).resolve().parents[1]
CI = SPARK.parent / "ci"  # the patchq checkout this series repo sits in
if not (CI / "release_check.py").is_file():
    pytest.skip("ci/release_check.py of a patchq checkout is not beside this series repo", allow_module_level=True)


def _private_cache(tmp: Path, shared: Path) -> Path:
    """A patchq cache whose release trees and wheels are links into the shared one (read only)."""
    cache = tmp / "cache"
    (cache / "releases").mkdir(parents=True)
    (cache / "wheels").mkdir()
    for tree in sorted((shared / "releases").iterdir()):
        if tree.is_dir() and not tree.name.startswith("."):
            (cache / "releases" / tree.name).symlink_to(tree)
    for whl in sorted((shared / "wheels").glob("*.whl")):
        (cache / "wheels" / whl.name).symlink_to(whl)
    return cache


def _series_repo(tmp: Path) -> Path:
    """A git repository holding a copy of the series and its anchors (its store included)."""
    root = tmp / "project"
    shutil.copytree(SPARK / "series", root / "series", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(SPARK / "anchors", root / "anchors")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "series"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


@pytest.fixture
def spark_copy(tmp_path) -> Path:
    """A copy of the series (``series/``, without its store) and ``anchors/``; returns the series."""
    root = tmp_path / "spark"
    shutil.copytree(SPARK / "series", root / "series", ignore=shutil.ignore_patterns("__pycache__", "diffs"))
    shutil.copytree(SPARK / "anchors", root / "anchors")
    return root / "series"


#: the synthetic release, per Spark patch: (check before, the rebase step's outcome or None, check after)
CARRIED = {
    "fla-shmem": ("upstreamed", "upstreamed", "upstreamed"),  # an upstreamed variant written from 0.33.1 on
    "unify-kv-page": ("moved", "clean", "moved"),  # carried to its new module (the hint stays: moved)
    "prefix-align": ("upstreamed", None, "upstreamed"),  # the series says so since 0.28
    "inc-hybrid-fp8": ("conflict", "conflict", "conflict"),  # a person resolves it
    "int8-lmhead": ("applies", None, "applies"),  # re-wrapped only: same fingerprint, nothing to merge
}


@pytest.mark.slow
def test_upgrade_pipeline_on_synthetic_0_33_1(tmp_path):
    """The whole pipeline through ci/release_check.py against a loopback index: per-patch outcomes,
    the branch and its commit, the pull-request body, the matrix column, exit 1."""
    from patchq.vllmdist import releases

    if shutil.which("zip") is None:
        pytest.skip("zip (Info-ZIP) is not installed: the fixture carries the wheel's members over with `zip -d`")
    try:
        base = releases.wheel_path(rf.BASE)
    except releases.ReleaseError as exc:
        pytest.skip(f"no vllm {rf.BASE} wheel: {exc}")
    shared = releases.cache_dir()
    t0 = time.perf_counter()
    wheel = rf.build_wheel(base, tmp_path)
    index = rf.write_index(tmp_path / "index", [wheel])
    wheel.unlink()
    built_s = time.perf_counter() - t0
    cache = _private_cache(tmp_path, shared)
    root = _series_repo(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "PATCHQ_CACHE_DIR": str(cache)}
    with rf.serve(index) as url:
        t1 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(CI / "release_check.py"), rf.NEXT, "--index-url", url, "--series",
             str(root / "series"), "--out", str(out), "--matrix-releases", ">=0.32.0"],
            capture_output=True, text=True, env=env, timeout=900)
        run_s = time.perf_counter() - t1
    print(f"\nsynthetic {rf.NEXT}: wheel + index {built_s:.1f} s, pipeline {run_s:.1f} s")
    assert proc.returncode == 1, proc.stderr[-3000:] + proc.stdout[-3000:]
    doc = json.loads((out / "upgrade.json").read_text())
    rebased = {r["id"]: r["status"] for r in doc["rebased"]}
    got = {p["id"]: (p["before"], rebased.get(p["id"]), p["check"]) for p in doc["patches"] if p["id"] in CARRIED}
    assert got == CARRIED, got
    body = (out / "pull-request.md").read_text()
    assert "**A person is needed** for inc-hybrid-fp8" in body
    assert "| inc-hybrid-fp8 | **conflict** | conflict |" in body
    assert f"## Matrix: the column of vllm {rf.NEXT}" in body and "| int8-lmhead | - | - | - | applies (src) |" in body
    assert doc["pull_request"] == str(out / "pull-request.md")

    # the branch and its one commit
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True,  # noqa: E731
                                    check=True).stdout.strip()
    assert git("rev-parse", "--abbrev-ref", "HEAD") == f"release/v{rf.NEXT}" and doc["commit"]
    assert git("status", "--porcelain", "--", "series", "anchors") == ""
    changed = set(git("show", "--name-only", "--format=", "HEAD").splitlines())
    conflict = f".patchq-rebase/{rf.NEXT}/inc-hybrid-fp8/INCConfig.py"
    assert {conflict, "series/fla_shmem.py", "anchors/unify-kv-page.toml", "anchors/int8-lmhead.toml",
            f"series/diffs/{rf.NEXT}/unify-kv-page.diff", f"series/diffs/{rf.NEXT}/int8-lmhead.diff",
            "series/diffs/int8-lmhead.expect.toml"} <= changed, changed
    assert "<<<<<<<" in (root / conflict).read_text()
    assert f'variant(">={rf.NEXT}", upstreamed=' in (root / "series" / "fla_shmem.py").read_text()
    for name in ("unify-kv-page", "int8-lmhead"):
        assert f'"{rf.NEXT}" = ' in (root / "anchors" / f"{name}.toml").read_text()
    assert f'"{rf.NEXT}" = ' not in (root / "anchors" / "inc-hybrid-fp8.toml").read_text()  # blocked: a person's
    assert git("log", "-1", "--format=%s") == f"patchq upgrade: carry the series to vLLM {rf.NEXT}"

    matrix = json.loads((out / "matrix" / "matrix.json").read_text())
    assert {rf.NEXT, "0.33.0", "0.32.0"} <= set(matrix["releases"]) and matrix["releases"] == sorted(
        matrix["releases"], key=lambda v: tuple(map(int, v.split("."))))
    assert matrix["cells"]["dense"]["int8-lmhead"][rf.NEXT]["status"] == "applies"
    assert not (shared / "releases" / rf.NEXT).exists() and not releases.find_wheel(shared / "wheels", rf.NEXT)
    shutil.rmtree(cache / "wheels", ignore_errors=True)
    shutil.rmtree(index, ignore_errors=True)


def test_upgrade_to_a_release_already_carried_exits_0(tmp_path, spark_copy):
    """0.33.0 (cached) with --no-branch on a plain (not git) copy of the series: nothing to
    merge, no person needed, its expected output written in place."""
    from patchq.vllmdist import releases

    shared = releases.cache_dir()
    if not (shared / "releases" / rf.BASE).is_dir():
        pytest.skip(f"vllm {rf.BASE} not cached (this test downloads nothing)")
    env = {**os.environ, "PATCHQ_CACHE_DIR": str(_private_cache(tmp_path, shared))}
    proc = subprocess.run(
        [sys.executable, str(CI / "release_check.py"), rf.BASE, "--series", str(spark_copy), "--out",
         str(tmp_path / "out"), "--matrix-releases", rf.BASE, "--json", "--no-branch"],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["rebased"] == [] and doc["reviews"] == [] and doc["profile"] is None
    assert {p["id"]: p["check"] for p in doc["patches"]} == {
        "fla-shmem": "applies", "unify-kv-page": "applies", "prefix-align": "upstreamed", "inc-hybrid-fp8": "applies",
        "int8-lmhead": "applies"}
    assert doc["matrix"]["releases"] == [rf.BASE] and doc["branch"] is None and doc["commit"] is None
    stored = {p.name for p in (spark_copy / "diffs" / rf.BASE).iterdir()}
    assert stored == {"fla-shmem.diff", "inc-hybrid-fp8.diff", "int8-lmhead.diff", "unify-kv-page.diff"}
