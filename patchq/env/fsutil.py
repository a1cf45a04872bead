"""Atomic file writes.

Every write patchq makes goes through :func:`atomic_write`: a temporary file in the
same directory, fsync, ``os.replace`` over the target, fsync of the directory. Readers
see the old or the new bytes, never a mix; a crash leaves one or the other. Replacing
(rather than writing into) the target also breaks hard links: uv installs files as hard
links into its cache, and writing through one would patch every environment sharing it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

#: Suffix of :func:`atomic_write`'s temporary files: ``.<name>.<pid>.<random>.patchq-tmp``.
TMP_SUFFIX = ".patchq-tmp"
#: A temporary file older than this (seconds) is stale whoever wrote it.
STALE_AGE = 3600.0


def stale_temp(directory: Path | str) -> list[str]:
    """The temporary files of :func:`atomic_write` in ``directory`` (not below it) whose
    writer is gone: its pid (in the name) no longer runs, or the file is older than
    :data:`STALE_AGE` (a name without a pid, from an older patchq, or a reused pid). A
    kill -9 between the write and the rename leaves one; a live writer's is never listed.
    Regular files only (paths)."""
    import re
    import time

    out: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    now = time.time()
    for name in names:
        m = re.match(r"^\..+?(?:\.(\d+))?\.[A-Za-z0-9_]{8}\.patchq-tmp$", name)
        if m is None:
            continue
        path = os.path.join(str(directory), name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        gone = now - st.st_mtime > STALE_AGE
        if not gone and m.group(1):
            try:
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                gone = True
            except (OSError, OverflowError, ValueError):
                pass
        if gone:
            out.append(path)
    return out


def _source_checkout() -> bool:
    """True when this patchq runs from its source checkout (an editable install, or the
    checkout on ``PYTHONPATH``): ``pyproject.toml`` of project ``patchq`` beside the package."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as fh:
            head = fh.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return '\nname = "patchq"\n' in head


def fault_point(variable: str) -> None:
    """The test layer's crash hook, called after each write: with ``$<variable>`` = N (the
    tests' ``PATCHQ_FAULT_AFTER_WRITES`` for site-packages, ``PATCHQ_FAULT_AFTER_REPO_WRITES``
    for a series repo), the N-th write ends the process at once (``os._exit(99)``, as a
    kill -9 would leave things). Honoured only when patchq runs from its source checkout
    (docs/testing.md): an installed wheel never stops itself over a stray variable."""
    value = os.environ.get(variable)
    if value is None or not value.strip().isdigit() or not _source_checkout():
        return
    left = int(value) - 1
    if left <= 0:
        os._exit(99)
    os.environ[variable] = str(left)


def fsync_dir(directory: Path | str) -> None:
    """fsync a directory so a rename in it is durable (no-op where unsupported). The one
    directory fsync of both writers, site-packages (:mod:`patchq.env`) and the series repo
    (:mod:`patchq.authoring.repowrite`)."""
    try:
        fd = os.open(str(directory), os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int | None = None, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically.

    Args:
        path: the file to create or replace.
        data: its new bytes.
        mode: permission bits; default: the existing file's, else 0o644.
        sync_dir: fsync the directory afterwards; a caller writing many files into a
            few directories passes False and calls :func:`fsync_dir` once per directory.
    Raises:
        OSError: the directory cannot be written (nothing is changed then).
    """
    path = Path(path)
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644
    # a long name is cut so that the temporary name stays within NAME_MAX (255 bytes); the
    # writer's pid in it tells a later patchq that a left temp file is stale (its writer is gone)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:80]}.{os.getpid()}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if sync_dir:
        fsync_dir(path.parent)


def invalidate_pycache(path: Path) -> list[Path]:
    """Delete the compiled ``__pycache__/<stem>.*.pyc`` files of a module source.

    Needed because an unchecked-hash pyc (PEP 552), as some installers write, is never
    re-validated against its source. Returns the files removed.
    """
    cache = path.parent / "__pycache__"
    removed = []
    if cache.is_dir() and not cache.is_symlink():  # a symlinked __pycache__ leads elsewhere: not followed
        for pyc in cache.glob(f"{path.stem}.*.pyc"):
            try:
                pyc.unlink()
                removed.append(pyc)
            except FileNotFoundError:
                pass
    return removed
