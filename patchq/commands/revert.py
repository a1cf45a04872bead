"""``patchq revert --all`` / ``--profile NAME``: restore byte-exact pristine files
(``patchq.apply/1``, as apply). One algorithm with apply (:mod:`patchq.env.converge`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchq.commands.apply import converge_to, document, modules_of, summary
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.documents import ApplyDoc


def run(target: CodeSource, series: Series | None, profile: str | None, force: bool) -> tuple[ApplyDoc, int]:
    """Revert ``profile``'s patches (None: all): the environment keeps the applied patches
    that are not in ``profile``. With ``force``, foreign edits are overwritten (a copy is
    kept): journalled files go back to patchq's pristine copy, and with ``--all`` any other
    target module of the series that someone else edited (e.g. the old sentinel scripts)
    goes back to the release wheel's bytes.

    ``series`` None (only with ``profile`` None and ``force``: ``revert --all --force``
    when the series cannot be read, :func:`load_for_recovery`): the files the journal and
    the pristine copies name go back to their RECORD-verified bytes; nothing of the series
    is read. Returns (document, exit code)."""
    from patchq.env.state import Journal, StateDir
    from patchq.errors import StateError

    try:
        journal = StateDir(target.root).read()
    except StateError as exc:
        if not force:
            return document("revert", target, profile, None, exc), exc.exit_code
        journal = Journal()  # converge sets the damaged journal aside
    if series is None:
        assert profile is None and force, "only revert --all --force runs without the series"
        modules = recovery_modules(target, journal)
        return converge_to("revert", target, None, [], profile=None, force=True, restore_foreign=modules,
                           modules=modules, leftover=list(journal.patches))
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
    modules = modules_of(digest)
    if force and profile is None:  # with what the journal and the pristine copies name (an anchors file may not read)
        modules = sorted(set(modules) | set(recovery_modules(target, journal)))
    restore = modules if force and profile is None else []
    # a revert that leaves sentinels of the patches it reverts (a lost journal) is refused
    leftover = series.all_patch_ids() if profile is None else list(series.profile(profile).patches)
    return converge_to("revert", target, profile, keep, profile=remaining_profile, force=force,
                       summary=digest, restore_foreign=restore, modules=modules, leftover=leftover)


def load_for_recovery(series_dir: str | None) -> tuple[Series | None, str | None]:
    """The series for ``revert --all --force``, or (None, why) when it cannot be read: a
    malformed ``profiles.toml`` or anchors file, a refused walked-up config, a damaged
    series transaction must not block the documented recovery, which needs only the
    journal and the pristine copies (docs/recovery.md)."""
    from patchq import series as series_mod
    from patchq.errors import PatchqError

    try:
        loaded = series_mod.load(series_dir)
        summary(loaded)  # every anchors file and series file it reads must read
    except PatchqError as exc:
        return None, str(exc)
    return loaded, None


def recovery_modules(target: CodeSource, journal) -> list[str]:
    """The files a series-less ``revert --all --force`` restores: the journal's, and each
    file with a pristine copy in the state directory, that is a RECORD path of the vLLM
    distribution (relpaths, sorted)."""
    from patchq.env import layout
    from patchq.env.state import StateDir

    record = target.record()
    found = set(journal.files) | set(StateDir(target.root).pristine_relpaths())
    return sorted(r for r in found if r in record and layout.relpath_problem(r) is None)
