"""ci/release_check.py (a thin caller of ``patchq upgrade``): its exit codes, the verdict variant it
writes, the sharded matrix merge, and the GitHub workflows (schema and static audit), on the
stack fixture. The pipeline end to end on a synthetic release is the Spark series' own test
(``spark/tests/test_release_check.py``: the synthetic release's drift is shaped on its patches).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO
from testing import stack
from testing.fake_index import FakeIndex
from testing.tools import tool

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


def _series_repo(tmp: Path) -> Path:
    root = tmp / "project"
    stack.copy(root)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "series"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


def test_add_verdict_variant_keeps_the_series_loadable(tmp_path, series_copy):
    """The upstreamed variant written into a copy of backend_tiles.py: the edit variant ends before it."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from patchq import series as series_mod
    from patchq.authoring import seriesedit
    from patchq.errors import SeriesError

    path = series_copy / "backend_tiles.py"
    path.write_text(path.read_text().replace('variant(">=0.15,<0.26"', 'variant(">=0.26"'))  # open-ended
    old, capped = seriesedit.add_verdict_variant(path, SpecifierSet(">=0.26"), Version("0.33.1"), "upstreamed",
                                                 'DEFAULT is "101376" upstream')
    assert (old, capped) == (">=0.26", ">=0.26,<0.33.1")
    patch = series_mod.load(str(series_copy)).patch("backend-tiles")
    assert patch.variant_for(Version("0.33.0")).kind == "edit"
    assert patch.variant_for(Version("0.33.1")).kind == "upstreamed"
    assert patch.variant_for(Version("0.33.1")).upstreamed == 'DEFAULT is "101376" upstream'
    with pytest.raises(SeriesError):
        seriesedit.add_verdict_variant(path, SpecifierSet(">=0.26"), Version("0.34.0"), "upstreamed", "again")


def test_usage_and_missing_release_exit_codes(tmp_path, monkeypatch, capsys):
    """patchq's exit codes, none of the script's own: 2 usage (no version, a dirty series repo),
    3 a release the index does not have."""
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    # release_check.main sets $PIP_INDEX_URL in this process: restored after the test (it leaked
    # the dead loopback index into every later test of the session that reads an index)
    monkeypatch.setenv("PIP_INDEX_URL", "")
    monkeypatch.delenv("PIP_INDEX_URL")
    assert release_check.main([]) == 2
    root = _series_repo(tmp_path)
    (root / "anchors" / "backend-tiles.toml").write_text("# edited\n", encoding="utf-8")
    args = ["0.99.0", "--series", str(root / "series"), "--out", str(tmp_path / "o")]
    assert release_check.main(args) == 2
    assert "uncommitted changes under the series" in capsys.readouterr().err
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "anchors"], check=True)
    with FakeIndex([]) as index:
        assert release_check.main([*args, "--index-url", index.url]) == 3
    assert "0.99.0" in capsys.readouterr().err
    assert release_check.upgrade_argv(release_check.parse_args(["0.34.0"])) == [
        "upgrade", "--to", "0.34.0", "--write", "--out", "release-check/0.34.0", "--matrix",
        "--branch", "release/v0.34.0", "--commit"]


# --------------------------------------------------------------------------- end to end


# --------------------------------------------------------------------------- the sharded matrix


def test_matrix_shards_merge_like_one_matrix(tmp_path):
    """Two one-release shards merged equal the two-release matrix (cells, changes, exit code)."""
    from patchq.compat import matrix
    from patchq.vllmdist import releases

    if not (releases.cache_dir() / "releases" / "0.32.0").is_dir() or not (
            releases.cache_dir() / "releases" / "0.33.0").is_dir():
        pytest.skip("vllm 0.32.0 and 0.33.0 trees not cached")
    profiles = ["kv", "full"]
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
