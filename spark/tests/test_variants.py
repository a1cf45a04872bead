"""The Spark series' per-release variants on the real release wheels 0.15.1 - 0.33.0.

* every release x every profile plans with no failed patch, every patched file
  compiles, and each (release, patch) result is what the series itself says there: the
  variant covering the release (``series/<patch>.py``) names the anchors edited (status
  ``ok``), each resolved in its hinted module (never ``moved``) with its recorded
  fingerprint, or says ``absent`` / ``upstreamed``; where the store records a verdict for the
  release (``series/diffs/<patch>.expect.toml``, the one store of expected output, tested
  case by case by ``test_patches.py``), the result agrees with it;
* the store holds the first and last release of every variant range, and each stored
  sentinel names its own patch;
* behaviour read from the patched code: no stock lm-head call survives int8-lmhead,
  every not-quantized branch of ``INCConfig`` tries FP8 first, unify-kv-page never
  adds an unscaled padding, prefix-align's guard; each patch's ``upstream_check``;
* ``anchors/*.toml`` fingerprints are what ``python -m patchq.authoring.fingerprints --record``
  writes today.

Release trees come from the local wheel cache (:func:`patchq.vllmdist.sources.release_source`);
a release that cannot be had is skipped.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from packaging.version import Version

from patchq.testing import definition

REPO = Path(__file__).resolve().parents[1]  # the Spark series repo: tests/ is one below
pytestmark = pytest.mark.wheel  # real releases


def definition_source(text: str, qualname: str) -> str:
    """The one definition ``qualname`` of ``text`` (dedented, sentinel lines dropped)."""
    found = definition(text, qualname)
    assert found is not None, qualname
    return found

PATCHES = ("fla-shmem", "unify-kv-page", "prefix-align", "inc-hybrid-fp8", "int8-lmhead")
PROFILES = ("base", "mtp", "dflash", "dense")

#: Every final release 0.15.1 - 0.33.0 (the matrix's range is 0.20.2 - 0.33.0; the older ones
#: are kept sensible).
VERSIONS = ("0.15.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1",
            "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
            "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")
#: the store's verdict that each kind of variant gives (``check`` words; ``ok`` of the planner is ``applies``)
STORE_WORD = {"edit": "applies", "absent": "absent", "upstreamed": "upstreamed"}


@functools.lru_cache(maxsize=None)
def release(version: str):
    """The release's CodeSource (cached per test session), or skip."""
    from patchq.vllmdist import sources
    from patchq.errors import PatchqError

    try:
        return sources.release_source(version)
    except PatchqError as exc:  # TargetNotFound: no wheel cached and PyPI unreachable
        pytest.skip(f"vllm {version} not available: {exc}")


@functools.lru_cache(maxsize=None)
def loaded_series():
    from patchq import series

    return series.load(REPO / "series")


@functools.lru_cache(maxsize=None)
def dense_plan(version: str):
    """The plan of the whole series (= profile dense) on ``version``."""
    from patchq.plan import engine

    s = loaded_series()
    return engine.plan(release(version), [s.patch(pid) for pid in PATCHES])


def kind(version: str, patch_id: str) -> str:
    """The kind of variant of ``patch_id`` that covers ``version`` (``edit``, ``absent``, ``upstreamed``)."""
    variant = loaded_series().patch(patch_id).variant_for(version)
    assert variant is not None, f"no variant of {patch_id} covers {version}"
    return variant.kind


def test_the_patches_and_profiles_are_the_series():
    # these tests know the Spark patches; a patch added later is held to its own store (test_patches.py)
    assert set(PATCHES) <= set(loaded_series().all_patch_ids())
    assert set(PROFILES) <= set(loaded_series().profiles)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("version", VERSIONS)
