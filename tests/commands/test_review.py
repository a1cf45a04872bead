"""patchq.commands.review: showing a drifted release's three-way review and recording it as
reviewed. The small series, reviewed on 0.1.0, on a release 0.2.0 whose ``Backend`` drifted
next to the patched statement (both in the layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import hashing
from patchq.commands import review
from patchq.compat import drift
from patchq.errors import UsageError
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_release

DRIFTED = UTILS_PY.replace("    DEFAULT = 102400\n", "    DEFAULT = 102400\n    LIMIT = DEFAULT * 2\n")


@pytest.fixture
def drifted(small):
    """Release 0.2.0 (drifted) beside the reviewed 0.1.0, both in the cache."""
    drift._release_source.cache_clear()
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.2.0", utils=DRIFTED)
    yield sources.release_source("0.2.0")
    drift._release_source.cache_clear()


def test_a_drifted_release_shows_its_review_and_blocks(small, drifted):
    doc, code = review.run(drifted, small.series, "bump-default", accept=False)
    assert code == 1 and doc["schema"] == "patchq.review/1" and not doc["ok"] and not doc["accepted"]
    assert (doc["status"], doc["blocking"]) == ("review", True) and doc["threeway"]
    text = review.render_text(doc)
    assert text.startswith("review bump-default on vllm 0.2.0: review (blocking)")
    assert "patchq review bump-default --vllm 0.2.0 --accept" in text


def test_accepting_records_the_release_as_reviewed(small, drifted):
    doc, code = review.run(drifted, small.series, "bump-default", accept=True, by="ana", note="looked at it")
    toml = small.root / "anchors" / "bump-default.toml"
    assert code == 0 and doc["accepted"] and doc["changed"] == [str(toml)]
    data = hashing.toml_module().loads(toml.read_text())
    assert "0.2.0" in data["anchors"]["default"]["fingerprints"]
    assert (data["reviews"]["0.2.0"]["by"], data["reviews"]["0.2.0"]["how"]) == ("ana", "review")


def test_the_prompt_decides_and_unknown_patches_are_refused(small, drifted):
    seen = []
    doc, code = review.run(drifted, small.series, "bump-default", ask=lambda d: seen.append(d["status"]) or False)
    assert seen == ["review"] and not doc["accepted"] and code == 1
    with pytest.raises(UsageError, match="unknown patch 'nope'"):
        review.run(drifted, small.series, "nope")
