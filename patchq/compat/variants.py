"""Variant policy of ``check`` and ``matrix``: which variant of a patch is planned on a version.

A patch's variant for a version is the first whose applies-range contains it
(:meth:`patchq.model.Patch.variant_for`). When none covers an in-range version, ``check``
tries the *nearest edit variant* in its place (what a rebase would start from), and
``absent`` is confirmed by resolving the nearest edit variant's anchors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patchq.model import Patch, Variant


def _lower_bound(spec: SpecifierSet) -> Version:
    """The lowest version a range admits by its ``>=``/``>``/``==``/``~=`` clauses (0 if none)."""
    lows = [Version(s.version.rstrip(".*")) for s in spec if s.operator in (">=", ">", "==", "~=", "===")]
    return max(lows) if lows else Version("0")


def nearest_edit_variant(patch: Patch, version: Version) -> Variant | None:
    """The edit variant whose range starts closest below ``version`` (else the lowest above).

    Used when no variant covers ``version`` (the trial), and to confirm ``absent``.
    """
    edits = [v for v in patch.variants if v.kind == "edit"]
    if not edits:
        return None
    below = [v for v in edits if _lower_bound(v.applies) <= version]
    if below:
        return max(below, key=lambda v: _lower_bound(v.applies))
    return min(edits, key=lambda v: _lower_bound(v.applies))


def _label(variant: Variant) -> str:
    return str(variant.applies) or "all"


def effective_patches(patches: Iterable[Patch], version: Version) -> tuple[list[Patch], dict[str, Variant]]:
    """The patches to plan: an uncovered in-range patch is replaced by its nearest edit variant.

    Returns:
        (patches in the same order, patch id -> the variant tried in place of a missing one).
    """
    out: list[Patch] = []
    tried: dict[str, Variant] = {}
    for p in patches:
        if version in p.applies and p.variant_for(version) is None:
            near = nearest_edit_variant(p, version)
            if near is not None:
                tried[p.id] = near
                p = replace(p, variants=(replace(near, applies=SpecifierSet()),))
        out.append(p)
    return out, tried


# ---------------------------------------------------------------------------
