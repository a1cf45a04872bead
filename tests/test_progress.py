"""patchq.progress: a bar on a terminal's stderr only, one live bar per process, silent elsewhere."""

from __future__ import annotations

import io
import os
import pty
import sys

import pytest

from patchq import progress


@pytest.fixture
def terminal(monkeypatch):
    """``terminal()`` makes stderr a real terminal (a pty) for the rest of the test (pytest sets
    its own stderr again between a fixture and the test, so the test calls it) and returns a
    function that reads what was drawn."""
    leader, follower = pty.openpty()
    tty = os.fdopen(follower, "w", buffering=1)
    os.set_blocking(leader, False)

    def install():
        monkeypatch.setattr(sys, "stderr", tty)
        monkeypatch.setenv("TERM", "xterm")
        monkeypatch.delenv("PATCHQ_PROGRESS", raising=False)
        return drawn

    def drawn() -> str:
        tty.flush()
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except BlockingIOError:
                return out.decode(errors="replace")
            if not chunk:
                return out.decode(errors="replace")
            out += chunk
    yield install
    tty.close()
    os.close(leader)


def test_a_bar_is_drawn_on_a_terminal_and_counts(terminal):
    drawn = terminal()
    assert progress.enabled()
    with progress.Bar("vllm 0.23.0 sources", total=4, unit="items") as bar:
        assert bar.shown
        bar.advance(3, label="0.24.0")
        bar.advance()
        bar.set_total(5)
        bar.note("fetched 0.24.0")
    assert (bar.done, bar.total, bar.shown) == (4, 5, False)
    assert "patchq: fetched 0.24.0" in drawn()


def test_only_one_bar_is_live(terminal):
    drawn = terminal()
    with progress.Bar("matrix", total=2) as outer, progress.Bar("a fetch inside", unit="bytes") as inner:
        assert outer.shown and not inner.shown
        inner.advance(1024)
        inner.note("never printed")
        assert inner.done == 1024
    assert "never printed" not in drawn()
    with progress.Bar("next") as bar:  # the outer one released the slot
        assert bar.shown


@pytest.mark.parametrize("setting", [("PATCHQ_PROGRESS", "0"), ("TERM", "dumb"), ("TERM", "unknown")])
def test_turned_off(terminal, monkeypatch, setting):
    drawn = terminal()
    monkeypatch.setenv(*setting)
    assert not progress.enabled()
    with progress.Bar("x") as bar:
        assert not bar.shown
    assert drawn() == ""


def test_piped_or_closed_stderr_draws_nothing(monkeypatch):
    monkeypatch.delenv("PATCHQ_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress.enabled()
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    assert not progress.enabled()
    monkeypatch.setattr(sys, "stderr", None)
    assert not progress.enabled()


def test_silence_turns_bars_off_for_the_process(terminal, monkeypatch):
    terminal()
    monkeypatch.setenv("PATCHQ_PROGRESS", "1")  # restored after the test (silence sets "0")
    progress.silence()
    assert os.environ["PATCHQ_PROGRESS"] == "0" and not progress.enabled()
