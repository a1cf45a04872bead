"""``patchq apply --profile NAME`` and ``patchq revert``: converge, then report."""

from __future__ import annotations

from patchq import report
from patchq.env.converge import ConvergeResult, PlanFailed, converge
from patchq.errors import EXIT_OK, PatchqError
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

SCHEMA = "patchq.apply/1"


def document(command: str, target: CodeSource, profile: str | None, result: ConvergeResult | None,
             error: PatchqError | None = None, plan=None) -> dict:
    """The ``patchq.apply/1`` document for apply and revert."""
    plan = result.plan if result else plan
    return {
        "schema": SCHEMA,
        "command": command,
        "ok": error is None,
        "error": str(error) if error else None,
        "noop": bool(result and result.noop),
        "profile": profile,
        "vllm": {"version": str(target.version), "site_packages": str(target.root), "dist": target.dist},
        "patches": report.patch_rows(plan) if plan else [],
        "written": result.written if result else [],
        "restored": result.restored if result else [],
        "added": result.added if result else [],
        "removed": result.removed if result else [],
        "foreign_kept": result.foreign_kept if result else {},
        "recovered": result.recovered if result else [],
    }


def summary(series: Series) -> dict:
    """The series summary cached in the journal (see :func:`patchq.hashing.series_summary`)."""
    from patchq.hashing import series_summary

    return series_summary(series.root, series.anchors_root, syntax=True)  # status reads syntax_errors from it


def apply(target: CodeSource, series: Series, profile: str, strict: bool = False) -> tuple[dict, int]:
    """Make ``target`` carry exactly ``profile``'s patches. Returns (document, exit code).

    ``strict``: an upstreamed patch fails instead of being skipped (``apply --strict``).
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
                       summary=digest, modules=modules_of(digest), strict=strict)


def modules_of(digest: dict) -> list[str]:
    """Every target module of the series (relpaths), from its summary."""
    return sorted({rel for rels in digest["modules"].values() for rel in rels})


def converge_to(command: str, target: CodeSource, asked: str | None, patches: list,
              **options) -> tuple[dict, int]:
    """:func:`converge` to ``patches`` with ``options``, as (document for the profile
    ``asked`` on the command line, exit code)."""
    try:
        result = converge(target, patches, **options)
    except PlanFailed as exc:
        return document(command, target, asked, None, exc, plan=exc.plan), exc.exit_code
    except PatchqError as exc:
        return document(command, target, asked, None, exc), exc.exit_code
    return document(command, target, asked, result), EXIT_OK
