"""patchq.edge: every exception becomes one line (or the JSON error document) and a documented
exit code, in process (the CLI scenarios of the same rules are in tests/e2e/test_front.py)."""

from __future__ import annotations

import errno
import json
import os
import sys

import click
import pytest

from patchq import edge
from patchq.errors import EXIT_INTERNAL, ForeignEditError, SeriesError


@pytest.fixture(autouse=True)
def _no_json_mode(monkeypatch):
    monkeypatch.setattr(edge, "_json_mode", None)  # set_json is process-wide


def _raise(exc):
    def fn(argv):
        raise exc
    return fn


def test_a_patchq_error_is_one_line_with_its_code(capsys):
    assert edge.guard(_raise(ForeignEditError("vllm/x.py was edited\nby someone else")), ["apply"]) == 4
    out = capsys.readouterr()
    assert out.out == "" and out.err == "patchq: error: vllm/x.py was edited by someone else\n"


def test_with_json_the_error_is_the_document_on_stdout(capsys):
    assert edge.guard(_raise(ForeignEditError("edited")), ["apply", "--json"]) == 4
    out = capsys.readouterr()
    assert json.loads(out.out) == {"ok": False, "error": "edited", "exit_code": 4} and out.err == ""
    assert not edge.wants_json(["run", "--", "cmd", "--json"])  # after --, it is the command's
    edge.set_json(True)
    assert edge.wants_json([])


def test_an_environment_oserror_is_exit_5_naming_the_file(capsys):
    exc = OSError(errno.ENOSPC, "No space left on device", "/site/vllm/x.py")
    assert edge.guard(_raise(exc), []) == 5
    assert capsys.readouterr().err == ("patchq: error: cannot write /site/vllm/x.py: No space left on device "
                                       "(ENOSPC); nothing more was written\n")
    assert edge.environment_error(OSError(errno.EACCES, "Permission denied")) == \
        "cannot access: Permission denied (EACCES); nothing more was written"
    assert edge.environment_error(OSError(errno.ENOENT, "No such file", "/out/x")) == \
        "cannot access /out/x: No such file (ENOENT); nothing more was written"  # a path missing: exit 5 too
    assert edge.environment_error(OSError(errno.EINVAL, "Invalid argument")) is None  # not in errors.ENV_ERRNOS: a bug


def test_anything_else_is_an_internal_error_with_a_log(capsys):
    assert edge.guard(_raise(ValueError("boom\nsecond line")), ["status", "--x"]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("patchq: error: internal error (ValueError: boom); a bug in patchq, the traceback is in ")
    log = err.rsplit("the traceback is in ", 1)[1].strip()
    assert log.startswith(os.path.join(os.environ["PATCHQ_CACHE_DIR"], "logs", "patchq-"))
    text = open(log).read()
    assert "argv: ['patchq', 'status', '--x']" in text and "ValueError: boom" in text and "Traceback" in text


def test_ctrl_c_and_a_usage_error_of_click(capsys):
    assert edge.guard(_raise(KeyboardInterrupt()), []) == 130
    assert capsys.readouterr().err == "patchq: interrupted\n"
    assert edge.guard(_raise(click.UsageError("No such option: --frobnicate")), []) == 2
    assert capsys.readouterr().err == "patchq: error: No such option: --frobnicate\n"


def test_an_exception_from_a_series_file_names_the_file_and_line(tmp_path):
    path = tmp_path / "my_patch.py"
    path.write_text("def transform():\n    raise RuntimeError('bad transform')\n")
    namespace = {"__name__": "patchq_series_my_patch"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    try:
        namespace["transform"]()
    except RuntimeError as exc:
        found = edge.series_error(exc)
    assert isinstance(found, SeriesError) and str(found) == f"{path}:2: RuntimeError: bad transform"
    assert edge.series_error(RuntimeError("from patchq itself")) is None


def test_hoist_json_moves_a_leading_json_to_the_verb():
    assert edge.hoist_json(["--json", "list"]) == ["list", "--json"]
    assert edge.hoist_json(["--json", "run", "--", "cmd"]) == ["run", "--json", "--", "cmd"]
    assert edge.hoist_json(["status"]) == ["status"]
    # --series DIR before the verb too (the README names it beside --json)
    assert edge.hoist_json(["--series", "s", "--json", "list"]) == ["list", "--series", "s", "--json"]
    assert edge.hoist_json(["--series=s", "run", "--", "cmd"]) == ["run", "--series=s", "--", "cmd"]
    assert edge.hoist_json(["--series"]) == ["--series"]


def test_a_closed_stdout_exits_141_quietly(monkeypatch):
    def fn(argv):
        raise BrokenPipeError
    monkeypatch.setattr(edge, "_quiet_stdout", lambda: None)  # pytest's own stdout stays usable
    assert edge.guard(fn, []) == 141


def test_success_and_system_exit():
    assert edge.guard(lambda argv: None, []) == 0 and edge.guard(lambda argv: 3, []) == 3
    with pytest.raises(SystemExit):
        edge.guard(lambda argv: sys.exit(4), [])


@pytest.mark.parametrize("argv, path", [([], "patchq"), (["upstream"], "patchq upstream")])
def test_no_command_prints_the_help_then_one_error_line(capsys, argv, path):
    """A bare ``patchq`` (or a group without its subcommand): the help, then the one line every
    usage error ends with, exit 2 (issue 39: it exited 2 with no error line)."""
    from patchq import cli

    assert edge.guard(cli.main, argv) == 2
    out = capsys.readouterr()
    lines = out.err.rstrip("\n").splitlines()
    assert out.out == "" and lines[0].startswith(f"Usage: {path} ")
    assert lines[-1] == f"patchq: error: no command given: `{path} COMMAND` (the commands are listed above)"
