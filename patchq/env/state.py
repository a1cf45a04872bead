"""The per-environment state: journal, pristine copies, transaction, lock.

Where the state directory is and what it holds is :mod:`patchq.env.layout` (the one owner
of those names); this module is the only writer of it. Every byte written back into
site-packages from this state is verified first: a pristine copy against the journal and
RECORD (:meth:`StateDir.read_pristine`), a staged transaction file against the hash its
manifest recorded (:meth:`StateDir.recover`); a mismatch is a :class:`StateError` naming
the file, and nothing is written. Every path read from state must pass
:func:`patchq.env.layout.relpath_problem` and be a RECORD path (:meth:`StateDir.confine`).

This module uses the standard library only, so the no-op and status paths stay fast.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from patchq.env import layout
from patchq.env.fsutil import atomic_write, fault_point, fsync_dir, invalidate_pycache
from patchq.errors import ReadOnlyError, StateError
from patchq.hashing import sha256_file

SCHEMA = layout.JOURNAL_SCHEMA
STATE_DIRNAME = layout.STATE_DIRNAME


@dataclass
class FileEntry:
    """One file patchq changed: RECORD, pristine and patched sha256, and its patch ids."""

    record_sha256: str | None
    pristine_sha256: str
    patched_sha256: str
    patches: list[str] = field(default_factory=list)


@dataclass
class PatchEntry:
    """One patch of the applied profile: its hash, variant and files.

    ``outcome`` (patchq relations hook): ``applied``; ``superseded`` (applied, and a later
    patch rewrote its change on purpose: ``reason`` names it); or ``upstreamed`` (the
    release already has the change: nothing applied, no files). Written by
    :func:`patchq.plan.engine.journal_outcome`, read by ``status`` without parsing.
    """

    hash: str
    variant: str = ""
    files: list[str] = field(default_factory=list)
    outcome: str = "applied"
    reason: str = ""


@dataclass
class Journal:
    """The committed state of one environment (``journal.json``)."""

    vllm: str | None = None
    profile: str | None = None
    patches: dict[str, PatchEntry] = field(default_factory=dict)
    files: dict[str, FileEntry] = field(default_factory=dict)
    #: patch id -> hash of every patch of ``profile`` when it was applied (including
    #: not-applicable / upstreamed ones): the no-op check compares it with the series.
    profile_hashes: dict[str, str] = field(default_factory=dict)
    #: the plan's per-patch rows of the last write (``patches`` of the apply document).
    results: list = field(default_factory=list)
    #: :func:`patchq.hashing.series_summary` of the series at the last write: lets the
    #: fast path skip TOML parsing while the series files are unchanged.
    series: dict = field(default_factory=dict)
    updated: str = ""
    #: the series the patches were applied from (a ``series`` reference of the command
    #: documents: dir, anchors, from, config); {} when nothing is applied, or when an earlier
    #: patchq wrote the journal. ``apply`` refuses to revert another series' patches.
    applied_from: dict = field(default_factory=dict)

    def to_json(self) -> str:
        """Deterministic JSON text."""
        data = {"schema": SCHEMA, **asdict(self)}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data) -> Journal:
        """A journal from parsed JSON. Raises StateError when malformed."""
        problem = layout.journal_problem(data)
        if problem:
            raise StateError(f"journal.json is damaged: {problem}; `patchq revert --all --force` "
                             f"sets it aside and restores the files")
        return cls(
            vllm=data.get("vllm"), profile=data.get("profile"),
            patches={k: PatchEntry(**v) for k, v in data.get("patches", {}).items()},
            files={k: FileEntry(**v) for k, v in data.get("files", {}).items()},
            profile_hashes=data.get("profile_hashes", {}),
            results=data.get("results", []),
            series=data.get("series", {}),
            updated=data.get("updated", ""),
            applied_from=data.get("applied_from") or {},
        )


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StateLock:
    """The inter-process lock of one state directory: ``flock`` on the directory itself.

    Locking the directory (not a file in it) means a deleted or replaced ``lock`` file
    cannot let a second writer in; and after acquiring, the path must still name the
    locked directory (it was not removed and re-created meanwhile), else the lock is
    taken again. The directory is opened without following a symlink.
    ``$PATCHQ_LOCK_TIMEOUT`` (seconds, default 300) bounds the wait.

    Raises (on enter):
        ReadOnlyError: another patchq held the lock for the whole timeout, or the
            directory cannot be opened (nothing was written).
        StateError: the state directory is a symlink or not a directory.
    """

    def __init__(self, directory: Path, timeout: float | None = None) -> None:
        self.path = str(directory)
        if timeout is None:
            try:
                timeout = float(os.environ.get("PATCHQ_LOCK_TIMEOUT") or 300.0)
            except ValueError:
                timeout = 300.0
        self.timeout = timeout
        self.fd: int | None = None

    def __enter__(self) -> StateLock:
        import fcntl

        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise StateError(f"the state directory {self.path} is a symlink or not a directory; "
                                     f"refusing to use it") from None
                raise ReadOnlyError(f"cannot open {self.path} ({exc.strerror}); nothing was written") from None
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise ReadOnlyError(f"another patchq is writing this environment (it held {self.path} "
                                                f"for {self.timeout:g} s); nothing was written") from None
                        time.sleep(0.02)
                held = os.fstat(fd)
                try:
                    now = os.stat(self.path, follow_symlinks=False)
                except FileNotFoundError:
                    now = None
                if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                    self.fd = fd
                    return self
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # removed or replaced while we waited: lock the new one

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None


def _state_write(path: Path, data: bytes, **kw) -> None:
    """:func:`atomic_write` into the state directory; a full disk, a quota or a read-only
    filesystem is :class:`ReadOnlyError` (exit 5)."""
    try:
        atomic_write(path, data, **kw)
    except OSError as exc:
        raise ReadOnlyError(f"cannot write {path} ({exc.strerror or exc})") from None


class StateDir:
    """The state directory of one site-packages (see :mod:`patchq.env.layout`)."""

    def __init__(self, site_packages: Path) -> None:
        self.site = Path(site_packages)
        self.root = Path(layout.state_root(str(self.site)))
        base = layout.shared_base()
        self.legacy = bool(base and os.path.abspath(self.root) == os.path.abspath(base))

    @property
    def journal_path(self) -> Path:
        return Path(layout.journal_path(str(self.root)))

    @property
    def txn(self) -> Path:
        return Path(layout.txn_dir(str(self.root)))

    @property
    def manifest_path(self) -> Path:
        return Path(layout.txn_manifest(str(self.root)))

    def pristine_path(self, relpath: str) -> Path:
        return Path(layout.pristine_path(str(self.root), relpath))

    def check_usable(self) -> None:
        """Refuse a symlinked state directory, or a keyed one that names another
        site-packages in ``owner.json``. Raises StateError."""
        problem = layout.symlink_problem(str(self.root))
        if problem:
            raise StateError(problem)
        if layout.shared_base() and not self.legacy:
            owner = layout.read_owner(str(self.root))
            if owner is not None and owner != os.path.realpath(self.site):
                raise StateError(f"{self.root} belongs to {owner}, not {os.path.realpath(self.site)}")

    def confine(self, relpaths, record: dict[str, str], what: str) -> None:
        """Every relpath read from state must be a RECORD path of the vLLM distribution and
        lie inside site-packages (no symlink). Raises StateError naming the first that
        is not (``what``: where it was read)."""
        for rel in relpaths:
            problem = layout.relpath_problem(rel)
            if problem is None and rel not in record:
                problem = f"{rel!r} is not a file of the vllm distribution (not in RECORD)"
            if problem is None:
                problem = layout.inside(str(self.site), rel)
            if problem:
                raise StateError(f"{what} is damaged: {problem}; `patchq revert --all --force` restores the files")

    def read(self, record: dict[str, str] | None = None) -> Journal:
        """The committed journal (empty when none); with ``record``, its paths are confined.

        Raises:
            StateError: damaged, a directory, a symlinked state directory, or a path that
                is not a RECORD path inside site-packages.
        """
        from patchq.env.status import read_journal  # the one journal reader (stdlib: the fast path's too)

        self.check_usable()
        data = read_journal(str(self.root))
        journal = Journal.from_dict(data) if data else Journal()
        if record is not None:
            self.confine(journal.files, record, str(self.journal_path))
        return journal

    def set_aside(self) -> Path:
        """Move a damaged journal aside (``journal.json.damaged-<UTC time>``) so that a forced
        revert can start from an empty one; returns where it went."""
        aside = self.root / f"{layout.JOURNAL}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
        if os.path.lexists(self.journal_path):
            os.replace(self.journal_path, aside)
        return aside

    def set_aside_txn(self) -> Path:
        """Move a damaged transaction aside (``txn.damaged-<UTC time>``); returns where."""
        aside = self.root / f"{layout.TXN}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
        os.replace(self.txn, aside)
        return aside

    def has_pending(self) -> bool:
        """True when an interrupted write awaits recovery."""
        return layout.has_pending(str(self.root))

    def ensure(self, force: bool = False) -> None:
        """Create the state directory (moving a legacy flat ``$PATCHQ_STATE_DIR`` into its
        ``env-<key>/``) and record its owner. With ``force`` (``revert --force``), a
        symlinked entry in it (``journal.json``, ``pristine``, ...) is moved aside as a link,
        never followed; a symlinked state directory itself is refused even then.

        Raises:
            ReadOnlyError: it cannot be created or written.
            StateError: it is a symlink, or belongs to another site-packages.
        """
        if self.legacy:
            self._migrate()
        stamp = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
        if force and (os.path.islink(self.root) or (os.path.lexists(self.root) and not self.root.is_dir())):
            # a symlinked (or non-directory) state directory is moved aside as it is, never
            # followed: the forced revert restores the files from RECORD-verified bytes
            aside = self.root.with_name(f"{self.root.name}.damaged-{stamp}")
            try:
                os.replace(self.root, aside)
            except OSError as exc:
                raise ReadOnlyError(f"cannot move {self.root} aside ({exc.strerror})") from None
        if force and self.root.is_dir() and not os.path.islink(self.root):
            for name in layout.ENTRY_KINDS:
                if layout.entry_problem(str(self.root), name):  # a symlink, a FIFO, a file for a directory...
                    kind = "symlink" if os.path.islink(self.root / name) else "damaged"
                    os.replace(self.root / name, self.root / f"{name}.{kind}-{stamp}")
        self.check_usable()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReadOnlyError(
                f"{self.root} cannot be created ({exc.strerror}); nothing was written "
                f"(use `patchq run` to patch at import time instead)") from None
        self.check_usable()
        owner = layout.read_owner(str(self.root))
        if owner != os.path.realpath(self.site):
            _state_write(Path(layout.owner_path(str(self.root))), layout.owner_json(str(self.site)).encode(),
                         mode=0o644)

    def _migrate(self) -> None:
        """Move a flat (pre-keyed) ``$PATCHQ_STATE_DIR`` into ``env-<key>/``, under the
        lock of that base directory."""
        base = self.root
        keyed = Path(layout.keyed_root(str(base), str(self.site)))
        problem = layout.symlink_problem(str(base))
        if problem:
            raise StateError(problem)
        with StateLock(base):
            if layout.is_legacy(str(base), str(self.site)) and not os.path.lexists(keyed):
                tmp = base / f".migrating-{os.getpid()}"
                try:
                    tmp.mkdir()
                    for name in os.listdir(base):
                        if name in layout.LEGACY_ENTRIES or name.startswith(layout.JOURNAL + ".damaged-"):
                            os.replace(base / name, tmp / name)
                    _state_write(tmp / layout.OWNER, layout.owner_json(str(self.site)).encode(), mode=0o644)
                    os.replace(tmp, keyed)
                except OSError as exc:
                    raise ReadOnlyError(f"cannot move the state in {base} into {keyed} ({exc.strerror})") from None
        self.root, self.legacy = keyed, False

    def lock(self, timeout: float | None = None) -> StateLock:
        """The inter-process lock (a context manager; see :class:`StateLock`)."""
        return StateLock(self.root, timeout=timeout)

    def probe(self) -> None:
        """Check that the state directory is writable with a probe file unique to this
        process (call it under the lock). Raises ReadOnlyError."""
        probe = layout.probe_path(str(self.root))
        try:
            with open(probe, "xb"):
                pass
            os.unlink(probe)
        except OSError as exc:
            raise ReadOnlyError(
                f"{self.root} is not writable ({exc.strerror}); nothing was written "
                f"(use `patchq run` to patch at import time instead)") from None

    def clean_temp(self, site_dirs=()) -> list[str]:
        """Remove temp files of :func:`atomic_write` left by a killed patchq (under the lock:
        no other patchq is writing): everywhere in the state directory, and directly in
        ``site_dirs`` (directories of vLLM files). Returns what was removed."""
        removed = []
        real_site = os.path.realpath(self.site)
        dirs = {str(d) for d in site_dirs if not os.path.islink(d) and
                os.path.realpath(d).startswith(real_site.rstrip(os.sep) + os.sep)}  # never outside site-packages
        for dirpath, _dirnames, _files in os.walk(self.root):  # os.walk does not follow symlinks
            dirs.add(dirpath)
        for d in sorted(dirs):
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for name in names:
                if layout.is_temp_name(name) or name.startswith(layout.PROBE_PREFIX):
                    p = os.path.join(d, name)
                    try:
                        if os.path.isfile(p) and not os.path.islink(p):
                            os.unlink(p)
                            removed.append(p)
                    except OSError:
                        pass
        return removed

    def write_journal(self, journal: Journal) -> None:
        """Commit ``journal`` atomically. Raises ReadOnlyError when it cannot be written."""
        journal.updated = _utc()
        _state_write(self.journal_path, journal.to_json().encode())

    def save_pristine(self, relpath: str, data: bytes, expected: str) -> Path | None:
        """Keep the pristine bytes of a file (atomic; a stale copy left by a journal that was
        set aside or an old release is replaced). ``data`` must hash to ``expected`` (its
        RECORD sha256): checked before anything is written. Returns the directory the
        caller must :func:`fsync_dir` before relying on the copy, or None.

        Raises:
            StateError: ``data`` does not hash to ``expected``.
            ReadOnlyError: the copy cannot be written (a full disk).
        """
        import hashlib

        if hashlib.sha256(data).hexdigest() != expected:
            raise StateError(f"pristine text of {relpath} does not match its RECORD hash; nothing was written")
        path = self.pristine_path(relpath)
        outside = layout.confined(str(self.root), str(path))
        if outside:
            raise StateError(f"{outside}; nothing was written (`patchq revert --all --force` sets it aside)")
        if path.is_file() and not path.is_symlink() and sha256_file(path) == expected:
            return None
        if os.path.lexists(path) and (path.is_symlink() or not path.is_file()):
            raise StateError(f"{path} is not a file (a directory or a symlink is in the way of the pristine "
                             f"copy); remove it, nothing was written")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReadOnlyError(f"cannot create {path.parent} ({exc.strerror})") from None
        _state_write(path, data, mode=0o644, sync_dir=False)
        return path.parent

    def read_pristine(self, relpath: str, expected: str | None = None, record: str | None = None) -> bytes:
        """The kept pristine bytes, verified: they must hash to ``expected`` (the journal's
        pristine sha256) and to ``record`` (RECORD's) where given.

        Raises:
            StateError: missing, unreadable, or a hash mismatch (the message names the file;
                ``revert --all --force`` restores it from the release wheel).
        """
        import hashlib

        from patchq import jsonsafe

        path = self.pristine_path(relpath)
        outside = layout.confined(str(self.root), str(path))
        if outside and os.path.lexists(path):
            raise StateError(f"pristine copy: {outside}; `patchq revert --all --force` restores the file "
                             f"from the vllm wheel")
        try:
            data = jsonsafe.read_bytes(path, 1 << 30)
        except ValueError as exc:  # a symlink, FIFO or device where the copy belongs
            raise StateError(f"pristine copy {path} is not a regular file ({exc}); refusing to read it; "
                             f"`patchq revert --all --force` restores the file from the vllm wheel") from None
        except FileNotFoundError:
            raise StateError(f"pristine copy of {relpath} is missing from {self.root}; `patchq revert --all "
                             f"--force` restores it from the vllm wheel") from None
        except OSError as exc:
            raise StateError(f"pristine copy {path} cannot be read ({exc.strerror})") from None
        got = hashlib.sha256(data).hexdigest()
        for want, what in ((expected, "the journal's"), (record, "RECORD's")):
            if want is not None and got != want:
                raise StateError(f"pristine copy of {relpath} is damaged (sha256 {got[:12]}, {what} {want[:12]}); "
                                 f"nothing was written; `patchq revert --all --force` restores it from the vllm wheel")
        return data

    def pristine_relpaths(self, limit: int = 100_000) -> list[str]:
        """The relpaths that have a pristine copy (regular files under ``pristine/``; a
        symlinked directory is not followed), at most ``limit`` of them."""
        top = layout.pristine_dir(str(self.root))
        if os.path.islink(self.root) or layout.entry_problem(str(self.root), layout.PRISTINE) or \
                layout.confined(str(self.root), top) or not os.path.isdir(top):
            return []  # a symlinked state directory (or pristine/) is never read through
        out: list[str] = []
        for dirpath, _dirnames, filenames in os.walk(top):  # os.walk never follows symlinked directories
            for name in filenames:
                path = os.path.join(dirpath, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    out.append(os.path.relpath(path, top).replace(os.sep, "/"))
                    if len(out) >= limit:
                        return out
        return out

    def drop_pristine(self, relpath: str) -> None:
        """Forget a pristine copy (after the write that made it unnecessary completed;
        best effort: something else in its place is left for :meth:`save_pristine` to name)."""
        path = self.pristine_path(relpath)
        if layout.confined(str(self.root), str(path)) and not os.path.islink(path):
            return  # a symlinked directory on the way: never delete outside the state directory
        try:
            path.unlink()
        except OSError:
            pass

    def keep_foreign(self, relpath: str, data: bytes) -> Path:
        """Save a foreign edit before it is overwritten; returns where. Raises ReadOnlyError."""
        path = Path(layout.foreign_dir(str(self.root)), *relpath.split("/"))
        path = path.with_name(f"{path.name}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReadOnlyError(f"cannot create {path.parent} ({exc.strerror})") from None
        outside = layout.confined(str(self.root), str(path))
        if outside:
            raise StateError(f"{outside}; nothing was written")
        _state_write(path, data, mode=0o644)
        return path

    def keep_foreign_dir(self, path: Path, relpath: str) -> Path:
        """Move a directory someone put where the file ``relpath`` belongs (``path``) into
        the foreign-edit directory, whole, before the file is written back; returns where.

        Raises:
            ReadOnlyError: it cannot be moved (another filesystem, a permission).
        """
        aside = Path(layout.foreign_dir(str(self.root)), *relpath.split("/"))
        aside = aside.with_name(f"{aside.name}.dir-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        try:
            aside.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReadOnlyError(f"cannot create {aside.parent} ({exc.strerror})") from None
        outside = layout.confined(str(self.root), str(aside))
        if outside:
            raise StateError(f"{outside}; nothing was written")
        try:
            os.rename(path, aside)
        except OSError as exc:
            raise ReadOnlyError(f"cannot move the directory {path} aside to {aside} ({exc.strerror}); nothing was "
                                f"written: move it away by hand") from None
        return aside

    # -- transactions -------------------------------------------------------

    def begin(self, writes: dict[str, tuple[str | None, bytes]], journal: Journal) -> None:
        """Record an intended write: relpath -> (current sha256, new bytes), and the journal after.

        Raises:
            ReadOnlyError: the transaction cannot be written (a full disk).
        """
        import hashlib

        try:
            if os.path.lexists(self.txn):
                shutil.rmtree(self.txn)
            dirs = set()
            for relpath, (_, data) in writes.items():
                path = Path(layout.txn_file(str(self.root), relpath))
                path.parent.mkdir(parents=True, exist_ok=True)
                _state_write(path, data, mode=0o644, sync_dir=False)
                dirs.add(path.parent)
            for directory in dirs:  # once per directory, before the manifest makes them count
                fsync_dir(directory)
            manifest = {
                "files": {r: {"from": f if layout._sha_text(f) else None, "to": hashlib.sha256(d).hexdigest()}
                          for r, (f, d) in writes.items()},
                "journal": json.loads(journal.to_json()),
            }
            self.txn.mkdir(parents=True, exist_ok=True)  # no file writes (a profile rename) made no txn dir
            _state_write(self.manifest_path, json.dumps(manifest, indent=2, sort_keys=True).encode())
        except OSError as exc:
            shutil.rmtree(self.txn, ignore_errors=True)
            raise ReadOnlyError(f"cannot write the transaction in {self.txn} ({exc.strerror}); "
                                f"nothing was changed") from None
        except ReadOnlyError as exc:
            shutil.rmtree(self.txn, ignore_errors=True)
            raise ReadOnlyError(f"{exc}; nothing was changed") from None

    def commit(self, journal: Journal) -> None:
        """Write the journal, then drop the transaction."""
        self.write_journal(journal)
        shutil.rmtree(self.txn, ignore_errors=True)

    def read_manifest(self, record: dict[str, str]) -> dict:
        """The pending transaction's manifest, checked (types, confined paths).

        Raises:
            StateError: missing pieces, truncated, wrong types, or paths outside RECORD.
        """
        from patchq import jsonsafe

        path = self.manifest_path
        try:
            data = jsonsafe.read_file(path)
        except (OSError, ValueError) as exc:
            raise StateError(f"the interrupted write {path} is damaged ({exc}); `patchq revert --all --force` "
                             f"sets it aside and restores the files") from None
        problem = layout.manifest_problem(data)
        if problem:
            raise StateError(f"the interrupted write {path} is damaged ({problem}); `patchq revert --all --force` "
                             f"sets it aside and restores the files")
        self.confine(data["files"], record, str(path))
        self.confine(data["journal"]["files"], record, str(path))
        return data

    def recover(self, record: dict[str, str]) -> list[str]:
        """Roll an interrupted write forward. Returns the files it wrote.

        Every staged file is verified before any is written: its bytes must hash to the
        manifest's ``to``, which must be the journal's patched sha256 (a patched file) or
        RECORD's (a restored one).

        Raises:
            StateError: a damaged manifest or staged file, or a file that matches neither
                side of the transaction (edited since); nothing was written then.
        """
        import hashlib

        if not self.has_pending():
            return []
        manifest = self.read_manifest(record)
        journal = Journal.from_dict(manifest["journal"])
        todo: dict[str, bytes] = {}
        for relpath, ends in manifest["files"].items():
            target = self.site / relpath
            entry = journal.files.get(relpath)
            want = entry.patched_sha256 if entry else record.get(relpath)
            if ends["to"] != want:
                raise StateError(f"the interrupted write {self.manifest_path} is damaged: {relpath} would become "
                                 f"{ends['to'][:12]}, not {str(want)[:12]}; nothing was written; "
                                 f"`patchq revert --all --force` restores the files")
            now = sha256_file(target)
            if now == ends["to"]:
                continue
            if now != ends["from"]:
                raise StateError(f"interrupted write: {relpath} matches neither its old nor its new "
                                 f"content; resolve by hand ({self.txn})")
            from patchq import jsonsafe

            try:
                data = jsonsafe.read_bytes(layout.txn_file(str(self.root), relpath), 1 << 30)
            except (OSError, ValueError) as exc:
                raise StateError(f"the staged copy of {relpath} in {self.txn} cannot be read ({exc}); "
                                 f"nothing was written") from None
            if hashlib.sha256(data).hexdigest() != ends["to"]:
                raise StateError(f"the staged copy of {relpath} in {self.txn} is damaged (sha256 mismatch); "
                                 f"nothing was written; `patchq revert --all --force` restores the files")
            todo[relpath] = data
        for relpath in sorted(todo):
            write_file(self.site / relpath, todo[relpath])
        self.commit(journal)
        for relpath in manifest["files"]:
            if relpath not in journal.files:
                self.drop_pristine(relpath)
        return sorted(todo)


def write_file(path: Path, data: bytes) -> None:
    """Write a vLLM file atomically and drop its stale bytecode.

    Raises:
        ReadOnlyError: the file's directory is not writable.
    """
    try:
        atomic_write(path, data)
    except OSError as exc:  # permissions, a read-only filesystem, a full disk
        raise ReadOnlyError(f"cannot write {path}: {exc.strerror or exc}") from None
    invalidate_pycache(path)
    fault_point("PATCHQ_FAULT_AFTER_WRITES")  # the test layer's crash after the n-th write (a checkout only)
