"""patchq.authoring.rangediff: a patch's renderings on two releases compared hunk by hunk
(real unified diffs from patchq.plan.diffs)."""

from __future__ import annotations

import pytest
from unidiff import UnidiffParseError

from patchq.authoring import rangediff
from patchq.plan.diffs import unified

A = "".join(f"line{i} = {i}\n" for i in range(40))


def _edit(text: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert old in text
        text = text.replace(old, new)
    return text


def test_the_same_change_elsewhere_is_equal_a_close_one_changed_others_dropped_or_new():
    moved = "header = 0\n" * 5 + A  # the release moved everything down: line numbers differ
    old = unified("vllm/x.py", A, _edit(A, ("line3 = 3\n", "line3 = 33\n"), ("line20 = 20\n", "line20 = 2000\n"),
                                         ("line30 = 30\n", "line30 = 300\n")))
    new = unified("vllm/x.py", moved, _edit(moved, ("line3 = 3\n", "line3 = 33\n"),
                                            ("line20 = 20\n", "line20 = 2001\n"),
                                            ("line36 = 36\n",
                                             "from somewhere.completely import other_things, and_more  # new\n")))
    pairs = rangediff.compare(old, new)
    assert [p.marker for p in pairs] == ["=", "!", "<", ">"]
    assert rangediff.counts(pairs) == {"same": 1, "changed": 1, "removed": 1, "added": 1}
    same, changed = pairs[0], pairs[1]
    assert same.old.header != same.new.header and same.old.removed == same.new.removed == ("line3 = 3",)
    assert rangediff.SIMILAR <= changed.score < 100
    lines = rangediff.render(pairs)
    assert lines[0] == "1: vllm/x.py @@ -1,7 +1,7 @@ = 1: vllm/x.py @@ -6,7 +6,7 @@"
    assert lines[2].endswith("< -") and lines[3].startswith("- > ")


def test_sentinel_lines_are_not_content():
    sentinel = "# patchq:bump-default:0123456789ab (applied by patchq; `patchq status` explains)\n"
    diff = unified("vllm/x.py", A, _edit(A, ("line5 = 5\n", sentinel + "line5 = 5\n")))
    assert rangediff.hunks(diff) == []


def test_not_a_diff():
    with pytest.raises(UnidiffParseError):
        rangediff.hunks("@@ -1 +1 @@\n-a\n+b\n")
