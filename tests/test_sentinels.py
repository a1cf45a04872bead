"""patchq.sentinels: the comment left on every changed definition (stdlib only)."""

from __future__ import annotations

import subprocess
import sys

from patchq.sentinels import SENTINEL_RE, find_sentinels, sentinel_comment


def test_comment_round_trips():
    text = sentinel_comment("head-gemv", "0123456789ab")
    assert text.startswith("# patchq:head-gemv:0123456789ab ")
    assert SENTINEL_RE.match(text).groups() == ("head-gemv", "0123456789ab")


def test_find_sentinels_in_order_without_parsing():
    text = (
        "# patchq:backend-tiles:aaaaaaaaaaaa (applied)\nclass Backend:\n"
        "    # patchq:page-scale:bbbbbbbbbbbb\n    def f(self): ...\n"
        "x = '# patchq:Bad:cccccccccccc'\n"          # upper case id: not a sentinel
        "# patchq:short:abc\n"                        # hash too short
        "# patchq:long:0123456789abcdef\n"            # 16 hex: not at a word boundary after 12
        "def broken(:\n"                              # not Python: still found
        "# patchq:align-backoff:cccccccccccc\n"
    )
    assert find_sentinels(text) == [
        ("backend-tiles", "aaaaaaaaaaaa"), ("page-scale", "bbbbbbbbbbbb"), ("align-backoff", "cccccccccccc"),
    ]


def test_stdlib_only():
    """The fast path imports it: it must not pull in libcst or typer."""
    code = "import sys, patchq.sentinels; print(sorted(m for m in ('libcst', 'typer', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
