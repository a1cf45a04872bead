"""The one way patchq writes into a series repo: atomic, verified, and whole or not at all.

Every file patchq writes under a series repo (``patchq.toml``, ``series/*.py``,
``series/profiles.toml``, ``anchors/*.toml``, goldens, ``series/diffs/<v>/*.diff``, the
``.patchq-edit/`` and ``.patchq-rebase/`` work directories) goes through this module, the
way site-packages goes through :mod:`patchq.env.fsutil`:

:func:`write_file` (one file)
    a temporary file in the same directory, written and fsynced, ``os.replace``\\ d over
    the target, the directory fsynced, then the file read back and compared with what
    was meant (sha256). A full disk, a read-only filesystem or a missing permission
    (``ENOSPC``, ``EDQUOT``, ``EROFS``, ``EACCES``, ``EPERM``) raises
    :class:`patchq.errors.RepoWriteError` (exit 5, one line naming the file and the
    errno); the target then still holds its old bytes (a rewrite that grows past a
    block is never truncated in place).
:class:`Transaction` (several files: a patch module, its anchors, the profile entry,
    goldens, diffs)
    a rollback journal, as SQLite keeps one. Before the first file changes, the old bytes
    of every file to change are saved with their sha256 in ``<repo>/.patchq-txn/``
    (built beside it and renamed into place, so the journal is whole or absent). Then
    the files are written with :func:`write_file`. When the block of the ``with``
    statement ends without an exception, the journal is renamed away (the commit
    point) and removed; on an exception every file is put back from the journal. A
    process killed in between leaves the journal, and the next patchq that uses this
    series (:func:`recover`, called by :func:`patchq.discovery.find`) rolls it back:
    each file that holds the transaction's new bytes gets its old bytes again (a file
    created by it is removed); a file edited since is left alone and named. So a
    multi-file change lands whole (the command finished, verification included) or not
    at all.

Temporary files a killed writer left (``.<name>.<pid>.<random>.patchq-tmp``, the writer's pid
no longer running) are removed on the next write into their directory and when a
transaction starts (:func:`clean_temp`); their names never look like series data.

Rules: a journal path must lie inside one of the roots the caller names (the series
repo, its series, anchors and goldens directories); a journal entry is only acted on
when the file's current sha256 is the transaction's new one. The repo directory is
``flock``\\ ed while a transaction is open, so two patchq processes never interleave
their changes of one series. Standard library only: the fast path calls :func:`pending`.

Typical use::

    from patchq.authoring import repowrite

    with repowrite.Transaction(repo, "patchq record my-fix") as txn:
        txn.write(series / "my_fix.py", module_text)
        txn.write(anchors / "my-fix.toml", anchors_text)
        txn.write(series / "profiles.toml", profiles_text)
        verify()   # raises: every file above is put back as it was
    written = txn.written
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from patchq.env.fsutil import atomic_write, fault_point, fsync_dir
from patchq.errors import RepoWriteError, StateError, UsageError

if TYPE_CHECKING:
    from patchq.series import Series

#: The journal directory of an open (or interrupted) transaction, in the repo root.
JOURNAL_DIR = ".patchq-txn"
JOURNAL_FILE = "journal.json"
JOURNAL_SCHEMA = "patchq.repo-txn/1"
#: Suffix of the temporary files :func:`write_file` makes (``.<name>.<pid>.<random>.patchq-tmp``).
TMP_SUFFIX = ".patchq-tmp"
#: A journal larger than this is not read (a planted or damaged one).
MAX_JOURNAL_BYTES = 64 << 20


def env_error(path: Path | str, exc: OSError, what: str = "write") -> RepoWriteError:
    """The one-line :class:`RepoWriteError` (exit 5) for an ``OSError`` while writing
    ``path``: any errno, named (those of :data:`patchq.errors.ENV_ERRNOS` are what the
    environment refuses; the table is there, not here)."""
    from patchq.errors import errno_name

    name = errno_name(exc)
    why = f"{exc.strerror or exc}" + (f" ({name})" if name else "")
    return RepoWriteError(f"cannot {what} {path}: {why}; nothing was changed")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_regular(path: Path | str, limit: int | None = None) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (None when it does not exist).

    Never blocks and never follows: a FIFO, a device, a socket or a symlink in its place
    raises :class:`RepoWriteError` (opened with ``O_NONBLOCK | O_NOFOLLOW`` and checked
    with ``fstat``); so does a file larger than ``limit`` bytes.
    """
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RepoWriteError(f"{path} is a symlink; patchq neither reads nor writes through it") from None
        if exc.errno == errno.ENOTDIR:
            return None
        raise env_error(path, exc, "read") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RepoWriteError(f"{path} is not a regular file (a directory, FIFO or device is in its place)")
        if limit is not None and st.st_size > limit:
            raise RepoWriteError(f"{path} is larger than {limit} bytes; refusing to read it")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def refuse_bundled(path: Path | str, what: str = "this") -> None:
    """Refuse any write at or under a series an installed distribution carries in its
    install (:func:`patchq.discovery.installed_roots`: a wheel's files, which the next
    install replaces; an editable install's series is its checkout's and is written as any
    series repo is).

    ``what`` names the cause in the message (``upgrade`` passes ``--write``).

    Raises:
        UsageError: ``path`` resolves inside such a series (exit 2); nothing is written.
    """
    from patchq import discovery

    real = os.path.realpath(path)
    for root, dist in discovery.installed_roots().items():
        if real == root or real.startswith(root + os.sep):
            raise UsageError(f"{what} would write {real} inside the installed series of {dist} ({root}), which the "
                             f"next install replaces; nothing was written. Make a series repo (`patchq init DIR`; copy "
                             f"that series/ and anchors/ there to start from them) and work in it or pass --series DIR")


