"""patchq.commands.status: which patches are live and each target file's state (``patchq.status/1``)."""

from __future__ import annotations

from patchq.commands import apply, status
from testing.small_world import UTILS


def test_nothing_applied(small):
    doc, code = status.run(str(small.site))
    assert code == 0 and doc["schema"] == "patchq.status/1" and doc["profile"] is None
    assert doc["series"]["from"] == "PATCHQ_SERIES" and doc["series"]["dir"] == str(small.series.root)
    assert [(p["id"], p["status"], p["applied_hash"]) for p in doc["patches"]] == [
        ("bump-default", "not-applied", None)]
    assert doc["vllm"] == "0.1.0" and doc["site_packages"] == str(small.site)


def test_an_applied_profile_and_then_a_foreign_edit(small):
    apply.apply(small.target, small.series, "base")
    doc, code = status.run(str(small.site))
    assert code == 0 and doc["profile"] == "base"
    assert [(p["id"], p["status"]) for p in doc["patches"]] == [("bump-default", "applied")]
    assert [(f["path"], f["state"]) for f in doc["files"]] == [(UTILS, "patched")]
    (small.site / UTILS).write_text(small.utils() + "# edited\n")
    doc, code = status.run(str(small.site))
    assert code == 7 and [(f["path"], f["state"]) for f in doc["files"]] == [(UTILS, "modified")]
    assert [(p["status"], p["reason"]) for p in doc["patches"]] == [("foreign", f"modified since apply: {UTILS}")]
