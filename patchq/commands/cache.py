"""``patchq cache [prune --keep N | clean]``: patchq's download cache.

The cache (``$PATCHQ_CACHE_DIR``, else the platform user cache, ``~/.cache/patchq`` on
Linux) holds per vLLM release: its wheel (``wheels/``), the extracted tree
(``releases/<version>/``) and test installs (``test-envs/vllm-<version>/``); plus the
release index (``index/``) and the git history of releases (``upstream/``, see
``patchq upstream sync``). Everything in it can be downloaded again.

``patchq.cache/1``: ``dir``, ``total_bytes``, ``releases`` [{``version``, ``bytes``,
``wheel``, ``tree``, ``test_envs``}] (oldest first), ``other`` {name: bytes}, ``removed``
[paths] (``prune`` and ``clean``), ``kept`` [versions] (``prune``). Exit 0; 2 for a bad
``--keep``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from patchq.errors import EXIT_OK, UsageError
from patchq.vllmdist import releases

if TYPE_CHECKING:
    from patchq.documents import CacheDoc, ReleasesDoc

SCHEMA = "patchq.cache/1"
_WHEEL_RE = re.compile(r"^vllm-([^-]+)-")


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    total = 0
    seen: set[tuple[int, int]] = set()
    for root, _dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            if (st.st_dev, st.st_ino) not in seen:  # hard links count once
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def _per_release(root: Path) -> dict[str, dict[str, list[Path]]]:
    out: dict[str, dict[str, list[Path]]] = {}

    def add(version: str, kind: str, path: Path) -> None:
        try:
            key = str(Version(version))
        except InvalidVersion:
            return
        out.setdefault(key, {"wheel": [], "tree": [], "test_envs": []})[kind].append(path)

    for p in sorted((root / "wheels").glob("vllm-*.whl")) if (root / "wheels").is_dir() else []:
        m = _WHEEL_RE.match(p.name)
        if m:
            add(m.group(1), "wheel", p)
    for p in sorted((root / "releases").iterdir()) if (root / "releases").is_dir() else []:
        if p.is_dir():
            add(p.name, "tree", p)
    for p in sorted((root / "test-envs").glob("vllm-*")) if (root / "test-envs").is_dir() else []:
        if p.is_dir():
            add(p.name[len("vllm-"):], "test_envs", p)
    return out


def info(removed: list[str] | None = None, kept: list[str] | None = None) -> CacheDoc:
    """The ``patchq.cache/1`` document for the cache as it is now."""
    root = releases.cache_dir()
    per = _per_release(root)
    rows: list[dict] = []
    for version in sorted(per, key=Version):
        kinds = per[version]
        sizes = {k: sum(_size(p) for p in paths) for k, paths in kinds.items()}
        rows.append({"version": version, "bytes": sum(sizes.values()),
                     "wheel": [str(p) for p in kinds["wheel"]], "tree": [str(p) for p in kinds["tree"]],
                     "test_envs": [str(p) for p in kinds["test_envs"]]})
    other = {}
    if root.is_dir():
        for p in sorted(root.iterdir()):
            if p.name not in ("wheels", "releases", "test-envs"):
                other[p.name] = _size(p)
    total = sum(r["bytes"] for r in rows) + sum(other.values())
    return {"schema": SCHEMA, "dir": str(root), "total_bytes": total, "releases": rows, "other": other,
            "removed": removed or [], "kept": kept or []}


def show() -> tuple[CacheDoc, int]:
    """Where the cache is and what it holds."""
    return info(), EXIT_OK


def prune(keep: int) -> tuple[CacheDoc, int]:
    """Remove every release but the newest ``keep`` (wheel, tree, test installs)."""
    if keep < 0:
        raise UsageError(f"--keep {keep}: give 0 or more releases to keep")
    per = _per_release(releases.cache_dir())
    versions = sorted(per, key=Version)
    kept = versions[len(versions) - keep:] if keep else []
    removed = []
    for version in versions:
        if version in kept:
            continue
        for paths in per[version].values():
            for p in paths:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)
                removed.append(str(p))
    return info(removed, kept), EXIT_OK


def clean() -> tuple[CacheDoc, int]:
    """Remove the whole cache directory's contents."""
    root = releases.cache_dir()
    removed = []
    if root.is_dir():
        for p in sorted(root.iterdir()):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)
            removed.append(str(p))
    return info(removed), EXIT_OK


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def render_text(doc: CacheDoc) -> str:
    """The cache directory, size per release, what was removed."""
    lines = [f"cache {doc['dir']}: {_human(doc['total_bytes'])}"]
    for r in doc["releases"]:
        parts = [k for k in ("wheel", "tree", "test_envs") if r[k]]
        lines.append(f"  vllm {r['version']:<8} {_human(r['bytes']):>10}  ({', '.join(parts)})")
    for name, size in doc["other"].items():
        lines.append(f"  {name + '/':<13} {_human(size):>10}")
    if doc["removed"]:
        kept = f"; kept {', '.join(doc['kept'])}" if doc["kept"] else ""
        lines.append(f"removed {len(doc['removed'])} path(s)" + kept)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------- the release list

#: ``patchq cache refresh``'s document.
RELEASES_SCHEMA = "patchq.releases/1"


def refresh(package: str = "vllm") -> tuple[ReleasesDoc, int]:
    """``patchq cache refresh``: ask the index for the release list now
    (:func:`patchq.vllmdist.releases.list_releases` with ``refresh``), so a release that came
    out within the hour the cached list counts as fresh is known at once. When the index
    cannot be reached the last cached list is used and ``note`` (also on stderr) says so.

    ``patchq.releases/1``: ``package``, ``index``, ``source`` (``index``; ``stale-cache``: the
    index could not be reached), ``fetched`` (UTC time the list was had), ``age_s``, ``note``,
    ``releases`` (ascending), ``newest``. Exit 0.

    Raises:
        ReleaseError: the index cannot be reached and no list is cached (exit 3).
    """
    import time

    versions = releases.list_releases(package=package, refresh=True)
    listed = releases.listing(package) or {}
    fetched = float(listed.get("fetched") or time.time())
    doc: ReleasesDoc = {"schema": RELEASES_SCHEMA, "package": package, "index": str(listed.get("index") or ""),
                        "source": str(listed.get("source") or "index"),
                        "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fetched)),
                        "age_s": float(listed.get("age_s") or 0.0), "note": str(listed.get("note") or ""),
                        "releases": [str(v) for v in versions], "newest": str(versions[-1])}
    return doc, EXIT_OK


def render_refresh(doc: ReleasesDoc) -> str:
    """One line: how many releases, the range, the newest, where and when the list was had."""
    rel = doc["releases"]
    when = "just now" if doc["source"] == "index" else \
        f"(the index could not be reached: the list cached {releases.age_text(doc['age_s'])} ago)"
    head = (f"{doc['package']}: {len(rel)} final releases, {rel[0]} .. {rel[-1]} (newest {doc['newest']}), "
            f"listed by {doc['index']} {when}")
    return head + "\n"
