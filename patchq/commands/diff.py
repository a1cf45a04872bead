"""``patchq diff``: the unified diff of what apply changes (or changed) (``patchq.diff/1``).

Fields: ``profile``, ``vllm``, ``files``, ``diff`` (the text, paths relative to
site-packages: ``git apply`` and ``patch -p1`` take it), ``patches`` (as in
``patchq.apply/1``). Without ``--profile`` the profile is the one the installed
environment carries (its journal). ``diff --release X --write`` is
:mod:`patchq.commands.diffwrite`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchq.errors import EXIT_OK, UsageError

if TYPE_CHECKING:
    from patchq.documents import DiffDoc
    from patchq.plan.results import Plan
    from patchq.series import Series
    from patchq.vllmdist.sources import CodeSource

SCHEMA = "patchq.diff/1"


def applied_profile(site_packages: str | None, python: str | None) -> str:
    """The profile the installed environment carries, from its journal.

    Raises:
        UsageError: no vLLM there, or no profile applied in it. StateError: the journal
            is damaged.
    """
    from patchq.env.status import read_journal, state_root
    from patchq.errors import TargetNotFound
    from patchq.vllmdist import sources

    try:
        target = sources.installed(site_packages, python)
    except TargetNotFound as exc:
        raise UsageError(f"give --profile NAME ({exc}, so no applied profile to default to)") from None
    profile = read_journal(state_root(str(target.root))).get("profile")
    if not profile:
        raise UsageError(f"no profile is applied in {target.root}: give --profile NAME")
    return profile


def run(series: Series, profile: str | None, *, site_packages: str | None = None, python: str | None = None,
        vllm: str | None = None, source: str | None = None,
        patch_ids: list[str] | None = None) -> tuple[DiffDoc, int]:
    """Plan ``profile`` (None: the applied one) on the installed vLLM (without writing),
    on release ``vllm`` or on the source tree ``source``; with ``patch_ids``, those
    patches alone (:func:`patchq.commands.pick.plan_alone`). Returns (document, 0).

    Raises:
        UsageError: unknown or no profile. TargetNotFound: no vLLM, release or tree.
        PlanFailed: a patch fails there (exit 1, nothing rendered).
        ForeignEditError: an installed target file was edited by someone else.
    """
    from patchq.env.converge import PlanFailed, converge
    from patchq.plan import engine
    from patchq.vllmdist import sources

    if patch_ids:
        from patchq.commands import pick

        target = (sources.release_source(vllm) if vllm else sources.source_tree(source) if source
                  else sources.installed(site_packages, python))
        plan = pick.plan_alone(target, series, patch_ids)
        if not plan.ok:
            raise PlanFailed(plan)
        return _document(None, target, plan), EXIT_OK
    profile = profile or applied_profile(site_packages, python)
    patches = series.patches_of(profile)
    if vllm or source:
        if vllm:
            target = sources.release_source(vllm)
        else:
            assert source  # vllm or source
            target = sources.source_tree(source)
        plan = engine.plan(target, patches)
        if not plan.ok:
            raise PlanFailed(plan)
    else:
        target = sources.installed(site_packages, python)
        plan = converge(target, patches, profile=profile, dry_run=True).plan
    return _document(profile, target, plan), EXIT_OK


def _document(profile: str | None, target: CodeSource, plan: Plan) -> DiffDoc:
    """The ``patchq.diff/1`` document of ``plan`` (of ``profile``; None: ``--patch``)."""
    from patchq import report
    from patchq.plan import diffs

    return {"schema": SCHEMA, "profile": profile, "vllm": str(target.version), "files": sorted(plan.patched),
            "diff": diffs.unified_all(plan.pristine, plan.patched), "patches": report.patch_rows(plan)}
