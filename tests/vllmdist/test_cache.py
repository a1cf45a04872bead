"""patchq.vllmdist.cache: the one owner of the cache layout (the root and every folder in it)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
