"""``patchq cache [prune --keep N | clean]``: patchq's download cache.

The cache (``$PATCHQ_CACHE_DIR``, else the platform user cache, ``~/.cache/patchq`` on
Linux) holds per vLLM release: its wheel (``wheels/``), the extracted tree
(``releases/<version>/``) and test installs (``test-envs/vllm-<version>/``); plus the
release index (``index/``), plans, verdicts, stamps, the import hooks and the git history
of releases (``upstream/``, see ``patchq upstream sync``). Everything in it can be
downloaded or computed again. The layout, and the rule that the root is patchq's alone,
are :mod:`patchq.vllmdist.cache`'s.

``prune`` and ``clean`` remove only what patchq makes, under a root carrying patchq's
marker (``CACHEDIR.TAG``), holding the root's lock exclusively (they wait for running
commands that use a release tree). They first judge every path they would remove (:func:`scan`): a release tree's
files must be those its RECORD lists plus patchq's two markers, a wheel must be named as a
wheel, a plan, verdict or stamp as patchq names them, and so on; test environments, the
releases' git history, hook directories and logs are removed whole. A symlink is never
followed: it is removed as a link. Anything else found there is *foreign*: the command
removes nothing, and exits 2 naming it (remove it yourself, or move it out, and run again).

``patchq.cache/1``: ``dir``, ``total_bytes``, ``releases`` [{``version``, ``bytes``,
``wheel``, ``tree``, ``test_envs``}] (oldest first), ``other`` {name: bytes}, ``removed``
[paths] (``prune`` and ``clean``), ``kept`` [versions] (``prune``). Exit 0; 2 for a bad
``--keep``, a cache directory patchq refuses (not a directory, another user's, not
patchq's) or something foreign where ``prune``/``clean`` would remove; 5 when other
commands held the cache (used a release tree) for ``$PATCHQ_LOCK_TIMEOUT`` seconds.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from patchq.errors import EXIT_OK, CacheRefused, UsageError
from patchq.vllmdist import cache, releases

if TYPE_CHECKING:
    from patchq.documents import CacheDoc, ReleasesDoc

SCHEMA = "patchq.cache/1"
_WHEEL_RE = re.compile(r"^vllm-([^-]+)-")

_HEX2, _HEX64 = "[0-9a-f]{2}", "[0-9a-f]{64}"
#: Files patchq makes, by their path under the root (POSIX, full match). Older formats
#: (``.pickle`` plans and verdicts, ``defs-2.sqlite``) are patchq's too.
_FILES = re.compile("|".join([
    r"wheels/[^/]+\.whl", r"wheels/\.[^/]+\.whl\.sha256", r"wheels/\.[^/]+\.lock",
    r"releases/\.[^/]+\.lock",
    r"index/[^/.][^/]*\.json", r"index/\.[^/]+\.tmp", r"index/defs-\d+\.sqlite(-wal|-shm|-journal)?",
    rf"plans/{_HEX64}\.(pickle|json)", r"plans/\.tmp-[^/]+", rf"plans/texts/{_HEX2}/{_HEX64}",
    rf"plans/texts/{_HEX2}/\.tmp-[^/]+",
    rf"verdicts/{_HEX2}/{_HEX64}\.(pickle|json)", rf"verdicts/{_HEX2}/\.tmp-[^/]+",
    r"stamps/[0-9a-f]{16}\.stamp(\.\d+\.tmp)?",
    r"upstream/vllm\.git\.lock",
    r"procs/\d+\.json(\.\d+\.tmp)?",
    r"runtime/sources/[^/]+\.py", r"runtime/sources/\.[^/]+\.patchq-tmp",
    r"(test-envs|venvs)/\.[^/]+\.lock",
]))
#: Directories patchq makes and whose entries are judged one by one.
_DIRS = re.compile("|".join([
    "wheels", "releases", "index", "plans", "plans/texts", f"plans/texts/{_HEX2}", "verdicts", f"verdicts/{_HEX2}",
    "stamps", "upstream", "procs", "runtime", "runtime/hooks", "runtime/sources", "test-envs", "venvs", "probe",
]))
#: Directories removed whole: what a tool makes inside them is theirs (git, venv, the hook), and
#: patchq's temporary directories.
_UNITS = re.compile("|".join([
    r"wheels/\.dl-[^/]+", r"releases/\.[^/]+\.tmp-[^/]+", "upstream/vllm\\.git", r"(test-envs|venvs)/[^/.][^/]*",
    r"probe/[^/.][^/]*",  # the probe environments of one Python and platform (patchq/probe/env.py)
    r"runtime/hooks/[^/]+", "logs", r"[^/]+/\.[^/]+\.tmp-removing-\d+",
]))
#: A release tree: ``releases/<version>`` (or ``<dist>-<version>``).
_TREE = re.compile(r"releases/[^/.][^/]*")
#: patchq's own files in a release tree besides those RECORD lists.
_TREE_OWN = {releases._MARKER, releases.VERIFIED}


class Scan:
    """What :func:`scan` found under some paths of the root: ``foreign`` (relpaths of what
    patchq does not make, sorted, at most :data:`LIMIT`; ``count``: all of them)."""

    LIMIT = 20

    def __init__(self) -> None:
        self.foreign: list[str] = []
        self.count = 0

    def add(self, rel: str) -> None:
        self.count += 1
        if len(self.foreign) < self.LIMIT:
            self.foreign.append(rel)


def _tree_files(tree: Path) -> set[str] | None:
    """The relpaths a release tree may hold: every path its RECORD lists (RECORD's first
    column, whatever the hashes say) and patchq's markers; None without a readable RECORD."""
    import csv

    records = [p for p in tree.iterdir() if p.name.endswith(".dist-info") and not p.is_symlink()]
    if len(records) != 1 or not (records[0] / "RECORD").is_file() or (records[0] / "RECORD").is_symlink():
        return None
    try:
        with open(records[0] / "RECORD", encoding="utf-8", newline="") as fh:
            rows = {row[0] for row in csv.reader(fh) if row}
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return rows | _TREE_OWN


