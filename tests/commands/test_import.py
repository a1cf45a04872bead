"""patchq.commands.import_: ``patchq import`` turns a unified diff (or a monkeypatch) into an
anchored patch of the series, verified on its release (the small world; release 0.1.0 in the
layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.commands import apply, import_, revert
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


def test_a_runtime_name_is_declared_only_when_asked(world, tmp_path):
    """A name the patched code reads and its module lacks is refused (nothing written), and
    becomes runtime_names only through --runtime-name (issue 37 item 3)."""
    scaled = UTILS_PY.replace("        return self.DEFAULT\n", "        return self.DEFAULT * SCALE\n")
    (tmp_path / "scaled.diff").write_text(diffs.unified(UTILS, UTILS_PY, scaled))
    with pytest.raises(ImportRefused, match=r"`SCALE` \(vllm/ops/utils\.py:11\).*--runtime-name NAME"):
        import_.run(world.series, str(tmp_path / "scaled.diff"), "scaled", release="0.1.0")
    assert "scaled" not in series_mod.load(world.series.root).all_patch_ids()
    doc, _ = import_.run(world.series, str(tmp_path / "scaled.diff"), "scaled", release="0.1.0",
                         runtime_names=["SCALE"])
    assert series_mod.load(world.series.root).patch("scaled").runtime_names == ("SCALE",)
    assert any("declared runtime_names=['SCALE'] as asked" in n for n in doc["notes"])


def test_a_monkeypatch_wrapper_becomes_a_result_wrapper(world, tmp_path):
    """`import --replacement` of a wrapper saved in a factory (issue 37 items 1, 2, 8)."""
    (tmp_path / "stack.py").write_text(
        "def install():\n    from vllm.ops.utils import Backend\n\n    get = Backend.get\n\n"
        "    def doubled(self):\n        value = get(self)\n        return value * 2\n\n    Backend.get = doubled\n")
    doc, code = import_.run(world.series, None, "doubled", release="0.1.0",
                            replacement=f"{tmp_path / 'stack.py'}:install.doubled",
                            replaces="vllm.ops.utils:Backend.get")
    assert code == 0 and [a["ops"] for a in doc["anchors"]] == [["result"]]
    plan = engine.plan(world.target, [series_mod.load(world.series.root).patch("doubled")])
    assert plan.ok and "        value = self.DEFAULT\n        return value * 2\n" in plan.patched[UTILS]
    # applied: one sentinel, a second apply changes nothing; revert gives the pristine bytes back
    pristine = (world.site / UTILS).read_bytes()
    series = series_mod.load(world.series.root)
    apply.apply(world.target, series, "default")
    text = world.utils()
    assert text.count("# patchq:doubled:") == 1 and "        return value * 2\n" in text
    apply.apply(world.target, series, "default")
    assert world.utils() == text
    _, code = revert.run(world.target, series, None, force=False)
    assert code == 0 and (world.site / UTILS).read_bytes() == pristine


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
