"""The verdict cache (patchq.compat.verdictcache): a warm check parses nothing, and every
input that can change a verdict is in its key (issue 25); its entries are plain data that
loading cannot execute, and another user's entry is ignored (issue 38)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.compat import check, verdictcache
from patchq.plan import engine
from patchq.vllmdist import sources
from testing import small_series


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
    return sorted((world / "cache" / "verdicts").rglob("*.json"))


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


def _planted_pickle(marker: Path) -> bytes:
    """What format 1 read: the sha256 of a pickle, then the pickle; this one runs code."""
    import hashlib
    import pickle

    class Planted:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').write('ran')",))

    payload = pickle.dumps({"format": 1, "rows": Planted()})
    return hashlib.sha256(payload).digest() + payload


def test_a_planted_pickle_is_never_executed(world: Path) -> None:
    """issue 38: with a world-writable cache, a planted pickle ran code on `check` (exit 0)."""
    s = series_mod.load(str(world / "repo" / "series"))
    src = sources.release_source("0.1.0")
    first = _rows(world)
    k = verdictcache.key(src, s.patches_of("base"))
    marker = world / "PWNED"
    for path in {verdictcache._path(k), verdictcache._path(k).with_suffix(".pickle")}:
        path.write_bytes(_planted_pickle(marker))
    assert _rows(world) == first and not marker.exists()


@pytest.mark.parametrize("how", ["other-uid", "world-writable"])
def test_another_users_entry_is_ignored_with_a_note(world: Path, capsys, how) -> None:
    import os

    first = _rows(world)
    (entry,) = _entries(world)
    doc = entry.read_bytes().replace(b'"status":"applies-drifted"', b'"status":"applies"')
    head, _, body = doc.partition(b"\n")
    import hashlib

    entry.write_bytes(head.split(b" ")[0] + b" " + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    s = series_mod.load(str(world / "repo" / "series"))
    assert verdictcache.load(sources.release_source("0.1.0"), s.patches_of("base"))[0][0].status == "applies"
    if how == "other-uid":
        if os.geteuid() != 0:
            pytest.skip("chown to another uid needs root")
        os.chown(entry, 65534, 65534)
    else:
        os.chmod(entry, 0o666)
    capsys.readouterr()
    assert _rows(world) == first  # recomputed: the planted "applies" is not believed
    err = capsys.readouterr().err
    assert f"patchq: note: ignoring the cached verdict {entry}" in err and err.count("\n") == 1


def test_rows_are_stored_only_when_they_come_back_equal(world: Path) -> None:
    s = series_mod.load(str(world / "repo" / "series"))
    src = sources.release_source("0.1.0")
    rows = check.check(src, s.patches_of("base"))
    assert verdictcache.row_from(json.loads(json.dumps(verdictcache.row_data(rows[0])))) == rows[0]
    for entry in _entries(world):
        entry.unlink()
    _, k = verdictcache.load(src, s.patches_of("base"))
    rows[0].anchors = [{"where": ("a", 1)}]  # a tuple comes back a list: never stored
    verdictcache.store(src, s.patches_of("base"), rows, k)
    assert _entries(world) == []
    with pytest.raises(TypeError):
        verdictcache.row_from({**verdictcache.row_data(rows[0]), "__reduce__": "os.system"})


def test_a_row_that_read_a_stack_module_is_served_only_while_it_stamps_the_same(world: Path, monkeypatch) -> None:
    """A verdict that looked at a module of the stack's own (patchq.compat.foreign) depends on
    it: the entry keeps its stamp, and another text there (or the module gone) is a miss."""
    from patchq.compat import foreign
    from patchq.vllmdist import cache

    site = world / "site"
    (site / "mystack").mkdir(parents=True)
    (site / "mystack" / "__init__.py").write_text("")
    (site / "mystack" / "server.py").write_text("from vllm.logger import init_logger\n")
    monkeypatch.syspath_prepend(str(site))
    first = _rows(world)
    (entry,) = _entries(world)
    data = cache.read_entry(entry, verdictcache.SCHEMA, "verdict")
    data["rows"][0]["outside"] = {"mystack.server": foreign.stamp("mystack.server")}
    cache.write_entry(entry, cache.pack_entry(verdictcache.SCHEMA, data))
    with monkeypatch.context() as m:
        _no_planning(m)
        assert _rows(world) == first  # the module stamps the same: served
    (site / "mystack" / "server.py").write_text("from vllm.entrypoints.utils import gone\n")
    planned = []
    real = engine.plan
    monkeypatch.setattr(engine, "plan", lambda *a, **k: planned.append(1) or real(*a, **k))
    assert _rows(world) == first and planned  # another text: checked again
