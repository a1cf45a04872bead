"""patchq.plan.backward: when an anchor no longer resolves, the release is compared with what
the patch produced on its last verified release (the small series, verified on 0.1.0, that
release in the layer's own cache; targets written here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.version import Version

from patchq.plan import backward, engine
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_release, write_tree


@pytest.fixture
def verified(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    return small.series.patch("bump-default")


def _plan(patch, tmp_path, text: str) -> engine.PatchResult:
    tree = write_tree(tmp_path / "t", utils=text)
    return engine.plan(sources.source_tree(tree, version="0.2.0"), [patch]).results[0]


def test_last_verified_and_the_cached_release(verified):
    assert backward.last_verified(verified, Version("0.2.0")) == "0.1.0"
    assert backward.last_verified(verified, Version("0.0.9")) is None
    assert backward.cached_release("0.1.0").version == Version("0.1.0")
    assert backward.cached_release("0.2.0") is None  # never downloads


def test_every_change_already_in_the_release_is_upstreamed(verified, tmp_path):
    text = UTILS_PY.replace("    DEFAULT = 102400\n", "    DEFAULT = 101376\n    DEFAULT = 101376\n")
    r = _plan(verified, tmp_path, text)  # the anchor matches twice: it cannot resolve
    assert r.status == engine.UPSTREAMED
    assert r.reason == ("every edit's change (as made on verified vllm 0.1.0) is already in vllm 0.2.0: "
                        "default: `DEFAULT = 101376` (vllm/ops/utils.py:8)")


def test_an_alike_change_is_possibly_upstreamed_and_blocks(verified, tmp_path):
    r = _plan(verified, tmp_path, UTILS_PY.replace("    DEFAULT = 102400\n", "    DEFAULT: int = 101376\n"))
    assert (r.status, r.failure) == (engine.FAILED, "possibly-upstreamed")
    assert "upstream `DEFAULT: int = 101376` vs the patch's `DEFAULT = 101376`" in r.reason


def test_a_change_gone_without_trace_is_not_proven_upstream(verified, tmp_path):
    r = _plan(verified, tmp_path, UTILS_PY.replace("    DEFAULT = 102400\n", ""))
    assert (r.status, r.failure) == (engine.FAILED, "conflict")
    assert r.reason.endswith("generic upstream detection cannot prove bump-default's change (as made on verified "
                             "vllm 0.1.0) present in vllm 0.2.0")


def test_without_the_verified_release_in_the_cache_there_is_no_verdict(small, tmp_path):
    r = _plan(small.series.patch("bump-default"), tmp_path, UTILS_PY.replace("    DEFAULT = 102400\n", ""))
    assert r.status == engine.FAILED and "generic upstream detection" not in r.reason
