"""patchq.commands.import_: ``patchq import`` turns a unified diff (or a monkeypatch) into an
anchored patch of the series, verified on its release (the small world; release 0.1.0 in the
layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from testing.small_series import UTILS_PY, write_release
from testing.small_world import UTILS

from patchq import series as series_mod
from patchq.commands import import_
from patchq.errors import ImportRefused, UsageError
from patchq.plan import diffs, engine

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


def test_the_diff_file_is_bounded_in_kind_size_and_encoding(world, tmp_path, monkeypatch):
    """A FIFO or a device is refused unread (`import /dev/zero` was OOM-killed), a file over
    the bound is refused (PATCHQ_IMPORT_MAX_BYTES raises it), UTF-16 and stray bytes are one
    ImportRefused each (exit 70 before); nothing is written."""
    os.mkfifo(tmp_path / "fifo.diff")
    for path in (tmp_path / "fifo.diff", "/dev/zero", tmp_path):
        with pytest.raises(UsageError, match="not a regular file"):
            import_.run(world.series, str(path), "x-y", release="0.1.0")
    good = tmp_path / "double.diff"
    monkeypatch.setenv(import_.MAX_ENV, "100")
    with pytest.raises(UsageError, match=f"larger than 100 bytes.*{import_.MAX_ENV}=N"):
        import_.run(world.series, str(good), "x-y", release="0.1.0")
    monkeypatch.setenv(import_.MAX_ENV, "ten")
    with pytest.raises(UsageError, match="a positive number of bytes"):
        import_.run(world.series, str(good), "x-y", release="0.1.0")
    monkeypatch.delenv(import_.MAX_ENV)
    (tmp_path / "u16.diff").write_bytes(good.read_text().encode("utf-16"))
    with pytest.raises(ImportRefused, match="is UTF-16 text"):
        import_.run(world.series, str(tmp_path / "u16.diff"), "x-y", release="0.1.0")
    (tmp_path / "l1.diff").write_bytes(good.read_bytes().replace(b"* 2", b"* \xe9"))
    with pytest.raises(ImportRefused, match=r"l1.diff:\d+: not UTF-8 \(byte 0xe9"):
        import_.run(world.series, str(tmp_path / "l1.diff"), "x-y", release="0.1.0")
    assert "x-y" not in series_mod.load(world.series.root).all_patch_ids()
    doc, code = import_.run(world.series, str(good), "x-y", release="0.1.0")
    assert code == 0 and doc["verified"]
