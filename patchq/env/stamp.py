"""Stat stamps: "nothing changed since it was last verified" without hashing (stdlib only).

The no-op ``apply`` and ``status`` run at every server start. Hashing every series file
and every patched file each time costs more than the interpreter's start for a long
series, so, once their content has been verified by hashing, what was verified is
remembered as a **stamp**: for every input file ``(st_dev, st_ino, st_size,
st_mtime_ns, st_ctime_ns)`` (``missing`` for a file that must stay absent), for every
input directory the same without the size plus its entry names, and a small payload
derived from that content (what the caller would have computed). :func:`load` gives the
payload back only when every input's stat is what the stamp says; otherwise the caller
hashes as before, and may :func:`save` a fresh stamp.

Why equal stats mean equal content here, and where the classic holes are closed:

* **Any write** to a file sets its ``st_ctime`` to the time of the write, and no system
  call lets a user set ``ctime`` (``utime``/``touch -d`` set only ``atime`` and
  ``mtime``): restoring an old ``mtime`` after editing does not hide the edit. A file
  replaced by a rename (editors, ``pip``, patchq's own atomic writes) has another inode,
  and its directory's ``mtime``/``ctime`` and entry list change too.
* **Timestamp granularity and same-size rewrites.** Two writes within one tick of the
  file system's clock (a few ms on Linux, 1-2 s on some file systems) can leave ``size``,
  ``mtime`` and ``ctime`` all equal. So :func:`save` records a stamp only when every
  input's ``mtime`` and ``ctime`` lie more than :data:`SETTLE_NS` (2 s) before the
  moment the caller started verifying (``taken``, from :func:`now`, read *before* the
  inputs were hashed): any write after that moment gets a ``ctime`` no earlier than
  ``taken`` less one tick, so it cannot equal a recorded ``ctime`` that lies 2 s before
  it. An input written less than 2 s before ``taken`` -- such as the files ``apply``
  just wrote -- is "not settled": no stamp is saved, and the next run hashes again (and
  saves one once the files have settled). A write during the hashing is after
  ``taken``, so it is either seen by :func:`save` (not settled: nothing saved) or by the
  next :func:`load` (``ctime`` differs).
* **Clock skew.** A file time ahead of this host's clock is "not settled", never
  stamped. The remaining hole is a file system whose clock lags this host's by more than
  2 s (a remote server): a second same-size write within one of *its* ticks of a first
  one, with a verification run in between, would not be seen. Hashing has no such hole;
  git's index ("racy git") and make rely on the same stat data with less margin.
* **The stamp itself** carries a CRC-32 of its body: a damaged stamp is ignored (the
  caller hashes), never trusted; so is a stamp owned by another user (not root) or
  writable by others, with a one-line note (the cache's rule, :mod:`patchq.vllmdist.cache`).
  Its key names everything the payload depends on besides the stamped files (the command,
  the profile, the paths, the vLLM dist-info, patchq's version); a stamp of another key is
  ignored.
* **patchq itself.** A payload is what *this* patchq computed, so every key also names
  the directory patchq runs from (``code``), and every stamp also holds the file of each
  patchq module loaded when it was saved as an input (:func:`own_sources`): another install
  of the same version sharing the cache (a second venv, a worktree), or a patchq changed
  in place (a checkout's ``git pull``, an edit) reads no stamp another patchq wrote.

Stamps are a cache: ``<cache>/stamps/<CRC-32 and Adler-32 of the key>.stamp``, one line
per input (written atomically; an unwritable cache only costs the hashing). Reading one
imports neither :mod:`json` nor :mod:`hashlib` (they cost more than the rest of a no-op).
``PATCHQ_STAMPS=0`` turns them off.
"""

from __future__ import annotations

import os
from stat import S_ISDIR, S_ISREG  # imported by os already

SCHEMA = "patchq.stamp/2"
#: An input must be older than this when a stamp is saved (module docstring).
SETTLE_NS = 2_000_000_000
#: A larger stamp file is not read (a stamp of a 400-patch series is about 100 KB).
MAX_BYTES = 16 << 20
_BAD = ("\t", "\n", "\r")  # a path or key holding one of these is never stamped


def now() -> int:
    """The time a verification starts (``time.time_ns()``): pass it to :func:`save`."""
    import time

    return time.time_ns()


def enabled() -> bool:
    """False when ``PATCHQ_STAMPS=0``."""
    return os.environ.get("PATCHQ_STAMPS", "1") != "0"


#: The directory patchq runs from (module docstring: "patchq itself").
CODE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _key_line(key: dict[str, str]) -> str:
    key = {**key, "code": CODE}
    return "K\t" + "\t".join(f"{k}={key[k]}" for k in sorted(key))


def own_sources() -> list[str]:
    """The files of patchq's modules loaded in this process, sorted: the code that computed
    a payload (inputs of every stamp; a change that alters the answer changes one of them,
    or one of them to import another)."""
    import sys

    prefix = os.path.join(CODE, "")
    files = {getattr(m, "__file__", None) for name, m in list(sys.modules.items())
             if name == "patchq" or name.startswith("patchq.")}
    return sorted(f for f in files if isinstance(f, str) and os.path.abspath(f).startswith(prefix))


def _path(key: dict[str, str]) -> str:
    import zlib

    from patchq.vllmdist import cache

    line = _key_line(key).encode("utf-8", "surrogateescape")
    return os.path.join(cache.root_text(), "stamps", f"{zlib.crc32(line):08x}{zlib.adler32(line):08x}.stamp")


def _crc(text: str) -> str:
    import zlib

    return f"{zlib.crc32(text.encode('utf-8', 'surrogateescape')):08x}"