def test_every_profile_on_every_release(version, profile):
    from patchq.plan import engine

    s = loaded_series()
    patches = s.patches_of(profile)
    plan = engine.plan(release(version), patches)
    assert plan.ok, [(r.patch_id, r.reason) for r in plan.failures()]
    for relpath, text in plan.patched.items():
        compile(text, relpath, "exec")
    for result in plan.results:
        if result.patch_id not in PATCHES:
            continue
        variant = s.patch(result.patch_id).variant_for(version)
        stored = _stored_verdicts(result.patch_id).get(version)
        assert stored in (None, STORE_WORD[variant.kind]), (result.patch_id, version, stored, variant.kind)
        if variant.kind == "edit":
            assert result.status == engine.OK, (result.patch_id, result.reason)
            assert tuple(a.anchor for a in result.anchors) == tuple(variant.edits)
            spec = s.patch(result.patch_id).anchors
            for a in result.anchors:
                assert a.relpath in spec[a.anchor].module_paths[:2] and not a.moved, a
                assert spec[a.anchor].fingerprints.get(version) == a.fingerprint, \
                    f"{result.patch_id}/{a.anchor}: fingerprint of {version} not recorded (run python -m patchq.authoring.fingerprints --record)"
                assert a.verified is not None
            assert result.files == sorted({a.relpath for a in result.anchors})
        else:
            assert (result.status, result.anchors, result.files) == (variant.kind, [], []), result
            assert result.reason
    assert [r.patch_id for r in plan.results] == [p.id for p in patches]


@pytest.mark.parametrize("version", VERSIONS)
def test_dense_plan_on_release_is_what_the_profiles_add_up_to(version):
    """The dense plan edits exactly the files its edit variants' anchors resolve to, nothing else."""
    from patchq.plan import engine

    plan = dense_plan(version)
    want = sorted({f for r in plan.results if r.status == engine.OK for f in r.files})
    assert sorted(plan.patched) == want and want


#: First/last release of each variant range (see each series/<patch>.py): 0.15.1 / 0.16.0
#: first/last 1-call int8 and first of every old-shape variant; 0.17.0 first 2-call int8;
#: 0.19.1 last without prefix-align and with the 1-arg base hook; 0.20.0 first prefix-align
#: edit, 4 INC backends; 0.23.0 last of the <0.24 variants; 0.24.0 / 0.25.1 first/last
#: re-indented unify, first inc/ package, last 2-call int8 and old FLA path; 0.26.0 first
#: moved FLA, Mamba branch, _apply_head; 0.27.1 last prefix-align edit; 0.28.0 first
#: prefix-align upstreamed; 0.32.0 last unify in kv_cache_utils; 0.33.0 first
#: kv_cache_planning and last of all.
STORED = ("0.15.1", "0.16.0", "0.17.0", "0.19.1", "0.20.0", "0.23.0", "0.24.0", "0.25.1", "0.26.0", "0.27.1",
          "0.28.0", "0.32.0", "0.33.0")


def _stored_verdicts(pid: str) -> dict[str, str]:
    from patchq.authoring import diffstore

    return diffstore.read_verdicts(REPO / "series", pid) or {}


@pytest.mark.parametrize("pid", PATCHES)
def test_the_store_covers_every_variant_at_both_ends(pid):
    """Each patch's expected output is recorded on STORED, so every variant with edits has
    its first and last release in the store (patchq.testing checks each one)."""
    s = loaded_series()
    assert set(STORED) <= set(_stored_verdicts(pid)), f"record them: patchq test --regen --patch {pid} --releases ..."
    for v in s.patch(pid).variants:
        inside = [x for x in VERSIONS if v.applies.contains(x) and x in s.patch(pid).applies]
        if v.kind == "edit" and inside:
            assert {inside[0], inside[-1]} <= set(STORED), (pid, str(v.applies), inside[0], inside[-1])


def test_stored_sentinels_name_their_patch():
    """Every sentinel a stored diff adds names the diff's own patch, once per anchored definition."""
    from patchq.sentinels import SENTINEL_RE

    for path in sorted((REPO / "series" / "diffs").glob("*/*.diff")):
        added = [m.group(1) for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("+")
                 for m in SENTINEL_RE.finditer(line)]
        assert added and set(added) == {path.stem}, path


# -- behaviour read from the patched code ------------------------------------------------


def _class(text: str, name: str) -> ast.ClassDef:
    (cls,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == name]
    return cls


def _calls_to(node: ast.AST, attr: str) -> int:
    return sum(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr
               and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "quant_method"
               for n in ast.walk(node))


