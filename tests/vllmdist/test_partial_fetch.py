"""The partial fetch (:mod:`patchq.vllmdist.lazywheel`) on a real release from PyPI: the tree
made from ~8 MB of range requests is byte-identical to the one extracted from the whole
274 MB wheel. Fetches those ~8 MB from PyPI on every run (into a temporary cache)."""

from __future__ import annotations

import os
import zipfile

import platformdirs
import pytest

from patchq.vllmdist import releases as R

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

REAL_CACHE = os.environ.get("PATCHQ_CACHE_DIR") or platformdirs.user_cache_dir("patchq")


def test_range_tree_equals_the_whole_wheel_0_23_0(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHQ_CACHE_DIR", REAL_CACHE)
    wheel = R.wheel_path("0.23.0")  # the whole wheel (cached once)
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATCHQ_PROGRESS", "0")
    root = R.release_tree("0.23.0")
    info = R.tree_info("0.23.0")
    assert info["source"] == "range" and info["wheel"] == wheel.name
    assert info["wheel_size"] == wheel.stat().st_size
    assert info["fetched_bytes"] < info["wheel_size"] / 20 and info["requests"] <= 16
    with zipfile.ZipFile(wheel) as zf:
        want = {i.filename: zf.read(i) for i in zf.infolist()
                if not i.is_dir() and R._wanted_member(i.filename, "vllm")}
        meta = next(i for i in zf.infolist() if i.filename == "vllm-0.23.0.dist-info/METADATA")
    got = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
           if p.is_file() and not p.name.startswith(".patchq")}
    assert len(got) > 1900 and got == want
    assert R.build_date("0.23.0") == meta.date_time
    assert R.cached_wheels() == {}
