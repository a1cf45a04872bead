"""The verdict corpus (tests/verdicts/): real public stacks that patch vLLM, each cell's
truth read from that release's code. Check must match it, except on the cells each stack's
``known.toml`` lists (today's known misses: a ratchet, never a threshold), and name the
upstream lines behind every blocking verdict."""

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
def test_verdicts_match_the_truth_or_are_known_misses(stack):
    cells = corpus.evaluate(stack)
    known = corpus.known(stack)
    misses = {(c["patch"], c["version"]): c for c in cells if not c["match"]}
    new = [(k, corpus.miss_kind(c), c["truth"], corpus.verdict(c), c["reason"])
           for k, c in misses.items() if known.get(k) != corpus.verdict(c)]
    assert not new, f"misses not in tests/verdicts/{stack}/known.toml (a regression, or list it): {new}"
    fixed = sorted(set(known) - set(misses))
    assert not fixed, f"these now match the truth: remove them from tests/verdicts/{stack}/known.toml: {fixed}"
    assert not [c for c in cells if not c["names_lines"]], "a blocking verdict that names no upstream lines"
