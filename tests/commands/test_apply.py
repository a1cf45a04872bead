"""patchq.commands.apply: apply a profile to an installed vLLM, in process; the document and the
exit code (``patchq.apply/1``). The CLI scenarios on real releases are tests/e2e/."""

from __future__ import annotations

from patchq.commands import apply
from patchq.sentinels import find_sentinels

from testing.small_world import UTILS


def test_apply_writes_the_profile_and_reports_it(small):
    doc, code = apply.apply(small.target, small.series, "base")
    assert code == 0 and doc["schema"] == "patchq.apply/1" and doc["ok"] and doc["profile"] == "base"
    assert doc["written"] == [UTILS] and not doc["noop"]
    assert [(p["id"], p["status"]) for p in doc["patches"]] == [("bump-default", "ok")]
    assert doc["vllm"]["version"] == "0.1.0" and doc["vllm"]["site_packages"] == str(small.site)
    text = small.utils()
    assert "DEFAULT = 101376" in text and find_sentinels(text) == [("bump-default", small.series.patch("bump-default").hash)]


def test_a_second_apply_is_a_noop(small):
    apply.apply(small.target, small.series, "base")
    before = small.utils()
    doc, code = apply.apply(small.target, small.series, "base")
    assert (code, doc["noop"], doc["written"]) == (0, True, []) and small.utils() == before


def test_the_empty_profile_restores_the_pristine_file(small):
    pristine = small.utils()
    apply.apply(small.target, small.series, "base")
    doc, code = apply.apply(small.target, small.series, "none")
    assert code == 0 and doc["restored"] == [UTILS] and small.utils() == pristine


def test_a_patch_that_does_not_resolve_writes_nothing_and_exits_1(small):
    small.reinstall("class Other:\n    pass\n")
    doc, code = apply.apply(small.target, small.series, "base")
    assert code == 1 and not doc["ok"] and doc["written"] == []
    (row,) = doc["patches"]
    assert (row["id"], row["status"], row["failure"]) == ("bump-default", "failed", "gone")
    assert small.utils() == "class Other:\n    pass\n"


def test_a_foreign_edit_is_refused_with_exit_4(small):
    (small.site / UTILS).write_text(small.utils() + "# mine\n")  # not what RECORD says
    doc, code = apply.apply(small.target, small.series, "base")
    assert code == 4 and "modified by someone else" in doc["error"] and doc["written"] == []
    assert small.utils().endswith("# mine\n")
