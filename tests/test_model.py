"""patchq.model: the public patch model (AnchorSpec, Variant, Patch, Profile) a series imports."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from patchq import series as S
from patchq.model import MODULE_QUALNAME, AnchorSpec, Patch, Variant
from testing.small_series import write_series


def test_anchor_module_paths_and_counts():
    spec = AnchorSpec(id="a", module="vllm.v1.core.kv_cache_utils", qualname="f")
    assert spec.module_paths == ("vllm/v1/core/kv_cache_utils.py", "vllm/v1/core/kv_cache_utils/__init__.py")
    assert not spec.is_module and AnchorSpec(id="m", module="vllm.x", qualname=MODULE_QUALNAME).is_module
    assert spec.count_text() == "1" and spec.count_ok(1) and not spec.count_ok(0) and not spec.count_ok(2)
    some = AnchorSpec(id="a", module="m", qualname="f", min_count=2, max_count=4)
    assert some.count_text() == "2 to 4" and some.count_ok(4) and not some.count_ok(5)
    many = AnchorSpec(id="a", module="m", qualname="f", min_count=2, max_count=None)
    assert many.count_text() == "at least 2" and many.count_ok(1000)


def test_variant_kinds():
    assert Variant(SpecifierSet(">=1"), edits={"a": lambda *a: None}).kind == "edit"
    assert Variant(SpecifierSet(">=1"), upstreamed="merged in #1").kind == "upstreamed"
    assert Variant(SpecifierSet("<1"), absent="not written yet").kind == "absent"


def test_variant_for_takes_the_first_covering_variant_inside_applies():
    first = Variant(SpecifierSet(">=0.1,<0.3"), edits={})
    later = Variant(SpecifierSet(">=0.2"), upstreamed="x")
    patch = Patch(id="p", summary="s", why="w", applies=SpecifierSet(">=0.1,<1"), variants=(first, later),
                  requires=("q",), supersedes=("r",))
    assert patch.variant_for("0.2.5") is first and patch.variant_for("0.3.0") is later
    assert patch.variant_for("0.0.9") is None and patch.variant_for("1.0") is None  # outside applies
    assert patch.relations() == {"requires": ["q"], "conflicts": [], "supersedes": ["r"]}


def test_a_loaded_series_builds_the_model(tmp_path):
    patch = S.load(write_series(tmp_path)).patch("bump-default")
    assert isinstance(patch, Patch) and patch.id == "bump-default" and len(patch.hash) == 12
    assert [v.kind for v in patch.variants] == ["edit", "upstreamed"]
    (anchor,) = patch.anchors.values()
    assert (anchor.module, anchor.qualname, anchor.node) == ("vllm.ops.utils", "Backend", "DEFAULT = ...")
