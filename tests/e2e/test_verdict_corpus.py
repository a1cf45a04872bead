"""The verdict corpus (tests/verdicts/): real public stacks that patch vLLM, each cell's
truth read from that release's code; check must match it, never apply falsely, and name
the upstream lines behind every blocking verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "verdicts"))
import verdict_corpus as corpus  # noqa: E402

pytestmark = pytest.mark.wheel


def test_the_corpus_has_two_real_stacks():
    assert len(corpus.stacks()) >= 2
    for stack in corpus.stacks():
        data = corpus.truth(stack)
        assert data["source"].startswith("https://github.com/"), stack
        assert all(c["truth"] in corpus.MATCH and c["reason"].strip()
                   for cells in data["cells"].values() for c in cells.values()), stack


@pytest.mark.parametrize("stack", corpus.stacks())
def test_verdicts_match_the_truth(stack):
    cells = corpus.evaluate(stack)
    m = corpus.summary(cells)
    assert m["false_applies"] == 0, [c for c in cells if c["false_apply"]]
    assert m["false_conflicts"] <= 0.02 * m["cells"], [c for c in cells if c["false_conflict"]]
    assert m["unnamed_blocking"] == 0, [c for c in cells if not c["names_lines"]]
    assert m["matches"] == m["cells"], [(c["patch"], c["version"], c["truth"], c["status"], c["reason"])
                                        for c in cells if not c["match"]]
