"""patchq.commands.import_: ``patchq import`` turns a unified diff (or a monkeypatch) into an
anchored patch of the series, verified on its release (the small world; release 0.1.0 in the
layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.commands import import_
from patchq.errors import ImportRefused, UsageError
from patchq.plan import diffs, engine
from testing.small_series import UTILS_PY, write_release
from testing.small_world import UTILS

DOUBLED = UTILS_PY.replace("        return self.DEFAULT\n", "        return self.DEFAULT * 2\n")


@pytest.fixture
def world(small, tmp_path):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    (tmp_path / "double.diff").write_text(diffs.unified(UTILS, UTILS_PY, DOUBLED))
    return small


def test_a_diff_becomes_a_patch_that_reproduces_it(world, tmp_path):
    doc, code = import_.run(world.series, str(tmp_path / "double.diff"), "double-get", release="0.1.0",
                            profile="extra")
    assert code == 0 and doc["schema"] == "patchq.import/1" and doc["verified"]
    assert (doc["release"], doc["release_from"], doc["profile"], doc["added_to_profile"]) == ("0.1.0", "given",
                                                                                          "extra", True)
    assert [(h["path"], h["definitions"]) for h in doc["hunks"]] == [(UTILS, ["Backend.get"])]
    loaded = series_mod.load(world.series.root)
    plan = engine.plan(world.target, [loaded.patch("double-get")])
    assert plan.ok and "return self.DEFAULT * 2" in plan.patched[UTILS]


def test_the_release_is_guessed_from_the_cache_when_not_given(world, tmp_path):
    doc, _ = import_.run(world.series, str(tmp_path / "double.diff"), "double-get")
    assert doc["release"] == "0.1.0" and doc["release_from"] in ("installed", "guessed")


def test_refusals(world, tmp_path):
    with pytest.raises(UsageError, match="cannot read"):
        import_.run(world.series, str(tmp_path / "absent.diff"), "x-y", release="0.1.0")
    with pytest.raises(UsageError, match="give a diff FILE"):
        import_.run(world.series, None, "x-y", release="0.1.0")
    (tmp_path / "stale.diff").write_text(diffs.unified(UTILS, UTILS_PY.replace("102400", "1"), "x = 1\n"))
    with pytest.raises(ImportRefused):
        import_.run(world.series, str(tmp_path / "stale.diff"), "x-y", release="0.1.0")
    assert "x-y" not in series_mod.load(world.series.root).all_patch_ids()  # nothing left written
