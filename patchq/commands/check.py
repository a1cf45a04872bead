"""``patchq check``: what each patch of a profile does on a vLLM (schema in :mod:`patchq.compat.check`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchq.compat import check as checking
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.documents import CheckDoc


def run(target: CodeSource, series: Series, profile: str | None) -> tuple[CheckDoc, int]:
    """Check ``profile``'s patches (None: every patch of the series) on ``target``.

    Returns:
        (the ``patchq.check/1`` document, exit code: 1 when any row is blocking, else 0).
    Raises:
        UsageError: unknown profile. SeriesError: broken series data.
    """
    # relations hook: a profile's patches come validated against their declared relations
    patches = series.patches_of(profile) if profile else [series.patch(pid) for pid in series.all_patch_ids()]
    rows = checking.check(target, patches, keep_plan=True)  # apply reuses the plan (compat/checkplan.py)
    doc = checking.document(target, profile, rows)
    return doc, doc["exit_code"]

