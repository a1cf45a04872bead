"""Upstream history on real vLLM releases: the releases repository and definition logs.

The repository of 0.23.0, 0.24.0 and 0.26.0 is built once per session in a temporary
directory (about 3 s from the cached release trees); the CLI test uses patchq's own cache
(``patchq upstream sync`` is incremental there).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from datetime import datetime, timezone

import git
import pytest
from packaging.version import Version

from patchq import series
from patchq.authoring import upstream
from patchq.model import AnchorSpec
from patchq.vllmdist import releases
from testing import stack

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

RELEASES = ["0.23.0", "0.24.0", "0.26.0"]


@pytest.fixture(scope="session")
def releases_repo(tmp_path_factory):
    """(path, SyncResult) of a releases repository of RELEASES, built once."""
    path = tmp_path_factory.mktemp("upstream") / "vllm.git"
    result = upstream.sync(RELEASES, path)
    return path, result


@pytest.fixture(scope="session")
def up(releases_repo):
    path, _ = releases_repo
    return upstream.Upstream(path, "releases", git.Repo(path))


def test_sync_commits_each_release_in_order_tagged(releases_repo, up):
    path, result = releases_repo
    assert result.added == RELEASES and result.skipped == [] and result.rewritten == []
    assert up.versions() == [Version(v) for v in RELEASES]
    repo = up.repo
    chain = [c.message.splitlines()[0] for c in repo.iter_commits("releases")]
    assert chain == ["vllm 0.26.0", "vllm 0.24.0", "vllm 0.23.0"]  # newest first, linear
    assert repo.commit("v0.23.0").parents == ()
    assert repo.commit("v0.26.0").parents[0] == repo.commit("v0.24.0")
    assert repo.head.reference.name == "releases"


def test_release_tree_is_exactly_the_wheels_python_files(up):
    tree_root = releases.release_tree("0.24.0")
    expected = upstream.release_py_files(tree_root)
    src = up.source("0.24.0")
    assert src.py_files() == expected
    assert len(expected) > 1500
    rel = "vllm/v1/core/kv_cache_utils.py"
    assert src.read_bytes(rel) == (tree_root / rel).read_bytes()
    assert src.read_text("vllm/not/there.py") is None


def test_commit_date_is_the_wheels_build_date(up):
    wheel = releases.wheel_path("0.23.0")
    with zipfile.ZipFile(wheel) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith(".dist-info/METADATA"))
    want = datetime(*info.date_time, tzinfo=timezone.utc)
    assert up.repo.commit("v0.23.0").authored_datetime == want


def test_sync_is_incremental_and_keeps_release_order(releases_repo, tmp_path):
    path, _ = releases_repo
    copy = tmp_path / "vllm.git"
    shutil.copytree(path, copy)
    repo = git.Repo(copy)
    before = {t.name: t.commit.hexsha for t in repo.tags}
    again = upstream.sync(RELEASES, copy)
    assert again.added == [] and again.skipped == RELEASES
    assert {t.name: t.commit.hexsha for t in repo.tags} == before
    # an older release inserted: 0.26.0 is re-chained on top of it, with the same tree
    tree_026 = repo.commit("v0.26.0").tree.hexsha
    inserted = upstream.sync(["0.25.1"], copy)
    assert inserted.added == ["0.25.1"] and inserted.rewritten == ["0.26.0"]
    assert inserted.skipped == ["0.23.0", "0.24.0"]
    assert repo.commit("v0.26.0").parents[0] == repo.commit("v0.25.1")
    assert repo.commit("v0.25.1").parents[0].hexsha == before["v0.24.0"]
    assert repo.commit("v0.26.0").tree.hexsha == tree_026


def test_history_follows_a_definition_across_files(up):
    """backend-tiles's Backend moves to vllm/third_party at 0.26.0 with identical code."""
    spec = AnchorSpec(id="x", module="vllm.model_executor.layers.fla.ops.utils", qualname="Backend")
    hist = upstream.definition_history(up, spec, up.versions())
    paths = {str(v): s.relpath for v, s in hist.states.items()}
    assert paths == {"0.23.0": "vllm/model_executor/layers/fla/ops/utils.py",
                     "0.24.0": "vllm/model_executor/layers/fla/ops/utils.py",
                     "0.26.0": "vllm/third_party/flash_linear_attention/ops/utils.py"}
    entries = upstream.log_entries(up, hist)
    assert [(e.version, e.change) for e in entries] == [("0.23.0", "appears"), ("0.26.0", "moved")]
    assert entries[1].diff == "" and entries[1].commits == []  # no code change; no clone


