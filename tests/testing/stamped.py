"""What the stat-stamp tests share (patchq.env.stamp, the no-op fast path and status): a
cache directory of the test's own, a clock that sees every file as settled, and the small
series applied to a small site-packages (issue 25)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.commands import apply
from patchq.env import stamp
from patchq.plan.anchors import ast_index, fingerprint_ast
from patchq.vllmdist import sources
from testing import small_series


def use_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``PATCHQ_CACHE_DIR`` at ``tmp_path/cache`` with stamps on; returns that path."""
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PATCHQ_STAMPS", raising=False)
    return tmp_path / "cache"


def later() -> int:
    """A verification that started well after every file of the test was written (ns)."""
    return time.time_ns() + 2 * stamp.SETTLE_NS


def apply_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Write the small site-packages and series under ``tmp_path``, apply profile ``base``,
    and make every file settled for ``stamp.now``. Returns ``{"site", "series", "anchors"}``
    (str) and ``"repo"`` (Path)."""
    site = small_series.write_site(tmp_path / "site")
    repo = tmp_path / "repo"
    small_series.write_series(repo, fingerprint=fingerprint_ast(ast_index(small_series.UTILS_PY)["Backend"][0]))
    s = series_mod.load(str(repo / "series"))
    doc, code = apply.apply(sources.installed(str(site)), s, "base")
    assert code == 0, doc
    monkeypatch.setattr(stamp, "now", later)
    return {"site": str(site), "series": str(repo / "series"), "anchors": str(repo / "anchors"), "repo": repo}


def stamp_files(cache: Path) -> list[Path]:
    """The stamps saved under ``cache``, sorted."""
    return sorted((cache / "stamps").glob("*.stamp")) if (cache / "stamps").is_dir() else []
