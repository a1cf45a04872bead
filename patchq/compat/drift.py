"""Drift: how an anchored definition changed since the releases it was verified on.

An anchor's ``fingerprints`` (``anchors/<patch>.toml``) record the definition's
fingerprint on verified releases. A target whose fingerprint matches none *drifted*;
its ``drift`` entry is the unified diff of the definition's text between the nearest
verified release (read from patchq's release cache, never downloaded) and the target.
Definitions are found through :mod:`patchq.plan.definitions` (no module is parsed
when the release's index is cached).
"""

from __future__ import annotations

import difflib
import functools
import textwrap
from collections.abc import Iterable

from packaging.version import Version

from patchq.model import AnchorSpec, Patch
from patchq.plan import definitions, engine
from patchq.plan.definitions import definition_text  # noqa: F401 - re-exported
from patchq.report import definition_label
from patchq.vllmdist.sources import CodeSource


def recorded_fingerprints(patch: Patch, qualname: str, relpath: str | None = None) -> dict[str, str]:
    """version -> fingerprint recorded for ``qualname`` by any anchor of ``patch``.

    A fingerprint belongs to the definition, not to the anchor: a variant's new anchor
    (say, at a moved module) is verified by an older anchor's record of the same
    definition. Records of the anchors that name ``qualname`` are merged. A module-level
    anchor's definition is its module: with ``relpath`` (the file the anchor resolved
    to), only the module-level anchors of that file count, so two modules of one patch
    never verify each other (without ``relpath``: every one).
    """
    out: dict[str, str] = {}
    for spec in patch.anchors.values():
        if spec.qualname != qualname:
            continue
        if spec.is_module and relpath is not None and relpath not in spec.module_paths:
            continue
        out.update(spec.fingerprints)
    return out


def verified_release(patch: Patch, qualname: str, fp: str, version: Version,
                     relpath: str | None = None) -> str | None:
    """The recorded release nearest to ``version`` (:func:`nearest_verified`) whose
    fingerprint of ``qualname`` (in ``relpath``, for a module-level anchor:
    :func:`recorded_fingerprints`) equals ``fp``, or None."""
    hits = [v for v, f in recorded_fingerprints(patch, qualname, relpath).items() if f == fp]
    return nearest_verified(hits, version)


def nearest_verified(known_versions: Iterable[str], version: Version) -> str | None:
    """The recorded release nearest to ``version``: the newest at or below it, else the oldest above."""
    known = sorted(known_versions, key=Version)
    below = [v for v in known if Version(v) <= version]
    if below:
        return below[-1]
    return known[0] if known else None


#: (cache root, version) of cached releases that could not be read (the verdict cache keeps no answer then)
_BROKEN: set[tuple[str, str]] = set()


@functools.lru_cache(maxsize=32)
def _cached_source(root: str, version: str) -> CodeSource | None:
    from patchq.errors import CacheError, ReadOnlyError
    from patchq.vllmdist import releases, sources

    if Version(version) not in releases.cached_releases():  # a whole wheel or a (partial-fetch) tree
        return None
    try:
        return sources.release_source(version)
    except (CacheError, ReadOnlyError):  # damaged and not fetched again, or held by `cache clean`: never a
        raise  # verdict without it (issue 38)
    except Exception:  # a release that cannot be read for another reason must not break a check
        _BROKEN.add((root, version))
        return None


def _release_source(version: str) -> CodeSource | None:
    """A release from patchq's cache only (never downloads); None when not cached (or
    cached but unreadable: :func:`patchq.compat.verdictcache.note_unreadable`). Memoized
    per cache root and version (``_release_source.cache_clear()`` forgets).

    Raises:
        CacheError: the cached tree is damaged (or another release's) and could not be
            fetched again: the check reports it (exit 3) instead of a verdict without it.
    """
    from patchq.vllmdist import releases

    root = str(releases.cache_dir())
    got = _cached_source(root, version)
    if got is None and (root, version) in _BROKEN:
        from patchq.compat.verdictcache import note_unreadable

        note_unreadable(version)
    return got


def _forget() -> None:
    _cached_source.cache_clear()
    _BROKEN.clear()


_release_source.cache_clear = _forget  # type: ignore[attr-defined]


