"""``--help`` from a stat stamp (patchq.helpcache): the same text, and only plain requests."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from patchq import helpcache
from patchq.env import stamp


@pytest.fixture()
def out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PATCHQ_STAMPS", raising=False)
    monkeypatch.setattr(stamp, "now", lambda: time.time_ns() + 2 * stamp.SETTLE_NS)
    return capsys


def test_plain_requests_only() -> None:
    assert helpcache.is_plain_help(["--help"]) and helpcache.is_plain_help(["upstream", "log", "--help"])
    assert not helpcache.is_plain_help(["check", "--profile", "x", "--help"])
    assert not helpcache.is_plain_help(["--help", "check"]) and not helpcache.is_plain_help([])


def test_the_second_request_writes_the_kept_text(out) -> None:
    calls = []

    def render(argv: list[str]) -> int:
        calls.append(argv)
        sys.stdout.write("Usage: patchq check [OPTIONS]\n")
        return 0

    assert helpcache.run(["check", "--help"], render) == 0
    assert helpcache.run(["check", "--help"], render) == 0
    assert calls == [["check", "--help"]]
    assert out.readouterr().out == "Usage: patchq check [OPTIONS]\n" * 2
    assert helpcache.run(["list", "--help"], render) == 0 and len(calls) == 2  # another request, another stamp


@pytest.mark.parametrize("how", ["stderr", "exit 2", "buffer", "not help"])
def test_nothing_kept_unless_plain_and_clean(out, how: str) -> None:
    calls = []

    def render(argv: list[str]) -> int:
        calls.append(argv)
        sys.stdout.write("text\n")
        if how == "stderr":
            sys.stderr.write("warning\n")
        if how == "buffer":
            getattr(sys.stdout, "buffer", None)
        return 2 if how == "exit 2" else 0

    argv = ["check", "--profile", "p"] if how == "not help" else ["check", "--help"]
    helpcache.run(argv, render)
    helpcache.run(argv, render)
    assert len(calls) == 2
