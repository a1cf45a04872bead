"""patchq.commands.cache: what patchq's cache holds per release, prune and clean (an empty cache
of its own with two small releases)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq.commands import cache
from patchq.errors import UsageError
from testing.small_series import write_release


@pytest.fixture
def root() -> Path:
    root = Path(os.environ["PATCHQ_CACHE_DIR"])  # the fast layer's empty cache
    for version in ("0.1.0", "0.2.0", "0.10.0"):
        write_release(root, version)
    (root / "plans").mkdir()
    (root / "plans" / "x").write_bytes(b"1234")
    return root


def test_show(root):
    doc, code = cache.show()
    assert code == 0 and doc["schema"] == "patchq.cache/1" and doc["dir"] == str(root)
    assert [r["version"] for r in doc["releases"]] == ["0.1.0", "0.2.0", "0.10.0"]
    assert doc["releases"][0]["tree"] == [str(root / "releases" / "0.1.0")] and doc["other"] == {"plans": 4}
    assert doc["total_bytes"] == sum(r["bytes"] for r in doc["releases"]) + 4
    assert cache.render_text(doc).splitlines()[0].startswith(f"cache {root}: ")


def test_prune_keeps_the_newest(root):
    doc, code = cache.prune(1)
    assert code == 0 and doc["kept"] == ["0.10.0"]
    assert sorted(p.name for p in (root / "releases").iterdir()) == ["0.10.0"]
    assert sorted(doc["removed"]) == sorted(str(root / "releases" / v) for v in ("0.1.0", "0.2.0"))
    with pytest.raises(UsageError, match="--keep -1"):
        cache.prune(-1)


def test_clean_empties_the_cache(root):
    doc, code = cache.clean()
    assert code == 0 and list(root.iterdir()) == [] and doc["releases"] == [] and doc["total_bytes"] == 0
    assert sorted(doc["removed"]) == [str(root / "plans"), str(root / "releases")]


@pytest.fixture
def online(monkeypatch):
    """The network allowed (the fast layer sets PATCHQ_OFFLINE=1): only the loopback index is asked;
    no `pip index versions` fallback (it would ask the same index again)."""
    from patchq.vllmdist import releases

    monkeypatch.delenv("PATCHQ_OFFLINE", raising=False)

    def no_pip(package):
        raise RuntimeError("pip index versions not used here")

    monkeypatch.setattr(releases, "_fetch_pip_index", no_pip)


def test_refresh_knows_a_release_the_index_gained(online, monkeypatch, capsys):
    """Release day: the index gains 0.34.0; within the hour the cached list is used, `patchq cache
    refresh` asks at once; with the index gone, the last cached list is used and the output says so."""
    from testing.fake_index import FakeIndex

    from patchq.vllmdist import releases

    with FakeIndex(["0.32.0", "0.33.0"]) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        assert str(releases.newest()) == "0.33.0"
        index.add("0.34.0")
        assert str(releases.newest()) == "0.33.0" and releases.listing()["source"] == "cache"  # fresh for an hour
        doc, code = cache.refresh()
        assert code == 0 and doc["schema"] == "patchq.releases/1" and doc["newest"] == "0.34.0"
        assert (doc["releases"], doc["source"], doc["index"], doc["note"]) == (
            ["0.32.0", "0.33.0", "0.34.0"], "index", index.url, "")
        assert cache.render_refresh(doc).startswith(f"vllm: 3 final releases, 0.32.0 .. 0.34.0 (newest 0.34.0), "
                                                    f"listed by {index.url} just now")
    capsys.readouterr()
    doc, code = cache.refresh()  # the index cannot be reached: the last list, said so
    assert code == 0 and doc["newest"] == "0.34.0" and doc["source"] == "stale-cache"
    assert f"{index.url} cannot be reached" in doc["note"] and "`patchq cache refresh`" in doc["note"]
    assert f"patchq: note: {doc['note']}" in capsys.readouterr().err
    assert "(the index could not be reached: the list cached" in cache.render_refresh(doc)
