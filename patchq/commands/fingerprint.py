"""``patchq fingerprint [--patch ID] [--releases SPEC] [--check]``: record anchor fingerprints.

Each anchor's fingerprint is recorded on every release where its patch plans ``ok``,
only for releases inside the patch's applies-range (:mod:`patchq.authoring.fingerprints`).
Releases: the cached release wheels (default), a range among them, or an explicit list
(downloaded once when not cached).

``patchq.fingerprint/1``: ``ok``, ``check``, ``releases`` [versions], ``patches`` [ids],
``changed`` [anchor files written, or out of date with ``--check``], ``series``.
Exit 0; 1 with ``--check`` when a file is out of date; 2 for an unknown patch.
"""

from __future__ import annotations

from patchq.authoring import fingerprints
from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, UsageError
from patchq.series import Series
from patchq.vllmdist import releases

SCHEMA = "patchq.fingerprint/1"


def select_releases(spec: str | None) -> list[str]:
    """The versions to record: cached ones, filtered by a range, or an explicit list."""
    if spec and not any(op in spec for op in "<>=!~"):
        return [v.strip() for v in spec.split(",") if v.strip()]
    cached = fingerprints.cached_versions()
    return [str(v) for v in releases.filter_releases(cached, spec)] if spec else cached


def run(series: Series, patches: list[str], spec: str | None, check: bool = False) -> tuple[dict, int]:
    """Record (or ``check``) fingerprints. Returns (document, exit code).

    Raises:
        UsageError: an unknown patch id, or no release selected.
    """
    known = series.all_patch_ids()
    unknown = [p for p in patches if p not in known]
    if unknown:
        raise UsageError(f"unknown patch(es) {', '.join(unknown)}; known: {', '.join(known)}")
    versions = select_releases(spec)
    if not versions:
        raise UsageError(f"no release selected ({spec or 'no cached release wheel'}); pass --releases X.Y.Z")
    changed = fingerprints.record(series, versions, write=not check, patch_ids=patches or None)
    doc = {"schema": SCHEMA, "ok": not (check and changed), "check": check, "releases": versions,
           "patches": patches or known, "changed": sorted(str(p) for p in changed),
           "series": series.location.as_json() if series.location else None}
    return doc, EXIT_PATCH_FAILED if (check and changed) else EXIT_OK


def render_text(doc: dict) -> str:
    """What was recorded (or is out of date)."""
    verb = "out of date" if doc["check"] else "wrote"
    lines = [f"fingerprints of {', '.join(doc['patches'])} on {len(doc['releases'])} release(s) "
             f"({doc['releases'][0]} .. {doc['releases'][-1]})"]
    lines += [f"  {verb} {p}" for p in doc["changed"]] or ["  up to date"]
    return "\n".join(lines) + "\n"
