"""``patchq upstream sync`` and ``patchq upstream log PATCH``.

``sync`` builds or extends the releases repository (:func:`patchq.authoring.upstream.sync`), or,
with ``--repo``, checks that a clone has the wanted ``vX.Y.Z`` tags. ``log`` follows each
anchored definition of a patch through the tagged releases
(:func:`patchq.authoring.upstream.definition_history`) and lists the releases where it changed,
with the diff of just that definition and, for a clone, the commits that touched it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from patchq.authoring import upstream
from patchq.errors import EXIT_OK, UsageError
from patchq.model import AnchorSpec
from patchq.series import Series
from patchq.vllmdist import releases

if TYPE_CHECKING:
    from pathlib import Path

    from patchq.documents import UpstreamLogDoc, UpstreamSyncDoc

SYNC_SCHEMA = "patchq.upstream-sync/1"
LOG_SCHEMA = "patchq.upstream-log/1"


def sync(spec: str | None, repo: str | None = None) -> tuple[UpstreamSyncDoc, int]:
    """Sync releases (``spec``: a list or a specifier, as ``--releases``). Returns (document, code).

    Raises:
        UsageError: no spec for the releases repository, or a malformed one.
        TargetNotFound: a clone lacks a wanted tag, or a release cannot be had.
    """
    if repo is not None:
        up = upstream.open_upstream(repo)
        tagged = up.versions()
        wanted = upstream.select_versions(up, spec) if spec else tagged
        return _sync_document("clone", up.path, [str(v) for v in tagged], [str(v) for v in wanted],
                              skipped=[str(v) for v in wanted]), EXIT_OK
    if not spec:
        raise UsageError("give --releases SPEC (e.g. 0.23.0,0.24.0,0.26.0 or '>=0.23,<=0.26') or --repo PATH")
    try:
        versions = _releases(spec)
    except releases.ReleaseError as exc:
        raise UsageError(str(exc)) from None
    if not versions:
        raise UsageError(f"--releases {spec!r} selects no release")
    result = upstream.sync(versions)
    return _sync_document("releases", result.path, result.releases, [str(v) for v in versions], added=result.added,
                          skipped=result.skipped, rewritten=result.rewritten, seconds=result.seconds), EXIT_OK


def _sync_document(kind: str, path: Path, tagged: list[str], selected: list[str], *, added: list[str] | None = None,
                   skipped: list[str] | None = None, rewritten: list[str] | None = None,
                   seconds: dict[str, float] | None = None) -> UpstreamSyncDoc:
    """The ``patchq.upstream-sync/1`` document: the history of ``kind`` (``releases``, or a
    ``clone`` given with --repo) at ``path``, its ``tagged`` releases, those ``selected``,
    and what the sync did (:class:`patchq.authoring.upstream.SyncResult`)."""
    return {"schema": SYNC_SCHEMA, "kind": kind, "path": str(path), "releases": tagged, "added": added or [],
            "skipped": skipped or [], "rewritten": rewritten or [], "seconds": seconds or {}, "selected": selected}


def _releases(spec: str) -> list:
    """An explicit list of cached releases is taken as is (no index query); anything
    else goes through :func:`patchq.vllmdist.releases.list_releases` (PyPI, cached an hour)."""
    if not any(op in spec for op in "<>=!~"):
        try:
            return releases.filter_releases(releases.cached_releases(), spec)
        except releases.ReleaseError:
            pass
    return releases.list_releases(spec)



def log(series: Series, patch_id: str, spec: str | None = None, repo: str | None = None,
        commits: bool | None = None) -> tuple[UpstreamLogDoc, int]:
    """The history of each anchored definition of a patch. Returns (document, code).

    Raises:
        TargetNotFound: no upstream history (sync first) or no such clone.
        UsageError: an unknown patch, or a spec selecting no tagged release.
    """
    patch = series.patch(patch_id)
    up = upstream.open_upstream(repo)
    versions = upstream.select_versions(up, spec)
    if not versions:
        raise UsageError(f"--releases {spec!r} selects none of the tagged releases")
    seen: dict[tuple[str, str], list[str]] = {}
    for a in patch.anchors.values():
        seen.setdefault((a.module, a.qualname), []).append(a.id)
    defs = []
    for (module, qualname), ids in seen.items():
        spec_ = AnchorSpec(id=ids[0], module=module, qualname=qualname)
        history = upstream.definition_history(up, spec_, versions)
        entries = upstream.log_entries(up, history, with_commits=commits)
        present = {str(v): (s.relpath if isinstance(s, upstream.DefinitionAt) else s)
                   for v, s in history.states.items()}
        defs.append({"qualname": qualname, "module": module, "anchors": ids,
                     "releases": present, "changes": [asdict(e) for e in entries]})
    doc: UpstreamLogDoc = {"schema": LOG_SCHEMA, "patch": patch_id, "upstream": {"kind": up.kind, "path": str(up.path)},
                           "releases": [str(v) for v in versions], "definitions": defs}
    return doc, EXIT_OK

