"""Bounded reading of the JSON and state files patchq did not just write (standard library only).

Every JSON document patchq reads back from disk (the journal, a transaction manifest,
``owner.json``, runtime records, hook manifests, cache markers, a series repo's journal)
is read with :func:`read_file` / :func:`loads`:

* the file must be a regular file: opened with ``O_NONBLOCK | O_NOFOLLOW`` and checked
  with ``fstat``, so a FIFO never blocks, a device is never read and a symlink is never
  followed (:class:`NotRegular`);
* at most ``max_bytes`` bytes (default :data:`MAX_BYTES`) are read (:class:`TooLarge`);
* nesting deeper than ``max_depth`` (default :data:`MAX_DEPTH`) is refused before the
  parser recurses (the C parser would raise ``RecursionError``, which is not a
  ``ValueError``).

All three errors are ``ValueError`` subclasses, so a caller that already turns
``(OSError, ValueError)`` into "damaged" keeps doing so.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat

#: Largest JSON file read (bytes): journals of big profiles are well below 1 MiB.
MAX_BYTES = 32 << 20
#: Deepest nesting accepted; patchq's own documents nest 6 levels at most.
MAX_DEPTH = 64

_OPENERS = re.compile(rb"[\[{]")


class NotRegular(ValueError):
    """A FIFO, device, socket, directory or symlink where a regular file belongs."""


class TooLarge(ValueError):
    """The file or text is larger than the bound."""


class TooDeep(ValueError):
    """The document nests deeper than the bound."""


class Untrusted(ValueError):
    """The file is owned by another user (not root) or writable by others
    (:func:`patchq.trust.stat_problem`); the message says which."""


def _depth_ok(raw: bytes, max_depth: int) -> bool:
    """Cheap check that no more than ``max_depth`` brackets are open at once (strings are
    stripped first, so brackets inside them do not count)."""
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return True
    stripped = re.sub(rb'"(?:[^"\\]|\\.)*"', b"", raw)
    depth = 0
    for m in re.finditer(rb"[\[\]{}]", stripped):
        if m.group() in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                return False
        else:
            depth -= 1
    return True


def loads(data: bytes | str, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH):
    """``json.loads`` with bounds (module docstring).

    Raises:
        ValueError: not JSON, not UTF-8, larger than ``max_bytes`` (:class:`TooLarge`) or
            nested deeper than ``max_depth`` (:class:`TooDeep`).
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise TooLarge(f"{len(raw)} bytes, more than {max_bytes}")
    if not _depth_ok(raw, max_depth):
        raise TooDeep(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:  # pragma: no cover - _depth_ok refuses these first
        raise TooDeep(f"nested deeper than {max_depth} levels") from None


def read_bytes(path: str | os.PathLike, max_bytes: int = MAX_BYTES, *, owned: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (never blocking, never following a link).

    ``owned``: the file must also be owned by this user or root and not writable by others,
    judged on the descriptor read (:func:`patchq.trust.stat_problem`): patchq's cache
    entries are read so.

    Raises:
        FileNotFoundError: it does not exist.
        NotRegular: something else is in its place (also a symlink).
        TooLarge: it is larger than ``max_bytes``.
        Untrusted: ``owned`` and the file is another user's or writable by others.
        OSError: it cannot be read.
    """
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular(f"{os.fspath(path)} is a symlink") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"{os.fspath(path)} is not a regular file")
        if st.st_size > max_bytes:
            raise TooLarge(f"{os.fspath(path)} is {st.st_size} bytes, more than {max_bytes}")
        if owned:
            from patchq.trust import stat_problem

            problem = stat_problem(os.fspath(path), st)
            if problem:
                raise Untrusted(problem)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise TooLarge(f"{os.fspath(path)} is more than {max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_file(path: str | os.PathLike, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH):
    """The parsed JSON of the regular file ``path`` (see :func:`read_bytes`, :func:`loads`).

    Raises:
        FileNotFoundError, OSError, ValueError (the subclasses above included).
    """
    return loads(read_bytes(path, max_bytes), max_bytes, max_depth)
