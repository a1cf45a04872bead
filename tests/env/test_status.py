"""patchq status (patchq.env.status): the report from a stat stamp once computed, and a
change to a patched file behind a restored mtime still seen (issue 25)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from testing import small_series

from patchq import series as series_mod
from patchq.commands import apply as apply_cmd
from patchq.env import stamp
from patchq.env import status as st
from patchq.plan.anchors import ast_index, fingerprint_ast
from patchq.vllmdist import sources


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PATCHQ_STAMPS", raising=False)
    return tmp_path / "cache"


def _later() -> int:
    """A verification that started well after every file of the test was written."""
    return time.time_ns() + 2 * stamp.SETTLE_NS


@pytest.fixture()
def applied(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A small site-packages with profile ``base`` applied, and a clock that sees every
    file as settled (the stamps are saved by the first verified no-op / status)."""
    site = small_series.write_site(tmp_path / "site")
    repo = tmp_path / "repo"
    small_series.write_series(repo, fingerprint=fingerprint_ast(ast_index(small_series.UTILS_PY)["Backend"][0]))
    s = series_mod.load(str(repo / "series"))
    doc, code = apply_cmd.apply(sources.installed(str(site)), s, "base")
    assert code == 0, doc
    monkeypatch.setattr(stamp, "now", _later)
    return {"site": str(site), "series": str(repo / "series"), "anchors": str(repo / "anchors"), "repo": repo}


def _stamps(cache: Path) -> list[Path]:
    return sorted((cache / "stamps").glob("*.stamp")) if (cache / "stamps").is_dir() else []


def test_status_is_stamped_and_sees_a_change(applied: dict, cache: Path) -> None:
    first = st.collect(applied["site"], applied["series"], applied["anchors"])
    assert len(_stamps(cache)) == 1
    again = st.collect(applied["site"], applied["series"], applied["anchors"])
    assert again == first and list(again) == list(first)  # the same document, keys in the same order
    utils = Path(applied["site"]) / "vllm" / "ops" / "utils.py"
    old = os.stat(utils)
    utils.write_text(utils.read_text().replace("101376", "101377"))
    os.utime(utils, ns=(old.st_atime_ns, old.st_mtime_ns))
    after = st.collect(applied["site"], applied["series"], applied["anchors"])
    assert [f["state"] for f in after["files"]] == ["modified"]
    assert st.exit_code(after) != 0
