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


@pytest.mark.parametrize("args", [("check", "--profile", "full", "--vllm", "0.33.0"),
                                  ("matrix", "--releases", "0.33.0"), ("cache",), ("apply", "--profile", "full"),
                                  ("status",), ("run", "--profile", "full", "--", "true")])
def test_a_cache_dir_that_is_a_file_is_one_line_and_exit_2(tmp_path, args):
    """issue 39: PATCHQ_CACHE_DIR naming a regular file was exit 70 for check and matrix, and
    `cache` said "0 B", exit 0; every command now says so in one line, exit 2."""
    from support import run_cli

    path = tmp_path / "cache"
    path.write_text("a file\n")
    r = run_cli(*args, env={"PATCHQ_CACHE_DIR": str(path)})
    assert r.rc == 2, r
    assert r.stderr.strip().splitlines() == [f"patchq: error: the cache directory {path} ($PATCHQ_CACHE_DIR) is a "
                                             f"regular file; set PATCHQ_CACHE_DIR to a directory of patchq's own "
                                             f"(patchq creates it)"]
    assert path.read_text() == "a file\n"


def test_help_and_version_answer_whatever_the_cache_dir(tmp_path):
    from support import run_cli

    path = tmp_path / "cache"
    path.write_text("a file\n")
    for args in (("--version",), ("check", "--help")):
        r = run_cli(*args, env={"PATCHQ_CACHE_DIR": str(path)})
        assert r.rc == 0 and r.stdout, r
