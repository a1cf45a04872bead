"""patchq.plan.results: a plan's per-patch outcomes, its ``ok``/``failures`` and what the
journal records for each outcome; on a real plan of the small series (offline)."""

from __future__ import annotations

import pytest

from patchq import series as S
from patchq.plan import engine, results
from patchq.vllmdist import sources
from testing.small_series import write_series, write_tree


def _result(status: str, reason: str = "") -> results.PatchResult:
    return results.PatchResult(patch_id="p", hash="0" * 12, status=status, reason=reason)


@pytest.mark.parametrize("status, reason, want", [
    (results.OK, "", ("applied", "")),
    (results.SUPERSEDED, "rewritten by q", ("superseded", "rewritten by q")),
    (results.UPSTREAMED, "0.3 sets it", ("upstreamed", "upstreamed on 0.3.0, not applied: 0.3 sets it")),
    (results.FAILED, "conflict", None),
    (results.NOT_APPLICABLE, "", None),
    (results.ABSENT, "", None),
])
def test_journal_outcome(status, reason, want):
    assert results.journal_outcome(_result(status, reason), "0.3.0") == want
    assert (want is not None) == (status in results.JOURNALLED)


def test_a_real_plan_carries_its_results_and_failures(tmp_path):
    tree = write_tree(tmp_path / "tree")
    patch = S.load(write_series(tmp_path)).patch("bump-default")
    plan = engine.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    assert isinstance(plan, results.Plan) and plan.ok and plan.failures() == []
    (r,) = plan.results
    assert isinstance(r, results.PatchResult) and r.status == results.OK and r.hash == patch.hash
    (a,) = r.anchors
    assert isinstance(a, results.AnchorResult) and (a.anchor, a.qualname) == ("default", "Backend")
    (tree / "vllm" / "ops" / "utils.py").write_text("class Other:\n    pass\n")
    failed = engine.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    assert not failed.ok and [f.patch_id for f in failed.failures()] == ["bump-default"]
    assert failed.failures()[0].failure == "gone" and failed.patched == {}
