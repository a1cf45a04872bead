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
    assert backward.last_verified(verified, Version("0.0.9"), above=True) == "0.1.0"  # older than every record
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


GROW_PATCH = '''
from patchq import edits
from patchq.series import patch, variant


def grow(defn, found, ctx):
    (stmt,) = found
    return edits.insert_after(defn, stmt, edits.stmts("total += n\\ntotal = max(total, floor)\\n"))


PATCH = patch(id="grow-total", summary="grow", why="test", applies=">=0.1",
              variants=[variant(">=0.1", edits={"total": grow})])
'''
GROW_UTILS = "def grow(sizes, n, floor=0):\n    total = sum(sizes)\n    return total\n"


@pytest.fixture
def grow_patch(tmp_path):
    """The grow-total patch, reviewed (fingerprinted) on 0.1.0, that release in the layer's own cache."""
    from patchq import series
    from patchq.plan.anchors import ast_index, fingerprint_ast
    from testing.mini_series import mini_series

    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0", utils=GROW_UTILS)
    fp = fingerprint_ast(ast_index(GROW_UTILS)["grow"][0])
    anchors = ('[anchors.total]\nmodule = "vllm.ops.utils"\nqualname = "grow"\nnode = "total = sum(...)"\n'
               f'count = 1\n\n[anchors.total.fingerprints]\n"0.1.0" = "{fp}"\n')
    return series.load(mini_series(tmp_path / "repo", "grow-total", GROW_PATCH, anchors)).patch("grow-total")


def test_a_fix_upstream_moved_into_a_helper_the_definition_calls_is_upstreamed(grow_patch, tmp_path):
    """Issue 35 class 5: the anchored statement left grow for a helper it calls, with the
    patch's change in it (spelt otherwise): conflict before, upstreamed now."""
    text = ("def _total(sizes, n, floor):\n    total = sum(sizes) or 0\n    total = total + n\n"
            "    total = max(total, floor)\n    return total\n\n\n"
            "def grow(sizes, n, floor=0):\n    return _total(sizes, n, floor)\n")
    r = _plan(grow_patch, tmp_path, text)
    assert r.status == engine.UPSTREAMED, r.reason
    assert "in _total, which grow calls" in r.reason and "(vllm/ops/utils.py:3" in r.reason


def test_a_gone_definition_is_searched_for_in_the_release(grow_patch, tmp_path):
    """Item 5 of issue 35: grow is gone; its change lives in another module's function
    (upstreamed, naming the place), or nothing like it does (gone, naming what was searched
    and the nearest candidates)."""
    tree = write_tree(tmp_path / "t", utils="def other():\n    return 1\n")
    (tree / "vllm/ops/sizes.py").write_text(
        "def grow_sizes(sizes, n, floor=0):\n    total = sum(sizes)\n    total += n\n"
        "    total = max(total, floor)\n    return total\n")
    r = engine.plan(sources.source_tree(tree, version="0.2.0"), [grow_patch]).results[0]
    assert r.status == engine.UPSTREAMED, r.reason
    assert r.reason.endswith("is in vllm 0.2.0 elsewhere: total: `total += n; total = max(total, floor)` as "
                             "`total += n; total = max(total, floor)` (vllm/ops/sizes.py:3, in grow_sizes)")
    (tree / "vllm/ops/sizes.py").write_text(
        "def grow_sizes(sizes, n, floor=0):\n    total = sum(sizes)\n    return total\n")
    r = engine.plan(sources.source_tree(tree, version="0.2.1"), [grow_patch]).results[0]
    assert (r.status, r.failure) == (engine.FAILED, "gone")
    assert ("grow is gone: searched 3 files (those declaring the most names it uses, then its own directory: "
            "vllm/ops/") in r.reason
    assert "for its content and for the patch's change by meaning: nearest candidates: grow_sizes " \
           "(vllm/ops/sizes.py:1, similarity 0.96)" in r.reason


MARLIN = '''
from patchq import edits
from patchq.series import patch, variant


def relax(defn, found, ctx):
    (stmt,) = found
    return edits.replace(defn, stmt, edits.stmts(
        "supports_shape = hidden_size % 128 == 0 and (\\n"
        "    group_size <= 0 or intermediate_size_per_partition % group_size == 0\\n"
        ")\\n"))


PATCH = patch(id="marlin-tile-padding", summary="marlin MoE pads tiles", why="a plugin zero-pads tiles",
              applies=">=0.24", variants=[variant(">=0.24", edits={"shape": relax})])
'''
MARLIN_ANCHORS = '''
[anchors.shape]
module = "vllm.model_executor.layers.quantization.utils.marlin_utils"
qualname = "check_moe_marlin_supports_layer"
node = "supports_shape = (hidden_size % 128 == 0 and intermediate_size_per_partition % max(64, group_size) == 0)"
count = 1
'''


@pytest.mark.wheel
def test_a_fix_upstream_moved_into_a_helper_on_real_code(tmp_path):
    """Issue 35 class 5 on vLLM 0.27.0: check_moe_marlin_supports_layer (the patch's anchor,
    reviewed on 0.24.0) now only calls check_moe_marlin_supports_config, which holds the
    relaxed shape test the patch writes: upstreamed there (conflict before)."""
    from testing.mini_series import reviewed_patch

    patch = reviewed_patch(tmp_path, "marlin-tile-padding", MARLIN, MARLIN_ANCHORS, "0.24.0",
                           {"shape": ("vllm/model_executor/layers/quantization/utils/marlin_utils.py",
                                      "check_moe_marlin_supports_layer")})
    r = engine.plan(sources.release_source("0.27.0"), [patch]).results[0]
    assert r.status == engine.UPSTREAMED, r.reason
    # the helper's statement, named with the helper the anchored definition calls
    assert r.reason.endswith("(vllm/model_executor/layers/quantization/utils/marlin_utils.py:377, in "
                             "check_moe_marlin_supports_config, which check_moe_marlin_supports_layer calls)"), r.reason


ACCEPTED = '''
from patchq import edits
from patchq.series import patch, variant


def sync(defn, found, ctx):
    (stmt,) = found
    return edits.insert_before(defn, stmt, edits.stmts("torch.cuda.current_stream().synchronize()"))


PATCH = patch(id="accepted-sync", summary="sync before the accepted-token copy", why="a race", applies=">=0.33",
              variants=[variant(">=0.33", edits={"update": sync})])
'''


@pytest.mark.wheel
def test_a_definition_gone_with_its_file_names_what_was_searched(tmp_path):
    """Item 5 of issue 35 on vLLM 0.34.0, which deleted vllm/v1/worker/gpu_model_runner.py:
    the patch's definition (reviewed on 0.33.0) is searched for in the release, and the
    reason names the files searched and the nearest candidates (model runner V2's)."""
    from testing.mini_series import reviewed_patch

    patch = reviewed_patch(tmp_path, "accepted-sync", ACCEPTED, '''
        [anchors.update]
        module = "vllm.v1.worker.gpu_model_runner"
        qualname = "GPUModelRunner._update_states_after_model_execute"
        count = 1
        ''', "0.33.0", {"update": ("vllm/v1/worker/gpu_model_runner.py",
                                   "GPUModelRunner._update_states_after_model_execute")})
    r = engine.plan(sources.release_source("0.34.0"), [patch]).results[0]
    assert (r.status, r.failure) == (engine.FAILED, "gone"), r.reason
    assert "GPUModelRunner._update_states_after_model_execute is gone: searched 8 files (those declaring the " \
           "most names it uses" in r.reason
    assert "vllm/v1/worker/gpu/model_runner.py" in r.reason and "nearest candidates: " in r.reason
