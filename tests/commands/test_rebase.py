"""Rebase on real releases: the stack fixture (a 0.23.0 series) carried to 0.24.0, 0.26.0 and 0.33.0.

Each patch is rebased with the variant that applies at 0.23.0 (``--from 0.23.0``), so the
merge outcomes depend only on that variant and on vLLM's code; what the series says at
the target (other variants) is reported beside them, never instead of them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.commands import rebase as cmd
from patchq.vllmdist import releases
from testing import stack
from testing.mini_series import SHMEM_ANCHORS, SHMEM_PATCH, mini_series

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

TARGETS = ("0.24.0", "0.26.0", "0.33.0")

#: patch -> merge outcome per target (the 0.23.0 variant merged node by node).
EXPECTED_MERGE = {
    "0.24.0": {"backend-tiles": "clean", "page-scale": "conflict", "align-backoff": "clean",
               "fp8-experts": "conflict", "head-gemv": "clean"},
    "0.26.0": {"backend-tiles": "clean", "page-scale": "conflict", "align-backoff": "clean",
               "fp8-experts": "conflict", "head-gemv": "conflict"},
    "0.33.0": {"backend-tiles": "clean", "page-scale": "conflict", "align-backoff": "conflict",
               "fp8-experts": "conflict", "head-gemv": "conflict"},
}


@pytest.fixture(scope="module")
def rebased(tmp_path_factory):
    """target -> (document, exit code, work dir) of rebasing the project's series from 0.23.0."""
    s = series_mod.load(stack.SERIES)
    out = {}
    for target in TARGETS:
        work = tmp_path_factory.mktemp(f"rebase-{target}")
        doc, code = cmd.run(s, target, "0.23.0", None, write=False, workdir=work)
        out[target] = (doc, code, work)
    return out


def _by_id(doc: dict) -> dict:
    return {p["id"]: p for p in doc["patches"]}


@pytest.mark.parametrize("target", TARGETS)
def test_which_patches_merge_cleanly_and_which_conflict(rebased, target):
    doc, code, work = rebased[target]
    got = {p["id"]: p["merge"] for p in doc["patches"] if p["id"] in EXPECTED_MERGE[target]}
    assert got == EXPECTED_MERGE[target]  # the stack's patches
    assert code == 1 and doc["ok"] is False  # a conflict is reported, never hidden
    for p in doc["patches"]:
        if p["merge"] == "conflict":
            assert p["status"] in ("conflict", "upstreamed")  # upstreamed: the series' own verdict
            for u in p["units"]:
                if u["merge"] == "conflict" and u["files"]:
                    text = Path(u["files"][0]).read_text()
                    assert text.count("<<<<<<< ") == u["conflicts"] >= 1
                    assert f">>>>>>> vllm {target}\n" in text
                    assert Path(u["files"][0]).parent == work / target / p["id"]


@pytest.mark.parametrize("target", TARGETS)
def test_clean_merges_are_checked_against_the_transform(rebased, target):
    doc, _, _ = rebased[target]
    for p in doc["patches"]:
        if p["merge"] == "clean":
            assert p["transform"] == "carries-forward", p
            assert p["status"] == "clean"
            assert p["new_diff_source"] == "transform"
            assert all(u["transform"].startswith("carries-forward") for u in p["units"])


def test_backend_tiles_follows_the_moved_file(rebased):
    doc, _, _ = rebased["0.26.0"]
    p = _by_id(doc)["backend-tiles"]
    (unit,) = p["units"]
    assert unit["resolution"] == "moved"
    assert unit["base_path"] == "vllm/model_executor/layers/fla/ops/utils.py"
    assert unit["target_path"] == "vllm/third_party/flash_linear_attention/ops/utils.py"
    assert unit["upstream_changed"] is False
    assert p["range_diff"]["counts"] == {"same": 1, "changed": 0, "removed": 0, "added": 0}
    (row,) = p["range_diff"]["rows"]
    assert row.startswith("1: vllm/model_executor/layers/fla/ops/utils.py @@ ") and \
        " = 1: vllm/third_party/flash_linear_attention/ops/utils.py @@ " in row


