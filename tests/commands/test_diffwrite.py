"""patchq.commands.diffwrite: ``patchq diff --release V --write`` renders, validates and stores
each patch's diff on a release (the small series, its release 0.1.0 in the layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq.authoring import diffstore
from patchq.commands import diffwrite
from patchq.errors import TargetNotFound
from testing.small_series import write_release
from testing.small_world import UTILS


def test_the_diff_is_stored_per_release_and_patch(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    doc, code = diffwrite.run(small.series, "0.1.0")
    assert code == 0 and doc["ok"] and doc["vllm"] == "0.1.0" and doc["profile"] is None
    path = diffstore.diff_path(small.series.root, "0.1.0", "bump-default")
    assert doc["dir"] == str(path.parent) and path.is_file()
    text = path.read_text()
    assert text.startswith(f"diff --git a/{UTILS} b/{UTILS}\n") and "+    DEFAULT = 101376\n" in text
    assert [p["id"] if "id" in p else p.get("patch_id") for p in doc["patches"]] == ["bump-default"]
    assert diffstore.apply_diff({UTILS: (small.site / UTILS).read_text()}, text)[UTILS].count("101376") == 1


def test_a_release_that_cannot_be_had_writes_nothing(small):
    with pytest.raises(TargetNotFound):
        diffwrite.run(small.series, "0.2.0")
    assert not diffstore.store_root(small.series.root).exists()
