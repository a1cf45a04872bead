"""``patchq check``: what each patch of a profile does on a vLLM (schema in :mod:`patchq.compat.check`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchq.compat import check as checking
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.documents import CheckDoc


def run(target: CodeSource, series: Series, profile: str | None) -> tuple[CheckDoc, int]:
    """Check ``profile``'s patches (None: every patch of the series, each in the context of
    its own profiles: :func:`patchq.compat.views.check_all`) on ``target``.

    Returns:
        (the ``patchq.check/1`` document, exit code: 1 when any row is blocking, else 0).
    Raises:
        UsageError: unknown profile. SeriesError: broken series data.
    """
    # relations hook: a profile's patches come validated against their declared relations
    if profile:
        rows = checking.check(target, series.patches_of(profile), keep_plan=True)  # apply reuses it (checkplan)
    else:  # each patch in the context of its own profiles, never stacked on other profiles' patches
        from patchq.compat.views import check_all

        rows = check_all(target, series)
    doc = checking.document(target, profile, rows)
    doc["newest_release"] = newer_release(target)
    return doc, doc["exit_code"]


def newer_release(target: CodeSource) -> str | None:
    """The newest release in the cached release list when it is newer than the installed vLLM
    ``target`` (no network: the list ``matrix``, ``upgrade`` or ``cache refresh`` fetched last),
    else None; None for a release or source tree."""
    from patchq.vllmdist import releases

    if target.kind != "installed":
        return None
    known = releases.cached_list(target.dist or "vllm")
    return str(known[-1]) if known and known[-1] > target.version else None

