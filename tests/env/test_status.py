"""patchq.env.status: the status report of an environment, its exit code, the journal reader the
fast path shares, and whether this interpreter would import another vllm (the small world)."""

from __future__ import annotations

import sys

import pytest

from patchq.commands import apply
from patchq.env import status
from patchq.errors import StateError
from testing.small_series import write_site
from testing.small_world import UTILS


def _collect(small) -> dict:
    return status.collect(str(small.site), str(small.series.root), str(small.root / "anchors"))


def test_collect_before_and_after_apply(small):
    before = _collect(small)
    assert before["schema"] == "patchq.status/1" and before["profile"] is None and status.exit_code(before) == 0
    apply.apply(small.target, small.series, "base")
    after = _collect(small)
    assert after["profile"] == "base" and after["journal_vllm"] == "0.1.0" and status.exit_code(after) == 0
    assert [(f["path"], f["state"], f["sentinels"]) for f in after["files"]] == [
        (UTILS, "patched", [f"bump-default:{small.series.patch('bump-default').hash}"])]


def test_a_changed_series_makes_the_patch_stale(small):
    apply.apply(small.target, small.series, "base")
    patch_py = small.series.root / "bump_default.py"
    patch_py.write_text(patch_py.read_text().replace("Backend.DEFAULT becomes 101376", "a new summary"))
    report = _collect(small)
    assert [p["status"] for p in report["patches"]] == ["stale"] and status.exit_code(report) == 7


def test_read_journal(small):
    root = status.state_root(str(small.site))
    assert status.read_journal(root) == {}
    apply.apply(small.target, small.series, "base")
    assert status.read_journal(root)["profile"] == "base"
    (small.site / ".patchq" / "journal.json").write_text("not json")
    with pytest.raises(StateError, match="journal.json is damaged"):
        status.read_journal(root)


def test_shadowing_names_the_vllm_this_interpreter_would_import_first(small, tmp_path, monkeypatch):
    other = write_site(tmp_path / "earlier")
    monkeypatch.setattr(sys, "path", [str(other), str(small.site)])
    assert status.shadowing(str(small.site)) == str(other / "vllm")
    monkeypatch.setattr(sys, "path", [str(small.site), str(other)])
    assert status.shadowing(str(small.site)) is None
    monkeypatch.setattr(sys, "path", [str(other)])
    assert status.shadowing(str(small.site)) is None  # not this interpreter's environment


def test_exit_code_rules():
    clean = {"patches": [{"status": "applied"}], "files": [{"state": "patched"}], "pending_write": False}
    assert status.exit_code(clean) == 0
    assert status.exit_code({**clean, "patches": [{"status": "foreign"}]}) == 7
    assert status.exit_code({**clean, "pending_write": True}) == 7
    assert status.exit_code({**clean, "shadowed_by": "/elsewhere/vllm"}) == 7
    assert status.exit_code({**clean, "series_errors": ["series/x.py:1: SyntaxError"]}) == 2
