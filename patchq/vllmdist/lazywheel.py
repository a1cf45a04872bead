"""Fetch only the members patchq reads from a wheel on the index, with HTTP Range requests.

A wheel is a zip file whose central directory sits at its end, and PyPI's file host
answers ``Range`` requests (``206 Partial Content``). patchq reads a vLLM release's
``vllm/**/*.py`` files and its ``*.dist-info/`` directory only: 5-11 MB of a 240-490 MB
wheel. :func:`fetch_members` therefore

1. locates the wheel through the PEP 691 JSON simple API (:func:`locate`): the index is
   ``$PIP_INDEX_URL``, else the ``index-url`` of pip's configuration files, else PyPI;
   only an ``http(s)`` index is used, and the x86_64 Linux wheel with the highest build
   tag is chosen, as :func:`patchq.vllmdist.releases.find_wheel` chooses from a directory;
2. opens it as a seekable file object (:class:`HttpRangeFile`, in the manner of pip's
   ``LazyZipOverHTTP``) and lets :class:`zipfile.ZipFile` read the central directory: two
   or three small range requests at the end of the file;
3. coalesces the wanted members (sorted by offset, gaps below ``max_gap`` bytes are
   fetched too) into a few large range requests, run a few at a time;
4. decompresses every member (zipfile checks its CRC-32) and checks its sha256 against
   the wheel's own RECORD before anything is written.

Anything the server does not support (no ``206``, a wrong ``Content-Range``, a short
body) raises :class:`RangeUnsupported`, and the caller falls back to downloading the
whole wheel. Standard library only (``urllib``), so it works without pip.
"""

from __future__ import annotations

import base64
import bisect
import configparser
import csv
import hashlib
import io
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

#: PyPI's PEP 691 JSON simple index (used when pip names no http(s) index).
PYPI_SIMPLE = "https://pypi.org/simple/"
_JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
_UA = "patchq (lazywheel.py)"
#: Timeout (seconds) of one HTTP request.
HTTP_TIMEOUT = 60.0
#: Wanted members closer than this many bytes are fetched in one request.
MAX_GAP = 1 << 20
#: Range requests in flight at once.
PARALLEL = 4
#: Bytes read from the end of the file first (the end-of-central-directory record).
_TAIL = 64 << 10


class RangeUnsupported(Exception):
    """The server (or the network) cannot serve the partial fetch; download the whole wheel."""


class NotOnIndex(Exception):
    """The index has no Linux x86_64 wheel of that release (a full download would fail too)."""


class IntegrityError(Exception):
    """A fetched member disagrees with the wheel's RECORD (or RECORD lacks it)."""


@dataclass(frozen=True)
class RemoteWheel:
    """One wheel file on the index."""

    filename: str
    url: str
    sha256: str | None
    size: int | None


@dataclass
class FetchStats:
    """What a partial fetch cost: HTTP requests and bytes received."""

    requests: int = 0
    bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, n: int, request: bool = False) -> None:
        with self.lock:
            self.bytes += n
            self.requests += int(request)


# ----------------------------------------------------------------------- the index


def _pip_config_files() -> list[Path]:
    env = os.environ.get("PIP_CONFIG_FILE")
    if env:
        return [Path(env)]
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return [Path("/etc/pip.conf"), xdg / "pip" / "pip.conf", home / ".pip" / "pip.conf"]


def index_url() -> str:
    """The simple index to ask: ``$PIP_INDEX_URL``, else pip's config ``index-url``, else PyPI.

    pip's configuration files are read with :mod:`configparser` (later files win, as in
    pip); sections ``[global]``, ``[download]`` and ``[install]`` count. A ``file:`` or
    other non-http(s) index is skipped (PyPI is used then).
    """
    candidates = [os.environ.get("PIP_INDEX_URL", "")]
    found = ""
    for path in _pip_config_files():
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error, UnicodeDecodeError):
            continue
        for section in ("global", "download", "install"):
            if parser.has_option(section, "index-url"):
                found = parser.get(section, "index-url").strip()
    candidates.append(found)
    for url in candidates:
        if url.startswith(("https://", "http://")):
            return url.rstrip("/") + "/"
    return PYPI_SIMPLE


def _is_x86_64_linux(tags) -> bool:
    return any(t.platform.endswith("x86_64") and "linux" in t.platform for t in tags)


