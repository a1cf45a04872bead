"""The per-environment state: journal, pristine copies, transaction, lock.

Everything lives in ``<site-packages>/.patchq/`` (``$PATCHQ_STATE_DIR`` overrides), so
the state goes wherever the environment goes and can be read with ``cat``:

``journal.json``
    the committed state (:class:`Journal`): vLLM version, profile, applied patch ids and
    hashes, and per changed file its RECORD, pristine and patched sha256.
``pristine/<relpath>``
    the pristine bytes of each file patchq changed (verified against RECORD).
``txn/``
    an in-flight write: ``manifest.json`` (each file's from/to sha256 and the journal to
    commit) and ``files/<relpath>`` (the new bytes). A crash leaves it behind; the next
    ``apply`` or ``revert`` rolls it forward (every file ends pristine or fully patched).
``foreign/<relpath>.<UTC time>``
    a copy of a foreign edit that ``revert --force`` overwrote.
``lock``
    the inter-process lock around apply and revert.

This module uses the standard library only (the lock imports filelock when taken), so
the no-op and status paths stay fast.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from patchq.errors import ReadOnlyError, StateError
from patchq.env.fsutil import atomic_write, fsync_dir, invalidate_pycache
from patchq.hashing import sha256_file

SCHEMA = 1
STATE_DIRNAME = ".patchq"


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

    def to_json(self) -> str:
        """Deterministic JSON text."""
        data = {"schema": SCHEMA, **asdict(self)}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Journal":
        """Parse ``journal.json``. Raises StateError on a damaged or newer journal."""
        try:
            data = json.loads(text)
            if data.get("schema") != SCHEMA:
                raise StateError(f"journal schema {data.get('schema')} is not {SCHEMA}")
            return cls(
                vllm=data.get("vllm"), profile=data.get("profile"),
                patches={k: PatchEntry(**v) for k, v in data.get("patches", {}).items()},
                files={k: FileEntry(**v) for k, v in data.get("files", {}).items()},
                profile_hashes=data.get("profile_hashes", {}),
                results=data.get("results", []),
                series=data.get("series", {}),
                updated=data.get("updated", ""),
            )
        except (ValueError, TypeError, AttributeError) as exc:
            raise StateError(f"journal.json is damaged: {exc}") from None


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StateDir:
    """The ``.patchq`` directory of one site-packages (see module docstring)."""

    def __init__(self, site_packages: Path) -> None:
        self.site = Path(site_packages)
        override = os.environ.get("PATCHQ_STATE_DIR")
        self.root = Path(override) if override else self.site / STATE_DIRNAME

    @property
    def journal_path(self) -> Path:
        return self.root / "journal.json"

    @property
    def txn(self) -> Path:
        return self.root / "txn"

    def pristine_path(self, relpath: str) -> Path:
        return self.root / "pristine" / relpath

    def read(self) -> Journal:
        """The committed journal (empty when none). Raises StateError when damaged."""
        try:
            return Journal.from_json(self.journal_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return Journal()

    def set_aside(self) -> Path:
        """Move a damaged journal aside (``journal.json.damaged-<UTC time>``) so that a forced
        revert can start from an empty one; returns where it went."""
        aside = self.root / f"journal.json.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        os.replace(self.journal_path, aside)
        return aside

    def has_pending(self) -> bool:
        """True when an interrupted write awaits recovery."""
        return (self.txn / "manifest.json").is_file()

    def ensure(self) -> None:
        """Create the state directory. Raises ReadOnlyError when it cannot be."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / ".write-probe"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise ReadOnlyError(
                f"{self.site} is not writable ({exc.strerror}); nothing was written "
                f"(use `patchq run` to patch at import time instead)") from None

    def lock(self, timeout: float = 300.0):
        """The inter-process lock (a :class:`filelock.FileLock`, used as a context manager)."""
        from filelock import FileLock

        return FileLock(str(self.root / "lock"), timeout=timeout)

    def write_journal(self, journal: Journal) -> None:
        """Commit ``journal`` atomically."""
        journal.updated = _utc()
        atomic_write(self.journal_path, journal.to_json().encode())

    def save_pristine(self, relpath: str, data: bytes) -> Path | None:
        """Keep the pristine bytes of a file (atomic; a stale copy left by a journal that was
        set aside or an old release is replaced). Returns the directory the
        caller must :func:`fsync_dir` before relying on the copy, or None."""
        path = self.pristine_path(relpath)
        if path.is_file() and path.read_bytes() == data:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, mode=0o644, sync_dir=False)
        return path.parent

    def read_pristine(self, relpath: str) -> bytes:
        """The kept pristine bytes. Raises StateError when missing."""
        try:
            return self.pristine_path(relpath).read_bytes()
        except FileNotFoundError:
            raise StateError(f"pristine copy of {relpath} is missing from {self.root}") from None

    def drop_pristine(self, relpath: str) -> None:
        """Forget a pristine copy (after the file was restored)."""
        try:
            self.pristine_path(relpath).unlink()
        except FileNotFoundError:
            pass

    def keep_foreign(self, relpath: str, data: bytes) -> Path:
        """Save a foreign edit before it is overwritten; returns where."""
        path = self.root / "foreign" / f"{relpath}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, mode=0o644)
        return path

    # -- transactions -------------------------------------------------------

    def begin(self, writes: dict[str, tuple[str | None, bytes]], journal: Journal) -> None:
        """Record an intended write: relpath -> (current sha256, new bytes), and the journal after."""
        if self.txn.exists():
            shutil.rmtree(self.txn)
        dirs = set()
        for relpath, (_, data) in writes.items():
            path = self.txn / "files" / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, mode=0o644, sync_dir=False)
            dirs.add(path.parent)
        for directory in dirs:  # once per directory, before the manifest makes them count
            fsync_dir(directory)
        import hashlib

        manifest = {
            "files": {r: {"from": f, "to": hashlib.sha256(d).hexdigest()} for r, (f, d) in writes.items()},
            "journal": json.loads(journal.to_json()),
        }
        self.txn.mkdir(parents=True, exist_ok=True)  # no file writes (a profile rename) made no txn dir
        atomic_write(self.txn / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True).encode())

    def commit(self, journal: Journal) -> None:
        """Write the journal, then drop the transaction."""
        self.write_journal(journal)
        shutil.rmtree(self.txn, ignore_errors=True)

    def recover(self) -> list[str]:
        """Roll an interrupted write forward. Returns the files it wrote.

        Raises:
            StateError: a file matches neither side of the transaction (edited since).
        """
        if not self.has_pending():
            return []
        manifest = json.loads((self.txn / "manifest.json").read_text(encoding="utf-8"))
        written = []
        for relpath, ends in manifest["files"].items():
            target = self.site / relpath
            now = sha256_file(target)
            if now == ends["to"]:
                continue
            if now != ends["from"]:
                raise StateError(f"interrupted write: {relpath} matches neither its old nor its new "
                                 f"content; resolve by hand ({self.txn})")
            write_file(target, (self.txn / "files" / relpath).read_bytes())
            written.append(relpath)
        journal_data = manifest["journal"]
        journal = Journal.from_json(json.dumps(journal_data))
        self.commit(journal)
        for relpath in manifest["files"]:
            if relpath not in journal.files:
                self.drop_pristine(relpath)
        return written


def write_file(path: Path, data: bytes) -> None:
    """Write a vLLM file atomically and drop its stale bytecode.

    Raises:
        ReadOnlyError: the file's directory is not writable.
    """
    try:
        atomic_write(path, data)
    except PermissionError as exc:
        raise ReadOnlyError(f"cannot write {path}: {exc.strerror}") from None
    invalidate_pycache(path)
    fault = os.environ.get("PATCHQ_FAULT_AFTER_WRITES")  # test hook: simulate a crash
    if fault is not None:
        left = int(fault) - 1
        if left <= 0:
            os._exit(99)
        os.environ["PATCHQ_FAULT_AFTER_WRITES"] = str(left)
