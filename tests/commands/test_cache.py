"""patchq.commands.cache: what patchq's cache holds per release, prune and clean (an empty cache
of its own with two small releases); prune and clean remove only what patchq made, under a root
that is patchq's (issue 38: `clean` deleted a repo, `prune` a user's file in a release tree)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchq.commands import cache
from patchq.errors import CacheRefused, ReadOnlyError, UsageError
from patchq.vllmdist import cache as layout
from testing.small_series import write_release

PLAN = "ab" * 32 + ".json"


@pytest.fixture
def root() -> Path:
    root = Path(os.environ["PATCHQ_CACHE_DIR"])  # the fast layer's empty cache
    for version in ("0.1.0", "0.2.0", "0.10.0"):
        write_release(root, version)
    (root / "plans").mkdir()
    (root / "plans" / PLAN).write_bytes(b"1234")
    return root


def test_show(root):
    doc, code = cache.show()
    assert code == 0 and doc["schema"] == "patchq.cache/1" and doc["dir"] == str(root)
    assert [r["version"] for r in doc["releases"]] == ["0.1.0", "0.2.0", "0.10.0"]
    assert doc["releases"][0]["tree"] == [str(root / "releases" / "0.1.0")] and doc["other"] == {"plans": 4}
    assert doc["total_bytes"] == sum(r["bytes"] for r in doc["releases"]) + 4
    assert cache.render_text(doc).splitlines()[0].startswith(f"cache {root}: ")
    assert "  plans/ " in cache.render_text(doc)  # a directory is shown as one
    assert layout.is_marked(str(root))  # adopted: every entry is a name patchq makes
    # a stray file is shown as a file, not a folder (a fresh user's find)
    doc["other"]["notes.txt"] = 5
    (root / "notes.txt").write_text("mine\n")
    assert "  notes.txt " in cache.render_text(doc) and "notes.txt/" not in cache.render_text(doc)


def test_prune_keeps_the_newest(root):
    wheel = root / "wheels" / "vllm-0.1.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    (root / "wheels" / f".{wheel.name}.sha256").write_text("0" * 64 + "\n")
    doc, code = cache.prune(1)
    assert code == 0 and doc["kept"] == ["0.10.0"]
    assert sorted(p.name for p in (root / "releases").iterdir() if not p.name.startswith(".")) == ["0.10.0"]
    assert list((root / "wheels").iterdir()) == []  # the wheel and its checksum note
    assert sorted(doc["removed"]) == sorted([str(root / "releases" / v) for v in ("0.1.0", "0.2.0")]
                                            + [str(wheel), str(root / "wheels" / f".{wheel.name}.sha256")])
    with pytest.raises(UsageError, match="--keep -1"):
        cache.prune(-1)


def test_clean_empties_the_cache_but_keeps_its_marker(root):
    doc, code = cache.clean()
    assert code == 0 and [p.name for p in root.iterdir()] == ["CACHEDIR.TAG"]
    assert doc["releases"] == [] and doc["total_bytes"] == 0
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
    from patchq.vllmdist import releases
    from testing.fake_index import FakeIndex

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


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_clean_refuses_a_directory_that_is_not_patchqs(tmp_path, monkeypatch):
    """PATCHQ_CACHE_DIR=. in a repository: nothing removed, one error naming what is foreign."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "series").mkdir()
    (repo / "series" / "mine.py").write_text("PATCH = 1\n")
    before = _tree(repo)
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(repo))
    with pytest.raises(CacheRefused, match=r"\.git, series.*patchq does not make.*CACHEDIR\.TAG") as err:
        cache.clean()
    assert err.value.exit_code == 2 and _tree(repo) == before and not (repo / "CACHEDIR.TAG").exists()


@pytest.mark.parametrize("where", ["releases/0.1.0/NOTES.md", "releases/0.1.0/vllm/mine.py", "plans/notes.txt",
                                   "my-notes.txt", "wheels/my.tar"])
def test_clean_removes_nothing_when_a_foreign_file_is_inside(root, where):
    cache.show()  # adopts the cache (marker written)
    (root / where).parent.mkdir(parents=True, exist_ok=True)
    (root / where).write_text("the user's own\n")
    before = _tree(root)
    with pytest.raises(CacheRefused, match=where.replace(".", r"\.")):
        cache.clean()
    assert _tree(root) == before


def test_prune_never_removes_a_foreign_file_placed_in_a_release(root):
    cache.show()  # adopts the cache (marker written)
    mine = root / "releases" / "0.1.0" / "vllm" / "ops" / "my_notes.txt"
    mine.write_text("the user's own\n")
    before = _tree(root)
    with pytest.raises(CacheRefused, match="releases/0.1.0/vllm/ops/my_notes.txt") as err:
        cache.prune(0)
    assert err.value.exit_code == 2 and _tree(root) == before
    mine.unlink()  # the other releases' trees are patchq's alone: pruned
    doc, _ = cache.prune(0)
    assert doc["kept"] == [] and not [p for p in (root / "releases").iterdir() if not p.name.startswith(".")]


def test_a_symlinked_entry_is_removed_as_a_link_never_followed(root, tmp_path):
    """bench/scale.py's private caches link releases/ to the shared cache: pruning or cleaning
    one never reaches through the link."""
    shared = tmp_path / "shared"
    write_release(shared, "0.3.0")
    (root / "test-envs").mkdir()
    os.symlink(shared / "releases", root / "test-envs" / "vllm-0.3.0")
    before = _tree(shared)
    cache.prune(0)
    cache.clean()
    assert _tree(shared) == before and [p.name for p in root.iterdir()] == ["CACHEDIR.TAG"]


def test_clean_waits_for_a_running_command_then_gives_up(root, monkeypatch):
    """A command using a release tree (the root's shared lock, taken by release_tree) makes
    clean wait, then exit 5 with nothing removed: a check never reads a tree being removed
    (issue 38)."""
    cache.show()  # adopts the cache (marker written)
    code = ("import sys, time; from patchq.vllmdist import releases; releases.release_tree('0.1.0'); "
            "print('held', flush=True); time.sleep(30)")
    reader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ)
    try:
        assert reader.stdout.readline().strip() == "held"
        monkeypatch.setenv("PATCHQ_LOCK_TIMEOUT", "0.3")
        before = _tree(root)
        with pytest.raises(ReadOnlyError, match="held the cache") as err:
            cache.clean()
        assert err.value.exit_code == 5 and _tree(root) == before
    finally:
        reader.kill()
        reader.wait()
    assert cache.clean()[1] == 0  # the reader gone: clean proceeds
