"""patchq.compat.variants: which variant check and matrix plan when none covers a version."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patchq.compat import variants
from patchq.model import Patch, Variant

OLD = Variant(SpecifierSet(">=0.1,<0.2"), edits={"a": lambda *a: None}, note="old")
NEW = Variant(SpecifierSet(">=0.3,<0.4"), edits={"a": lambda *a: None}, note="new")
UP = Variant(SpecifierSet(">=0.5"), upstreamed="merged")


def _patch(*vs: Variant) -> Patch:
    return Patch(id="p", summary="", why="", applies=SpecifierSet(">=0.1"), variants=vs)


def test_the_nearest_edit_variant_starts_closest_below_else_lowest_above():
    patch = _patch(OLD, NEW, UP)
    assert variants.nearest_edit_variant(patch, Version("0.2.5")) is OLD
    assert variants.nearest_edit_variant(patch, Version("0.4.1")) is NEW  # the upstreamed one is no edit
    assert variants.nearest_edit_variant(patch, Version("0.0.1")) is OLD
    assert variants.nearest_edit_variant(_patch(UP), Version("0.6")) is None


def test_effective_patches_try_the_nearest_variant_in_a_gap_only():
    patch = _patch(OLD, NEW, UP)
    (planned,), tried = variants.effective_patches([patch], Version("0.2.5"))
    assert tried == {"p": OLD} and planned.variant_for("0.2.5").note == "old"
    (same,), tried = variants.effective_patches([patch], Version("0.3.1"))
    assert tried == {} and same is patch
    (outside,), tried = variants.effective_patches([patch], Version("0.0.5"))  # outside applies: not tried
    assert tried == {} and outside is patch