def _scan_tree(root: Path, rel: str, found: Scan) -> None:
    """Judge a release tree: only the files its RECORD lists, patchq's markers and the
    directories holding them."""
    tree = root / rel
    allowed = _tree_files(tree)
    if allowed is None:
        found.add(f"{rel}/ (a release tree without a readable RECORD)")
        return
    dirs = {"/".join(p.split("/")[:i]) for p in allowed for i in range(1, p.count("/") + 1)}
    for dirpath, dirnames, filenames in os.walk(tree):
        here = Path(dirpath).relative_to(tree).as_posix()
        here = "" if here == "." else here + "/"
        for name in list(dirnames):
            sub = here + name
            if os.path.islink(os.path.join(dirpath, name)) or sub not in dirs:
                found.add(f"{rel}/{sub}")
                dirnames.remove(name)
        for name in filenames:
            sub = here + name
            st = os.lstat(os.path.join(dirpath, name))
            if sub not in allowed or not stat.S_ISREG(st.st_mode):
                found.add(f"{rel}/{sub}")


def _scan(root: Path, rel: str, found: Scan) -> None:
    """Judge the path ``rel`` under ``root`` and, for patchq's directories, what is in it."""
    path = root / rel
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        return  # removed as a link, never followed
    if stat.S_ISDIR(st.st_mode):
        if _UNITS.fullmatch(rel):
            return
        if _TREE.fullmatch(rel):
            _scan_tree(root, rel, found)
            return
        if _DIRS.fullmatch(rel):
            for name in sorted(os.listdir(path)):
                _scan(root, f"{rel}/{name}", found)
            return
        found.add(f"{rel}/")
        return
    if not (stat.S_ISREG(st.st_mode) and _FILES.fullmatch(rel)):
        found.add(rel)


def scan(root: Path, rels: list[str]) -> Scan:
    """What is foreign under the paths ``rels`` (relative to ``root``), judged as
    ``prune``/``clean`` remove them (module docstring)."""
    found = Scan()
    for rel in rels:
        _scan(root, rel, found)
    return found


def _refuse_foreign(root: Path, found: Scan, what: str) -> None:
    if found.count:
        more = f" and {found.count - len(found.foreign[:3])} more" if found.count > 3 else ""
        raise CacheRefused(f"refusing to {what} {root}: it holds {', '.join(found.foreign[:3])}{more}, which patchq "
                           f"does not make; nothing was removed (move it out of the cache and run again)")


def _marked_root() -> Path:
    """The cache root, checked (:func:`patchq.vllmdist.cache.check_root`) and marked.

    Raises:
        CacheRefused: it cannot be used, or carries no marker of patchq's (a read-only
            cache that could not be adopted).
    """
    path = cache.check_root()
    if os.path.isdir(path) and not cache.is_marked(path):
        raise CacheRefused(f"refusing to remove anything in {os.path.abspath(path)}: it carries no {cache.MARKER} "
                           f"of patchq's (it could not be written); nothing was removed")
    return Path(path)


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


def _listing(path: Path) -> list[Path]:
    """The entries of the directory ``path``, sorted; none when it is missing or a symlink
    (never followed: a linked ``releases/`` is another cache's)."""
    if path.is_symlink() or not path.is_dir():
        return []
    return sorted(path.iterdir())


