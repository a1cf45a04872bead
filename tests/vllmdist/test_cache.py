"""patchq.vllmdist.cache: the one owner of the cache layout (the root and every folder in it), and of
the rule that the root is patchq's alone (issues 38, 39)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq.errors import CacheRefused
from patchq.vllmdist import cache


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name in ("PATCHQ_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_the_root_is_patchq_cache_dir_then_xdg_then_home(env, tmp_path):
    assert cache.root() == tmp_path / "home" / ".cache" / "patchq"
    env.setenv("XDG_CACHE_HOME", "relative/not/used")
    assert cache.root() == tmp_path / "home" / ".cache" / "patchq"
    env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.root() == tmp_path / "xdg" / "patchq"
    env.setenv("PATCHQ_CACHE_DIR", "~/mine")
    assert cache.root() == tmp_path / "home" / "mine"


def test_every_folder_is_under_the_root_and_nothing_is_created(env, tmp_path):
    env.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "c"))
    root = tmp_path / "c"
    assert {
        "wheels": cache.wheels(), "releases": cache.releases(), "index": cache.index(), "plans": cache.plans(),
        "upstream/vllm.git": cache.upstream_repo(), "procs": cache.procs(), "runtime/hooks": cache.hooks(),
        "runtime/sources": cache.hook_sources(), "logs": cache.logs(), "test-envs": cache.test_envs(),
        "probe": cache.probe(),
    } == {rel: root / rel for rel in ("wheels", "releases", "index", "plans", "upstream/vllm.git", "procs",
                                       "runtime/hooks", "runtime/sources", "logs", "test-envs", "probe")}
    index = cache.definition_index()
    assert index.parent == root / "index" and index.name.startswith("defs") and index.suffix == ".sqlite"
    assert not root.exists()


def test_the_layout_is_documented_where_it_is_owned():
    doc = cache.__doc__ or ""
    for entry in ("wheels/", "releases/", "index/", "plans/", "upstream/vllm.git", "procs/", "runtime/hooks/",
                  "logs/", "test-envs/", "probe/"):
        assert entry in doc, entry
    assert isinstance(cache.root(), Path)


# ------------------------------------------------------------------ the root is patchq's alone


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """check_root() on a root of the test's own (not yet checked in this process)."""
    monkeypatch.setattr(cache, "_checked", None)
    yield lambda path: (monkeypatch.setenv("PATCHQ_CACHE_DIR", str(path)), cache.check_root())[1]
    cache.release_shared()


def test_a_new_root_is_created_with_patchqs_marker(fresh, tmp_path):
    root = tmp_path / "a" / "cache"
    assert fresh(root) == str(root)
    assert [p.name for p in root.iterdir()] == ["CACHEDIR.TAG"] and cache.is_marked(str(root))
    text = (root / "CACHEDIR.TAG").read_text()
    assert text.startswith("Signature: 8a477f597d28d172789f06886806bc55\n") and "patchq.cache-root/1" in text
    assert (root.stat().st_mode & 0o777) == 0o755


def test_a_cache_of_an_earlier_patchq_is_adopted(fresh, tmp_path):
    root = tmp_path / "cache"
    for name in ("index", "releases", "stamps", "verdicts", "wheels", "plans", "upstream", "test-envs"):
        (root / name).mkdir(parents=True)
    fresh(root)
    assert cache.is_marked(str(root)) and cache.foreign(str(root)) == []


@pytest.mark.parametrize("kind", ["file", "fifo", "dangling", "below-a-file"])
def test_a_root_that_is_not_a_directory_is_refused(fresh, tmp_path, kind):
    """issue 39: PATCHQ_CACHE_DIR naming a regular file was exit 70 for check and matrix."""
    path = tmp_path / "c"
    if kind == "file":
        path.write_text("not a directory\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        os.symlink(tmp_path / "gone", path)
    else:
        (tmp_path / "f").write_text("")
        path = tmp_path / "f" / "c"
    with pytest.raises(CacheRefused, match=f"{path}.*PATCHQ_CACHE_DIR") as err:
        fresh(path)
    assert err.value.exit_code == 2


@pytest.mark.parametrize("tag", [None, "Signature: 8a477f597d28d172789f06886806bc55\n# made by another tool\n"])
def test_a_directory_holding_anything_else_is_refused_and_left_alone(fresh, tmp_path, tag):
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "releases").mkdir()
    (root / "main.py").write_text("print('mine')\n")
    if tag:
        (root / "CACHEDIR.TAG").write_text(tag)
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(CacheRefused, match=r"holds \.git, (CACHEDIR\.TAG, )?main\.py, which patchq does not make"):
        fresh(root)
    assert sorted(p.name for p in root.iterdir()) == before


def test_a_marked_root_may_hold_other_entries_for_commands_that_only_read(fresh, tmp_path):
    root = tmp_path / "cache"
    fresh(root)
    (root / "notes.txt").write_text("mine\n")
    cache.release_shared()
    assert fresh(root) == str(root)


@pytest.mark.parametrize("how", ["other-uid", "world-writable"])
def test_a_root_another_user_can_write_is_refused_unless_opted_in(fresh, tmp_path, monkeypatch, how):
    """issue 38: a cache another uid created first, or a world-writable one, let a planted
    entry run code; refused like a walked-up config (PATCHQ_SAFE_DIRECTORIES opts in)."""
    root = tmp_path / "shared"
    root.mkdir()
    if how == "other-uid":
        if os.geteuid() != 0:
            pytest.skip("chown to another uid needs root")
        os.chown(root, 65534, 65534)
    else:
        os.chmod(root, 0o777)
    with pytest.raises(CacheRefused, match="owned by uid 65534|writable by others") as err:
        fresh(root)
    assert "PATCHQ_SAFE_DIRECTORIES" in str(err.value) and not (root / "CACHEDIR.TAG").exists()
    monkeypatch.setenv("PATCHQ_SAFE_DIRECTORIES", str(root))
    assert fresh(root) == str(root)


def test_a_reader_waits_for_clean_then_gives_up(fresh, tmp_path, monkeypatch):
    import subprocess
    import sys

    from patchq.errors import ReadOnlyError

    root = tmp_path / "cache"
    fresh(root)
    monkeypatch.setenv("PATCHQ_LOCK_TIMEOUT", "0.3")
    code = ("import time; from patchq.vllmdist import cache; "
            "c = cache.exclusive(cache.check_root()).__enter__(); print('held', flush=True); time.sleep(30)")
    env = {**os.environ, "PATCHQ_LOCK_TIMEOUT": "30"}
    cache.release_shared()  # the writer must get the lock this process holds shared
    cleaner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert cleaner.stdout.readline().strip() == "held"
        with pytest.raises(ReadOnlyError, match="`patchq cache prune` held the cache"):
            cache.hold_shared()
    finally:
        cleaner.kill()
        cleaner.wait()
    cache.hold_shared()
    assert cache._shared_root == str(root)
