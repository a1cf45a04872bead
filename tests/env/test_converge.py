"""patchq.env.converge: the one algorithm of apply and revert (make the environment carry exactly
these patches), on the small world: dry runs, the journal it commits, a read-only site, and the
interrupted write it rolls forward first."""

from __future__ import annotations

import hashlib

import pytest

from patchq.env.converge import PlanFailed, converge
from patchq.env.state import StateDir
from patchq.errors import ReadOnlyError
from testing.small_world import UTILS


def test_a_dry_run_plans_and_writes_nothing(small):
    before = (small.site / UTILS).read_bytes()
    result = converge(small.target, small.series.patches_of("base"), profile="base", dry_run=True)
    assert result.plan.ok and list(result.plan.patched) == [UTILS] and result.added == ["bump-default"]
    assert (small.site / UTILS).read_bytes() == before and not (small.site / ".patchq").exists()


def test_converge_commits_the_journal_and_a_second_run_is_a_noop(small):
    result = converge(small.target, small.series.patches_of("base"), profile="base")
    assert (result.written, result.added, result.noop) == ([UTILS], ["bump-default"], False)
    journal = StateDir(small.site).read()
    entry = journal.files[UTILS]
    assert journal.profile == "base" and list(journal.patches) == ["bump-default"]
    assert entry.patched_sha256 == hashlib.sha256((small.site / UTILS).read_bytes()).hexdigest()
    assert entry.pristine_sha256 == entry.record_sha256
    again = converge(small.target, small.series.patches_of("base"), profile="base")
    assert again.noop and again.written == []
    back = converge(small.target, [], profile=None)
    assert back.removed == ["bump-default"] and back.restored == [UTILS]
    assert hashlib.sha256((small.site / UTILS).read_bytes()).hexdigest() == entry.record_sha256


def test_removed_counts_a_patch_whose_sentinels_a_forced_write_takes_out(small):
    """A foreign edit over patched code: the patch is not live (its file is not as patchq
    left it), yet forcing the file back to pristine removes it: ``removed`` says so."""
    converge(small.target, small.series.patches_of("base"), profile="base")
    (small.site / UTILS).write_text(small.utils() + "# someone's edit\n")
    back = converge(small.target, [], profile=None, force=True)
    assert (back.written, back.restored, back.removed) == ([UTILS], [UTILS], ["bump-default"])
    assert converge(small.target, [], profile=None).removed == []  # nothing left to take out


def test_a_failed_plan_raises_with_the_plan_and_writes_nothing(small):
    small.reinstall("class Other:\n    pass\n")
    with pytest.raises(PlanFailed) as err:
        converge(small.target, small.series.patches_of("base"), profile="base")
    assert [r.failure for r in err.value.plan.failures()] == ["gone"]
    assert (small.site / UTILS).read_text() == "class Other:\n    pass\n"


def test_a_site_that_refuses_writes_is_refused_before_anything_is_written(small, immutable):
    before = (small.site / UTILS).read_bytes()
    immutable(small.site, small.site / "vllm" / "ops")  # refuses new entries even to root
    with pytest.raises(ReadOnlyError, match="nothing was written"):
        converge(small.target, small.series.patches_of("base"), profile="base")
    assert (small.site / UTILS).read_bytes() == before


def test_an_interrupted_write_is_recovered_before_converging(small):
    converge(small.target, small.series.patches_of("base"), profile="base")
    state = StateDir(small.site)
    patched = (small.site / UTILS).read_bytes()
    pristine = state.read_pristine(UTILS)
    (small.site / UTILS).write_bytes(pristine)
    state.begin({UTILS: (hashlib.sha256(pristine).hexdigest(), patched)}, state.read())
    result = converge(small.target, small.series.patches_of("base"), profile="base")
    assert result.recovered == [UTILS] and result.noop and (small.site / UTILS).read_bytes() == patched


def _bump_with(small, code: str):
    """The small series' patch, its new statement ``code`` instead (the series loaded again)."""
    from patchq import series as series_mod
    from testing.small_series import PATCH_PY

    (small.series.root / "bump_default.py").write_text(
        PATCH_PY.replace('edits.stmts("DEFAULT = 101376")', f"edits.stmts({code!r})"))
    return series_mod.load(small.series.root).patches_of("base")


def test_the_plan_names_what_patched_code_imports_and_an_absent_module_is_refused(small):
    result = converge(small.target, small.series.patches_of("base"), profile="base", dry_run=True)
    assert result.plan.imports == {UTILS: []}  # a constant: nothing to look for, the module is not read again
    stdlib = converge(small.target, _bump_with(small, "import json\nDEFAULT = 101376"), profile="base", dry_run=True)
    assert stdlib.plan.imports == {UTILS: ["json"]}
    before = (small.site / UTILS).read_bytes()
    with pytest.raises(ReadOnlyError, match="patched vllm imports zz_patchq_absent, which is not installed"):
        converge(small.target, _bump_with(small, "import zz_patchq_absent.sub\nDEFAULT = 101376"), profile="base")
    assert (small.site / UTILS).read_bytes() == before


def test_the_install_advice_names_where_the_providing_distribution_came_from(tmp_path, monkeypatch):
    """A series' run-time package comes from the series' own distribution, which need not be
    on PyPI (where its name could be anyone's): the advice installs it from the wheel or
    checkout it was installed from here (PEP 610 ``direct_url.json``), else by name."""
    import json
    import sys

    from patchq.env.converge import _install_advice

    site = tmp_path / "site"
    di = site / "my_stack-1.0.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: my-stack\nVersion: 1.0\n")
    (di / "top_level.txt").write_text("my_stack_runtime\n")
    (di / "direct_url.json").write_text(json.dumps({"url": f"file://{tmp_path}/my-stack", "dir_info": {}}))
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    assert _install_advice(["my_stack_runtime"]) == (
        f"Install my-stack there first (`<that environment's python> -m pip install {tmp_path}/my-stack`, "
        f"where it was installed from here)")
    (di / "direct_url.json").unlink()
    assert _install_advice(["my_stack_runtime"]) == (
        "Install my-stack there first (`<that environment's python> -m pip install my-stack`)")
    assert _install_advice(["nobody_provides_this"]) == "Install the package that provides it there first"
