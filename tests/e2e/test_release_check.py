"""ci/release_check.py (a thin caller of ``patchq upgrade``) end to end on a synthetic vLLM 0.33.1,
its exit codes, the sharded matrix merge, and the GitHub workflows (schema and static audit).

The end-to-end test builds 0.33.1 from the real cached 0.33.0 wheel (tests/testing/release_fixture.py),
serves it from a loopback PEP 503 index, and runs the pipeline in a subprocess with a
private patchq cache (``PATCHQ_CACHE_DIR``) whose release trees are links to the shared
cache's (warm: nothing but 0.33.1 is downloaded, and the shared cache never sees 0.33.1),
on a git copy of the series.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing import release_fixture as rf
from testing.tools import tool
from support import REPO

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

CI = REPO / "ci"
WORKFLOWS = sorted((CI / "github").glob("*.yml"))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, CI / f"{name.removeprefix('patchq_ci_')}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


release_check = _load("patchq_ci_release_check")
matrix_merge = _load("patchq_ci_matrix_merge")


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
    root = tmp / "project"
    shutil.copytree(REPO / "series", root / "series", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "anchors", root / "anchors")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "series"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


def test_add_verdict_variant_keeps_the_series_loadable(tmp_path, series_copy):
    """The upstreamed variant written into a copy of fla_shmem.py: the edit variant ends before it."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from patchq import series as series_mod
    from patchq.authoring import seriesedit
    from patchq.errors import SeriesError

    path = series_copy / "fla_shmem.py"
    old, capped = seriesedit.add_verdict_variant(path, SpecifierSet(">=0.26"), Version("0.33.1"), "upstreamed",
                                                 'DEFAULT is "101376" upstream')
    assert (old, capped) == (">=0.26", ">=0.26,<0.33.1")
    patch = series_mod.load(str(series_copy)).patch("fla-shmem")
    assert patch.variant_for(Version("0.33.0")).kind == "edit"
    assert patch.variant_for(Version("0.33.1")).kind == "upstreamed"
    assert patch.variant_for(Version("0.33.1")).upstreamed == 'DEFAULT is "101376" upstream'
    with pytest.raises(SeriesError):
        seriesedit.add_verdict_variant(path, SpecifierSet(">=0.26"), Version("0.34.0"), "upstreamed", "again")


def test_usage_and_missing_release_exit_codes(tmp_path, monkeypatch, capsys):
    """patchq's exit codes, none of the script's own: 2 usage (no version, a dirty series repo),
    3 a release the index does not have."""
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    assert release_check.main([]) == 2
    root = _series_repo(tmp_path)
    (root / "anchors" / "fla-shmem.toml").write_text("# edited\n", encoding="utf-8")
    args = ["0.99.0", "--series", str(root / "series"), "--out", str(tmp_path / "o")]
    assert release_check.main(args) == 2
    assert "uncommitted changes under the series" in capsys.readouterr().err
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "anchors"], check=True)
    index = rf.write_index(tmp_path / "index", [])
    with rf.serve(index) as url:
        assert release_check.main([*args, "--index-url", url]) == 3
    assert "0.99.0" in capsys.readouterr().err
    assert release_check.upgrade_argv(release_check.parse_args(["0.34.0"])) == [
        "upgrade", "--to", "0.34.0", "--write", "--out", "release-check/0.34.0", "--matrix",
        "--branch", "release/v0.34.0", "--commit"]


# --------------------------------------------------------------------------- end to end


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
    assert f"| inc-hybrid-fp8 | **conflict** | conflict |" in body
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


def test_upgrade_to_a_release_already_carried_exits_0(tmp_path, series_copy):
    """0.33.0 (cached) with --no-branch on a plain (not git) copy of the series: nothing to
    merge, no person needed, its expected output written in place."""
    from patchq.vllmdist import releases

    shared = releases.cache_dir()
    if not (shared / "releases" / rf.BASE).is_dir():
        pytest.skip(f"vllm {rf.BASE} not cached (this test downloads nothing)")
    env = {**os.environ, "PATCHQ_CACHE_DIR": str(_private_cache(tmp_path, shared))}
    proc = subprocess.run(
        [sys.executable, str(CI / "release_check.py"), rf.BASE, "--series", str(series_copy), "--out",
         str(tmp_path / "out"), "--matrix-releases", rf.BASE, "--json", "--no-branch"],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["rebased"] == [] and doc["reviews"] == [] and doc["profile"] is None
    assert {p["id"]: p["check"] for p in doc["patches"]} == {
        "fla-shmem": "applies", "unify-kv-page": "applies", "prefix-align": "upstreamed", "inc-hybrid-fp8": "applies",
        "int8-lmhead": "applies"}
    assert doc["matrix"]["releases"] == [rf.BASE] and doc["branch"] is None and doc["commit"] is None
    stored = {p.name for p in (series_copy / "diffs" / rf.BASE).iterdir()}
    assert stored == {"fla-shmem.diff", "inc-hybrid-fp8.diff", "int8-lmhead.diff", "unify-kv-page.diff"}


# --------------------------------------------------------------------------- the sharded matrix


def test_matrix_shards_merge_like_one_matrix(tmp_path):
    """Two one-release shards merged equal the two-release matrix (cells, changes, exit code)."""
    from patchq.compat import matrix
    from patchq.vllmdist import releases

    if not (releases.cache_dir() / "releases" / "0.32.0").is_dir() or not (
            releases.cache_dir() / "releases" / "0.33.0").is_dir():
        pytest.skip("vllm 0.32.0 and 0.33.0 trees not cached")
    profiles = ["dflash", "dense"]
    whole = matrix.build(["0.32.0", "0.33.0"], profiles, workers=1)
    merged = matrix_merge.merge([matrix.build([v], profiles, workers=1) for v in ("0.33.0", "0.32.0")])
    for key in ("releases", "cells", "changes", "first_change", "errors", "exit_code"):
        assert merged[key] == whole[key], key
    paths = [tmp_path / f"s{i}.json" for i in range(2)]
    paths[0].write_text(json.dumps(matrix.build(["0.32.0"], profiles, workers=1)))
    paths[1].write_text(json.dumps({"schema": "other"}))
    assert matrix_merge.main(["merge", str(tmp_path / "m"), *map(str, paths)]) == 2


# --------------------------------------------------------------------------- the workflows


def test_workflows_match_the_github_schema():
    """check-jsonschema's vendored GitHub-workflow schema accepts every workflow under ci/github/."""
    proc = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                           *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflows_pass_zizmor_offline():
    """zizmor's offline audit finds nothing (pinned actions, no template injection, least permissions)."""
    proc = subprocess.run([tool("zizmor"), "--offline", "--no-progress", *map(str, WORKFLOWS)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflow_actions_pinned_to_full_hashes():
    """Every ``uses:`` names a 40-hex commit (with the tag in a comment)."""
    import re

    for wf in WORKFLOWS:
        for line in wf.read_text().splitlines():
            m = re.search(r"uses:\s*(\S+)", line)
            if m and not m.group(1).startswith("./"):
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", m.group(1)), f"{wf.name}: {line.strip()}"
                assert "# v" in line, f"{wf.name}: no tag comment: {line.strip()}"
