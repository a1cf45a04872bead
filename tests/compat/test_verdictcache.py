"""The verdict cache (patchq.compat.verdictcache): a warm check parses nothing, and every
input that can change a verdict is in its key (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testing import small_series

from patchq import series as series_mod
from patchq.compat import check, verdictcache
from patchq.plan import engine
from patchq.vllmdist import sources


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    small_series.write_release(cache, "0.1.0")
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(cache))
    monkeypatch.delenv("PATCHQ_VERDICT_CACHE", raising=False)
    small_series.write_series(tmp_path / "repo")
    return tmp_path


def _rows(world: Path) -> list[dict]:
    s = series_mod.load(str(world / "repo" / "series"))
    return [r.to_dict() for r in check.check(sources.release_source("0.1.0"), s.patches_of("base"))]


def _no_planning(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a, **k):
        raise AssertionError("planned although the verdict is cached")

    monkeypatch.setattr(engine, "plan", refuse)


def _entries(world: Path) -> list[Path]:
    return sorted((world / "cache" / "verdicts").rglob("*.pickle"))


def test_a_second_check_plans_nothing(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _rows(world)
    assert first[0]["status"] == "applies-drifted"  # the recorded fingerprint is 0000...: drift
    assert len(_entries(world)) == 1
    _no_planning(monkeypatch)
    assert _rows(world) == first


def test_a_new_fingerprint_changes_the_key(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _rows(world)
    fp = first[0]["anchors"][0]["fingerprint"]
    anchors = world / "repo" / "anchors" / "bump-default.toml"
    anchors.write_text(anchors.read_text().replace("0" * 16, fp))
    second = _rows(world)
    assert second[0]["status"] == "applies" and len(_entries(world)) == 2


def test_a_helper_beside_the_series_changes_the_key(world: Path) -> None:
    _rows(world)
    (world / "repo" / "series" / "_helpers.py").write_text("X = 1\n")
    _rows(world)
    assert len(_entries(world)) == 2


def test_a_damaged_entry_is_recomputed(world: Path) -> None:
    first = _rows(world)
    (entry,) = _entries(world)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0x10
    entry.write_bytes(bytes(data))
    assert verdictcache.load(sources.release_source("0.1.0"),
                             series_mod.load(str(world / "repo" / "series")).patches_of("base"))[0] is None
    assert _rows(world) == first  # recomputed (and stored again)
    assert verdictcache.load(sources.release_source("0.1.0"),
                             series_mod.load(str(world / "repo" / "series")).patches_of("base"))[0] is not None


def test_a_release_entering_the_cache_changes_the_key(world: Path) -> None:
    s = series_mod.load(str(world / "repo" / "series"))
    src = sources.release_source("0.1.0")
    before = verdictcache.key(src, s.patches_of("base"))
    small_series.write_release(world / "cache", "0.0.9")  # a fingerprint release is not cached yet
    anchors = world / "repo" / "anchors" / "bump-default.toml"
    anchors.write_text(anchors.read_text() + '"0.0.9" = "1111111111111111"\n')
    s = series_mod.load(str(world / "repo" / "series"))
    with_fp = verdictcache.key(src, s.patches_of("base"))
    (world / "cache" / "releases" / "0.0.9" / ".patchq-extracted-v1").unlink()
    assert verdictcache.key(src, s.patches_of("base")) not in (before, with_fp)


def test_an_unreadable_release_is_not_kept(world: Path) -> None:
    s = series_mod.load(str(world / "repo" / "series"))
    src = sources.release_source("0.1.0")
    rows, key = verdictcache.load(src, s.patches_of("base"))
    assert rows is None and key is not None
    verdictcache.note_unreadable("0.0.5")
    verdictcache.store(src, s.patches_of("base"), [], key)
    assert _entries(world) == []


def test_off_by_environment(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATCHQ_VERDICT_CACHE", "0")
    _rows(world)
    assert _entries(world) == []


def test_installed_and_source_trees_are_never_cached(world: Path) -> None:
    s = series_mod.load(str(world / "repo" / "series"))
    site = small_series.write_site(world / "site")
    check.check(sources.installed(str(site)), s.patches_of("base"))
    check.check(sources.source_tree(str(site), version="0.1.0"), s.patches_of("base"))
    assert _entries(world) == []


def test_cached_rows_render_the_same_document(world: Path) -> None:
    s = series_mod.load(str(world / "repo" / "series"))
    src = sources.release_source("0.1.0")
    doc = json.dumps(check.document(src, "base", check.check(src, s.patches_of("base"))))
    src = sources.release_source("0.1.0")
    assert json.dumps(check.document(src, "base", check.check(src, s.patches_of("base")))) == doc
