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
