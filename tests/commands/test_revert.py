"""patchq.commands.revert: back to the byte-exact pristine files, in process."""

from __future__ import annotations

from patchq import report
from patchq.commands import apply, revert
from testing.small_world import UTILS


def test_revert_all_restores_the_pristine_bytes(small):
    pristine = (small.site / UTILS).read_bytes()
    apply.apply(small.target, small.series, "base")
    doc, code = revert.run(small.target, small.series, None, force=False)
    assert (code, doc["command"], doc["restored"], doc["profile"]) == (0, "revert", [UTILS], None)
    assert (small.site / UTILS).read_bytes() == pristine
    again, code = revert.run(small.target, small.series, None, force=False)
    assert code == 0 and again["noop"] and again["restored"] == []


def test_revert_of_a_profile_keeps_nothing_of_it(small):
    pristine = (small.site / UTILS).read_bytes()
    apply.apply(small.target, small.series, "base")
    doc, code = revert.run(small.target, small.series, "base", force=False)
    assert code == 0 and doc["restored"] == [UTILS] and (small.site / UTILS).read_bytes() == pristine


def test_force_restores_a_foreign_edit_from_the_journal_and_keeps_a_copy(small):
    pristine = (small.site / UTILS).read_bytes()
    apply.apply(small.target, small.series, "base")
    (small.site / UTILS).write_text(small.utils() + "# someone's edit\n")
    doc, code = revert.run(small.target, small.series, None, force=False)
    assert code == 4 and "modified by someone else" in doc["error"]
    doc, code = revert.run(small.target, small.series, None, force=True)
    assert code == 0 and (small.site / UTILS).read_bytes() == pristine
    # the report is true: the file is written and restored, the patch it carried is removed
    assert (doc["written"], doc["restored"], doc["removed"]) == ([UTILS], [UTILS], ["bump-default"])
    assert "removed bump-default" in report.apply_text(doc)
    (kept,) = doc["foreign_kept"].values()
    assert open(kept).read().endswith("# someone's edit\n")


def test_force_over_a_damaged_journal_reports_the_patches_it_takes_out(small):
    """The journal is set aside, so it names no patch: the sentinels the restored files
    carried say which patches the revert removed."""
    import os
    from pathlib import Path

    from patchq.env.state import StateDir
    from testing.small_series import write_release

    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    pristine = (small.site / UTILS).read_bytes()
    apply.apply(small.target, small.series, "base")
    StateDir(small.site).journal_path.write_text("{not json")
    doc, code = revert.run(small.target, small.series, None, force=True)
    assert code == 0 and (small.site / UTILS).read_bytes() == pristine
    assert (doc["written"], doc["removed"]) == ([UTILS], ["bump-default"])


def test_revert_does_not_list_an_upstreamed_patch_as_removed(tmp_path, small):
    """A patch apply journalled as upstreamed was never written: revert takes nothing of it out,
    so it is not named among the removed (issue 39: revert listed align-backoff as removed)."""
    from patchq.vllmdist import sources
    from testing.small_series import UTILS_PY, write_site

    site = write_site(tmp_path / "site-0.3", "0.3.0", utils=UTILS_PY.replace("102400", "101376"))
    target = sources.installed(site)
    applied, code = apply.apply(target, small.series, "base")
    assert code == 0 and [p["status"] for p in applied["patches"]] == ["upstreamed"] and applied["added"] == []
    doc, code = revert.run(target, small.series, None, force=False)
    assert code == 0 and doc["removed"] == [] and doc["written"] == []
    assert "removed -" in report.apply_text(doc)


def test_force_all_without_the_series_needs_only_the_journal_and_the_pristine_copies(small, tmp_path, monkeypatch):
    """revert --all --force with no series (a malformed one cannot be read): the files the
    journal and the kept pristine copies name are restored from those copies, offline and
    with no release in the cache, even when the journal itself is damaged."""
    from patchq.env.state import StateDir

    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATCHQ_OFFLINE", "1")
    pristine = (small.site / UTILS).read_bytes()
    apply.apply(small.target, small.series, "base")
    doc, code = revert.run(small.target, None, None, force=True)
    assert code == 0 and (small.site / UTILS).read_bytes() == pristine and doc["removed"] == ["bump-default"]
    apply.apply(small.target, small.series, "base")
    StateDir(small.site).journal_path.write_text("[" * 100)  # damaged: only the pristine copy is left
    doc, code = revert.run(small.target, None, None, force=True)
    assert code == 0 and (small.site / UTILS).read_bytes() == pristine, doc
    assert doc["written"] == [UTILS] and doc["removed"] == ["bump-default"]


def test_load_for_recovery_says_why_the_series_cannot_be_read(small):
    (small.root / "series" / "profiles.toml").write_text("x = " + "[" * 5000 + "]" * 5000)
    loaded, why = revert.load_for_recovery(str(small.root / "series"))
    assert loaded is None and why.endswith("tables and arrays nested deeper than 32 levels; not a patchq file")


def test_force_sets_aside_a_directory_where_a_target_file_belongs(small):
    """A target file replaced by a directory blocked revert --all --force (exit 5); it is
    moved aside whole, as a foreign edit is kept, and the file restored."""
    pristine = (small.site / UTILS).read_bytes()
    apply.apply(small.target, small.series, "base")
    target = small.site / UTILS
    target.unlink()
    target.mkdir()
    (target / "mine.txt").write_text("someone's file\n")
    doc, code = revert.run(small.target, small.series, None, force=False)
    assert code == 4 and "modified by someone else" in doc["error"]
    doc, code = revert.run(small.target, small.series, None, force=True)
    assert code == 0 and target.read_bytes() == pristine, doc
    (kept,) = doc["foreign_kept"].values()
    assert ".patchq/foreign/" in kept and open(f"{kept}/mine.txt").read() == "someone's file\n"