def _per_release(root: Path) -> dict[str, dict[str, list[Path]]]:
    out: dict[str, dict[str, list[Path]]] = {}

    def add(version: str, kind: str, path: Path) -> None:
        try:
            key = str(Version(version))
        except InvalidVersion:
            return
        out.setdefault(key, {"wheel": [], "tree": [], "test_envs": []})[kind].append(path)

    for p in _listing(root / "wheels"):
        m = _WHEEL_RE.match(p.name)
        if m and p.name.endswith(".whl"):
            add(m.group(1), "wheel", p)
    for p in _listing(root / "releases"):
        if not p.name.startswith(".") and (p.is_dir() or p.is_symlink()):
            add(p.name, "tree", p)
    for p in _listing(root / "test-envs"):
        if p.name.startswith("vllm-") and (p.is_dir() or p.is_symlink()):
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
            if p.name not in ("wheels", "releases", "test-envs", cache.MARKER):
                other[p.name] = _size(p)
    total = sum(r["bytes"] for r in rows) + sum(other.values())
    return {"schema": SCHEMA, "dir": str(root), "total_bytes": total, "releases": rows, "other": other,
            "removed": removed or [], "kept": kept or []}


def show() -> tuple[CacheDoc, int]:
    """Where the cache is and what it holds.

    Raises:
        CacheRefused: the cache directory cannot be used (:func:`patchq.vllmdist.cache.check_root`).
    """
    cache.check_root()
    return info(), EXIT_OK


def _remove(path: Path, aside: bool = True) -> None:
    """Remove one entry patchq made (judged by :func:`scan`): a link as a link; a directory
    renamed aside first when ``aside`` (a reader that takes no lock, such as an older patchq,
    sees the whole tree or none), then deleted."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return
    doomed = path
    if aside:
        try:
            os.replace(path, path.with_name(f".{path.name}.tmp-removing-{os.getpid()}"))
            doomed = path.with_name(f".{path.name}.tmp-removing-{os.getpid()}")
        except OSError:
            pass
    shutil.rmtree(doomed)


def prune(keep: int) -> tuple[CacheDoc, int]:
    """Remove every release but the newest ``keep``: patchq's files of each (the wheel and its
    checksum note, the extracted tree, test installs); refused, removing nothing, when one of
    them holds something patchq does not make (module docstring).

    Raises:
        UsageError: ``keep`` is negative.
        CacheRefused: the cache cannot be used, or a release holds foreign files (exit 2).
        ReadOnlyError: other commands held the cache for ``$PATCHQ_LOCK_TIMEOUT`` seconds (exit 5).
    """
    if keep < 0:
        raise UsageError(f"--keep {keep}: give 0 or more releases to keep")
    root = _marked_root()
    with cache.exclusive(str(root)):
        per = _per_release(root)
        versions = sorted(per, key=Version)
        kept = versions[len(versions) - keep:] if keep else []
        doomed = [p for v in versions if v not in kept for paths in per[v].values() for p in paths]
        notes = [p.with_name(f".{p.name}.sha256") for p in doomed if p.parent.name == "wheels"]
        doomed += [n for n in notes if n.is_file() or n.is_symlink()]
        _refuse_foreign(root, scan(root, [p.relative_to(root).as_posix() for p in doomed]), "prune")
        removed = []
        for p in doomed:
            _remove(p)
            removed.append(str(p))
    return info(removed, kept), EXIT_OK


def clean() -> tuple[CacheDoc, int]:
    """Remove everything patchq made in the cache (its marker stays); refused, removing
    nothing, when it holds anything else (module docstring).

    Raises:
        CacheRefused: the cache cannot be used, or holds foreign files (exit 2).
        ReadOnlyError: other commands held the cache for ``$PATCHQ_LOCK_TIMEOUT`` seconds (exit 5).
    """
    root = _marked_root()
    removed: list[str] = []
    if not root.is_dir():
        return info(removed), EXIT_OK
    with cache.exclusive(str(root)):
        found = Scan()
        for name in cache.foreign(str(root)):
            found.add(name + ("/" if (root / name).is_dir() and not (root / name).is_symlink() else ""))
        entries = sorted(p for p in root.iterdir() if p.name in cache.NAMES)
        for p in entries:
            _scan(root, p.name, found)
        _refuse_foreign(root, found, "clean")
        for p in entries:
            _remove(p, aside=False)  # no reader holds the lock now
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
        shown = name + "/" if os.path.isdir(os.path.join(doc["dir"], name)) else name  # a stray file is no folder
        lines.append(f"  {shown:<13} {_human(size):>10}")
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
