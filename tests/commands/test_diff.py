"""patchq.commands.diff: a profile's patches as a unified diff, nothing written (``patchq.diff/1``)."""

from __future__ import annotations

import pytest

from patchq.commands import apply, diff
from patchq.errors import UsageError
from testing.small_world import UTILS


def test_the_diff_of_a_profile_on_the_installed_vllm(small):
    before = (small.site / UTILS).read_bytes()
    doc, code = diff.run(small.series, "base", site_packages=str(small.site))
    assert code == 0 and doc["schema"] == "patchq.diff/1" and (doc["profile"], doc["vllm"]) == ("base", "0.1.0")
    assert doc["files"] == [UTILS] and (small.site / UTILS).read_bytes() == before
    assert doc["diff"].startswith(f"diff --git a/{UTILS} b/{UTILS}\n--- a/{UTILS}\n+++ b/{UTILS}\n")
    assert "-    DEFAULT = 102400\n" in doc["diff"] and "+    DEFAULT = 101376\n" in doc["diff"]


def test_without_a_profile_the_applied_one_is_diffed(small):
    with pytest.raises(UsageError, match="no profile is applied"):
        diff.run(small.series, None, site_packages=str(small.site))
    apply.apply(small.target, small.series, "base")
    assert diff.applied_profile(str(small.site), None) == "base"
    doc, _ = diff.run(small.series, None, site_packages=str(small.site))
    assert doc["profile"] == "base" and doc["files"] == [UTILS]


def test_patches_alone_on_a_source_tree(small, tmp_path):
    from testing.small_series import write_tree

    tree = write_tree(tmp_path / "tree")
    (tree / "vllm" / "_version.py").write_text('__version__ = version = "0.2.0"\n')  # as setuptools-scm writes it
    doc, code = diff.run(small.series, None, source=str(tree), patch_ids=["bump-default"])
    assert code == 0 and (doc["profile"], doc["vllm"], doc["files"]) == (None, "0.2.0", [UTILS])
