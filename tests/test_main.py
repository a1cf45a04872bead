"""patchq.__main__: the console script's dispatch (in process; the subprocess scenarios are in
tests/e2e/)."""

from __future__ import annotations

import json
import sys

import pytest

import patchq
from patchq import __main__ as entry
from testing.small_series import write_series


def test_version(capsys):
    assert entry.dispatch(["--version"]) == 0
    assert capsys.readouterr().out == f"patchq {patchq.__version__}\n"


def test_list_is_answered_with_json_hoisted_before_the_verb(tmp_path, monkeypatch, capsys):
    series = write_series(tmp_path)
    monkeypatch.setenv("PATCHQ_SERIES", str(series))
    monkeypatch.setenv("PATCHQ_ANCHORS", str(tmp_path / "anchors"))
    assert entry.dispatch(["--json", "list"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "patchq.list/1" and [p["id"] for p in doc["patches"]] == ["bump-default"]


def test_main_exits_through_the_error_edge(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["patchq", "apply", "--profile", ""])
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("patchq: error:") and len(err.strip().splitlines()) == 1
