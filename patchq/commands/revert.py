"""``patchq revert --all`` / ``--profile NAME``: restore byte-exact pristine files
(``patchq.apply/1``, as apply). One algorithm with apply (:mod:`patchq.env.converge`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchq.commands.apply import converge_to, document, modules_of, summary
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.documents import ApplyDoc


def run(target: CodeSource, series: Series, profile: str | None, force: bool) -> tuple[ApplyDoc, int]:
    """Revert ``profile``'s patches (None: all): the environment keeps the applied patches
    that are not in ``profile``. With ``force``, foreign edits are overwritten (a copy is
    kept): journalled files go back to patchq's pristine copy, and with ``--all`` any other
    target module of the series that someone else edited (e.g. the old sentinel scripts)
    goes back to the release wheel's bytes. Returns (document, exit code)."""
    from patchq.env.state import Journal, StateDir
    from patchq.errors import StateError

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
    modules = modules_of(digest)
    restore = modules if force and profile is None else []
    # a revert that leaves sentinels of the patches it reverts (a lost journal) is refused
    leftover = series.all_patch_ids() if profile is None else list(series.profile(profile).patches)
    return converge_to("revert", target, profile, keep, profile=remaining_profile, force=force,
                       summary=digest, restore_foreign=restore, modules=modules, leftover=leftover)
