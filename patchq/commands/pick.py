"""``--patch ID`` (repeatable) on ``apply``, ``revert``, ``diff`` and ``check``: one patch at a time.

Like quilt's push and pop of a named patch: ``apply --patch X`` makes the environment
carry the patches it carries now plus X, ``revert --patch X`` the ones it carries minus
X (series order either way; the journal records the profile when the result is exactly
one, else none). ``diff --patch X`` and ``check --patch X`` look at X alone (on the
pristine files). The documents are those of the commands (``patchq.apply/1``,
``patchq.diff/1``, ``patchq.check/1``); ``profile`` is null and ``patch_ids`` (an added
field) lists the ids given, which the text header names (``check --patch X``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchq.errors import EXIT_OK, UsageError
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.documents import ApplyDoc, CheckDoc
    from patchq.plan.results import Plan


def chosen(series: Series, ids: list[str]) -> list:
    """The patches ``ids`` in series order. Raises UsageError for an unknown id."""
    known = series.all_patch_ids()
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise UsageError(f"unknown patch(es) {', '.join(unknown)}; known: {', '.join(known)}")
    return [series.patch(pid) for pid in known if pid in ids]


def _profile_of(series: Series, ids: list[str]) -> str | None:
    for name, prof in series.profiles.items():
        if list(prof.patches) == ids:
            return name
    return None


def push_pop(command: str, target: CodeSource, series: Series, ids: list[str],
             force: bool = False) -> tuple[ApplyDoc, int]:
    """``apply --patch`` (``command`` ``apply``) or ``revert --patch`` (``revert``)."""
    doc, code = _push_pop(command, target, series, ids, force)
    doc["patch_ids"] = list(ids)
    return doc, code


def _push_pop(command: str, target: CodeSource, series: Series, ids: list[str],
              force: bool) -> tuple[ApplyDoc, int]:
    from patchq.commands import apply as apply_cmd
    from patchq.env.converge import PlanFailed, converge
    from patchq.env.state import StateDir
    from patchq.errors import PatchqError

    chosen(series, ids)
    try:
        applied = set(StateDir(target.root).read().patches)
    except PatchqError as exc:
        return apply_cmd.document(command, target, None, None, exc), exc.exit_code
    foreign = sorted(applied - set(series.all_patch_ids()))
    if foreign:
        raise UsageError(f"the environment carries patches this series does not have ({', '.join(foreign)}): "
                         f"another series applied them; `patchq apply --profile NAME --replace` replaces them, "
                         f"`patchq revert --all` takes them out")
    want_ids = applied | set(ids) if command == "apply" else applied - set(ids)
    want = [series.patch(pid) for pid in series.all_patch_ids() if pid in want_ids]
    profile = _profile_of(series, [p.id for p in want])
    try:
        result = converge(target, want, profile=profile, force=force, summary=apply_cmd.summary(series),
                          series_ref=apply_cmd.series_ref(series), replace=True)  # every live patch is this series
    except PlanFailed as exc:
        return apply_cmd.document(command, target, None, None, exc, plan=exc.plan), exc.exit_code
    except PatchqError as exc:
        return apply_cmd.document(command, target, None, None, exc), exc.exit_code
    return apply_cmd.document(command, target, None, result), EXIT_OK


def plan_alone(target: CodeSource, series: Series, ids: list[str]) -> Plan:
    """The plan of the chosen patches alone on ``target``'s pristine files."""
    from patchq.compat.check import pristine_reader
    from patchq.plan import engine

    return engine.plan(target, chosen(series, ids), read=pristine_reader(target))


def check(target: CodeSource, series: Series, ids: list[str]) -> tuple[CheckDoc, int]:
    """``check --patch``: the chosen patches checked alone."""
    from patchq.compat import check as checking

    doc = checking.document(target, None, checking.check(target, chosen(series, ids)))
    doc["patch_ids"] = list(ids)
    return doc, doc["exit_code"]
