"""``patchq fingerprint [--patch ID] [--releases SPEC] [--check]``: record anchor fingerprints.

A recorded release is a person's word (:mod:`patchq.authoring.fingerprints`), so this
records only where someone said so:

* no ``--releases``: the releases already recorded for each patch are refreshed (its
  fingerprints recomputed there; a release where it no longer verifies is dropped). A
  patch with none recorded is an error naming the fix: ``--releases X`` (the release it
  was authored against);
* ``--releases 0.29.0,0.30.0`` (an explicit list, downloaded once when not cached): those
  releases are recorded where the patch verifies, each with a ``[reviews]`` entry (``how
  = "fingerprint"``, who and when). Where ``check`` blocks the patch on a named release
  (``review``, ``possibly-upstreamed``, a conflict, ...), nothing at all is recorded: a
  fingerprint there would turn the verdict into ``applies`` without anyone having seen why
  it blocked. The command exits 1 naming each (patch, release, status); ``patchq review
  PATCH --vllm X`` shows the three-way view and records the release with the status it had;
* ``--releases '>=0.23'`` (a range among the cached releases): only the recorded releases
  inside it are refreshed; the others are listed under ``skipped`` (drift is blessed with
  ``patchq review PATCH --vllm X``).

``patchq.fingerprint/1``: ``ok``, ``check``, ``releases`` [versions computed], ``patches``
[ids], ``changed`` [anchor files written, or out of date with ``--check``], ``skipped``
{patch: [versions not recorded because nobody named them]} (added), ``blocked`` {patch:
{release: {``status``, ``reason``}}}: named releases where ``check`` blocks the patch, so
nothing was recorded (added), ``series``.
Exit 0; 1 with ``--check`` when a file is out of date, and when a named release is
blocked; 2 for an unknown patch or nothing to record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from patchq.authoring import fingerprints
from patchq.commands import version_arg
from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, UsageError
from patchq.series import Series
from patchq.vllmdist import releases

if TYPE_CHECKING:
    from patchq.documents import FingerprintDoc

SCHEMA = "patchq.fingerprint/1"


def is_explicit(spec: str | None) -> bool:
    """True for a comma list of versions (not a range)."""
    return bool(spec) and not any(op in spec for op in "<>=!~")  # type: ignore[operator]


def select_releases(spec: str | None) -> list[str]:
    """The versions to record: an explicit list as given, else the cached ones (filtered by a range).

    Raises:
        UsageError: a malformed version or range (exit 2, as for ``matrix``).
    """
    if is_explicit(spec):
        listed = [v.strip() for v in spec.split(",") if v.strip()]  # type: ignore[union-attr]
        for v in listed:
            version_arg(v, "--releases")
        return listed
    cached = fingerprints.cached_versions()
    if not spec:
        return cached
    try:
        return [str(v) for v in releases.filter_releases(cached, spec)]
    except releases.ReleaseError as exc:  # a malformed range is the user's input, not a missing release
        raise UsageError(str(exc)) from None


def run(series: Series, patches: list[str], spec: str | None, check: bool = False,
        by: str | None = None) -> tuple[FingerprintDoc, int]:
    """Record (or ``check``) fingerprints. Returns (document, exit code).

    Raises:
        UsageError: an unknown patch id, no release selected, or (without ``--releases``)
            a patch with no recorded release.
    """
    known = series.all_patch_ids()
    unknown = [p for p in patches if p not in known]
    if unknown:
        raise UsageError(f"unknown patch(es) {', '.join(unknown)}; known: {', '.join(known)}")
    ids = patches or known
    explicit = is_explicit(spec)
    recorded = {pid: fingerprints.recorded_versions(series.patch(pid)) for pid in ids}
    versions = _versions(series, recorded, spec, named=bool(patches))
    if explicit:  # a person named these releases: record them for every patch, reviewed
        only = {pid: set(versions) for pid in ids}
        review = None if check else fingerprints.review_entry("fingerprint", by, series_root=series.root)
        blocked = {} if check else blocking_rows(series, ids, versions)
        if blocked:  # naming a release is not a review of what check blocks there: nothing written
            return _document(series, ids, check, [], {}, {}, blocked), EXIT_PATCH_FAILED
    else:  # refresh what was recorded, inside the range
        only = {pid: recorded[pid] & set(versions) for pid in ids}
        review = None
    skipped = _skipped(only, versions) if not explicit and spec else {}
    computed = sorted({v for vs in only.values() for v in vs}, key=releases.Version)
    changed = fingerprints.record(series, computed, write=not check, patch_ids=ids, only=only, review=review) \
        if computed else {}
    doc = _document(series, ids, check, computed, changed, skipped, {})
    return doc, EXIT_PATCH_FAILED if (check and changed) else EXIT_OK


def _document(series: Series, ids: list[str], check: bool, computed: list[str], changed: Mapping,
              skipped: dict[str, list[str]], blocked: dict[str, dict[str, dict[str, str]]]) -> FingerprintDoc:
    """The ``patchq.fingerprint/1`` document (module docstring)."""
    return {"schema": SCHEMA, "ok": not (check and changed) and not blocked, "check": check, "releases": computed,
            "patches": ids, "changed": sorted(str(p) for p in changed), "skipped": skipped, "blocked": blocked,
            "series": series.location.as_json() if series.location else None}


def blocking_rows(series: Series, ids: list[str], versions: list[str]) -> dict[str, dict[str, dict[str, str]]]:
    """patch id -> {release: {``status``, ``reason``}} for the ``ids`` that ``patchq check``
    blocks on each of ``versions`` (inside their applies-range), the series' patches
    checked together as :func:`patchq.authoring.fingerprints.compute` plans them.

    Raises:
        TargetNotFound: a release cannot be had. SeriesError: broken series data.
    """
    from packaging.version import Version

    from patchq.compat import check as checking
    from patchq.vllmdist.sources import release_source

    patches = [series.patch(pid) for pid in series.all_patch_ids()]
    wanted = set(ids)
    out: dict[str, dict[str, dict[str, str]]] = {}
    for version in versions:
        if not any(p.id in wanted and p.anchors and Version(version) in p.applies for p in patches):
            continue
        for patch, row in zip(patches, checking.check(release_source(version), patches), strict=True):
            if patch.id in wanted and row.blocking:
                out.setdefault(patch.id, {})[version] = {"status": row.status, "reason": row.reason}
    return out


def _skipped(only: dict[str, set[str]], versions: list[str]) -> dict[str, list[str]]:
    """patch id -> the selected ``versions`` not recorded for it (nobody named them), for
    the patches with any."""
    skipped = {pid: [v for v in versions if v not in only[pid]] for pid in only}
    return {k: v for k, v in skipped.items() if v}


def _versions(series: Series, recorded: dict[str, set[str]], spec: str | None, named: bool) -> list[str]:
    """The releases selected: ``spec``'s, else every release recorded for the patches
    (``recorded``: id -> versions).

    Raises:
        UsageError: none selected, or (without ``spec``) a patch the user ``named`` has no
            recorded release.
    """
    if not spec:
        bare = [pid for pid in recorded if not recorded[pid] and series.patch(pid).anchors]
        if bare and named:
            raise UsageError(f"no reviewed release recorded for {', '.join(bare)}: name the release it was "
                             f"authored against (--releases X.Y.Z)")
        versions = sorted({v for vs in recorded.values() for v in vs}, key=releases.Version)
    else:
        versions = select_releases(spec)
    if not versions:
        raise UsageError(f"no release selected ({spec or 'nothing recorded yet'}); pass --releases X.Y.Z")
    return versions


def render_text(doc: FingerprintDoc) -> str:
    """What was recorded (or is out of date), what was not recorded because nobody named
    it, or why nothing was recorded (a named release where ``check`` blocks)."""
    if doc.get("blocked"):
        from patchq.report import next_line

        lines = [f"nothing recorded: check blocks {len(doc['blocked'])} patch(es) on a named release "
                 f"(a fingerprint there would bless what nobody reviewed)"]
        for pid, by_release in sorted(doc["blocked"].items()):
            for version, row in by_release.items():
                lines.append(f"  {pid} on {version}: {row['status']}: {row['reason']}")
        first, version = next((pid, v) for pid, vs in sorted(doc["blocked"].items()) for v in vs)
        lines.append(next_line(f"`patchq review {first} --vllm {version}` shows why and records the release "
                               f"when you accept it"))
        return "\n".join(lines) + "\n"
    verb = "out of date" if doc["check"] else "wrote"
    span = f" ({doc['releases'][0]} .. {doc['releases'][-1]})" if doc["releases"] else ""
    lines = [f"fingerprints of {', '.join(doc['patches'])} on {len(doc['releases'])} release(s){span}"]
    lines += [f"  {verb} {p}" for p in doc["changed"]] or ["  up to date"]
    for pid, vs in sorted(doc.get("skipped", {}).items()):
        lines.append(f"  {pid}: not recorded on {', '.join(vs)} (never reviewed there: name a release with "
                     f"--releases X, or run patchq review {pid} --vllm X)")
    if doc["check"] and doc["changed"]:
        from patchq.report import next_line

        lines.append(next_line("`patchq fingerprint` (without --check) writes them"))
    return "\n".join(lines) + "\n"
