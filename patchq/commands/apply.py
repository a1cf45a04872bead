"""``patchq apply --profile NAME`` and ``patchq revert``: converge, then report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from patchq import report
from patchq.documents import APPLY_SCHEMA, apply_document
from patchq.env.converge import ConvergeResult, PlanFailed, converge
from patchq.errors import EXIT_OK, PatchqError
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.documents import ApplyDoc, InstalledVllm
    from patchq.plan.results import Plan

SCHEMA = APPLY_SCHEMA


def document(command: str, target: CodeSource, profile: str | None, result: ConvergeResult | None,
             error: PatchqError | None = None, plan: Plan | None = None) -> ApplyDoc:
    """The ``patchq.apply/1`` document (:func:`patchq.documents.apply_document`) of a
    converge's ``result``, or of the ``error`` that stopped it (with the failed ``plan``)."""
    plan = result.plan if result else plan
    vllm: InstalledVllm = {"version": str(target.version), "site_packages": str(target.root), "dist": target.dist}
    if result is None:
        return apply_document(command, profile, vllm, error=str(error) if error else None,
                              patches=report.patch_rows(plan) if plan else [])
    return apply_document(command, profile, vllm, error=str(error) if error else None, noop=bool(result.noop),
                          patches=report.patch_rows(plan) if plan else [], written=result.written,
                          restored=result.restored, added=result.added, removed=result.removed,
                          foreign_kept=result.foreign_kept, recovered=result.recovered)


def summary(series: Series) -> dict:
    """The series summary cached in the journal (see :func:`patchq.hashing.series_summary`)."""
    from patchq.hashing import series_summary

    return series_summary(series.root, series.anchors_root, syntax=True)  # status reads syntax_errors from it


def series_ref(series: Series) -> dict:
    """The ``series`` reference of ``series`` (documents' ``series`` field), as the journal
    records it in ``applied_from``."""
    if series.location is not None:
        return dict(series.location.as_json())
    return {"dir": str(series.root), "anchors": str(series.anchors_root), "from": "--series", "config": None}


def apply(target: CodeSource, series: Series, profile: str, strict: bool = False,
          replace: bool = False) -> tuple[ApplyDoc, int]:
    """Make ``target`` carry exactly ``profile``'s patches. Returns (document, exit code).

    ``strict``: an upstreamed patch fails instead of being skipped (``apply --strict``).
    ``replace``: revert the patches another series applied (``apply --replace``); without it
    that is refused, exit 7 (:func:`patchq.env.converge._refuse_other_series`).
    When this interpreter would import vllm from elsewhere than ``target``
    (:func:`patchq.env.status.shadowing`) nothing is written: exit 5."""
    from patchq.env.status import shadowing

    other = shadowing(str(target.root))
    if other:
        from patchq.errors import ReadOnlyError

        exc = ReadOnlyError(f"this interpreter imports vllm from {other}, not from {target.root} (PYTHONPATH or a .pth "
                            f"puts another vllm first): patching {target.root} would not change what runs; nothing "
                            f"was written (unset PYTHONPATH, or pass --site-packages for that vllm)")
        return document("apply", target, profile, None, exc), exc.exit_code
    digest = summary(series)
    return converge_to("apply", target, profile, series.patches_of(profile), profile=profile,
                       summary=digest, modules=modules_of(digest), strict=strict, series_ref=series_ref(series),
                       replace=replace)


def modules_of(digest: dict) -> list[str]:
    """Every target module of the series (relpaths), from its summary."""
    return sorted({rel for rels in digest["modules"].values() for rel in rels})


def converge_to(command: str, target: CodeSource, asked: str | None, patches: list,
              **options: Any) -> tuple[ApplyDoc, int]:
    """:func:`converge` to ``patches`` with ``options``, as (document for the profile
    ``asked`` on the command line, exit code)."""
    try:
        result = converge(target, patches, **options)
    except PlanFailed as exc:
        return document(command, target, asked, None, exc, plan=exc.plan), exc.exit_code
    except PatchqError as exc:
        return document(command, target, asked, None, exc), exc.exit_code
    return document(command, target, asked, result), EXIT_OK
