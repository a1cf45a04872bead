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
each must equal the release's RECORD entry. The entry's bytes are preceded by their
sha256: a damaged entry (a bit flip, a truncation) is a miss, never unpickled, and the
check is computed again. An entry is not stored when a release the check needed could
not be read for another reason than its absence from the cache (offline, a damaged
entry that could not be fetched again: :func:`note_unreadable`), since that answer may
change without any input changing. Installed vLLMs and source trees are never cached
(their files change in place). ``PATCHQ_VERDICT_CACHE=0`` turns the cache off. Any error
of the cache itself falls back to checking: the cache is only a speed-up. An entry unused
for 30 days is removed when another is stored beside it (``patchq cache clean`` removes
them all).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from patchq.model import Patch
from patchq.vllmdist import cache, releases
from patchq.vllmdist.sources import CodeSource

FORMAT = 1

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
    return cache.root() / "verdicts" / k[:2] / f"{k}.pickle"


def load(source: CodeSource, patches: Sequence[Patch]) -> tuple[list[Any] | None, str | None]:
    """(the cached rows, or None; the key, or None when ``source`` is not cached at all)."""
    if not enabled(source):
        return None, None
    try:
        k = key(source, patches)
    except Exception:  # noqa: BLE001 - the check itself reports a damaged release
        return None, None
    del _unreadable[:]
    try:
        with open(_path(k), "rb") as fh:
            data = fh.read()
        # sha256 of the pickle ahead of it: a damaged entry is a miss, never unpickled
        if len(data) < 32 or hashlib.sha256(data[32:]).digest() != data[:32]:
            return None, k
        entry = pickle.loads(data[32:])
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != k:
            return None, k
        record = source.record()
        if any(record.get(rel) != sha for rel, sha in entry["reads"].items()):
            return None, k
        rows = entry["rows"]
        if not isinstance(rows, list) or [r.id for r in rows] != [p.id for p in patches]:
            return None, k
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
    be read (:func:`note_unreadable`)."""
    if k is None or _unreadable or not enabled(source):
        return
    try:
        k = key(source, patches)
        record = source.record()
        reads = {}
        for rel, text in list(source._texts.items()):
            if text is not None:
                reads[rel] = record.get(rel)  # read_text checked these bytes against RECORD
        payload = pickle.dumps({"format": FORMAT, "key": k, "reads": reads, "rows": rows},
                               protocol=pickle.HIGHEST_PROTOCOL)
        cache.write_entry(_path(k), hashlib.sha256(payload).digest() + payload)
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
    for path in shard.glob("*.pickle"):
        try:
            if path.stat().st_mtime < limit:
                path.unlink()
        except OSError:
            pass