def test_align_backoff_merges_around_upstream_changes(rebased):
    """0.26.0 changed resolve_kv_cache_block_sizes elsewhere: a clean, real three-way merge."""
    p = _by_id(rebased["0.26.0"][0])["align-backoff"]
    (unit,) = p["units"]
    assert unit["upstream_changed"] is True and unit["merge"] == "clean"
    assert 'if getattr(cache_config, "mamba_cache_mode", "none") != "align" and any(' in unit["merged"]
    assert "prefix_match_unit" in unit["merged"]  # upstream's 0.26.0 rename kept
    assert p["range_diff"]["counts"]["same"] == 1


def test_page_scale_conflict_comes_with_the_transforms_result(rebased):
    """0.24.0 re-indents the scaled replace into an if-branch: the text merge conflicts,
    and the anchored transform's result is written beside the conflict for review."""
    p = _by_id(rebased["0.24.0"][0])["page-scale"]
    (unit,) = p["units"]
    assert unit["conflicts"] == 1 and len(unit["files"]) == 2
    conflict, transform = (Path(f) for f in unit["files"])
    assert transform.name == "unify_kv_cache_spec_page_size.transform.py"
    text = transform.read_text()
    assert "                if new_spec.page_size_bytes != max_page_size:\n" in text  # re-indented
    assert "<<<<<<<" not in text
    assert p["transform"] == "applies" and p["new_diff_source"] == "transform"


def test_head_gemv_conflicts_where_the_call_moved_to_a_helper(rebased):
    p = _by_id(rebased["0.26.0"][0])["head-gemv"]
    assert p["transform"] == "fails"
    assert {u["qualname"] for u in p["units"]} == {"LogitsProcessor._get_logits", "LogitsProcessor.get_top_tokens"}
    text = Path(p["units"][0]["files"][0]).read_text()
    assert "logits = self._apply_head(lm_head, hidden_states, embedding_bias)" in text
    assert p["range_diff"]["counts"]["removed"] == 2  # no new rendering to pair with


def test_page_scale_is_followed_into_kv_cache_planning(rebased):
    p = _by_id(rebased["0.33.0"][0])["page-scale"]
    (unit,) = p["units"]
    assert unit["resolution"] == "moved" and unit["target_path"] == "vllm/v1/core/kv_cache_planning.py"


# --------------------------------------------------------------------------- --write

def test_write_widens_the_range_records_fingerprints_and_the_diff(tmp_path, cli):
    """A 0.23.0-only patch whose transform carries forward to 0.26.0 becomes a 0.26.0 patch."""
    sdir = mini_series(tmp_path, "shmem-only", SHMEM_PATCH, SHMEM_ANCHORS)
    res = cli("rebase", "--to", "0.26.0", "--from", "0.23.0", "--write", "--series", sdir, "--json")
    assert res.rc == 0, res.stderr
    (p,) = res.json["patches"]
    assert (p["status"], p["merge"], p["transform"]) == ("clean", "clean", "carries-forward")
    assert any('widened variant ">=0.15,<0.26" to ">=0.15,<=0.26.0"' in s for s in p["next_steps"])
    module = (sdir / "shmem_only.py").read_text()
    assert 'variant(">=0.15,<=0.26.0", edits={"default": lower})' in module
    loaded = series_mod.load(sdir).patch("shmem-only")
    fps = loaded.anchors["default"].fingerprints
    assert set(fps) == {"0.23.0", "0.26.0"} and fps["0.23.0"] == fps["0.26.0"]  # Backend unchanged
    diff_file = sdir / "diffs" / "0.26.0" / "shmem-only.diff"
    text = diff_file.read_text()
    assert text.startswith("diff --git a/vllm/third_party/flash_linear_attention/ops/utils.py ")
    assert "+    DEFAULT = 101376  # sm121\n" in text and f"# patchq:shmem-only:{loaded.hash}" in text
    check = subprocess.run(["git", "apply", "--check", "-p1", str(diff_file)], cwd=releases.release_tree("0.26.0"),
                           capture_output=True)
    assert check.returncode == 0, check.stderr
    # the series now applies at 0.26.0 as it is
    res = cli("diff", "--release", "0.26.0", "--profile", "one", "--series", sdir)
    assert res.rc == 0 and res.stdout == text


