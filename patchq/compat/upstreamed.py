"""``check`` and matrix rows for the relations between patches and with upstream.

The engine (:mod:`patchq.plan.engine`) decides; this module turns its outcomes into
``patchq.check/1`` rows (:class:`patchq.compat.check.PatchCheck`):

``superseded`` (not blocking)
    the patch applies, and a later patch of the profile that declares ``supersedes`` it
    rewrote its change; the reason names that patch, the definition and the statement.
``interaction`` (blocking)
    a later patch removed or replaced a statement this one added without declaring
    ``supersedes``, or this patch's anchor lands on a statement another patch of the
    profile replaced or added (the reason names both patches, the definition and the
    statement).
``partially-upstreamed`` (blocking)
    some of the patch's edits are already in the release and some are not: the reason
    names which, with ``file:line`` evidence.
``possibly-upstreamed`` (blocking)
    an anchor no longer matches and the backward detection finds upstream's change alike
    the patch's, not provably the same (:mod:`patchq.plan.meaning`): both texts.
``upstreamed`` from generic detection (not blocking)
    every edit's added statements are already in the release, by statement or by meaning
    (:func:`by_meaning`, the engine's hook), or, backwards, the release's definition
    equals what the patch produced on its last verified release (also up to local names,
    helper names and equivalent constructs).

Every row also gets ``relations`` (``requires``, ``conflicts``, ``supersedes`` as
declared, and ``superseded_by``: the profile's patches that declare ``supersedes`` it)
and ``upstream_evidence`` ([{``anchor``, ``statement``, ``where``}]: what generic
detection found already in the release; empty when nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from patchq.model import Patch, Variant
from patchq.plan import engine
from patchq.plan.relations import relations_row

if TYPE_CHECKING:
    from patchq.compat.check import PatchCheck

SUPERSEDED = "superseded"
INTERACTION = "interaction"
PARTIAL = "partially-upstreamed"
POSSIBLY = "possibly-upstreamed"
#: statuses this module adds to ``patchq.check/1`` (blocking ones in BLOCKING)
STATUSES = (SUPERSEDED, INTERACTION, PARTIAL, POSSIBLY)
BLOCKING = (INTERACTION, PARTIAL, POSSIBLY)


def _anchor_row(a: engine.AnchorResult) -> dict:
    return {"anchor": a.anchor, "path": a.relpath, "qualname": a.qualname, "line": a.line,
            "moved": a.moved, "matches": a.matches, "fingerprint": a.fingerprint, "verified": a.verified}


def classify(patch: Patch, result: engine.PatchResult, row: PatchCheck) -> bool:
    """Fill ``row`` for a superseded, interacting or partially upstreamed result.

    Returns:
        True when ``row`` is complete (the caller returns it), False otherwise.
    """
    if result.status == engine.SUPERSEDED:
        row.status, row.reason, row.blocking = SUPERSEDED, result.reason, False
        row.anchors = [_anchor_row(a) for a in result.anchors]
        row.touched = set(result.files) | {a.relpath for a in result.anchors}
        return True
    if result.status == engine.FAILED and result.failure in (INTERACTION, PARTIAL, POSSIBLY):
        row.status, row.reason, row.blocking, row.level = result.failure, result.reason, True, None
        row.touched = set(result.files)
        return True
    return False


def evidence(plan: engine.Plan, patch_id: str) -> list[dict]:
    """What generic detection found already in the release for one patch of ``plan``."""
    out = []
    for ch in plan.changes.get(patch_id) or []:
        by = "meaning" if getattr(ch, "meaning", None) else "identity"
        for item, where in ch.upstream:
            row = {"anchor": ch.anchor, "statement": item.code, "where": where, "by": by, "score": 1.0}
            if by == "meaning":
                row["evidence"] = "; ".join(ch.meaning)
            out.append(row)
    return out


def annotate(rows: Iterable, patches: list[Patch], plan: engine.Plan) -> None:
    """Add ``relations`` and ``upstream_evidence`` to every row (rows and patches align).

    An ``upstreamed`` *variant* of a patch without a hand-written ``upstream_check`` is
    also tried with the backward detection (:mod:`patchq.plan.backward`); when that
    cannot prove the claim, a note says so (the author's declaration stands: not
    blocking, but never silent)."""
    for row, patch in zip(rows, patches, strict=False):
        row.relations = relations_row(patch, patches)
        row.upstream_evidence = evidence(plan, patch.id)
        if row.status == "upstreamed" and row.variant_kind == "upstreamed" and patch.upstream_check is None \
                and plan.workspace is not None:
            from patchq.compat.check import effective_patches, nearest_edit_variant
            from patchq.plan import backward

            near = nearest_edit_variant(patch, plan.source.version)
            if near is None:
                continue
            trial = effective_patches([_as_edit(patch, near)], plan.source.version)[0][0]
            verdict = backward.detect(trial, plan.source, plan.workspace)
            if verdict is None:
                row.notes.append("generic upstream detection could not run (no verified release in the cache)")
            elif verdict[0] == engine.UPSTREAMED:
                row.notes.append(f"generic upstream detection agrees: {verdict[1]}")
            else:
                row.notes.append(f"{verdict[1]}: the variant's upstreamed claim is not confirmed by the code")


def _as_edit(patch: Patch, variant: Variant) -> Patch:
    """``patch`` with ``variant`` (an edit variant) covering every version."""
    from dataclasses import replace

    from packaging.specifiers import SpecifierSet

    return replace(patch, variants=(replace(variant, applies=SpecifierSet()),))


def depends_on_others(rows: Iterable) -> bool:
    """True when a row's outcome came from another patch of the plan (superseded, or an
    interaction): a profile view taken from a larger plan is then not exact."""
    return any(r.status in (SUPERSEDED, INTERACTION) for r in rows)
