"""The five Spark patches on the real vLLM 0.23.0 wheel: the exact source they produce.

Every anchored definition, after its patch, must equal what the series' store says:
``series/diffs/0.23.0/<patch>.diff`` applied to the pristine release (``patchq test
--regen`` writes it; each was reviewed against ``docs/patches.md``). Sentinel hashes are
compared masked (the store's may be older) and checked against the series' current patch
hash here.
"""

from __future__ import annotations

import ast
import dataclasses
import py_compile
import re
from pathlib import Path

import pytest

from spark_support import SERIES, definition_source, patchq, site_of, stored_patched

from patchq.authoring.diffstore import mask_hashes as mask_sentinel_hashes

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

VERSION = "0.23.0"

#: patch id -> (file, anchored qualnames) on vLLM 0.23.0 (docs/patches.md's table; int8-lmhead
#: also rewrites the same call in get_top_tokens, which shares the lm-head module).
EXPECTED = {
    "fla-shmem": ("vllm/model_executor/layers/fla/ops/utils.py", ["Backend"]),
    "unify-kv-page": ("vllm/v1/core/kv_cache_utils.py", ["unify_kv_cache_spec_page_size"]),
    "prefix-align": ("vllm/v1/core/kv_cache_utils.py", ["resolve_kv_cache_block_sizes"]),
    "inc-hybrid-fp8": ("vllm/model_executor/layers/quantization/inc.py",
                       ["INCConfig", "INCConfig.__init__", "INCConfig.apply_vllm_mapper",
                        "INCConfig.get_quant_method"]),
    "int8-lmhead": ("vllm/model_executor/layers/logits_processor.py",
                    ["LogitsProcessor._get_logits", "LogitsProcessor.get_top_tokens"]),
}
PATCH_IDS = list(EXPECTED)


@pytest.fixture(scope="module")
def series():
    from patchq import series as series_mod

    return series_mod.load(SERIES)


@pytest.fixture(scope="module")
def pristine_site(tmp_path_factory):
    """vLLM 0.23.0 installed (its wheel's files), nothing applied. Read it; never write it."""
    return site_of(VERSION, tmp_path_factory.mktemp("pristine") / "site-packages")


@pytest.fixture(scope="module")
def source(pristine_site):
    from patchq.vllmdist import sources

    src = sources.installed(pristine_site)
    assert str(src.version) == VERSION
    return src


@pytest.fixture(scope="module")
def single_plans(source, series):
    """patch id -> the plan of that patch alone on the installed 0.23.0 (in memory)."""
    from patchq.plan import engine

    return {pid: engine.plan(source, [series.patch(pid)]) for pid in PATCH_IDS}


@pytest.fixture(scope="module")
def dense_site(tmp_path_factory):
    """A 0.23.0 install with ``apply --profile dense`` done by the CLI."""
    site = site_of(VERSION, tmp_path_factory.mktemp("dense") / "site-packages")
    res = patchq("apply", "--profile", "dense", "--site-packages", site, "--json")
    assert res.rc == 0, res
    return site


def test_series_anchors_the_expected_definitions(single_plans):
    for pid, (relpath, qualnames) in EXPECTED.items():
        (result,) = single_plans[pid].results
        assert result.status == "ok", (pid, result.reason)
        assert result.files == [relpath]
        assert sorted({a.qualname for a in result.anchors}) == sorted(qualnames)
        assert all(a.relpath == relpath and not a.moved for a in result.anchors)


@pytest.fixture(scope="module")
def stored(source):
    """patch id -> relpath -> the text the store's diff gives on the pristine 0.23.0."""
    return {pid: stored_patched(VERSION, pid, {EXPECTED[pid][0]: source.read_text(EXPECTED[pid][0])})
            for pid in PATCH_IDS}


def test_the_store_changes_exactly_the_anchored_files(stored):
    assert {pid: sorted(files) for pid, files in stored.items()} == {pid: [rel] for pid, (rel, _) in EXPECTED.items()}


@pytest.mark.parametrize("patch_id", PATCH_IDS)
def test_exact_patched_source(patch_id, single_plans, series, stored):
    """Each anchored definition after the patch alone equals the store's, whole: its
    sentinel, and the definition's unchanged rest."""
    plan = single_plans[patch_id]
    relpath, qualnames = EXPECTED[patch_id]
    text = plan.patched[relpath]
    patch_hash = series.patch(patch_id).hash
    for qualname in qualnames:
        got = definition_source(text, qualname)
        want = definition_source(stored[patch_id][relpath], qualname)
        assert mask_sentinel_hashes(got) == mask_sentinel_hashes(want), \
            f"{patch_id} {qualname}: run `patchq test --regen --patch {patch_id}` and review"
        # the sentinel right above the definition carries the series' current hash
        assert re.search(rf"^# patchq:{patch_id}:{patch_hash} ", got, re.M), got.splitlines()[0]
        compile(want, f"{patch_id}/{qualname}", "exec")  # the stored definition stands on its own


@pytest.mark.parametrize("patch_id", PATCH_IDS)
def test_patched_module_compiles(patch_id, single_plans):
    plan = single_plans[patch_id]
    for relpath, text in plan.patched.items():
        compile(text, relpath, "exec")