def test_log_gives_the_diff_of_just_the_definition(up):
    s = series.load(stack.SERIES)
    spec = s.patch("page-scale").anchors["scaled-replace"]
    hist = upstream.definition_history(up, spec, up.versions())
    fps = {str(v): st.fingerprint for v, st in hist.states.items()}
    assert len(set(fps.values())) == 3  # changed at 0.24.0 and at 0.26.0
    entries = upstream.log_entries(up, hist)
    assert [(e.version, e.change) for e in entries] == [("0.23.0", "appears"), ("0.24.0", "code"), ("0.26.0", "code")]
    d24 = entries[1].diff
    assert d24.startswith("--- a/vllm/v1/core/kv_cache_utils.py (vllm 0.23.0)\n"
                          "+++ b/vllm/v1/core/kv_cache_utils.py (vllm 0.24.0)\n")
    assert "+            if max_page_size % layer_page_size == 0:\n" in d24
    assert "+                new_spec = replace(layer_spec, block_size=new_block_size)\n" in d24
    assert "-            new_spec = replace(layer_spec, block_size=new_block_size)\n" in d24
    # only this definition: nothing of the rest of the 1500-line file
    assert "def resolve_kv_cache_block_sizes" not in d24
    # hunk headers carry the file's real line numbers
    start_023 = hist.states[Version("0.23.0")].start
    first_hunk = next(ln for ln in d24.splitlines() if ln.startswith("@@"))
    assert int(first_hunk.split()[1].split(",")[0][1:]) >= start_023
    d26 = entries[2].diff
    assert "+        elif isinstance(layer_spec, MambaSpec):\n" in d26


def test_commits_between_tags_with_a_clone(up):
    """A repository with vX.Y.Z tags used as a clone: git log -L over the definition's lines."""
    clone = upstream.open_upstream(up.path)
    assert clone.kind == "clone"
    spec = AnchorSpec(id="x", module="vllm.v1.core.kv_cache_utils", qualname="unify_kv_cache_spec_page_size")
    entries = upstream.log_entries(clone, upstream.definition_history(clone, spec, clone.versions()))
    e24 = entries[1]
    assert e24.commits_method == "line-range"
    assert [c["subject"] for c in e24.commits] == ["vllm 0.24.0"]
    assert e24.commits[0]["commit"] == up.repo.commit("v0.24.0").hexsha


def test_cli_sync_and_log(cli):
    res = cli("upstream", "sync", "--releases", "0.23.0,0.24.0,0.26.0", "--json")
    assert res.rc == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "patchq.upstream-sync/1"
    assert {"0.23.0", "0.24.0", "0.26.0"} <= set(doc["releases"])
    res = cli("upstream", "log", "head-gemv", "--releases", "0.23.0,0.24.0,0.26.0", "--json")
    assert res.rc == 0, res.stderr
    doc = json.loads(res.stdout)
    defs = {d["qualname"]: d for d in doc["definitions"]}
    assert set(defs) >= {"LogitsProcessor._get_logits", "LogitsProcessor.get_top_tokens"}
    changes = [(c["version"], c["change"]) for c in defs["LogitsProcessor._get_logits"]["changes"]]
    assert changes == [("0.23.0", "appears"), ("0.26.0", "code")]
    diff = defs["LogitsProcessor._get_logits"]["changes"][1]["diff"]
    assert "-        logits = lm_head.quant_method.apply(lm_head, hidden_states, bias=embedding_bias)\n" in diff
    assert "+        logits = self._apply_head(lm_head, hidden_states, embedding_bias)\n" in diff
    text = cli("upstream", "log", "head-gemv", "--releases", "0.23.0,0.24.0,0.26.0").stdout
    assert "-- 0.26.0 (since 0.24.0): code [vllm/model_executor/layers/logits_processor.py]" in text