def pick_wheel(simple_json: dict, version: Version, package: str, base_url: str) -> RemoteWheel:
    """The Linux x86_64 wheel of ``package==version`` in a PEP 691 answer (pure).

    Yanked files are left out; among several wheels the highest build tag wins.

    Raises:
        NotOnIndex: there is none.
    """
    want = canonicalize_name(package)
    best = None
    for entry in simple_json.get("files", ()):
        name = entry.get("filename", "")
        if not name.endswith(".whl") or entry.get("yanked"):
            continue
        try:
            pname, ver, build, tags = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if pname != want or ver != version or not _is_x86_64_linux(tags):
            continue
        key = (build, name)
        if best is None or key > best[0]:
            best = (key, entry)
    if best is None:
        raise NotOnIndex(f"the index has no Linux x86_64 wheel of {package}=={version}")
    entry = best[1]
    url = urllib.parse.urljoin(base_url, entry["url"])
    size = entry.get("size")
    return RemoteWheel(entry["filename"], url.split("#", 1)[0], (entry.get("hashes") or {}).get("sha256"),
                       int(size) if isinstance(size, int) else None)


def locate(version: str | Version, package: str = "vllm", *, index: str | None = None) -> RemoteWheel:
    """Ask the index (PEP 691 JSON) where the release's Linux x86_64 wheel is.

    Raises:
        NotOnIndex: no such wheel.
        RangeUnsupported: the index cannot be read as JSON (network down, HTML only).
    """
    base = (index or index_url()).rstrip("/") + "/" + canonicalize_name(package) + "/"
    req = urllib.request.Request(base, headers={"Accept": _JSON_ACCEPT, "User-Agent": _UA})
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
            if "json" not in resp.headers.get("Content-Type", ""):
                raise RangeUnsupported(f"{base} does not answer PEP 691 JSON")
            data = json.load(resp)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise NotOnIndex(f"{base}: 404") from None
        raise RangeUnsupported(f"{base}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise RangeUnsupported(f"{base}: {exc}") from None
    return pick_wheel(data, Version(str(version)), package, base)


# ------------------------------------------------------------- a lazy HTTP file


class HttpRangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file that fetches with Range requests.

    Fetched spans are kept in memory; :meth:`read` serves from them and fetches what is
    missing (at least ``min_fetch`` bytes). :meth:`prefetch` fetches many spans at once
    (``PARALLEL`` requests in flight), so that a later sequential read costs nothing.
    """

    def __init__(self, url: str, size: int, *, stats: FetchStats | None = None,
                 progress: Callable[[int], None] | None = None, min_fetch: int = _TAIL):
        super().__init__()
        self.url, self.size, self.min_fetch = url, size, min_fetch
        self.stats = stats or FetchStats()
        self._progress = progress
        self._pos = 0
        self._starts: list[int] = []
        self._chunks: dict[int, bytes] = {}
        self._lock = threading.Lock()

    # io plumbing
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buf) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self._pos + n)
        out = bytearray()
        while self._pos < end:
            piece = self._cached(self._pos, end)
            if piece is None:
                self._fetch(self._pos, min(self.size, max(end, self._pos + self.min_fetch)))
                continue
            out += piece
            self._pos += len(piece)
        return bytes(out)

    def _cached(self, start: int, end: int) -> bytes | None:
        with self._lock:
            i = bisect.bisect_right(self._starts, start) - 1
            if i < 0:
                return None
            cstart = self._starts[i]
            chunk = self._chunks[cstart]
            if start >= cstart + len(chunk):
                return None
            return chunk[start - cstart: end - cstart]

    def _fetch(self, start: int, end: int) -> None:
        """GET bytes [start, end) with one Range request and keep them."""
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}", "User-Agent": _UA})
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
                if resp.status != 206:
                    raise RangeUnsupported(f"the file host answered {resp.status} to a Range request")
                got = re.match(r"bytes (\d+)-(\d+)/", resp.headers.get("Content-Range", ""))
                if not got or int(got.group(1)) != start or int(got.group(2)) != end - 1:
                    raise RangeUnsupported(f"unexpected Content-Range {resp.headers.get('Content-Range')!r}")
                parts = []
                received = 0
                while True:
                    block = resp.read(1 << 20)
                    if not block:
                        break
                    parts.append(block)
                    received += len(block)
                    if self._progress:
                        self._progress(len(block))
        except urllib.error.HTTPError as exc:
            raise RangeUnsupported(f"Range request: HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:  # URLError, timeouts, resets
            raise RangeUnsupported(f"Range request: {exc}") from None
        data = b"".join(parts)
        if len(data) != end - start:
            raise RangeUnsupported(f"short Range answer: {len(data)} of {end - start} bytes")
        self.stats.add(len(data), request=True)
        with self._lock:
            i = bisect.bisect_left(self._starts, start)
            if self._chunks.get(start) is None or len(self._chunks[start]) < len(data):
                if start not in self._chunks:
                    self._starts.insert(i, start)
                self._chunks[start] = data

    def prefetch(self, spans: list[tuple[int, int]]) -> None:
        """Fetch every ``[start, end)`` of ``spans`` (``PARALLEL`` at a time)."""
        if not spans:
            return
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(spans))) as pool:
            for fut in [pool.submit(self._fetch, s, e) for s, e in spans]:
                fut.result()


def coalesce(spans: list[tuple[int, int]], max_gap: int = MAX_GAP) -> list[tuple[int, int]]:
    """Merge ``[start, end)`` spans whose gap is at most ``max_gap`` bytes (pure)."""
    out: list[list[int]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] <= max_gap:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def _member_spans(zf: zipfile.ZipFile, wanted: list[zipfile.ZipInfo]) -> list[tuple[int, int]]:
    """Byte span of each wanted member: its local header to the next member's (or the
    central directory)."""
    offsets = sorted({i.header_offset for i in zf.infolist()})
    cd_start = zf.start_dir  # type: ignore[attr-defined]
    spans = []
    for info in wanted:
        k = bisect.bisect_right(offsets, info.header_offset)
        end = offsets[k] if k < len(offsets) else cd_start
        spans.append((info.header_offset, end))
    return spans


def record_digests(record: bytes) -> dict[str, str]:
    """RECORD as ``{relpath: hex sha256}`` (rows without a sha256 are left out; pure)."""
    out = {}
    for row in csv.reader(io.StringIO(record.decode("utf-8"))):
        if len(row) >= 2 and row[1].startswith("sha256="):
            b64 = row[1][len("sha256="):]
            out[row[0]] = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
    return out


# ------------------------------------------------------------------- progress


class _Progress:
    """Download progress: a bar on stderr on a terminal (:class:`patchq.progress.Bar`), and
    its summary line after it; nothing when stderr is not a terminal."""

    def __init__(self, label: str, total: int | None):
        from patchq.progress import Bar

        self.label, self.total, self.done = label, total, 0
        self._lock = threading.Lock()
        self._bar = Bar(label, total, unit="bytes").__enter__()

    def __call__(self, n: int) -> None:
        with self._lock:
            self.done += n
        self._bar.advance(n)

    def set_total(self, total: int) -> None:
        self.total = total
        self._bar.set_total(total)

    def finish(self, line: str | None = None) -> None:
        """Stop the bar (idempotent), leaving ``line`` on a terminal."""
        if line:
            self._bar.note(line)
        self._bar.__exit__(None, None, None)


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


# --------------------------------------------------------------------- the fetch


def fetch_members(
    version: str | Version,
    dest: Path,
    want: Callable[[str], bool],
    safe_relpath: Callable[[str], Path],
    *,
    package: str = "vllm",
    remote: RemoteWheel | None = None,
    max_gap: int = MAX_GAP,
) -> dict:
    """Write the wanted members of the release's wheel under ``dest``, fetching only them.

    Args:
        version: the release.
        dest: an existing empty directory (the tree's temporary root).
        want: member name -> whether to keep it (directories never reach it).
        safe_relpath: member name -> relative path (raises on an unsafe name).
        package: the project.
        remote: the wheel, when already located (tests pass one).
        max_gap: see :func:`coalesce`.

    Returns:
        ``{"wheel", "files", "bytes", "source": "range", "fetched_bytes", "requests",
        "wheel_size", "url", "wheel_sha256", "metadata_date"}``.

    Raises:
        NotOnIndex: the release has no Linux x86_64 wheel.
        RangeUnsupported: fall back to a full download.
        IntegrityError: a member disagrees with RECORD (nothing usable was written).
    """
    progress = _Progress(f"{package} {version} sources", None)  # from the index lookup on
    try:
        return _fetch_members(progress, version, dest, want, safe_relpath, package, remote, max_gap)
    finally:
        progress.finish()


def _fetch_members(progress: _Progress, version: str | Version, dest: Path, want: Callable[[str], bool],
                   safe_relpath: Callable[[str], Path], package: str, remote: RemoteWheel | None,
                   max_gap: int) -> dict:
    """:func:`fetch_members` with its progress bar."""
    started = time.perf_counter()
    remote = remote or locate(version, package)
    stats = FetchStats()
    size = remote.size
    if size is None:
        size = _content_length(remote.url)
    lazy = HttpRangeFile(remote.url, size, stats=stats, progress=progress)
    # the end of the central directory, and usually the whole central directory
    lazy.prefetch([(max(0, size - _TAIL), size)])
    try:
        zf = zipfile.ZipFile(lazy)
    except zipfile.BadZipFile as exc:
        raise RangeUnsupported(f"cannot read the central directory: {exc}") from None
    wanted = [i for i in zf.infolist() if not i.is_dir() and want(i.filename)]
    records = [i for i in wanted if i.filename.endswith(".dist-info/RECORD") and i.filename.count("/") == 1]
    if len(records) != 1:
        raise IntegrityError(f"{remote.filename}: expected one .dist-info/RECORD, found {len(records)}")
    spans = coalesce(_member_spans(zf, wanted), max_gap)
    progress.set_total(stats.bytes + sum(e - s for s, e in spans))
    lazy.prefetch(spans)
    before = stats.requests
    count, raw = _write_members(zf, wanted, records[0], dest, safe_relpath, remote.filename)
    if stats.requests != before:  # every member was prefetched: a miss is a bug worth seeing
        raise RangeUnsupported(f"{stats.requests - before} unplanned Range requests")
    meta = next((i for i in wanted if i.filename.endswith(".dist-info/METADATA")), None)
    seconds = time.perf_counter() - started
    progress.finish(
        f"fetched {package} {version} sources: {count} files, {human(stats.bytes)} of the "
        f"{human(size)} wheel in {stats.requests} range requests, {seconds:.1f} s")
    return {
        "wheel": remote.filename, "files": count, "bytes": raw, "source": "range",
        "fetched_bytes": stats.bytes, "requests": stats.requests, "wheel_size": size,
        "url": remote.url, "wheel_sha256": remote.sha256,
        "metadata_date": list(meta.date_time) if meta else None,
    }


def _write_members(zf: zipfile.ZipFile, wanted: list[zipfile.ZipInfo], record: zipfile.ZipInfo, dest: Path,
                   safe_relpath: Callable[[str], Path], wheel: str) -> tuple[int, int]:
    """Write the ``wanted`` members under ``dest``, each checked against the wheel's RECORD
    (the member ``record``). Returns (files, bytes) written.

    Raises:
        IntegrityError: a member has no sha256 in RECORD or differs from it.
    """
    digests = record_digests(zf.read(record))
    count = raw = 0
    made: set[Path] = set()
    for info in wanted:
        data = zf.read(info)  # CRC-32 checked by zipfile
        if info is not record:
            want_sha = digests.get(info.filename)
            if want_sha is None:
                raise IntegrityError(f"{wheel}: {info.filename} has no sha256 in RECORD")
            if hashlib.sha256(data).hexdigest() != want_sha:
                raise IntegrityError(f"{wheel}: {info.filename} differs from its RECORD sha256")
        target = dest / safe_relpath(info.filename)
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        target.write_bytes(data)
        count += 1
        raw += len(data)
    return count, raw


def _content_length(url: str) -> int:
    req = urllib.request.Request(url, method="HEAD", headers={"User-Agent": _UA})
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
            length = resp.headers.get("Content-Length")
            if resp.headers.get("Accept-Ranges", "bytes") != "bytes" or not length:
                raise RangeUnsupported(f"{url}: no byte ranges")
            return int(length)
    except (OSError, ValueError) as exc:
        raise RangeUnsupported(f"HEAD {url}: {exc}") from None


def download(remote: RemoteWheel, dest: Path) -> Path:
    """Download the whole wheel to ``dest`` (a file path), checking the index's sha256.

    Standard library only (for environments without pip).

    Raises:
        RangeUnsupported: network error (named so for symmetry; the caller reports it).
        IntegrityError: the sha256 differs from the index's.
    """
    req = urllib.request.Request(remote.url, headers={"User-Agent": _UA})
    progress = _Progress(remote.filename, remote.size)
    h = hashlib.sha256()
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp, open(dest, "wb") as out:
            while True:
                block = resp.read(1 << 20)
                if not block:
                    break
                h.update(block)
                out.write(block)
                progress(len(block))
    except (OSError, ValueError) as exc:
        progress.finish()
        raise RangeUnsupported(f"download {remote.url}: {exc}") from None
    except BaseException:  # Ctrl-C: the bar goes, the terminal is left as it was
        progress.finish()
        raise
    if remote.sha256 and h.hexdigest() != remote.sha256:
        progress.finish()
        raise IntegrityError(f"{remote.filename}: sha256 differs from the index's")
    progress.finish(f"downloaded {remote.filename}: {human(progress.done)} in "
                    f"{time.perf_counter() - started:.1f} s")
    return dest