def test_dense_on_disk_matches_the_store(dense_site, series, stored):
    """``apply --profile dense`` (CLI) leaves every anchored definition as the store's,
    and every patched module byte-compiles from disk."""
    for pid, (relpath, qualnames) in EXPECTED.items():
        text = (dense_site / relpath).read_text(encoding="utf-8")
        for qualname in qualnames:
            want = definition_source(stored[pid][relpath], qualname)
            assert mask_sentinel_hashes(definition_source(text, qualname)) == mask_sentinel_hashes(want), \
                (pid, qualname)
    for relpath in sorted({r for r, _ in EXPECTED.values()}):
        py_compile.compile(str(dense_site / relpath), cfile=str(dense_site / (relpath + "c.test")), doraise=True)
        (dense_site / (relpath + "c.test")).unlink()


def test_dense_equals_single_patches_combined(dense_site, single_plans):
    """Patches of one file compose: kv_cache_utils.py under dense holds both single-patch
    definitions (unify-kv-page, prefix-align) and nothing else changed."""
    relpath = "vllm/v1/core/kv_cache_utils.py"
    text = (dense_site / relpath).read_text(encoding="utf-8")
    for pid in ("unify-kv-page", "prefix-align"):
        (qualname,) = EXPECTED[pid][1]
        assert definition_source(text, qualname) == definition_source(single_plans[pid].patched[relpath], qualname)


# -- unify-kv-page must keep the scaled block size --------------------------------


def _unify_function(single_plans) -> tuple[str, ast.FunctionDef]:
    text = single_plans["unify-kv-page"].patched["vllm/v1/core/kv_cache_utils.py"]
    src = definition_source(text, "unify_kv_cache_spec_page_size")
    tree = ast.parse(src)
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    return src, fn


def _kw(call: ast.Call) -> dict[str, str]:
    return {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg}


def test_unify_kv_page_pads_only_with_the_scaled_block_size(single_plans):
    """Reading the patched code: every ``replace(...)`` that sets ``page_size_padded`` also
    sets ``block_size=new_block_size`` (= ``layer_spec.block_size * ratio``); the padded
    rebuild only runs when the scaled page still falls short; the assert stays after it."""
    _, fn = _unify_function(single_plans)
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == "replace"]
    padded = [c for c in calls if "page_size_padded" in _kw(c)]
    assert len(padded) == 1, "the patch adds exactly one padded rebuild"
    assert _kw(padded[0]) == {"block_size": "new_block_size", "page_size_padded": "max_page_size"}
    assert ast.unparse(padded[0].args[0]) == "layer_spec"
    assigns = {ast.unparse(n.targets[0]): ast.unparse(n.value) for n in ast.walk(fn) if isinstance(n, ast.Assign)}
    assert assigns["new_block_size"] == "layer_spec.block_size * ratio"
    assert assigns["ratio"] == "max_page_size // layer_page_size"

    # loop body order: scaled replace, guarded padded rebuild, the upstream assert
    loop = next(n for n in ast.walk(fn) if isinstance(n, ast.For))
    branch = loop.body[0].orelse  # if layer_spec.page_size_bytes == max_page_size: ... else:
    kinds = [ast.unparse(s).splitlines()[0] for s in branch]
    i = kinds.index("new_spec = replace(layer_spec, block_size=new_block_size)")
    assert kinds[i + 1] == "if new_spec.page_size_bytes != max_page_size:"
    assert branch[i + 1].body == [s for s in branch[i + 1].body if isinstance(s, ast.Assign)]
    assert kinds[i + 2] == "assert new_spec.page_size_bytes == max_page_size"


@dataclasses.dataclass(frozen=True)
class _PageSpec:
    """Stand-in with AttentionSpec's page rule (vllm/v1/kv_cache_interface.py, 0.23.0):
    ``page_size_padded`` if set, else ``block_size * bytes_per_token``. Only the
    patched function is vLLM code here; importing vLLM itself needs torch."""

    block_size: int
    bytes_per_token: int
    page_size_padded: int | None = None

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded if self.page_size_padded is not None else self.block_size * self.bytes_per_token


def test_unify_kv_page_runs_scaled_and_padded(single_plans):
    """Executing the patched function: a spec whose scaled page still falls short (its page
    is already padded) comes out with the SCALED block size and the padded maximum page;
    the stock function asserts on the same input."""
    src, _ = _unify_function(single_plans)
    ns = {"replace": dataclasses.replace, "KVCacheSpec": object}
    exec(compile(src, "unify_kv_cache_spec_page_size", "exec"), ns)
    specs = {"big": _PageSpec(block_size=16, bytes_per_token=2304),            # page 36864
             "small": _PageSpec(block_size=16, bytes_per_token=256, page_size_padded=12288)}
    out = ns["unify_kv_cache_spec_page_size"](dict(specs))
    assert out["big"] is specs["big"]
    assert out["small"].block_size == 48  # 16 * (36864 // 12288): scaled, not just padded
    assert out["small"].page_size_bytes == 36864 and out["small"].page_size_padded == 36864

    stock = definition_source(
        (Path(single_plans["unify-kv-page"].source.root) / "vllm/v1/core/kv_cache_utils.py").read_text(),
        "unify_kv_cache_spec_page_size")
    ns = {"replace": dataclasses.replace, "KVCacheSpec": object}
    exec(compile(stock, "stock", "exec"), ns)
    with pytest.raises(AssertionError):
        ns["unify_kv_cache_spec_page_size"](dict(specs))
