"""``patchq status`` (``patchq.status/1``, :mod:`patchq.env.status`) and ``status
--runtime`` (``patchq.runtime-status/1``, :mod:`patchq.env.runtime_status`).

Standard library only (no libcst, no typer): the fast path answers ``status`` through
:func:`run` too.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path imports this)
if TYPE_CHECKING:
    from patchq.documents import RuntimeStatusDoc, StatusDoc


def run(site_packages: str | None = None, python: str | None = None,
        series_dir: str | None = None) -> tuple[StatusDoc, int]:
    """Which patches are live in the environment, and each target file's state.

    Returns:
        (document, 0; 7 when a patch is stale or foreign, a file modified, or a write
        pending).
    Raises:
        TargetNotFound: no vLLM there. SeriesError: no series. StateError: damaged journal.
    """
    from patchq import discovery
    from patchq.env import status as st
    from patchq.vllmdist import sources

    target = sources.installed(site_packages, python)
    loc = discovery.find(series_dir)
    doc: StatusDoc = st.collect(str(target.root), str(loc.series), str(loc.anchors))
    doc["series"] = loc.as_json()
    return doc, st.exit_code(doc)


def runtime(series_dir: str | None = None) -> tuple[RuntimeStatusDoc, int]:
    """The patches live in running ``patchq run`` processes, per pid.

    Returns:
        (document, 0; 7 when a process runs a patch set the series has changed since: a
        patch's hash, or the patches its profile lists).
    """
    from patchq import series as series_mod
    from patchq.env import hookdir, runtime_status
    from patchq.errors import PatchqError
    from patchq.hashing import series_summary

    try:
        root = series_mod.series_dir(series_dir)
        summary = series_summary(root, series_mod.anchors_dir(root))
        hashes, profiles = summary["hashes"], summary["profiles"]
    except PatchqError:
        hashes = profiles = None  # no series here: report the processes without the stale check
    doc = runtime_status.collect(hookdir.runtime_dir(), hashes, profiles=profiles)
    return doc, runtime_status.exit_code(doc)
