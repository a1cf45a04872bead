"""patchq.compat.upstreamed: check rows for patches found upstream (evidence, possibly-upstreamed)
and the note on an upstreamed variant's claim (the small series verified on 0.1.0, that
release in the layer's own cache; targets written here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq.compat import check, upstreamed
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_release, write_tree


@pytest.fixture
def patch(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    return small.series.patch("bump-default")


def _row(patch, tmp_path, text: str, version: str = "0.2.0"):
    tree = write_tree(tmp_path / version, utils=text)
    (row,) = check.check(sources.source_tree(tree, version=version), [patch])
    return row


def test_a_change_already_in_the_release_is_an_upstreamed_row_naming_where(patch, tmp_path):
    row = _row(patch, tmp_path,
               UTILS_PY.replace("    DEFAULT = 102400\n", "    DEFAULT = 101376\n    DEFAULT = 101376\n"))
    assert (row.status, row.blocking) == ("upstreamed", False)
    assert row.relations == {"requires": [], "conflicts": [], "supersedes": [], "superseded_by": []}
    assert row.reason.startswith("every edit's change (as made on verified vllm 0.1.0) is already in vllm 0.2.0")
    # the same statement as a local of get(), the class attribute left at 102400: alike, not
    # the patch's change (an added statement matches only at its own depth), so a person looks
    forward = _row(patch, tmp_path, UTILS_PY.replace("        return self.DEFAULT\n",
                                                     "        DEFAULT = 101376\n        return DEFAULT\n"),
                   version="0.2.1")
    assert (forward.status, forward.blocking) == (upstreamed.POSSIBLY, True), forward.reason


def test_possibly_upstreamed_is_a_blocking_row(patch, tmp_path):
    row = _row(patch, tmp_path, UTILS_PY.replace("    DEFAULT = 102400\n", "    DEFAULT: int = 101376\n"))
    assert (row.status, row.blocking, row.level) == (upstreamed.POSSIBLY, True, None)
    assert upstreamed.POSSIBLY in upstreamed.BLOCKING


def test_an_upstreamed_variant_claim_is_checked_against_the_code(patch, tmp_path):
    agreed = _row(patch, tmp_path, UTILS_PY.replace("102400", "101376"), version="0.3.0")
    assert agreed.status == "upstreamed" and agreed.variant_kind == "upstreamed"
    assert [n for n in agreed.notes if n.startswith("generic upstream detection agrees: ")]
    doubted = _row(patch, tmp_path, UTILS_PY, version="0.3.1")  # still 102400 on a release said to have it
    assert doubted.status == "upstreamed" and not doubted.blocking  # the author's declaration stands...
    assert [n for n in doubted.notes if n.endswith("the variant's upstreamed claim is not confirmed by the code")]


def test_depends_on_others():
    class R:
        def __init__(self, status):
            self.status = status
    assert upstreamed.depends_on_others([R("applies"), R("superseded")])
    assert not upstreamed.depends_on_others([R("applies"), R("upstreamed")])
