"""patchq.runtime.plugin: the vLLM plugin's proof per process (is the expected profile live?) and
the compile-cache fold, in process on the small world (disk mode)."""

from __future__ import annotations

import logging
import os
import types

import pytest

from patchq.commands import apply
from patchq.runtime import plugin


@pytest.fixture
def vllm_here(small, monkeypatch):
    """This process's vllm is the small world's (as ``import vllm`` would have it)."""
    monkeypatch.setitem(__import__("sys").modules, "vllm",
                        types.SimpleNamespace(__file__=str(small.site / "vllm" / "__init__.py")))
    for name in ("PATCHQ_EXPECT_PROFILE", "PATCHQ_STRICT", "VLLM_CACHE_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATCHQ_CACHE_FOLD", "1")
    before = os.environ.get("VLLM_CACHE_ROOT")
    yield small
    if before is None:  # the plugin sets it in os.environ itself (as vLLM's children inherit it)
        os.environ.pop("VLLM_CACHE_ROOT", None)


def test_the_live_profile_is_named_and_the_cache_root_folded(vllm_here):
    apply.apply(vllm_here.target, vllm_here.series, "base")
    line = plugin.check(expect="base", strict=True)
    assert line.startswith(f"patchq: profile base live in pid {os.getpid()} ") and "disk mode: bump-default:" in line
    root = os.environ["VLLM_CACHE_ROOT"]
    assert f"VLLM_CACHE_ROOT={root}" in line and "base" in root


def test_another_profile_stops_a_strict_process_and_warns_otherwise(vllm_here, caplog):
    apply.apply(vllm_here.target, vllm_here.series, "base")
    with pytest.raises(plugin.ProfileNotLive, match=r"PATCHQ_EXPECT_PROFILE=full but profile base is live "
                                                    r"\(disk mode, .*\(PATCHQ_STRICT=1: stopping\)"):
        plugin.check(expect="full", strict=True)
    with caplog.at_level(logging.WARNING, logger="vllm.patchq"):
        assert plugin.check(expect="full", strict=False) == ""
    assert "PATCHQ_EXPECT_PROFILE=full but profile base is live" in caplog.text


def test_nothing_live(vllm_here):
    with pytest.raises(plugin.ProfileNotLive, match="no patchq profile is live"):
        plugin.check(expect="base", strict=True)
    assert plugin.check(expect="", strict=True) == ""
