"""Make an installed vLLM carry exactly a given list of patches (apply and revert).

``apply --profile P`` converges to P's patches; ``revert --all`` to none; ``revert
--profile P`` to the applied patches minus P's. One algorithm serves all three:

1. take the lock, roll forward any interrupted write (:meth:`StateDir.recover`);
2. read each target file's pristine text: patchq's kept copy when the file is as
   patchq left it, the file itself when it equals its RECORD hash; anything else is a
   foreign edit and is refused (``revert --force`` keeps a copy and overwrites it);
3. plan every patch in memory (anchors, transforms, compile): any failure, nothing written;
4. write: pristine copies, then the transaction, then each file atomically, then the
   journal. No byte changes when the environment already matches (idempotent).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Sequence

from patchq.plan import engine, plancache
from patchq.errors import ForeignEditError, PatchqError, ReadOnlyError, StateError
from patchq.env.fsutil import fsync_dir
from patchq.hashing import sha256_file
from patchq.model import Patch
from patchq.dist.sources import CodeSource, is_writable_dir, sha256_hex
from patchq.env.state import FileEntry, Journal, PatchEntry, StateDir, write_file


@dataclass
class ConvergeResult:
    """What a converge did (or would do, with ``dry_run``).

    Attributes:
        plan: the in-memory plan of the wanted patches.
        written: relpaths written (patched or restored), sorted.
        restored: relpaths restored to pristine.
        added, removed: patch ids newly applied / reverted.
        noop: True when nothing needed to change.
        foreign_kept: relpath -> where a forced-over foreign edit was saved.
        recovered: relpaths rolled forward from an interrupted write.
    """

    plan: engine.Plan
    journal: Journal
    written: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    noop: bool = False
    foreign_kept: dict[str, str] = field(default_factory=dict)
    recovered: list[str] = field(default_factory=list)


class PlanFailed(PatchqError):
    """One or more patches failed in the plan; nothing was written."""

    def __init__(self, plan: engine.Plan) -> None:
        self.plan = plan
        names = ", ".join(f"{r.patch_id} ({r.reason})" for r in plan.failures())
        super().__init__(f"{len(plan.failures())} patch(es) failed, nothing written: {names}")


def _file_state(target: CodeSource, state: StateDir, journal: Journal, relpath: str) -> tuple[str, str | None]:
    """('pristine' | 'patched' | 'foreign' | 'missing', current sha256) of one file."""
    now = sha256_file(target.path(relpath))
    if now is None:
        return "missing", None
    entry = journal.files.get(relpath)
    if entry and now == entry.patched_sha256:
        return "patched", now
    record = target.record().get(relpath)
    if record is not None and now == record:
        return "pristine", now
    return "foreign", now


def converge(
    target: CodeSource,
    patches: Sequence[Patch],
    *,
    profile: str | None,
    force: bool = False,
    dry_run: bool = False,
    summary: dict | None = None,
    restore_foreign: Sequence[str] = (),
) -> ConvergeResult:
    """Make ``target`` carry exactly ``patches`` (see module docstring).

    Args:
        target: an installed vLLM (``sources.installed``).
        patches: wanted patches, in series order.
        profile: the profile name to record (None for an ad-hoc set).
        force: overwrite foreign edits of files to change, keeping a copy.
        dry_run: plan only; write nothing, take no lock (``diff`` uses this).
        summary: :func:`patchq.hashing.series_summary`, cached in the journal for the
            fast path.
        restore_foreign: with ``force``, further relpaths (the series' target modules) to
            restore from the release wheel when someone else edited them (e.g. the old
            sentinel scripts); a copy of each edit is kept.
    Raises:
        PlanFailed: a patch failed to resolve, transform or compile (nothing written).
        ForeignEditError: a file to change was modified by someone else (no ``force``).
        ReadOnlyError: site-packages or a file's directory is not writable.
        StateError: the journal is damaged or a pristine copy fails its RECORD hash.
    """
    state = StateDir(target.root)
    if dry_run:
        return _converge(target, state, patches, profile, force, True, summary, restore_foreign)
    if not is_writable_dir(target.root):
        raise ReadOnlyError(f"{target.root} is not writable; nothing was written "
                            f"(use `patchq run` to patch at import time instead)")
    state.ensure()
    with state.lock():
        recovered = state.recover()
        result = _converge(target, state, patches, profile, force, False, summary, restore_foreign)
        result.recovered = recovered
        return result


def _foreign_message(target: CodeSource, relpaths) -> str:
    return (f"modified by someone else (neither RECORD nor patchq's journal matches): "
            f"{', '.join(sorted(relpaths))}; refusing to overwrite. `patchq revert --all --force` "
            f"restores them from the vllm {target.version} wheel and keeps a copy of each edit")


def _release_bytes(target: CodeSource, relpath: str) -> bytes:
    """A file's pristine bytes from the release wheel (downloaded once into the cache).

    Raises:
        StateError: the release cannot be had, or its file does not match RECORD.
    """
    from patchq.dist import releases

    try:
        data = (releases.release_tree(str(target.version)) / relpath).read_bytes()
    except (releases.ReleaseError, OSError) as exc:
        raise StateError(f"cannot restore {relpath}: the vllm {target.version} wheel is not available "
                         f"({exc}); reinstall vllm") from None
    if sha256_hex(data) != target.record().get(relpath):
        raise StateError(f"{relpath} from the vllm {target.version} wheel does not match RECORD; reinstall vllm")
    return data


def _converge(target, state, patches, profile, force, dry_run, summary, restore_foreign=()) -> ConvergeResult:
    try:
        journal = state.read()
    except StateError:
        if not force or dry_run:
            raise
        state.set_aside()  # a forced revert restores from RECORD-verified copies without it
        journal = Journal()
    if journal.vllm and journal.vllm != str(target.version):
        journal = _forget_upgraded(target, state, journal, dry_run)
    foreign: dict[str, str | None] = {}

    def read(relpath: str) -> str | None:
        kind, _ = _file_state(target, state, journal, relpath)
        if kind == "missing":
            return None
        if kind == "patched":
            return state.read_pristine(relpath).decode("utf-8")
        if kind == "foreign":
            foreign[relpath] = None
        return target.read_text(relpath)

    plan = plancache.plan(target, patches, read=read)
    if foreign and not force:  # before plan failures: an edit explains failing anchors
        raise ForeignEditError(_foreign_message(target, foreign))
    if not plan.ok:
        raise PlanFailed(plan)

    # what each file should become: patched text, or pristine for files no patch keeps
    wanted: dict[str, bytes] = {p: t.encode("utf-8") for p, t in plan.patched.items()}
    for relpath in journal.files:
        if relpath not in wanted:
            wanted[relpath] = state.read_pristine(relpath)
    writes: dict[str, tuple[str | None, bytes]] = {}
    for relpath, data in wanted.items():
        kind, now = _file_state(target, state, journal, relpath)
        if kind == "foreign":
            foreign.setdefault(relpath, now)
        if now != sha256_hex(data):
            writes[relpath] = (now, data)
        elif kind == "foreign":
            foreign.pop(relpath, None)  # someone else already wrote exactly this

    if force:  # files edited by someone else outside the journal: back to the release's bytes
        for relpath in restore_foreign:
            if relpath in writes or relpath in wanted or target.read_bytes(relpath) is None:
                continue
            kind, now = _file_state(target, state, journal, relpath)
            if kind == "foreign":
                foreign[relpath] = now
                writes[relpath] = (now, _release_bytes(target, relpath))
    to_overwrite = {r for r in foreign if r in writes}
    if to_overwrite and not force:
        raise ForeignEditError(_foreign_message(target, to_overwrite))

    new_journal = _journal_after(target, journal, plan, wanted, profile)
    new_journal.series = summary or journal.series
    applied_before = set(journal.patches)
    result = ConvergeResult(
        plan=plan, journal=new_journal,
        added=[p for p in new_journal.patches if p not in applied_before or
               journal.patches[p].hash != new_journal.patches[p].hash],
        removed=[p for p in journal.patches if p not in new_journal.patches],
    )
    result.restored = sorted(r for r in writes if r not in new_journal.files)
    result.written = sorted(writes)
    same_journal = (journal.patches == new_journal.patches and journal.files == new_journal.files
                    and journal.profile == new_journal.profile and journal.vllm == new_journal.vllm
                    and journal.profile_hashes == new_journal.profile_hashes)
    if not writes and same_journal:
        result.noop = True
        if not dry_run and new_journal.series != journal.series:
            state.write_journal(new_journal)  # refresh the fast path's cache only
        return result
    if dry_run:
        return result

    for relpath in writes:
        if not is_writable_dir(target.path(relpath).parent):
            raise ReadOnlyError(f"{target.path(relpath).parent} is not writable; nothing was written")
    kept_dirs = set()
    for relpath, data in wanted.items():
        if relpath in new_journal.files:
            pristine = plan.pristine.get(relpath)
            if pristine is not None:
                pdata = pristine.encode("utf-8")
                rec = target.record().get(relpath)
                if rec is not None and sha256_hex(pdata) != rec:
                    raise StateError(f"pristine text of {relpath} does not match its RECORD hash")
                kept_dirs.add(state.save_pristine(relpath, pdata))
        elif relpath in writes:
            rec = target.record().get(relpath)
            if rec is not None and sha256_hex(data) != rec:
                raise StateError(f"kept pristine copy of {relpath} does not match its RECORD hash; "
                                 f"reinstall vllm to recover")
    for relpath in sorted(to_overwrite):
        current = target.read_bytes(relpath)
        if current is not None:
            result.foreign_kept[relpath] = str(state.keep_foreign(relpath, current))
    for directory in kept_dirs - {None}:  # the pristine copies are durable before any write
        fsync_dir(directory)
    state.begin(writes, new_journal)
    previous: dict[str, bytes | None] = {}
    try:
        for relpath in sorted(writes):
            previous[relpath] = target.read_bytes(relpath)
            write_file(target.path(relpath), writes[relpath][1])
    except (ReadOnlyError, OSError) as exc:
        _roll_back(target, previous)
        shutil.rmtree(state.txn, ignore_errors=True)
        raise ReadOnlyError(f"{exc}; nothing was changed ({len(previous) - 1} file(s) written before it "
                            f"were rolled back)") from None
    state.commit(new_journal)
    for relpath in result.restored:
        state.drop_pristine(relpath)
    return result


def _roll_back(target: CodeSource, previous: dict[str, bytes | None]) -> None:
    """Put back the files written before a write failed (their earlier bytes)."""
    for relpath, data in previous.items():
        if data is not None and target.read_bytes(relpath) != data:
            try:
                write_file(target.path(relpath), data)
            except (ReadOnlyError, OSError):
                pass  # the txn is gone with it: status reports the file as modified


def _journal_after(target: CodeSource, journal: Journal, plan: engine.Plan,
                   wanted: dict[str, bytes], profile: str | None) -> Journal:
    files: dict[str, FileEntry] = {}
    patches: dict[str, PatchEntry] = {}
    for r in plan.results:
        if r.status == engine.OK:
            patches[r.patch_id] = PatchEntry(hash=r.hash, variant=r.variant, files=list(r.files))
    for relpath, text in plan.patched.items():
        files[relpath] = FileEntry(
            record_sha256=target.record().get(relpath),
            pristine_sha256=sha256_hex(plan.pristine[relpath].encode("utf-8")),
            patched_sha256=sha256_hex(wanted[relpath]),
            patches=[pid for pid, e in patches.items() if relpath in e.files],
        )
    from patchq.report import patch_rows

    return Journal(vllm=str(target.version), profile=profile,
                   patches=patches, files=files,
                   profile_hashes={r.patch_id: r.hash for r in plan.results} if profile else {},
                   results=patch_rows(plan), updated=journal.updated)


def _forget_upgraded(target: CodeSource, state: StateDir, journal: Journal, dry_run: bool) -> Journal:
    """After a vLLM upgrade (or downgrade) the installer replaced or removed the files the
    journal describes: its entries and pristine copies belong to the old release. Forget
    them; a file that now matches neither RECORD nor the journal is then reported as a
    foreign edit by the normal checks."""
    if not dry_run:
        for relpath in journal.files:
            state.drop_pristine(relpath)
    return Journal(vllm=str(target.version), series=journal.series)
