"""patchq.report: the one place documents become text (colour rules, ranges lower bound first,
wrapping, and the renderings of real apply/status/check documents of the small world)."""

from __future__ import annotations

import pytest

from patchq import report
from patchq.commands import apply, check, status


@pytest.fixture(autouse=True)
def _colour_decided_per_test(monkeypatch):
    monkeypatch.setattr(report, "_colour", {})  # colour_on remembers its answer per process
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)


def test_colour_follows_no_color_then_force_color_then_the_terminal(monkeypatch):
    assert report.paint("ok", "good") == "ok"  # captured stdout is no terminal
    monkeypatch.setattr(report, "_colour", {})
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert report.paint("ok", "good").startswith("\x1b[") and report.paint("ok", "good").endswith("ok\x1b[0m")
    assert report.status_word("gone").startswith("\x1b[") and report.paint("x", None) == "x"
    monkeypatch.setattr(report, "_colour", {})
    monkeypatch.setenv("NO_COLOR", "1")
    assert report.paint("ok", "good") == "ok"


def test_ranges_are_written_lower_bound_first():
    assert report.range_text("<0.26,>=0.15") == ">=0.15,<0.26" and report.range_text("") == "all"
    assert report.ranges_lower_first("variant <0.26,>=0.15; series at 0.26.0: edit <0.33,>=0.26") == (
        "variant >=0.15,<0.26; series at 0.26.0: edit >=0.26,<0.33")
    assert report.ranges_lower_first("widen the variant <0.28,>=0.20 to cover vllm 0.28.0") == (
        "widen the variant >=0.20,<0.28 to cover vllm 0.28.0")


def test_clip_and_wrap_never_break_a_path():
    assert report.clip("abcdef", 4) == "abc…" and report.clip("abc", 4) == "abc"
    path = "/a/very/long/path/" + "x" * 60 + ".py:12"
    lines = report._wrap(f"see {path} for the details of it", 4, "note: ", cols=40)
    assert lines[0] == "note: see" and lines[1] == "    " + path and all(path in ln or len(ln) <= 40 for ln in lines)


def test_selection():
    assert report.selection({"profile": "base"}) == "base"
    assert report.selection({"patch_ids": ["a", "b"]}) == "--patch a,b" and report.selection({}) == "--all"


def test_real_documents_render(small):
    doc, _ = apply.apply(small.target, small.series, "base")
    assert report.apply_text(doc).splitlines() == [
        "apply base on vllm 0.1.0:", "  bump-default  ok              Backend (utils.py:4)",
        "apply: wrote 1 file(s); added bump-default; removed -"]
    st, _ = status.run(str(small.site))
    assert "bump-default" in report.status_text(st) and "base" in report.status_text(st)
    ck, _ = check.run(small.target, small.series, "base")
    lines = report.check_text(ck).splitlines()
    assert any("bump-default" in ln and "applies" in ln for ln in lines)
    assert report.series_line(st) == [f"series {small.series.root} (from $PATCHQ_SERIES)"]


def test_status_from_another_series_asks_for_that_series_before_its_profile():
    """Run from another directory, status reads another series: the applied profile's name
    means nothing there (``apply --profile default`` would be refused as unknown), so the next
    step names the series that applied the patches (found by a fresh user)."""
    doc = {"series_errors": {}, "pending_write": False, "files": [], "note": "", "profile": "default",
           "profile_drift": "profile default is not in this series",
           "patches": [{"id": "log-configured", "status": "not-in-series"},
                       {"id": "backend-tiles", "status": "not-applied"}]}
    assert report.status_next(doc) == ["give the series that applied them (`--series DIR`), or `patchq revert --all`"]
    doc["patches"] = [{"id": "backend-tiles", "status": "not-applied"}]
    assert report.status_next(doc)[0].startswith("`patchq apply --profile default`")
