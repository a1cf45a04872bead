"""patchq.commands.test: ``patchq test`` records (``--regen``) and verifies each patch's expected
output per release (the small series, releases 0.1.0 and 0.3.0 in the layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq.authoring import diffstore
from patchq.commands import test as test_cmd
from patchq.errors import UsageError
from testing.small_series import write_release


@pytest.fixture
def cached(small):
    cache = Path(os.environ["PATCHQ_CACHE_DIR"])
    write_release(cache, "0.1.0")
    write_release(cache, "0.3.0")
    return small


def test_regen_records_then_test_verifies_and_a_changed_patch_fails(cached):
    root = str(cached.series.root)
    doc, code = test_cmd.run(root, [], regen=True, releases="0.1.0,0.3.0")
    assert code == 0 and doc["schema"] == "patchq.test/1" and doc["regen"] and doc["ok"]
    assert diffstore.read_verdicts(root, "bump-default") == {"0.1.0": "applies", "0.3.0": "upstreamed"}
    assert diffstore.diff_path(root, "0.1.0", "bump-default").is_file()
    doc, code = test_cmd.run(root, [], regen=False, releases=None)
    assert code == 0 and doc["ok"] and all(r["ok"] for r in doc["cases"]) and len(doc["cases"]) >= 2
    patch_py = cached.series.root / "bump_default.py"
    patch_py.write_text(patch_py.read_text().replace('"DEFAULT = 101376"', '"DEFAULT = 99"'))
    doc, code = test_cmd.run(root, [], regen=False, releases=None)
    assert code == 1 and not doc["ok"] and [r["ok"] for r in doc["cases"]].count(False) == 1
    assert "fail" in test_cmd.render_text(doc)


def test_usage_errors(cached):
    root = str(cached.series.root)
    with pytest.raises(UsageError, match="unknown patch"):
        test_cmd.run(root, ["nope"], regen=False, releases=None)
    with pytest.raises(UsageError, match="--releases goes with --regen"):
        test_cmd.run(root, [], regen=False, releases="0.1.0")
    with pytest.raises(UsageError, match="--migrate"):
        test_cmd.run(root, [], regen=True, releases=None, migrate=True)


def test_a_patch_with_no_expected_output_names_no_release(cached):
    """Before any ``--regen`` the case has no release: the line says so, never ``bump-default@-``."""
    doc, code = test_cmd.run(str(cached.series.root), [], regen=False, releases=None)
    assert code == 1 and [r["release"] for r in doc["cases"]] == [None]
    text = test_cmd.render_text(doc)
    assert "@-" not in text
    assert "  FAIL bump-default (no expected output yet)" in text.splitlines()
