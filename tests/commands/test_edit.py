"""patchq.commands.edit: ``patchq edit`` prepares a working copy, ``patchq record`` turns the edit
into an anchored patch of the series (the small world; its release 0.1.0 in the layer's own
cache, where record verifies the new patch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.commands import edit
from patchq.errors import UsageError
from patchq.plan import engine
from testing.small_series import write_release
from testing.small_world import UTILS


@pytest.fixture
def world(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    return small


def test_edit_then_record_makes_a_patch_that_applies(world):
    doc, code = edit.edit(world.series, world.target, "double-get", [UTILS], in_place=False)
    assert code == 0 and doc["mode"] == "copy" and [f["path"] for f in doc["files"]] == [UTILS]
    copy = Path(doc["files"][0]["edit"])
    assert copy.read_text() == world.utils() and doc["files"][0]["base"] == "pristine"
    assert edit.render_edit(doc).splitlines()[-1] == "then: patchq record double-get"
    copy.write_text(copy.read_text().replace("        return self.DEFAULT\n", "        return self.DEFAULT * 2\n"))
    rec, code = edit.record(world.series, world.target, "double-get", [], profile=None, apply=False)
    assert code == 0 and rec["profile"] == "default" and rec["profile_created"] and rec["added_to_profile"]
    assert "+        return self.DEFAULT * 2\n" in rec["diff"] and not Path(doc["dir"]).exists()
    loaded = series_mod.load(world.series.root)
    assert loaded.profile("default").patches == ("double-get",)
    (result,) = engine.plan(world.target, [loaded.patch("double-get")]).results
    assert result.status == engine.OK and result.anchors[0].qualname == "Backend.get"
    assert world.utils().count("* 2") == 0  # record did not apply (apply=False)


def test_refusals(world):
    with pytest.raises(UsageError, match="patch brand-new is new: name the file"):
        edit.edit(world.series, world.target, "brand-new", [], in_place=False)
    doc, _ = edit.edit(world.series, world.target, "unchanged", [UTILS], in_place=False)
    with pytest.raises(UsageError, match="nothing changed in vllm/ops/utils.py"):
        edit.record(world.series, world.target, "unchanged", [], profile=None, apply=False)
    with pytest.raises(UsageError, match="use kebab-case"):
        edit.edit(world.series, world.target, "Not_An_Id", [UTILS], in_place=False)


def test_editing_an_existing_patch_starts_from_its_result(world):
    doc, code = edit.edit(world.series, world.target, "bump-default", [], in_place=False)
    (row,) = doc["files"]
    assert code == 0 and row["base"] == "patched" and "DEFAULT = 101376" in Path(row["edit"]).read_text()
    assert "# patchq:" not in Path(row["edit"]).read_text()  # sentinels are patchq's, not the author's
