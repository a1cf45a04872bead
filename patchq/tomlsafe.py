"""Bounded reading of every TOML file patchq reads (standard library only).

The series' ``profiles.toml`` and ``anchors/<patch>.toml``, a project's ``patchq.toml`` or
``pyproject.toml`` ``[tool.patchq]``, the goldens' ``<patch>.expect.toml``: each is read
with :func:`read_file` (or its text parsed with :func:`loads`), the one TOML reader of
patchq, as :mod:`patchq.jsonsafe` is for JSON:

* the file must be a regular file: opened ``O_NONBLOCK`` and checked with ``fstat``, so a
  FIFO never blocks and a device is never read;
* at most :data:`MAX_BYTES` bytes (the largest real one, an anchors file of the Spark
  series, is under 7 KB);
* UTF-8, TOML, and nested at most :data:`MAX_DEPTH` tables and arrays deep (``tomllib``
  recurses once per level: 5000 nested arrays were a ``RecursionError``, exit 70, for
  every command);
* a file of a series found by walking up from the working directory is checked by the
  trust rule of its modules (:func:`file_problem`: owned by you or root, not writable by
  others), as ``profiles.toml`` chooses which patches a profile applies and an anchors file
  where they land. :mod:`patchq.discovery` decides which repos are held to it
  (:data:`GUARDED`) and uses :func:`ownership_problem` for the config and its directories.

Every refusal is a :class:`~patchq.errors.SeriesError` (exit 2) whose message starts with
the file; a walked-up file refused by the trust rule is an
:class:`~patchq.errors.UnsafeConfig` (exit 2, saying how to opt in).
"""

from __future__ import annotations

import os
import stat
import sys

from patchq.errors import SeriesError
from patchq.trust import SAFE_ENV, ownership_problem, stat_problem  # noqa: F401 - the one rule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)

#: Largest TOML file read (bytes).
MAX_BYTES = 1 << 20
#: Deepest nesting of tables and arrays accepted (``[anchors.<id>.fingerprints]`` is 3).
MAX_DEPTH = 32


#: real directory of a config found by walking up and not opted in -> the config: every file
#: read below it is held to the trust rule (:func:`file_problem`; filled by
#: :func:`patchq.discovery.guard`)
GUARDED: dict[str, str] = {}


def file_problem(path: str, st: os.stat_result | None = None) -> str | None:
    """Why the file ``path`` (``st``: its ``fstat`` once opened) of a series found by walking
    up may not be trusted, or None: as for its patch modules (:func:`ownership_problem`),
    a file that decides what runs (``profiles.toml`` chooses a profile's patches, an
    anchors file where they land, ``.patchq-edit`` what ``record`` writes) must be owned by
    you or root and not writable by others. Files of other series are not checked."""
    if not GUARDED:
        return None
    real = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    config = next((c for d, c in GUARDED.items() if real == d or real.startswith(d.rstrip(os.sep) + os.sep)), None)
    if config is None:
        return None
    problem = ownership_problem(path)
    if problem is None and st is not None:
        problem = stat_problem(path, st)
    if problem is None:
        return None
    directory = os.path.dirname(config)
    return (f"refusing {path} of the series found by walking up to {config}: {problem}. If you trust it, pass "
            f"--series {directory}, or set {SAFE_ENV}={directory}")


def toml_module():
    """``tomllib`` (Python 3.11+) or its backport ``tomli``: the one place that chooses."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


def _depth(data: object, limit: int) -> bool:
    """True when ``data`` (parsed TOML) nests at most ``limit`` tables/arrays deep
    (iterative: no recursion of its own)."""
    todo = [(data, 1)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, dict):
            items = list(value.values())
        elif isinstance(value, list):
            items = value
        else:
            continue
        if depth > limit:
            return False
        todo += [(v, depth + 1) for v in items if isinstance(v, (dict, list))]
    return True


def loads(text: str, where: object, max_depth: int = MAX_DEPTH) -> dict:
    """Parse TOML ``text`` read from ``where`` (a path, for the message), with the depth bound.

    Raises:
        SeriesError: ``WHERE: <the parser's message>`` (line and column), or nested deeper
            than ``max_depth``.
    """
    toml = toml_module()
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise SeriesError(f"{where}: {exc}") from None
    except RecursionError:
        data = None
    if data is None or not _depth(data, max_depth):
        raise SeriesError(f"{where}: tables and arrays nested deeper than {max_depth} levels; not a patchq file")
    return data


def read_bytes(path: str | os.PathLike, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them, never blocking,
    checked by the trust rule when it belongs to a walked-up series (module docstring).

    Raises:
        SeriesError: missing, unreadable, not a regular file, or too large (the message
            starts with the file). UnsafeConfig: refused by the trust rule.
    """
    where = os.fspath(path)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SeriesError(f"{where}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SeriesError(f"{where}: not a regular file (a directory, FIFO or device is in its place)")
        if st.st_size > max_bytes:
            raise SeriesError(f"{where}: {st.st_size} bytes, more than the {max_bytes} a patchq TOML file may hold")
        problem = file_problem(where, st)
        if problem:
            from patchq.errors import UnsafeConfig

            raise UnsafeConfig(problem)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > max_bytes:  # it grew while read
                raise SeriesError(f"{where}: more than the {max_bytes} bytes a patchq TOML file may hold")
            chunks.append(chunk)
    except OSError as exc:
        raise SeriesError(f"{where}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def parse(raw: bytes, where: object, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> dict:
    """The parsed TOML of ``raw``, the bytes of ``where`` (a path, for the message), bounded.

    Raises:
        SeriesError: larger than ``max_bytes``, not UTF-8, not TOML, nested too deep; the
            message starts with ``where``.
    """
    if len(raw) > max_bytes:
        raise SeriesError(f"{where}: {len(raw)} bytes, more than the {max_bytes} a patchq TOML file may hold")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SeriesError(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    return loads(text, where, max_depth)


def read_file(path: str | os.PathLike, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> dict:
    """The parsed TOML of the file ``path``, bounded (module docstring).

    Raises:
        SeriesError: not a regular file, too large, not UTF-8, not TOML, nested too deep;
            the message starts with the file. UnsafeConfig: refused by the trust rule.
    """
    return parse(read_bytes(path, max_bytes), os.fspath(path), max_bytes, max_depth)
