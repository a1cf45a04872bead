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
    assert "DEFAULT = 101376" in text
    assert find_sentinels(text) == [("bump-default", small.series.patch("bump-default").hash)]


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


def _second_series(tmp_path):
    """Another series repo's series (its own directory; the same patch, so only where it lives tells)."""
    from patchq import series as series_mod
    from testing import small_series

    return series_mod.load(str(small_series.write_series(tmp_path / "other")))


def test_apply_refuses_to_replace_the_patches_of_another_series(small, tmp_path):
    """One environment, two series: applying the second series' profile over the first one's
    patches is refused (exit 7, naming the series that applied them and the two ways forward),
    unless --replace; the journal records which series applied what (issue 39: apply reverted
    the bundled series' patches silently, exit 0)."""
    from patchq.env.state import StateDir

    first, code = apply.apply(small.target, small.series, "base")
    assert code == 0 and StateDir(small.site).read().applied_from["dir"] == str(small.series.root)
    other = _second_series(tmp_path)
    before = small.utils()
    doc, code = apply.apply(small.target, other, "none")
    assert code == 7 and not doc["ok"] and doc["written"] == [] and small.utils() == before
    assert doc["error"] == (
        f"the patches applied here (bump-default, profile base) were applied from {small.series.location.describe()}"
        f", not from this series ({other.root}): applying profile none would revert them. "
        f"Work in that series (`--series {small.series.root}`: its status, upgrade or revert), or replace them "
        f"with this series' profile: `patchq apply --profile none --replace`")
    doc, code = apply.apply(small.target, other, "none", replace=True)
    assert code == 0 and doc["removed"] == ["bump-default"]
    assert StateDir(small.site).read().applied_from["dir"] == str(other.root)  # its (empty) profile now
    doc, code = apply.apply(small.target, other, "base")
    assert code == 0 and StateDir(small.site).read().applied_from["dir"] == str(other.root)


def test_an_upstreamed_only_profile_of_another_series_is_no_obstacle(small, tmp_path):
    """Patches journalled as upstreamed were never written: nothing of the other series would be reverted."""
    from patchq.vllmdist import sources
    from testing.small_series import UTILS_PY, write_site

    target = sources.installed(write_site(tmp_path / "site-0.3", "0.3.0", utils=UTILS_PY.replace("102400", "101376")))
    assert apply.apply(target, small.series, "base")[1] == 0
    assert apply.apply(target, _second_series(tmp_path), "base")[1] == 0
