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
    # a long name is cut so that the temporary name stays within NAME_MAX (255 bytes)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:80]}.", suffix=".patchq-tmp", dir=path.parent)
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