RAY_PATCH = '''
from patchq import edits
from patchq.series import patch, variant


def tolerant_key(method, found, ctx):
    (line,) = found
    return edits.replace(method, line, edits.stmts(
        'device_key = getattr(vllm.platforms.current_platform, "ray_device_key", "")'))


PATCH = patch(
    id="ray-key",
    summary="tolerate platforms without ray_device_key",
    why="test",
    applies=">=0.23",
    variants=[variant(">=0.23,<0.24", edits={"key": tolerant_key})],
)
'''

RAY_ANCHORS = '''
[anchors.key]
module = "vllm.v1.executor.ray_utils"
qualname = "RayWorkerWrapper.get_node_and_gpu_ids"
node = "device_key = vllm.platforms.current_platform.ray_device_key"
count = 1
'''


def test_a_renamed_method_is_followed_by_similarity_with_its_score(tmp_path):
    """0.24.0 renames RayWorkerWrapper.get_node_and_gpu_ids to get_node_and_physical_gpu_ids."""
    sdir = mini_series(tmp_path, "ray-key", RAY_PATCH, RAY_ANCHORS)
    doc, code = cmd.run(series_mod.load(sdir), "0.24.0", "0.23.0", None, write=True, workdir=tmp_path / "work")
    (p,) = doc["patches"]
    (unit,) = p["units"]
    assert unit["resolution"] == "renamed"
    assert unit["target_qualname"] == "RayWorkerWrapper.get_node_and_physical_gpu_ids"
    best = unit["candidates"][0]
    assert best["qualname"] == unit["target_qualname"] and 95 <= best["score"] < 100
    assert f"by body similarity {best['score']:g}" in unit["reason"]
    assert p["merge"] == "clean"
    merged = unit["merged"]
    assert "def get_node_and_physical_gpu_ids(self)" in merged  # theirs: the new name
    assert 'getattr(vllm.platforms.current_platform, "ray_device_key", "")' in merged  # ours
    # the anchor still names the old qualname: the transform cannot carry forward
    assert p["transform"] == "fails" and p["status"] == "needs-variant" and code == 1
    assert any("qualname RayWorkerWrapper.get_node_and_gpu_ids -> RayWorkerWrapper.get_node_and_physical_gpu_ids"
               in s for s in p["next_steps"])
    # --write: the merged definition is proposed in the work dir, the series is untouched
    proposal = tmp_path / "work" / "0.24.0" / "ray-key" / "RayWorkerWrapper.get_node_and_gpu_ids.py"
    assert proposal.read_text() == merged
    assert 'variant(">=0.23,<0.24"' in (sdir / "ray_key.py").read_text()


def test_cli_text_report(tmp_path, cli):
    res = cli("rebase", "--to", "0.26.0", "--from", "0.23.0", "--patch", "align-backoff", "--patch", "head-gemv",
              "--workdir", tmp_path)
    assert res.rc == 1
    out = res.stdout
    assert "align-backoff: CLEAN" in out and "head-gemv: CONFLICT" in out
    assert "range-diff 0.23.0 -> 0.26.0: 1 same, 0 changed, 0 removed, 0 added" in out
    assert f"wrote {tmp_path}/0.26.0/head-gemv/LogitsProcessor._get_logits.py" in out
    assert "summary: 1 clean, 1 conflict" in out