@pytest.mark.parametrize("version", VERSIONS)
def test_int8_lmhead_leaves_no_stock_lm_head_call(version):
    """Every caller, the proposers' get_top_tokens / get_top_k_tokens included, takes the int8 path."""
    plan = dense_plan(version)
    rel = "vllm/model_executor/layers/logits_processor.py"
    before = _class(plan.pristine[rel], "LogitsProcessor")
    after = _class(plan.patched[rel], "LogitsProcessor")
    stock = 1 if Version(version) < Version("0.17.0") else 2 if Version(version) < Version("0.26.0") else 1
    assert _calls_to(before, "apply") == stock
    assert _calls_to(after, "apply") == 0
    int8 = [n for n in ast.walk(after) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id == "_patchq_lm_head_logits"]
    assert len(int8) == stock
    if Version(version) >= Version("0.26.0"):
        users = {f.name for f in after.body if isinstance(f, ast.FunctionDef)
                 and any(isinstance(n, ast.Attribute) and n.attr == "_apply_head" for n in ast.walk(f))}
        assert {"_get_logits", "get_top_tokens"} <= users
        if Version(version) >= Version("0.28.0"):
            assert "get_top_k_tokens" in users


def _is_fp8_first(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.If) and "self.fp8_config is not None" in ast.unparse(stmt.test)
            and "isinstance(layer, LinearBase)" in ast.unparse(stmt.test)
            and ast.unparse(stmt.body[0]) == "return self._fp8_linear_method()")


@pytest.mark.parametrize("version", VERSIONS)
def test_inc_every_unquantized_return_tries_fp8_first(version):
    """Each ``return UnquantizedLinearMethod()`` of INCConfig sits under a branch whose first
    statement returns Fp8LinearMethod for an FP8 LinearBase layer."""
    plan = dense_plan(version)
    (rel,) = [p for p in plan.patched if "quantization/inc" in p]
    cls = _class(plan.patched[rel], "INCConfig")
    parents = {child: node for node in ast.walk(cls) for child in ast.iter_child_nodes(node)}
    returns = [n for n in ast.walk(cls) if isinstance(n, ast.Return)
               and ast.unparse(n) == "return UnquantizedLinearMethod()"]
    assert len(returns) == (4 if Version(version) < Version("0.20.0") else 5 if Version(version) < Version("0.24.0") else 2)
    for ret in returns:
        node, guarded = ret, False
        while node in parents and not isinstance(node, ast.FunctionDef):
            node = parents[node]
            if isinstance(node, ast.If) and _is_fp8_first(node.body[0]):
                guarded = True
        assert guarded, f"{version}: {ast.unparse(ret)} at line {ret.lineno} is not guarded"
    names = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
    assert {"maybe_update_config", "_is_layer_fp8", "_fp8_linear_method"} <= names


@pytest.mark.parametrize("version", VERSIONS)
def test_unify_scales_then_pads_and_adds_no_unscaled_padding(version):
    plan = dense_plan(version)
    (rel,) = [p for p in plan.patched if p.startswith("vllm/v1/core/kv_cache_")
              and "def unify_kv_cache_spec_page_size" in plan.patched[p]]
    src = definition_source(plan.patched[rel], "unify_kv_cache_spec_page_size")
    old = definition_source(plan.pristine[rel], "unify_kv_cache_spec_page_size")
    fn = ast.parse(src).body[0]
    pad = "replace(layer_spec, block_size=new_block_size, page_size_padded=max_page_size)"
    unscaled = "replace(layer_spec, page_size_padded=max_page_size)"
    assert src.count(pad) == 1
    assert src.count(unscaled) == old.count(unscaled)  # upstream's Mamba/non-divisible branches only
    assert old.count(unscaled) == (0 if Version(version) < Version("0.24.0") else 1 if Version(version) < Version("0.26.0") else 2)
    for node in ast.walk(fn):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            if ast.unparse(stmt) == "new_spec = replace(layer_spec, block_size=new_block_size)":
                nxt = body[i + 1]
                assert ast.unparse(nxt.test) == "new_spec.page_size_bytes != max_page_size"
                assert pad in ast.unparse(nxt.body[0])
    assert src.count("assert new_spec.page_size_bytes == max_page_size") == \
        old.count("assert new_spec.page_size_bytes == max_page_size")


def _prefix_align_edits() -> list[str]:
    """The releases where prefix-align's covering variant edits (read from the series at collection)."""
    from patchq import series

    patch = series.load(REPO / "series").patch("prefix-align")
    return [v for v in VERSIONS if patch.variant_for(v) is not None and patch.variant_for(v).kind == "edit"]