def base_release(version: str) -> CodeSource | None:
    """A reviewed release to compare with: from patchq's cache, else fetched once (its
    ``.py`` files, as ``check --vllm`` does); None when it cannot be had (offline, not
    on the index: :func:`patchq.compat.verdictcache.note_unreadable`)."""
    cached = _release_source(version)
    if cached is not None:
        return cached
    from patchq.errors import CacheError, ReadOnlyError
    from patchq.vllmdist import sources

    try:
        return sources.release_source(version)
    except (CacheError, ReadOnlyError):
        raise
    except Exception:  # offline or not on the index: the caller blocks and says so
        from patchq.compat.verdictcache import note_unreadable

        note_unreadable(version)
        return None


def _definition_text(source: CodeSource, relpath: str, text: str, qualname: str) -> tuple[int, str] | None:
    """:func:`patchq.plan.definitions.definition_text` through ``source``'s index."""
    found = (definitions.for_source(source).text_index(relpath, text) or {}).get(qualname, [])
    if len(found) != 1:
        return None
    e = found[0]
    return e.start, textwrap.dedent(definitions.span_text(text, e.start, e.end))


def _find_reference(spec: AnchorSpec, ref: CodeSource, prefer: str) -> tuple[str, int, str] | None:
    """(relpath, line, text) of the anchored definition in a reference release: in
    ``prefer`` or the module hint, else the one file of the package that defines it once."""
    tried = []
    for rel in (prefer, *spec.module_paths):
        if rel in tried:
            continue
        tried.append(rel)
        text = ref.read_text(rel)
        found = _definition_text(ref, rel, text, spec.qualname) if text else None
        if found:
            return rel, found[0], found[1]
    per_file: dict[str, list] = {}
    for rel, entry in definitions.for_source(ref).where(spec.qualname):
        per_file.setdefault(rel, []).append(entry)
    hits = []
    for rel, entries in per_file.items():
        if len(entries) == 1:
            e = entries[0]
            span = definitions.span_text(ref.read_text(rel) or "", e.start, e.end)
            hits.append((rel, e.start, textwrap.dedent(span)))
    return hits[0] if len(hits) == 1 else None


def _module_reference(spec: AnchorSpec, ref: CodeSource, prefer: str) -> tuple[str, int, str] | None:
    """(relpath, 1, outline) of a module-level anchor's module in a reference release
    (:func:`patchq.plan.moduleview.outline`: the module's own statements, definition
    bodies cut), or None when its file is not there."""
    from patchq.plan import moduleview

    for rel in dict.fromkeys((prefer, *spec.module_paths)):
        text = ref.read_text(rel)
        if text is not None:
            return rel, 1, moduleview.outline(text)
    return None


def drift_entry(spec: AnchorSpec, anchor: engine.AnchorResult, target: CodeSource, target_text: str,
                known: Iterable[str] = ()) -> dict:
    """The ``drift`` item of an unverified anchor: the definition's diff from its nearest
    verified release to ``target`` (``diff`` is '' when they differ only in docstrings,
    or null with a ``note`` when no reference can be read). ``known``: the releases with a
    recorded fingerprint of the definition (:func:`recorded_fingerprints`)."""
    entry = {"anchor": anchor.anchor, "qualname": anchor.qualname, "path": anchor.relpath,
             "line": anchor.line, "base": None, "base_path": None, "base_line": None,
             "diff": None, "note": ""}
    base = nearest_verified(known, target.version)
    if base is None:
        entry["note"] = f"no verified release recorded for {spec.qualname} (anchor {spec.id}) in anchors/"
        return entry
    entry["base"] = base
    ref = _release_source(base)
    if ref is None:
        entry["note"] = f"vllm {base} is not in patchq's release cache: no diff"
        return entry
    if spec.is_module:  # the module's own statements (plan/moduleview.py), as its fingerprint sees them
        from patchq.plan import moduleview

        found = _module_reference(spec, ref, anchor.relpath)
        mine: tuple[int, str] | None = (1, moduleview.outline(target_text))
        what = "the module-level statements"
    else:
        found = _find_reference(spec, ref, anchor.relpath)
        mine = _definition_text(target, anchor.relpath, target_text, anchor.qualname)
        what = spec.qualname
    if found is None or mine is None:
        entry["note"] = f"{definition_label(spec.qualname, anchor.relpath)} not found once in vllm {base}: no diff"
        return entry
    rel, line, text = found
    entry["base_path"], entry["base_line"] = rel, line
    entry["diff"] = "".join(difflib.unified_diff(
        text.splitlines(keepends=True), mine[1].splitlines(keepends=True),
        f"{base}/{rel}:{line} {what}", f"{target.version}/{anchor.relpath}:{mine[0]} {what}"))
    return entry
