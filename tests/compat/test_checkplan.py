"""``apply`` reuses what ``check`` planned (:mod:`patchq.compat.checkplan`), on real releases:
the test stack's full profile (tests/testing/stack) and a 40-patch series checked on release 0.23.0, applied to an
install of it without planning; a damaged cached plan planned again; what is never kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchq import series
from patchq.compat import check
from patchq.env.converge import converge
from patchq.plan import engine, plancache
from patchq.vllmdist import cache, sources
from testing.spread import modules_of, spread_series

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel


@pytest.fixture
def plans(tmp_path, monkeypatch) -> Path:
    """The plan cache in a directory of its own; verdicts not cached (each check plans)."""
    monkeypatch.setattr(cache, "plans", lambda: tmp_path / "plans")
    monkeypatch.setenv("PATCHQ_VERDICT_CACHE", "0")
    return tmp_path / "plans"


def _applied(site: Path, patches) -> tuple[engine.Plan, dict[str, bytes]]:
    result = converge(sources.installed(site), patches, profile="all")
    return result.plan, {rel: (site / rel).read_bytes() for rel in result.plan.patched}


def test_apply_after_check_writes_the_checked_plan_without_planning(plans, make_site):
    patches = series.load().patches_of("full")
    rows = check.check(sources.release_source("0.23.0"), patches, keep_plan=True)
    assert not any(r.blocking for r in rows) and list(plans.glob("*.json"))
    served, written = _applied(make_site(), patches)
    assert served.workspace is None  # from the cache: nothing planned
    fresh = engine.plan(sources.installed(make_site()), patches)
    assert written == {rel: text.encode() for rel, text in fresh.patched.items()}
    assert [(r.patch_id, r.status, r.files, r.anchors) for r in served.results] == \
        [(r.patch_id, r.status, r.files, r.anchors) for r in fresh.results]  # the journal's rows are apply's own


def test_a_long_series_checked_in_forked_shares_is_applied_from_their_plans(plans, make_site, tmp_path, monkeypatch):
    from patchq.vllmdist import releases

    monkeypatch.setenv("PATCHQ_CHECK_WORKERS", "2")  # the fan-out, whatever this machine's CPUs
    patches = series.load(spread_series(tmp_path / "s", releases.release_tree("0.23.0"), 40)).patches_of("all")
    check.check(sources.release_source("0.23.0"), patches, keep_plan=True)
    served, written = _applied(make_site(), patches)
    assert served.workspace is None and len(written) == 40
    fresh = engine.plan(sources.installed(make_site()), patches)
    assert written == {rel: text.encode() for rel, text in fresh.patched.items()}


def test_a_damaged_cached_plan_is_planned_again_never_written(plans, make_site):
    patches = series.load().patches_of("full")
    check.check(sources.release_source("0.23.0"), patches, keep_plan=True)
    for text in (plans / "texts").rglob("*"):
        if text.is_file():
            text.write_bytes(text.read_bytes().replace(b"patchq", b"patchQ", 1))  # a bit flip in every text
    served, written = _applied(make_site(), patches)
    assert served.workspace is not None  # the damaged entry was a miss: planned
    assert all(b"patchQ" not in data for data in written.values())
    assert written == {rel: text.encode() for rel, text in served.patched.items()}


def test_nothing_is_kept_when_a_row_blocks_or_the_check_is_not_asked_to(plans, tmp_path):
    from patchq.vllmdist import releases

    modules = modules_of(releases.release_tree("0.23.0"), 40)
    gone = [("vllm.logger", "no_such_function", "0" * 16)]  # on no release: a blocking row
    with_gone = series.load(spread_series(tmp_path / "g", None, 0, modules=modules + gone)).patches_of("all")
    rows = check.check(sources.release_source("0.26.0"), with_gone, keep_plan=True)
    assert [r.id for r in rows if r.blocking] == ["fan-40"] and not plans.exists()  # apply would refuse
    patches = series.load(spread_series(tmp_path / "s", None, 0, modules=modules)).patches_of("all")
    assert not check.check(sources.release_source("0.23.0"), patches)[0].blocking and not plans.exists()  # not asked
    key = plancache.plan_key(sources.release_source("0.23.0"), patches)
    check.check(sources.release_source("0.23.0"), patches, keep_plan=True)
    assert (plans / f"{key}.json").is_file()  # the key apply looks up