UNIFY_PATCH = '''
from patchq import edits
from patchq.series import patch, variant

PAD = """
if new_spec.page_size_bytes != max_page_size:
    new_spec = replace(layer_spec, block_size=new_block_size, page_size_padded=max_page_size)
"""


def pad_after_scale(unify, found, ctx):
    (scaled,) = found
    return edits.insert_after(unify, scaled, edits.stmts(PAD))


PATCH = patch(
    id="pad-only",
    summary="pad after scaling",
    why="test",
    applies=">=0.15",
    variants=[variant(">=0.15,<0.24", edits={"scaled": pad_after_scale})],
)
'''

UNIFY_ANCHORS = '''
[anchors.scaled]
module = "vllm.v1.core.kv_cache_utils"
qualname = "unify_kv_cache_spec_page_size"
node = "new_spec = replace(layer_spec, block_size=new_block_size)"
count = 1
'''


def test_continue_takes_a_conflict_resolved_by_hand(tmp_path, cli):
    """0.24.0 conflicts; the maintainer takes the transform's result; --continue --write records it."""
    sdir = mini_series(tmp_path, "pad-only", UNIFY_PATCH, UNIFY_ANCHORS)
    work = tmp_path / "work"
    first = cli("rebase", "--to", "0.24.0", "--from", "0.23.0", "--series", sdir, "--workdir", work, "--json")
    assert first.rc == 1 and first.json["patches"][0]["status"] == "conflict"
    conflict = work / "0.24.0" / "pad-only" / "unify_kv_cache_spec_page_size.py"
    transform = conflict.with_name("unify_kv_cache_spec_page_size.transform.py")
    assert "<<<<<<< pad-only on vllm 0.23.0\n" in conflict.read_text()
    # --continue with the markers still there changes nothing
    again = cli("rebase", "--to", "0.24.0", "--from", "0.23.0", "--series", sdir, "--workdir", work, "--continue")
    assert again.rc == 1 and "pad-only: CONFLICT" in again.stdout
    conflict.write_text(transform.read_text())
    done = cli("rebase", "--to", "0.24.0", "--from", "0.23.0", "--series", sdir, "--workdir", work,
               "--continue", "--write", "--json")
    assert done.rc == 0, done.stdout
    (p,) = done.json["patches"]
    (unit,) = p["units"]
    assert (unit["resolution"], unit["merge"], unit["transform"]) == ("resolved", "clean", "carries-forward")
    assert p["status"] == "clean"
    assert 'variant(">=0.15,<=0.24.0", edits={"scaled": pad_after_scale})' in (sdir / "pad_only.py").read_text()
    assert (sdir / "diffs" / "0.24.0" / "pad-only.diff").is_file()
    fps = series_mod.load(sdir).patch("pad-only").anchors["scaled"].fingerprints
    assert set(fps) == {"0.23.0", "0.24.0"} and fps["0.23.0"] != fps["0.24.0"]


