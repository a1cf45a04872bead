"""patchq.plan.engine end to end on a small series and a small tree: plan, sentinel,
fingerprint, moved code, upstreamed variant, failure reasons, and the diff applied by git."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from patchq import series as S
from patchq.plan import anchors as A
from patchq.plan import engine
from patchq.plan.diffs import unified_all
from patchq.sentinels import find_sentinels
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_series, write_tree

REL = "vllm/ops/utils.py"


def test_plan_edits_in_memory_with_sentinel_and_verified_fingerprint(tmp_path):
    tree = write_tree(tmp_path / "tree")
    fp = A.fingerprint_ast(A.ast_index(UTILS_PY)["Backend"][0])
    patch = S.load(write_series(tmp_path, fingerprint=fp)).patch("bump-default")
    before = (tree / REL).read_bytes()
    plan = engine.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    assert plan.ok
    (result,) = plan.results
    assert (result.status, result.files) == (engine.OK, [REL])
    (anchor,) = result.anchors
    assert (anchor.relpath, anchor.qualname, anchor.line, anchor.moved, anchor.matches) == (REL, "Backend", 4, False, 1)
    assert anchor.fingerprint == fp and anchor.verified == "0.1.0"
    new = plan.patched[REL]
    assert "    # the default\n    DEFAULT = 101376\n" in new and "102400" not in new
    assert find_sentinels(new) == [("bump-default", patch.hash)]
    assert plan.pristine[REL] == UTILS_PY
    compile(new, REL, "exec")
    assert (tree / REL).read_bytes() == before  # nothing written


def test_moved_definition_is_found_and_reported(tmp_path):
    tree = write_tree(tmp_path / "tree", moved=True)
    patch = S.load(write_series(tmp_path)).patch("bump-default")
    (result,) = engine.plan(sources.source_tree(tree, version="0.2.0"), [patch]).results
    assert result.status == engine.OK and result.files == ["vllm/third_party/utils.py"]
    assert result.anchors[0].moved and result.anchors[0].verified is None


def test_upstreamed_not_applicable_and_failures(tmp_path):
    tree = write_tree(tmp_path / "tree")
    patch = S.load(write_series(tmp_path)).patch("bump-default")
    (up,) = engine.plan(sources.source_tree(tree, version="0.3.0"), [patch]).results
    assert (up.status, up.reason) == (engine.UPSTREAMED, "0.3 sets 101376 itself")
    (na,) = engine.plan(sources.source_tree(tree, version="0.0.5"), [patch]).results
    assert na.status == engine.NOT_APPLICABLE
    # two matches where one is expected: a conflict naming the count, nothing patched
    (tree / REL).write_text(UTILS_PY.replace("    def get", "    DEFAULT = 1\n\n    def get"))
    plan = engine.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    (bad,) = plan.results
    assert not plan.ok and bad.status == engine.FAILED and bad.failure == "conflict"
    assert "expected 1 match(es) of `DEFAULT = ...` in Backend, found 2" in bad.reason
    assert plan.patched == {}
    # the definition is gone everywhere
    (tree / REL).write_text("class Other:\n    pass\n")
    (gone,) = engine.plan(sources.source_tree(tree, version="0.1.0"), [patch]).results
    assert (gone.status, gone.failure, gone.failed_anchor) == (engine.FAILED, "gone", "default")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_plan_diff_applies_with_git(tmp_path):
    tree = write_tree(tmp_path / "tree")
    plan = engine.plan(sources.source_tree(tree, version="0.1.0"),
                       [S.load(write_series(tmp_path)).patch("bump-default")])
    (tmp_path / "p.diff").write_text(unified_all(plan.pristine, plan.patched))
    subprocess.run(["git", "apply", "-p1", str(tmp_path / "p.diff")], cwd=tree, check=True, capture_output=True)
    assert (tree / REL).read_text() == plan.patched[REL]
