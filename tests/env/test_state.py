"""patchq.env.state: the journal, verified pristine copies, the directory lock and the
transaction that rolls an interrupted write forward (on the small world's installed vLLM)."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest

from patchq.commands import apply
from patchq.env.state import FileEntry, Journal, PatchEntry, StateDir, StateLock
from patchq.errors import ReadOnlyError, StateError
from patchq.vllmdist import record as record_mod
from testing.small_world import UTILS


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_journal_round_trips_and_an_empty_state_reads_as_empty(small, tmp_path):
    state = StateDir(small.site)
    assert state.read() == Journal() and state.root == small.site / ".patchq"
    journal = Journal(vllm="0.1.0", profile="base", patches={"p": PatchEntry(hash="a" * 12, files=[UTILS])},
                      files={UTILS: FileEntry("1" * 64, "2" * 64, "3" * 64, ["p"])}, profile_hashes={"p": "a" * 12})
    state.ensure()
    state.write_journal(journal)
    back = state.read()
    assert (back.vllm, back.profile, back.patches, back.files) == (journal.vllm, journal.profile, journal.patches,
                                                                   journal.files)
    assert Journal.from_dict({"schema": 1, **{k: v for k, v in __import__("json").loads(journal.to_json()).items()
                                             if k != "schema"}}).files == journal.files


def test_a_damaged_journal_is_a_state_error_naming_the_way_out(small):
    state = StateDir(small.site)
    state.ensure()
    state.journal_path.write_text('{"schema": 1, "files": []}')
    with pytest.raises(StateError, match=r"journal.json is not a patchq journal of schema 1 \(files/patches are "
                                         r"not objects\); `patchq revert --all --force` sets it aside"):
        state.read()
    aside = state.set_aside()
    assert aside.name.startswith("journal.json.damaged-") and state.read() == Journal()


def test_paths_from_state_must_be_record_paths_inside_site_packages(small):
    apply.apply(small.target, small.series, "base")
    rec = record_mod.read_record(str(next(small.site.glob('vllm-*.dist-info'))))
    state = StateDir(small.site)
    assert list(state.read(rec).files) == [UTILS]
    with pytest.raises(StateError, match="not a file of the vllm distribution"):
        state.confine(["vllm/not_in_record.py"], rec, "journal.json")


def test_pristine_copies_are_checked_on_the_way_in_and_out(small):
    state = StateDir(small.site)
    state.ensure()
    data = (small.site / UTILS).read_bytes()
    with pytest.raises(StateError, match="does not match its RECORD hash"):
        state.save_pristine(UTILS, data + b"#", _sha(data))
    state.save_pristine(UTILS, data, _sha(data))
    assert state.read_pristine(UTILS, _sha(data), _sha(data)) == data
    state.pristine_path(UTILS).write_bytes(data + b"# damaged\n")
    with pytest.raises(StateError, match="is damaged"):
        state.read_pristine(UTILS, _sha(data))
    state.drop_pristine(UTILS)
    with pytest.raises(StateError, match="is missing"):
        state.read_pristine(UTILS)


def test_an_interrupted_write_is_rolled_forward(small):
    apply.apply(small.target, small.series, "base")
    state = StateDir(small.site)
    rec = record_mod.read_record(str(next(small.site.glob('vllm-*.dist-info'))))
    patched = (small.site / UTILS).read_bytes()
    journal = state.read(rec)
    pristine = state.read_pristine(UTILS)
    (small.site / UTILS).write_bytes(pristine)  # as if killed before the file was written
    state.begin({UTILS: (_sha(pristine), patched)}, journal)
    assert state.has_pending()
    assert state.recover(rec) == [UTILS] and (small.site / UTILS).read_bytes() == patched
    assert not state.has_pending() and state.recover(rec) == []


def test_a_file_edited_since_the_interrupted_write_is_left_alone(small):
    apply.apply(small.target, small.series, "base")
    state = StateDir(small.site)
    rec = record_mod.read_record(str(next(small.site.glob('vllm-*.dist-info'))))
    patched = (small.site / UTILS).read_bytes()
    state.begin({UTILS: (_sha(state.read_pristine(UTILS)), patched)}, state.read(rec))
    (small.site / UTILS).write_bytes(b"someone else's\n")
    with pytest.raises(StateError, match="matches neither its old nor its new content"):
        state.recover(rec)
    assert (small.site / UTILS).read_bytes() == b"someone else's\n"


def test_the_lock_excludes_a_second_writer_for_its_timeout(tmp_path):
    held = threading.Event()
    release = threading.Event()

    def holder():
        with StateLock(tmp_path):
            held.set()
            release.wait(5)
    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    start = time.monotonic()
    with pytest.raises(ReadOnlyError, match="another patchq is writing this environment"):
        with StateLock(tmp_path, timeout=0.2):
            pass
    assert time.monotonic() - start >= 0.2
    release.set()
    thread.join()
    with StateLock(tmp_path, timeout=0.2) as lock:
        assert lock.fd is not None
    os.symlink(tmp_path, tmp_path.parent / "linked-state")
    with pytest.raises(StateError, match="is a symlink or not a directory"):
        with StateLock(tmp_path.parent / "linked-state"):
            pass


def test_pristine_relpaths_lists_the_copies_and_never_reads_through_a_link(small, tmp_path):
    """What a series-less revert --all --force restores besides the journal's files: the
    kept pristine copies; a symlinked state directory or pristine/ is not read through."""
    import os
    import shutil

    from patchq.commands import apply
    from patchq.env.state import StateDir

    apply.apply(small.target, small.series, "base")
    state = StateDir(small.site)
    assert state.pristine_relpaths() == ["vllm/ops/utils.py"]
    shutil.move(str(state.root), tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", state.root)
    assert StateDir(small.site).pristine_relpaths() == []