def test_rebase_to_a_release_the_series_already_carries_merges_nothing():
    """Without --from, a patch whose variant is verified on the target is reported carried."""
    import json
    import sys

    r = subprocess.run([sys.executable, "-m", "patchq", "rebase", "--to", "0.23.0", "--series", stack.SERIES,
                        "--json"], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    doc = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    carried = [p for p in doc["patches"] if p["id"] in stack.FULL]
    assert len(carried) == 5 and {p["status"] for p in carried} == {"skipped"}
    assert all("already carried" in p["reason"] for p in carried)


def test_continue_write_writes_the_new_variant_of_a_hand_resolution(tmp_path, cli):
    """A resolution that is not the transform's result: --continue --write writes the variant itself
    (statement operations from the resolved merge, patchq.statements), and it gives exactly that merge."""
    from patchq.plan import engine
    from patchq.vllmdist.sources import release_source

    sdir = mini_series(tmp_path, "pad-only", UNIFY_PATCH, UNIFY_ANCHORS)
    work = tmp_path / "work"
    assert cli("rebase", "--to", "0.24.0", "--from", "0.23.0", "--series", sdir, "--workdir", work).rc == 1
    conflict = work / "0.24.0" / "pad-only" / "unify_kv_cache_spec_page_size.py"
    resolved = conflict.with_name("unify_kv_cache_spec_page_size.transform.py").read_text()
    assert resolved.count("page_size_padded=max_page_size") >= 1
    resolved = resolved.replace("page_size_padded=max_page_size", "page_size_padded=int(max_page_size)", 1)
    conflict.write_text(resolved)
    done = cli("rebase", "--to", "0.24.0", "--from", "0.23.0", "--series", sdir, "--workdir", work,
               "--continue", "--write", "--json")
    assert done.rc == 0, done.stdout
    (p,) = done.json["patches"]
    assert p["status"] == "clean" and any("wrote variant" in s for s in p["next_steps"]), p
    text = (sdir / "pad_only.py").read_text()
    assert 'variant(">=0.15,<0.24", edits={"scaled": pad_after_scale})' in text
    assert "from patchq.statements import statement_edit" in text and "OPS_0_24_0 = {" in text
    patch = series_mod.load(sdir).patch("pad-only")
    plan = engine.plan(release_source("0.24.0"), [patch])
    assert plan.results[0].status == "ok", plan.results[0].reason
    assert "page_size_padded=int(max_page_size)" in plan.patched["vllm/v1/core/kv_cache_utils.py"]
    assert engine.plan(release_source("0.23.0"), [patch]).results[0].status == "ok"  # the old variant still


FINISH_PATCH = '''
from patchq import edits
from patchq.series import patch, variant


def finish_log(definition, found, ctx):
    (stmt,) = found
    return edits.insert_after(definition, stmt, edits.stmts(
        'self.finished_recving_kv_req_ids.discard(request.request_id)'))


PATCH = patch(
    id="finish-log",
    summary="forget a receiving request when it is finished",
    why="test",
    applies=">=0.15",
    variants=[variant(">=0.15", edits={"target": finish_log})],
)
'''

FINISH_ANCHORS = '''
[anchors.target]
module = "vllm.v1.core.sched.scheduler"
qualname = "Scheduler.finish_requests"
node = "valid_requests.append(request)"
count = 1
'''


def test_write_records_no_fingerprint_where_check_asks_for_a_review(tmp_path, cli):
    """By 0.33.0 upstream's second pass of finish_requests reads finished_recving_kv_req_ids,
    which the patch's first-pass statement changes: check says review there. A clean merge
    is not a review, so --write keeps 0.33.0's fingerprints out (a fresh user's find: they
    were recorded, and check then said applies without anyone reviewing). (The patch was a
    counter upstream's return-annotation change left apart: applies-drifted since issue 35.)"""
    sdir = mini_series(tmp_path, "finish-log", FINISH_PATCH, FINISH_ANCHORS)
    assert cli("fingerprint", "--patch", "finish-log", "--releases", "0.23.0", "--series", sdir).rc == 0
    before = cli("check", "--patch", "finish-log", "--vllm", "0.33.0", "--series", sdir, "--json")
    assert (before.rc, before.json["patches"][0]["status"]) == (1, "review"), before.stdout
    res = cli("rebase", "--to", "0.33.0", "--patch", "finish-log", "--write", "--series", sdir, "--json")
    (p,) = res.json["patches"]
    assert (res.rc, p["status"], p["transform"]) == (0, "clean", "carries-forward"), res.stdout + res.stderr
    assert p["next_steps"][0].startswith("check gives review on vllm 0.33.0, so its fingerprints are not recorded")
    fps = series_mod.load(sdir).patch("finish-log").anchors["target"].fingerprints
    assert set(fps) == {"0.23.0"}
    after = cli("check", "--patch", "finish-log", "--vllm", "0.33.0", "--series", sdir, "--json")
    assert (after.rc, after.json["patches"][0]["status"]) == (1, "review"), after.stdout
