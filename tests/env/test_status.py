"""patchq.env.status: the status report of an environment, its exit code, the journal reader the
fast path shares, and whether this interpreter would import another vllm (the small world)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.commands import apply
from patchq.env import status
from patchq.errors import StateError
from testing import small_series, stamped
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


def test_the_applied_profile_against_the_series_profile_now(small):
    """A profile that gained, lost or no longer has patches since apply is drift (exit 7);
    one that names a patch without a series file is malformed series data (exit 2)."""
    profiles = small.series.root / "profiles.toml"
    apply.apply(small.target, small.series, "none")
    assert _collect(small)["profile_drift"] is None
    profiles.write_text(profiles.read_text().replace('patches = []', 'patches = ["bump-default"]'))
    report = _collect(small)
    assert report["profile_drift"] == (
        "profile none lists bump-default since it was applied: the series changed since apply")
    assert [(p["status"], p["reason"]) for p in report["patches"]] == [
        ("not-applied", "in profile none since it was applied")]
    assert status.exit_code(report) == 7
    profiles.write_text(profiles.read_text().replace('patches = ["bump-default"]',
                                                     'patches = ["bump-default", "ghost"]'))
    report = _collect(small)  # base lists bump-default too: both profiles name the ghost now
    assert report["series_errors"] == [f"{profiles}: profile {name} lists 'ghost', which has no series file"
                                       for name in ("base", "none")]
    assert status.exit_code(report) == 2
    # a profile other than the applied one naming a patch without a series file: malformed
    # series data all the same (list and check --profile say so too)
    profiles.write_text(profiles.read_text().replace('"bump-default", "ghost"]', '"bump-default"]')
                        + '\n[profiles.other]\npatches = ["ghost"]\n')
    report = _collect(small)
    assert report["series_errors"] == [f"{profiles}: profile other lists 'ghost', which has no series file"]
    assert status.exit_code(report) == 2

    profiles.write_text(small_series.PROFILES_TOML)
    apply.apply(small.target, series_mod.load(small.series.root), "base")
    assert _collect(small)["profile_drift"] is None and status.exit_code(_collect(small)) == 0
    profiles.write_text(small_series.PROFILES_TOML.replace('patches = ["bump-default"]', 'patches = []'))
    report = _collect(small)
    assert report["profile_drift"] == "profile base no longer lists bump-default: the series changed since apply"
    assert status.exit_code(report) == 7
    profiles.write_text(small_series.PROFILES_TOML.replace("[profiles.base]", "[profiles.renamed]"))
    report = _collect(small)
    assert report["profile_drift"] == (
        f"profile base is no longer in the series at {small.series.root}; its patches stay applied")
    assert status.exit_code(report) == 7


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


# -- the stat stamp (issue 25)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return stamped.use_cache(tmp_path, monkeypatch)


_later = stamped.later


@pytest.fixture()
def applied(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A small site-packages with profile ``base`` applied, and a clock that sees every
    file as settled (the stamps are saved by the first verified no-op / status)."""
    return stamped.apply_base(tmp_path, monkeypatch)


_stamps = stamped.stamp_files


def test_status_is_stamped_and_sees_a_change(applied: dict, cache: Path) -> None:
    first = status.collect(applied["site"], applied["series"], applied["anchors"])
    assert len(_stamps(cache)) == 1
    again = status.collect(applied["site"], applied["series"], applied["anchors"])
    assert again == first and list(again) == list(first)  # the same document, keys in the same order
    utils = Path(applied["site"]) / "vllm" / "ops" / "utils.py"
    old = os.stat(utils)
    utils.write_text(utils.read_text().replace("101376", "101377"))
    os.utime(utils, ns=(old.st_atime_ns, old.st_mtime_ns))
    after = status.collect(applied["site"], applied["series"], applied["anchors"])
    assert [f["state"] for f in after["files"]] == ["modified"]
    assert status.exit_code(after) != 0


def test_status_names_the_series_a_profile_was_applied_from(small, tmp_path):
    """Seen from another series, the applied profile is named with the series that applied it,
    never called 'no longer in the series' (it never was in it), and the next step names that
    series and --replace; seen from its own series, nothing of the kind (issue 39)."""
    from patchq import report

    other = small_series.write_series(tmp_path / "other")
    (other / "profiles.toml").write_text(small_series.PROFILES_TOML.replace("[profiles.base]", "[profiles.mine]"))
    apply.apply(small.target, small.series, "base")
    here = _collect(small)
    assert here["applied_from"]["dir"] == str(small.series.root) and here["other_series"] is False
    seen = status.collect(str(small.site), str(other), str(tmp_path / "other" / "anchors"))
    assert seen["other_series"] is True and seen["profile_drift"] is None
    assert seen["applied_from"] == small.series.location.as_json()
    text = report.status_text({**seen, "series": None})
    assert "no longer in the series" not in text
    assert f"! profile base was applied from another series: {small.series.location.describe()}" in text.splitlines()
    assert report.status_next(seen) == [
        f"`patchq status --series {small.series.root}` shows the patches that series applied; "
        f"`patchq apply --profile NAME --replace` replaces them with a profile of this series"]


def test_after_a_vllm_upgrade_status_recommends_upgrade_only_for_a_profile_it_can_carry(small):
    """The journal is from another release: `patchq upgrade` when it names a profile (upgrade carries
    it), else `patchq apply --profile NAME` (upgrade would exit 2: no profile applied; issue 39)."""
    import json

    from patchq import report
    from patchq.commands import revert

    apply.apply(small.target, small.series, "base")
    journal = Path(status.state_root(str(small.site))) / "journal.json"

    def upgraded() -> dict:  # as pip leaves it: the release's own files, the old journal
        (small.site / UTILS).write_text(small_series.UTILS_PY)
        data = json.loads(journal.read_text())
        journal.write_text(json.dumps({**data, "vllm": "0.0.9"}))
        return _collect(small)

    seen = upgraded()
    assert seen["note"] and seen["journal_profile"] == "base"
    assert report.status_next(seen)[0].startswith("`patchq upgrade` checks every patch of profile base")
    revert.run(small.target, small.series, None, force=False)
    seen = upgraded()
    assert seen["note"] and seen["journal_profile"] is None
    assert report.status_next(seen) == ["`patchq apply --profile NAME` patches this vllm (`patchq list` shows the "
                                        "profiles)"]