def _file_stat(path: str) -> tuple | None:
    """(dev, ino, size, mtime_ns, ctime_ns) of a regular file, ``None`` when it is
    missing, or ``()`` for anything else (never equal to a stamped file)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not S_ISREG(st.st_mode):
        return ()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _file_line(path: str) -> str | None:
    """:func:`_file_stat` as the numbers of a stamp's ``F`` line (tab-separated; ``""`` for
    anything but a regular file): a stamp is checked by comparing text, not parsing it."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not S_ISREG(st.st_mode):
        return ""
    return f"{st.st_dev}\t{st.st_ino}\t{st.st_size}\t{st.st_mtime_ns}\t{st.st_ctime_ns}"


def _dir_stat(path: str, suffixes: tuple[str, ...]) -> tuple | None:
    """((dev, ino, mtime_ns, ctime_ns), sorted names ending with ``suffixes``) of a
    directory, ``None`` when it is missing, ``()`` when it is not a directory."""
    try:
        st = os.stat(path)
        if not S_ISDIR(st.st_mode):
            return ()
        names = sorted(n for n in os.listdir(path) if n.endswith(suffixes))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), names


def _read(path: str) -> list[str] | None:
    """The lines of a stamp file after its header, when its CRC-32 is right and the file is
    yours or root's and not writable by others (another user's stamp is ignored, with a note:
    it could make a changed environment look unchanged)."""
    with open(path, "rb") as fh:
        from patchq.trust import stat_problem

        problem = stat_problem(path, os.fstat(fh.fileno()))
        if problem:
            from patchq.vllmdist import cache

            cache.note_untrusted("stamp", path, problem)
            return None
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        return None
    import zlib

    head, _, body = raw.partition(b"\n")  # the CRC of the bytes: what _crc took of the text
    if head != f"{SCHEMA} {zlib.crc32(body):08x}".encode():
        return None
    return body.decode("utf-8", "surrogateescape").split("\n")


def load(key: dict[str, str]) -> str | None:
    """The payload of the stamp of ``key`` when every stamped input is as stamped, else
    None (no stamp, a damaged one, another key, or any input changed)."""
    if not enabled():
        return None
    try:
        lines = _read(_path(key))
        if not lines or lines[0] != _key_line(key):
            return None
        return _check(lines[1:])
    except (OSError, ValueError, IndexError):
        return None  # a damaged or foreign stamp: hash as before


def _check(lines: list[str]) -> str | None:
    """The payload when every ``F``/``M``/``D`` line still holds, else None."""
    i = 0
    while i < len(lines):
        tag, _, rest = lines[i].partition("\t")
        i += 1
        if tag == "F":
            path, _, stats = rest.partition("\t")  # a stamped path holds no tab (_BAD)
            if _file_line(path) != stats:
                return None
        elif tag == "M":
            if _file_stat(rest) is not None:
                return None
        elif tag == "D":
            path, suffixes, *nums = rest.split("\t")
            count = int(nums.pop())
            got = _dir_stat(path, tuple(suffixes.split(",")))
            if not got or got != (tuple(int(n) for n in nums), lines[i:i + count]):
                return None
            i += count
        elif tag == "P":
            return rest
        else:
            return None
    return None


def _settled(times: tuple, taken: int) -> bool:
    return all(t < taken - SETTLE_NS for t in times)


def save(key: dict[str, str], files: list[str], dirs: list[tuple[str, tuple[str, ...]]], payload: str,
         taken: int) -> bool:
    """Stamp ``files`` (regular files, or files that must stay absent) and ``dirs`` (with
    their entries ending in the given suffixes) under ``key`` with ``payload`` (one line),
    verified from ``taken`` (:func:`now`, read before the caller hashed them) on.

    Returns:
        True when the stamp was written; False when an input is not settled (written
        less than :data:`SETTLE_NS` before ``taken``, or in the future), is neither a
        regular file nor missing, a path holds a tab or a line break, or the stamp cannot
        be written (nothing else happens: the next run hashes again).
    """
    if not enabled() or any(c in v for v in [*key.values(), *files, *(d for d, _ in dirs), payload] for c in _BAD):
        return False
    lines = [_key_line(key)]
    for path in [*files, *own_sources()]:
        st = _file_stat(path)
        if st is None:
            lines.append(f"M\t{path}")
            continue
        if not st or not _settled(st[3:5], taken):
            return False
        lines.append("F\t" + "\t".join([path, *map(str, st)]))
    for path, suffixes in dirs:
        got = _dir_stat(path, suffixes)
        if not got or not _settled(got[0][2:4], taken) or any(c in n for n in got[1] for c in _BAD):
            return False
        lines.append("D\t" + "\t".join([path, ",".join(suffixes), *map(str, got[0]), str(len(got[1]))]))
        lines += got[1]
    lines.append(f"P\t{payload}")
    body = "\n".join(lines)
    return _write(_path(key), f"{SCHEMA} {_crc(body)}\n{body}".encode("utf-8", "surrogateescape"))


def _write(target: str, data: bytes) -> bool:
    """Write one stamp, only into a cache root patchq may use
    (:func:`patchq.vllmdist.cache.check_root`: a missing root is made and marked, a
    directory of someone else's is refused): ``--help`` on a misset ``PATCHQ_CACHE_DIR``
    writes nothing there."""
    from patchq.errors import CacheRefused
    from patchq.vllmdist import cache

    try:
        root = cache.check_root()
    except CacheRefused:
        return False
    if not cache.is_marked(root):  # could not be made or marked here: leave it alone
        return False
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644), "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True
