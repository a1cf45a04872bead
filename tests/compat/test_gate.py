"""patchq.compat.gate: the review gate that apply and run share with check: a drifted definition
whose change is not provably apart from the patch fails the patch (``review``) and nothing is
planned for it; drift that is apart passes. On the small series, its reviewed release (0.1.0)
in an offline cache of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import series as S
from patchq.compat import drift, gate
from patchq.plan import anchors as A
from patchq.plan import engine, results
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_release, write_series, write_tree

REL = "vllm/ops/utils.py"


@pytest.fixture
def reviewed(tmp_path):
    """(patch, tree): the small patch with 0.1.0 recorded as reviewed, 0.1.0 in the cache."""
    drift._release_source.cache_clear()
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    fp = A.fingerprint_ast(A.ast_index(UTILS_PY)["Backend"][0])
    yield S.load(write_series(tmp_path, fingerprint=fp)).patch("bump-default"), write_tree(tmp_path / "tree")
    drift._release_source.cache_clear()


def _gated(patch, tree, text: str, version: str = "0.2.0") -> results.PatchResult:
    (tree / REL).write_text(text)
    plan = engine.plan(sources.source_tree(tree, version=version), [patch])
    assert plan.ok  # the plan alone applies: only the gate can stop it
    gate.review(plan, [patch])
    return plan.results[0]


def test_a_verified_definition_passes_untouched(reviewed):
    patch, tree = reviewed
    r = _gated(patch, tree, UTILS_PY, version="0.1.0")
    assert (r.status, r.failure) == (results.OK, "")


def test_upstream_changing_the_patched_statement_blocks_for_review(reviewed):
    patch, tree = reviewed
    text = UTILS_PY.replace("    DEFAULT = 102400\n", "    DEFAULT = 102400\n    LIMIT = DEFAULT * 2\n")
    r = _gated(patch, tree, text)
    assert (r.status, r.failure, r.failed_anchor) == (results.FAILED, "review", "default")
    assert "upstream" in r.reason


def test_drift_apart_from_the_patch_passes(reviewed):
    patch, tree = reviewed
    text = UTILS_PY + "\n    def size(self):\n        return 4\n"  # a new method, away from DEFAULT
    r = _gated(patch, tree, text)
    assert r.status == results.OK and r.anchors[0].verified is None  # drifted, and provably apart
    docs = UTILS_PY.replace('"""Shared memory per block."""', '"""Shared memory per block (docs)."""')
    r = _gated(patch, tree, docs)
    assert r.status == results.OK and r.anchors[0].verified == "0.1.0"  # a docstring is not drift