def _check_target(path: Path) -> None:
    """Refuse to replace anything but a regular file (or nothing): a symlink, a directory,
    a FIFO or a device in the way is named, never followed or replaced; and any path of
    an installed series (:func:`refuse_bundled`)."""
    refuse_bundled(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise env_error(path, exc) from None
    if stat.S_ISLNK(st.st_mode):
        raise RepoWriteError(f"{path} is a symlink; patchq does not write through links (nothing was changed)")
    if not stat.S_ISREG(st.st_mode):
        raise RepoWriteError(f"{path} is not a regular file (a directory, FIFO or device is in its place); "
                             f"nothing was changed")


def _makedirs(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RepoWriteError(f"{directory} is in the way: a file where a directory belongs; nothing was changed") \
            from None
    except OSError as exc:
        raise env_error(directory, exc, "create") from None


def clean_temp(directories: Iterable[Path | str]) -> list[str]:
    """Remove the temporary files a killed patchq left in ``directories`` (not below them;
    :func:`patchq.env.fsutil.stale_temp`: their writer is gone), so that none outlives the
    next write into the series; returns what was removed. Such a file is never read as
    series data either way (its name ends in ``.patchq-tmp``, not ``.toml`` or ``.py``)."""
    from patchq.env.fsutil import stale_temp

    removed = []
    for directory in dict.fromkeys(str(d) for d in directories):
        if os.path.islink(directory):
            continue
        for path in stale_temp(directory):
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def write_file(path: Path | str, data: bytes | str, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically and check it landed (module docstring).

    Args:
        path: the file to create or replace (its directories are created).
        data: the new content (``str`` is written as UTF-8).
        mode: permission bits; default: the existing file's, else ``0o666 & ~umask``.
    Raises:
        RepoWriteError: the environment refused the write (full disk, read-only,
            permission), something other than a regular file is in the way, or the bytes
            read back differ; the target holds its old bytes then.
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    _check_target(path)
    _makedirs(path.parent)
    clean_temp([path.parent])
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        except OSError as exc:
            raise env_error(path, exc) from None
    try:
        atomic_write(path, raw, mode)  # temp file beside it, fsync, replace, fsync of the directory
    except OSError as exc:
        raise env_error(path, exc) from None
    back = read_regular(path)
    if back is None or _sha(back) != _sha(raw):
        raise RepoWriteError(f"{path}: the bytes read back differ from what was written (a failing disk or "
                             f"another writer); check the file")
    fault_point("PATCHQ_FAULT_AFTER_REPO_WRITES")  # the test layer's crash after the n-th write (a checkout only)


def remove_file(path: Path | str) -> bool:
    """Remove the regular file (or symlink) ``path``; False when it was not there.

    Raises:
        RepoWriteError: it is a directory, or the environment refuses.
    """
    path = Path(path)
    refuse_bundled(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        raise RepoWriteError(f"{path} is a directory where patchq expects its own file; nothing was removed")
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise env_error(path, exc, "remove") from None
    fsync_dir(path.parent)
    return True


# --------------------------------------------------------------------------- transactions


def journal_dir(repo: Path | str) -> Path:
    """``<repo>/.patchq-txn``: where an open or interrupted transaction's journal lives."""
    return Path(repo) / JOURNAL_DIR


def pending(repo: Path | str) -> bool:
    """True when an interrupted transaction awaits :func:`recover` (one ``lstat``)."""
    return os.path.lexists(os.path.join(str(repo), JOURNAL_DIR))


def _inside(path: str, roots: Iterable[str]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return True
    return False


class _RepoLock:
    """``flock`` of the repo directory itself (no lock file is left in the user's repo)."""

    def __init__(self, repo: Path, timeout: float = 300.0) -> None:
        self.repo, self.timeout = repo, timeout
        self.fd: int | None = None

    def __enter__(self) -> _RepoLock:
        import fcntl

        try:
            fd = os.open(str(self.repo), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise env_error(self.repo, exc, "open") from None
        self.fd = fd
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    self.fd = None
                    raise RepoWriteError(f"another patchq is changing the series in {self.repo} "
                                         f"(it held the lock for {self.timeout:g} s); nothing was changed") from None
                time.sleep(0.02)
            except OSError:  # a filesystem without flock: one writer is the user's job there
                return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Transaction:
    """A multi-file change of a series repo that lands whole or not at all (module docstring).

    Args:
        repo: the series repo root (where ``.patchq-txn/`` goes; created when missing).
        what: the command, for the journal and messages (``"patchq record my-fix"``).
        roots: the directories the change may touch (default: ``repo``); a path outside
            them is refused with :class:`RepoWriteError` before anything is written.

    Files are staged with :meth:`write` / :meth:`remove` and land when the ``with`` block
    is left without an exception, or at :meth:`apply` inside the block when the caller
    must see them on disk (to verify them, or to compute the next file from them); more
    files may be staged and applied after that. The journal stays until the block ends
    without an exception: an exception, or a kill, puts every file back as it was before
    the block. :attr:`written` lists the paths changed (strings), in order.
    """

    def __init__(self, repo: Path | str, what: str, roots: Iterable[Path | str] = ()) -> None:
        refuse_bundled(repo)  # its journal, and every file it stages, would land in the install
        self.repo = Path(os.path.abspath(repo))
        self.what = what
        self.roots = [os.path.abspath(r) for r in roots] or [str(self.repo)]
        self._staged: dict[Path, bytes | None] = {}
        self._entries: list[dict] = []
        self._saved = 0
        self._lock: _RepoLock | None = None
        self.written: list[str] = []

    # -- staging ---------------------------------------------------------------------

    def _check(self, path: Path) -> Path:
        refuse_bundled(path)
        path = Path(os.path.abspath(path))
        if not _inside(str(path), self.roots):
            raise RepoWriteError(f"{path} is outside the series repo ({', '.join(self.roots)}); refusing to write it")
        return path

    def write(self, path: Path | str, data: bytes | str) -> None:
        """Stage ``path`` to hold ``data`` (``str``: UTF-8)."""
        p = self._check(Path(path))
        self._staged[p] = data.encode("utf-8") if isinstance(data, str) else bytes(data)

    def remove(self, path: Path | str) -> None:
        """Stage the removal of ``path`` (nothing when it does not exist)."""
        self._staged[self._check(Path(path))] = None

    def staged(self, path: Path | str) -> bytes | None:
        """What ``path`` will hold: the staged bytes, else its current bytes (None: absent)."""
        p = Path(os.path.abspath(path))
        if p in self._staged:
            return self._staged[p]
        return read_regular(p)

    # -- landing ---------------------------------------------------------------------

    def __enter__(self) -> Transaction:
        _makedirs(self.repo)
        self._lock = _RepoLock(self.repo)
        self._lock.__enter__()
        try:
            _recover_locked(self.repo, self.roots)
            clean_temp([r for r in self.roots if os.path.isdir(r)])
        except BaseException:
            self._release()
            raise
        return self

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.__exit__()
            self._lock = None

    def apply(self) -> list[str]:
        """Land the files staged so far (their old bytes journalled first); returns every
        path changed so far. An exception later in the ``with`` block still puts them back."""
        changes: dict[Path, tuple[bytes | None, bytes | None]] = {}
        for path, data in self._staged.items():
            old = read_regular(path)
            if old != data:
                changes[path] = (old, data)
        self._staged.clear()
        if not changes:
            return self.written
        self._journal(changes)
        try:
            for path, (_old, data) in changes.items():
                if data is None:
                    remove_file(path)
                else:
                    write_file(path, data)
                self.written.append(str(path))
        except BaseException:
            self._roll_back()
            raise
        return self.written

    def _journal(self, changes: dict[Path, tuple[bytes | None, bytes | None]]) -> None:
        """Add ``changes`` to the rollback journal. The first call builds the journal in a
        sibling directory and renames it into place; later ones save the old bytes first,
        then replace ``journal.json`` atomically."""
        final = journal_dir(self.repo)
        first = not self._entries
        where = Path(tempfile.mkdtemp(prefix=f"{JOURNAL_DIR}.tmp-", dir=self.repo)) if first else final
        try:
            for path, (old, new) in changes.items():
                entry = {"path": str(path), "old": None if old is None else _sha(old),
                         "new": None if new is None else _sha(new), "saved": None}
                if old is not None:
                    saved = f"old-{self._saved}"
                    entry["saved"] = saved
                    self._saved += 1
                    _write_plain(where / saved, old)
                self._entries.append(entry)
            doc = {"schema": JOURNAL_SCHEMA, "what": self.what, "pid": os.getpid(),
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "entries": self._entries}
            if first:
                _write_plain(where / JOURNAL_FILE, json.dumps(doc, indent=1).encode())
                fsync_dir(where)
                os.rename(where, final)
                fsync_dir(self.repo)
            else:
                fsync_dir(where)
                tmp = where / f"{JOURNAL_FILE}.{os.getpid()}.tmp"
                _write_plain(tmp, json.dumps(doc, indent=1).encode(), exclusive=False)
                os.replace(tmp, where / JOURNAL_FILE)
                fsync_dir(where)
        except OSError as exc:
            if first:
                shutil.rmtree(where, ignore_errors=True)
            self._entries = self._entries[:len(self._entries) - len(changes)] if not first else []
            raise env_error(final, exc) from None
        except BaseException:
            if first:
                shutil.rmtree(where, ignore_errors=True)
                self._entries = []
            raise

    def _roll_back(self) -> None:
        """Put every file back from the journal (then drop it); files edited since stay."""
        if pending(self.repo):
            _recover_locked(self.repo, self.roots)
        self._entries = []

    def _commit(self) -> None:
        final = journal_dir(self.repo)
        if not os.path.lexists(final):
            return
        done = self.repo / f"{JOURNAL_DIR}.done-{os.getpid()}-{os.urandom(3).hex()}"
        try:
            os.rename(final, done)  # the commit point
        except OSError as exc:
            raise env_error(final, exc, "commit") from None
        fsync_dir(self.repo)
        shutil.rmtree(done, ignore_errors=True)
        self._entries = []

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if exc_type is None:
                try:
                    self.apply()
                    self._commit()
                except BaseException:
                    self._roll_back()
                    raise
            elif self._entries:
                self._roll_back()
        finally:
            self._release()


def _write_plain(path: Path, data: bytes, exclusive: bool = True) -> None:
    with open(path, "xb" if exclusive else "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _read_journal(jdir: Path) -> dict:
    raw = read_regular(jdir / JOURNAL_FILE, limit=MAX_JOURNAL_BYTES)
    if raw is None:
        raise StateError(f"{jdir} holds no {JOURNAL_FILE}: an interrupted patchq left it damaged; check the files "
                         f"it names, then remove {jdir}")
    from patchq.jsonsafe import loads

    try:
        doc = loads(raw)
    except ValueError as exc:
        raise StateError(f"{jdir / JOURNAL_FILE} is damaged ({exc}); check your series files, then remove "
                         f"{jdir}") from None
    ok = (isinstance(doc, dict) and doc.get("schema") == JOURNAL_SCHEMA and isinstance(doc.get("entries"), list)
          and all(isinstance(e, dict) and isinstance(e.get("path"), str)
                  and all(e.get(k) is None or isinstance(e.get(k), str) for k in ("old", "new", "saved"))
                  for e in doc["entries"]))
    if not ok:
        raise StateError(f"{jdir / JOURNAL_FILE} is not a {JOURNAL_SCHEMA} journal; check your series files, then "
                         f"remove {jdir}")
    return doc


def recover(repo: Path | str, roots: Iterable[Path | str] = ()) -> list[str]:
    """Roll back an interrupted transaction of ``repo`` (module docstring); returns the
    paths put back. Leftovers of a journal being built or removed are cleaned. A
    transaction still open in a live patchq (it holds the repo's lock) is left alone.

    Args:
        repo: the series repo root.
        roots: directories a journal path must lie in (default: ``repo``).
    Raises:
        StateError: the journal is damaged, names a path outside ``roots``, its saved
            bytes do not match their sha256, or a file was edited since (named; that file
            is left as it is, the journal is kept).
        RepoWriteError: a file cannot be written back.
    """
    import fcntl

    try:
        fd = os.open(str(repo), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []  # another patchq is inside its transaction: not interrupted
        except OSError:
            pass
        return _recover_locked(repo, roots)
    finally:
        os.close(fd)


def _recover_locked(repo: Path | str, roots: Iterable[Path | str] = ()) -> list[str]:
    """:func:`recover`, the caller holding the repo's lock."""
    repo = Path(repo)
    allowed = [str(r) for r in roots] or [str(repo)]
    try:
        names = os.listdir(repo)
    except OSError:
        return []
    for name in names:  # a journal being built (not yet renamed in) or being removed
        if name.startswith((f"{JOURNAL_DIR}.tmp-", f"{JOURNAL_DIR}.done-")):
            p = repo / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
    jdir = journal_dir(repo)
    if not os.path.lexists(jdir):
        return []
    if os.path.islink(jdir) or not jdir.is_dir():
        raise StateError(f"{jdir} is not a directory patchq made (a symlink or a file); remove it by hand")
    doc = _read_journal(jdir)
    todo, edited = _rollback(jdir, doc["entries"], allowed)
    if edited:
        raise StateError(f"an interrupted `{doc.get('what')}` left {jdir}, and {', '.join(sorted(set(edited)))} "
                         f"changed since; patchq left them as they are: check them, then remove {jdir}")
    done = []
    for path, old in todo:
        if old is None:
            remove_file(path)
        else:
            write_file(path, old)
        done.append(str(path))
    gone = repo / f"{JOURNAL_DIR}.done-{os.getpid()}-{os.urandom(3).hex()}"
    try:
        os.rename(jdir, gone)
    except OSError as exc:
        raise env_error(jdir, exc, "remove") from None
    fsync_dir(repo)
    shutil.rmtree(gone, ignore_errors=True)
    return done


def _rollback(jdir: Path, entries: list[dict], allowed: list[str]) -> tuple[list[tuple[Path, bytes | None]],
                                                                          list[str]]:
    """What rolling back the journal's ``entries`` takes, newest first: (path, bytes to put
    back or None to remove) for each file as the transaction left it, and the paths
    edited since (neither before nor after). Nothing is written.

    Raises:
        StateError: a path outside ``allowed``, or a damaged saved copy.
    """
    todo: list[tuple[Path, bytes | None]] = []
    edited = []
    now: dict[str, str | None] = {}  # path -> its sha256 as the rollback so far leaves it
    for e in reversed(entries):  # a file changed twice is put back step by step
        path = Path(e["path"])
        if not path.is_absolute() or not _inside(str(path), allowed):
            raise StateError(f"{jdir / JOURNAL_FILE} names {path}, outside the series repo; refusing it "
                             f"(remove {jdir})")
        old = _saved(jdir, e, path)
        if str(path) not in now:
            data = read_regular(path) if os.path.lexists(path) else None
            now[str(path)] = None if data is None else _sha(data)
        if now[str(path)] == e["old"]:
            continue  # never written, or already put back
        if now[str(path)] == e["new"]:
            todo.append((path, old))
            now[str(path)] = e["old"]
        else:
            edited.append(str(path))
    return todo, edited


def _saved(jdir: Path, entry: dict, path: Path) -> bytes | None:
    """The bytes a journal entry saved of ``path`` before the write (None: it did not exist).

    Raises:
        StateError: the saved copy's name or bytes are damaged.
    """
    if entry["old"] is None:
        return None
    saved = entry.get("saved") or ""
    if "/" in saved or saved in ("", ".", ".."):
        raise StateError(f"{jdir / JOURNAL_FILE} is damaged (saved name {saved!r}); remove {jdir}")
    old = read_regular(jdir / saved)
    if old is None or _sha(old) != entry["old"]:
        raise StateError(f"the saved copy of {path} in {jdir} is damaged; check {path} by hand, then "
                         f"remove {jdir}")
    return old


def repo_of(series_root: Path | str) -> Path:
    """The series repo root of a series directory: its parent (where ``.patchq-edit/``,
    ``.patchq-rebase/`` and ``.patchq-txn/`` live, as ``patchq.toml`` does in ``patchq init``'s layout)."""
    return Path(os.path.abspath(series_root)).parent


def series_roots(series: Series) -> list[str]:
    """The directories a change of ``series`` (a :class:`patchq.series.Series`) may touch:
    its repo root, series, anchors and goldens directories."""
    roots = [repo_of(series.root), Path(series.root), Path(series.anchors_root)]
    loc = getattr(series, "location", None)
    if loc is not None and loc.goldens is not None:
        roots.append(loc.goldens)
    return [os.path.abspath(r) for r in roots]


def series_transaction(series: Series, what: str) -> Transaction:
    """A :class:`Transaction` over ``series``' repo (:func:`repo_of`, :func:`series_roots`)."""
    return Transaction(repo_of(series.root), what, series_roots(series))
