"""A content-addressed cache of ``check`` verdicts: a warm ``check`` or ``matrix`` does no work twice.

:func:`patchq.compat.check.check` of a list of patches on a **release** from patchq's
cache (``check --vllm X``, every release of ``matrix``) is a function of its inputs
only. Its rows (:class:`patchq.compat.check.PatchCheck`, everything the ``patchq.check/1``
row and the matrix's profile views read) are stored under ``<cache>/verdicts/`` and
served when every input is unchanged. The key (:func:`key`) holds every input that can
change a verdict:

* **patchq itself**: the sha256 of every ``.py`` file of the ``patchq`` package (the
  planner, the classification, the three-way and meaning checks, ``postcheck`` that
  series code calls; :func:`code_digest`), the Python minor version and the versions of
  libcst, pyflakes and packaging (they parse, check and compare versions);
* **the series**: the patch ids in order; per patch its hash, the sha256 of its series
  module, its anchors as loaded (module, qualname, pattern, count, **fingerprints**: they
  decide ``applies`` and the reviewed base releases) and its relations; the sha256 of
  every ``.py`` and ``.toml`` file beside its series module (helpers it may import,
  ``profiles.toml``);
* **the release**: its version and distribution, and the sha256 of its RECORD as
  verified against the tree's checksum (:func:`patchq.vllmdist.releases.verified_record`;
  every file of a release tree is checked against RECORD when read, so the RECORD digest
  names the content);
* **the other releases a check may read**: a drifted definition is compared with the
  nearest reviewed release, and the backward detection plans on the last verified one,
  both read from patchq's cache only when they are there. Those releases are among the
  versions of the recorded fingerprints, so the key holds, for each such version,
  whether its tree and its wheel are in the cache.

An entry also lists every file the check read from the release with its sha256; on load
each must equal the release's RECORD entry. A row that looked at a module of the stack's own
outside the release (:mod:`patchq.compat.foreign`: a module the patch's added code imports,
found on ``sys.path``) keeps where it was and its sha256 (``outside``); on load each must
stamp the same, found or not found as it was. **An entry is plain data** (format 2,
``verdicts/<k[:2]>/<k>.json``; :func:`patchq.vllmdist.cache.pack_entry`): the line
``patchq.verdict-cache/2 <sha256 of the body>``, then one JSON object: ``format``, ``key``,
``vllm``, ``reads`` ({relpath: sha256}) and ``rows`` (one object per patch, the fields of
:class:`~patchq.compat.check.PatchCheck`; ``touched`` as a sorted list). Loading builds
``PatchCheck`` from its field names and nothing else: no name in the data is imported or
called, so a planted entry cannot run code (format 1 was a pickle; its ``.pickle`` files are
never read). Rows that do not come back equal from JSON are not stored. A damaged entry (a
bit flip, a truncation: the body does not match its sha256) is a miss, and the check is
computed again; so is an entry owned by another user (not root) or writable by others, with
a one-line note (:func:`patchq.vllmdist.cache.read_entry`). An entry is not stored when a release the check needed could
not be read for another reason than its absence from the cache (offline, a damaged
entry that could not be fetched again: :func:`note_unreadable`), since that answer may
change without any input changing. Installed vLLMs and source trees are never cached
(their files change in place). ``PATCHQ_VERDICT_CACHE=0`` turns the cache off. Any error
of the cache itself falls back to checking: the cache is only a speed-up. An entry unused
for 30 days (a format-1 pickle included) is removed when another is stored beside it
(``patchq cache clean`` removes them all).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchq.model import Patch
from patchq.vllmdist import cache, releases
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.compat.check import PatchCheck

FORMAT = 2  # 1: a pickle behind its sha256; 2: JSON behind its sha256 (module docstring)
SCHEMA = f"patchq.verdict-cache/{FORMAT}"

_code_digest: str | None = None
_unreadable = releases.UNREADABLE  # the one list (plan/ and vllmdist/ note into it too)


def enabled(source: CodeSource) -> bool:
    """True when checks of ``source`` are cached: a release tree from patchq's cache,
    unless ``PATCHQ_VERDICT_CACHE=0``."""
    return source.kind == "release" and source.verify and os.environ.get("PATCHQ_VERDICT_CACHE", "1") != "0"


def note_unreadable(version: str) -> None:
    """A release the check needed could not be read although it may be readable later
    (offline, a failed fetch): the check's rows are not stored (module docstring;
    :func:`patchq.vllmdist.releases.note_unreadable`)."""
    releases.note_unreadable(version)


def code_digest() -> str:
    """sha256 hex over the bytes of every ``.py`` file of the ``patchq`` package (sorted by
    relative path), the Python minor version and the versions of libcst, pyflakes and
    packaging; computed once per process."""
    global _code_digest
    if _code_digest is None:
        import sys

        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256(f"py{sys.version_info[0]}.{sys.version_info[1]}\0".encode())
        for dist in ("libcst", "pyflakes", "packaging"):
            h.update(f"{dist}={_dist_version(dist)}\0".encode())
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if "__pycache__" not in p.parts)
        for rel in files:
            h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
        _code_digest = h.hexdigest()
    return _code_digest


def _dist_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def _series_files(dirs: Iterable[Path]) -> list[tuple[str, str]]:
    """(path, sha256) of every ``.py``/``.toml`` file in each directory, sorted."""
    out = []
    for d in sorted(set(dirs)):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            out.append((str(d), "-"))
            continue
        for name in names:
            if name.endswith((".py", ".toml")):
                path = d / name
                try:
                    out.append((str(path), hashlib.sha256(path.read_bytes()).hexdigest()))
                except OSError:
                    out.append((str(path), "-"))
    return out


def _presence(versions: Iterable[str], package: str) -> list[tuple[str, bool, bool, bool]]:
    """(version, wheel cached, tree complete, tree has ``vllm/``) of each version: what
    decides whether the drift diff, the three-way base and the backward detection can
    read that release from the cache."""
    from packaging.version import InvalidVersion, Version

    from patchq.vllmdist import releases

    wheels = {str(v) for v in releases.cached_wheels(package=package)}
    out = []
    for v in sorted(set(versions)):
        try:
            tree = releases.cache_dir() / "releases" / releases.version_key(Version(v))
        except (InvalidVersion, Exception):  # noqa: BLE001 - a version patchq cannot name is absent
            out.append((v, False, False, False))
            continue
        out.append((v, v in wheels, (tree / releases._MARKER).is_file(), (tree / "vllm").is_dir()))
    return out


def key(source: CodeSource, patches: Sequence[Patch]) -> str:
    """The cache key of checking ``patches`` (in order) on the release ``source`` (module
    docstring).

    Raises:
        CacheError: the release's RECORD is damaged and cannot be fetched again.
    """
    record = source.record()  # verified against the tree's checksum (a damaged one is fetched again)
    h = hashlib.sha256(f"patchq.verdicts/{FORMAT}\0{code_digest()}\0".encode())
    h.update(f"{source.version}\0{source.dist}\0".encode())
    h.update(hashlib.sha256(repr(sorted(record.items())).encode()).digest())
    versions: set[str] = set()
    dirs = []
    for p in patches:
        h.update(f"\0patch\0{p.id}\0{p.hash}\0{p.source_file}\0".encode())
        h.update(repr((p.requires, p.conflicts, p.supersedes, p.runtime_names, p.removes)).encode())
        if p.source_file:
            dirs.append(Path(p.source_file).parent)
        for aid, spec in sorted(p.anchors.items()):
            fps = sorted(spec.fingerprints.items())
            versions.update(v for v, _ in fps)
            h.update(repr((aid, spec.module, spec.qualname, spec.node, spec.min_count, spec.max_count,
                           fps)).encode())
    h.update(repr(_series_files(dirs)).encode())
    h.update(repr(_presence(versions, source.dist or "vllm")).encode())
    return h.hexdigest()


def _path(k: str) -> Path:
    return cache.root() / "verdicts" / k[:2] / f"{k}.json"


def row_data(row: PatchCheck) -> dict:
    """A check row as JSON data: its fields, ``touched`` as a sorted list."""
    data = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
    data["touched"] = sorted(row.touched)
    return data


def row_from(data: dict) -> PatchCheck:
    """The :class:`~patchq.compat.check.PatchCheck` of :func:`row_data`'s ``data``, built from
    its field names only (an unknown or missing field raises).

    Raises:
        TypeError, KeyError: ``data`` is not such an object.
    """
    from patchq.compat.check import PatchCheck

    return PatchCheck(**{**data, "touched": set(data["touched"])})


def load(source: CodeSource, patches: Sequence[Patch]) -> tuple[list[Any] | None, str | None]:
    """(the cached rows, or None; the key, or None when ``source`` is not cached at all)."""
    if not enabled(source):
        return None, None
    try:
        k = key(source, patches)
    except Exception:  # noqa: BLE001 - the check itself reports a damaged release
        return None, None
    del _unreadable[:]
    entry = cache.read_entry(_path(k), SCHEMA, "verdict")
    try:
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != k:
            return None, k
        record = source.record()
        if any(record.get(rel) != sha for rel, sha in entry["reads"].items()):
            return None, k
        rows = [row_from(r) for r in entry["rows"]]
        if [r.id for r in rows] != [p.id for p in patches]:
            return None, k
        from patchq.compat.foreign import stamp

        if any(stamp(m) != v for r in rows for m, v in r.outside.items()):
            return None, k  # a module of the stack's own the verdict read is another now
    except Exception:  # noqa: BLE001 - any damaged or missing entry is only a miss
        return None, k
    try:
        os.utime(_path(k))  # in use: kept by the pruning in store()
    except OSError:
        pass
    return rows, k


def store(source: CodeSource, patches: Sequence[Patch], rows: list[Any], k: str | None) -> None:
    """Store ``rows`` of a check that was a miss under key ``k`` (recomputed: a release read
    during the check may have entered the cache); nothing when a needed release could not
    be read (:func:`note_unreadable`), or when a row is not plain data (it would not come back
    equal from JSON)."""
    if k is None or _unreadable or not enabled(source):
        return
    try:
        k = key(source, patches)
        record = source.record()
        reads = {}
        for rel, text in list(source._texts.items()):
            if text is not None:
                reads[rel] = record.get(rel)  # read_text checked these bytes against RECORD
        payload = cache.pack_entry(SCHEMA, {"format": FORMAT, "key": k, "vllm": str(source.version),
                                            "reads": reads, "rows": [row_data(r) for r in rows]})
        if [row_from(d) for d in cache.unpack_body(payload)["rows"]] != list(rows):
            return  # not plain data (a tuple where a list comes back): never served different
        cache.write_entry(_path(k), payload)
        _prune(_path(k).parent)
    except Exception:  # noqa: BLE001 - the cache is only a speed-up
        return


#: An entry neither stored nor used for this long is removed (by the next store in its shard).
MAX_AGE_S = 30 * 86400


def _prune(shard: Path) -> None:
    """Remove the entries of one shard (1/256 of the cache) unused for :data:`MAX_AGE_S`:
    a series edited or a patchq upgraded leaves entries no key names any more."""
    import time

    limit = time.time() - MAX_AGE_S
    for path in [*shard.glob("*.json"), *shard.glob("*.pickle")]:
        try:
            if path.stat().st_mtime < limit:
                path.unlink()
        except OSError:
            pass


