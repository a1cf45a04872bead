"""``patchq apply --profile NAME`` and ``patchq revert``: converge, then report."""

from __future__ import annotations

from patchq import report
from patchq.env.converge import ConvergeResult, PlanFailed, converge
from patchq.errors import EXIT_OK, PatchqError
from patchq.series import Series
from patchq.dist.sources import CodeSource

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
        "vllm": {"version": str(target.version), "site_packages": str(target.root)},
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

    return series_summary(series.root, series.anchors_root)


def apply(target: CodeSource, series: Series, profile: str, strict: bool = False) -> tuple[dict, int]:
    """Make ``target`` carry exactly ``profile``'s patches. Returns (document, exit code).

    ``strict`` (relations hook): an upstreamed patch fails instead of being skipped."""
    return _converge("apply", target, profile, series.patches_of(profile), profile=profile,
                     summary=summary(series), strict=strict)


def _converge(command: str, target: CodeSource, asked: str | None, patches: list,
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


def revert(target: CodeSource, series: Series, profile: str | None, force: bool) -> tuple[dict, int]:
    """Revert ``profile``'s patches (None: all): the environment keeps the applied patches
    that are not in ``profile``. With ``force``, foreign edits are overwritten (a copy is
    kept): journalled files go back to patchq's pristine copy, and with ``--all`` any other
    target module of the series that someone else edited (e.g. the old sentinel scripts)
    goes back to the release wheel's bytes. Returns (document, exit code)."""
    from patchq.errors import StateError
    from patchq.env.state import Journal, StateDir

    try:
        journal = StateDir(target.root).read()
    except StateError as exc:
        if not force:
            return document("revert", target, profile, None, exc), exc.exit_code
        journal = Journal()  # converge sets the damaged journal aside
    if profile is None:
        keep_ids: list[str] = []
        remaining_profile = None
    else:
        drop = set(series.profile(profile).patches)
        keep_ids = [pid for pid in journal.patches if pid not in drop]
        # the environment still carries the recorded profile only if none of its patches goes
        recorded = series.profiles.get(journal.profile) if journal.profile else None
        remaining_profile = journal.profile if recorded and not drop & set(recorded.patches) else None
    keep = [series.patch(pid) for pid in series.all_patch_ids() if pid in keep_ids]
    digest = summary(series)
    restore = sorted({rel for rels in digest["modules"].values() for rel in rels}) if force and profile is None else []
    return _converge("revert", target, profile, keep, profile=remaining_profile, force=force,
                     summary=digest, restore_foreign=restore)