@pytest.mark.parametrize("version", _prefix_align_edits())
def test_prefix_align_guard(version):
    plan = dense_plan(version)
    src = definition_source(plan.patched["vllm/v1/core/kv_cache_utils.py"], "resolve_kv_cache_block_sizes")
    assert 'if getattr(cache_config, "mamba_cache_mode", "none") != "align" and any(' in src


# -- upstream checks -------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_upstream_checks_on_release_code(version):
    s = loaded_series()
    src = release(version)
    prefix = s.patch("prefix-align").upstream_check(src)
    if kind(version, "prefix-align") == "upstreamed":
        assert prefix is not None and 'mamba_cache_mode != "align"' in prefix
        assert "vllm/v1/core/kv_cache_utils.py:" in prefix
    else:
        assert prefix is None
    assert s.patch("fla-shmem").upstream_check(src) is None  # DEFAULT is 102400 everywhere


def _tree(tmp_path: Path, files: dict[str, str]):
    from patchq.vllmdist import sources

    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "vllm" / "__init__.py").write_text("", encoding="utf-8")
    return sources.source_tree(tmp_path, "0.40.0")


def test_upstream_checks_ignore_the_patchs_own_edit(tmp_path):
    """A patched tree is not an upstreamed one: the sentinel and the guard's shape tell them apart."""
    s = loaded_series()
    plan = dense_plan("0.27.1")
    tree = _tree(tmp_path, dict(plan.patched))
    assert s.patch("fla-shmem").upstream_check(tree) is None
    assert s.patch("prefix-align").upstream_check(tree) is None


def test_fla_upstream_check_sees_a_lowered_default(tmp_path):
    utils = release("0.33.0").read_text("vllm/third_party/flash_linear_attention/ops/utils.py")
    tree = _tree(tmp_path, {"vllm/third_party/flash_linear_attention/ops/utils.py":
                            utils.replace("DEFAULT = 102400", "DEFAULT = 99 * 1024")})
    reason = loaded_series().patch("fla-shmem").upstream_check(tree)
    assert reason is not None and "101376" in reason and "utils.py:" in reason


# -- fingerprints ------------------------------------------------------------------------


def test_recorded_fingerprints_are_current():
    """``python -m patchq.authoring.fingerprints --check`` over every release of the table."""
    from patchq.authoring import fingerprints

    for v in VERSIONS:
        release(v)
    assert fingerprints.record(loaded_series(), VERSIONS, write=False, patch_ids=PATCHES) == {}


def test_fingerprint_tables_sorted_by_version_and_rendering_is_stable():
    import tomllib

    from patchq.authoring import fingerprints

    assert list(fingerprints.merged({"0.9.0": "a", "0.23.0": "b"}, {"0.10.0": "c", "0.23.0": "d"},
                                    ["0.10.0", "0.23.0"]).items()) == \
        [("0.9.0", "a"), ("0.10.0", "c"), ("0.23.0", "d")]
    assert fingerprints.merged({"0.24.0": "x"}, {}, ["0.24.0"]) == {}  # no longer verified: dropped
    for pid in PATCHES:
        path = REPO / "anchors" / f"{pid}.toml"
        text = path.read_text(encoding="utf-8")
        assert fingerprints.render(pid, tomllib.loads(text)) == text
        for anchor in tomllib.loads(text)["anchors"].values():
            fps = list(anchor.get("fingerprints", {}))
            assert fps == sorted(fps, key=Version)


def test_fingerprints_follow_drift_md():
    """docs/drift.md's per-definition change points, as seen by the recorded fingerprints."""
    s = loaded_series()
    unify = {**s.patch("unify-kv-page").anchors["scaled-replace"].fingerprints,
             **s.patch("unify-kv-page").anchors["scaled-replace-planning"].fingerprints}
    changes = [v for a, v in zip(VERSIONS, VERSIONS[1:]) if unify[a] != unify[v]]
    assert changes == ["0.24.0", "0.26.0", "0.29.0"]  # 0.31.0 docstring-only, 0.33.0 moved verbatim
    fla = {**s.patch("fla-shmem").anchors["default-shmem"].fingerprints,
           **s.patch("fla-shmem").anchors["default-shmem-third-party"].fingerprints}
    assert len(set(fla.values())) == 1 and sorted(fla) == sorted(VERSIONS, key=Version)
