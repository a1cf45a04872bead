"""patchq.commands.run: ``patchq run``'s parser, the hook it prepares (cold, then warm) and the
environment it runs the command in (the small world; the running processes are
tests/e2e/test_runtime.py's)."""

from __future__ import annotations

import pytest

from patchq.commands import run
from patchq.errors import RunPlanFailed, UsageError


def test_parse_options_then_the_command():
    opts = run.parse(["--profile", "base", "--site-packages", "/s", "--", "vllm", "serve", "--profile", "x"])
    assert (opts.profile, opts.site_packages, opts.command) == ("base", "/s", ["vllm", "serve", "--profile", "x"])
    assert run.parse(["--profile", "base", "--print-env"]).print_env
    with pytest.raises(UsageError, match="--profile NAME is required"):
        run.parse(["--", "vllm"])
    with pytest.raises(UsageError, match="no command to run"):
        run.parse(["--profile", "base"])


def test_prepare_builds_the_hook_then_finds_it_warm(small):
    opts = run.parse(["--profile", "base", "--site-packages", str(small.site), "--print-env"])
    cold = run.prepare(opts)
    assert cold["warm"] is False and cold["profile"] == "base" and list(cold["modules"]) == ["vllm.ops.utils"]
    warm = run.prepare(opts)
    assert warm["warm"] is True and warm["hook_dir"] == cold["hook_dir"]
    env = run.environment(warm, {"PYTHONPATH": "/mine"})
    assert env["PATCHQ_EXPECT_PROFILE"] == "base" and env["PYTHONPATH"].split(":")[-1] == "/mine"
    assert env["PYTHONPATH"].split(":")[0] == warm["hook_dir"] and env["PATCHQ_STRICT"] == "1"
    assert "base" in env["VLLM_CACHE_ROOT"]  # the compile cache kept apart per patch set
    with pytest.raises(UsageError):
        run.environment(warm, {"PATCHQ_EXPECT_PROFILE": "full"})
    doc = run.env_document(warm, env)
    assert doc["profile"] == "base" and doc["env"]["PATCHQ_EXPECT_PROFILE"] == "base"


def test_a_patch_that_fails_runs_nothing_and_says_why(small):
    small.reinstall("class Other:\n    pass\n")
    with pytest.raises(RunPlanFailed) as err:
        run.prepare(run.parse(["--profile", "base", "--site-packages", str(small.site), "--print-env"]))
    assert err.value.exit_code == 1 and err.value.doc["command"] == "run"
    assert "bump-default" in err.value.text


def test_run_help_is_the_clis_help_wrapped_at_the_terminal():
    """``patchq run --help`` is typer's help, as every other verb's: wrapped at $COLUMNS, naming
    the variables run sets and no internal module (issue 39: it printed run.py's docstring, not
    wrapped, naming patchq.env.hookdir and patchq/runtime/hook.py)."""
    from support import run_cli

    for args in (["run", "--help"], ["run", "-h"]):
        res = run_cli(*args, env={"COLUMNS": "80"})
        assert res.rc == 0 and res.stderr == ""
        lines = res.stdout.splitlines()
        assert lines[0].startswith("Usage: patchq run [OPTIONS] [COMMAND]...")
        assert max(map(len, lines)) <= 80, max(lines, key=len)
        assert "patchq.env" not in res.stdout and "patchq/runtime" not in res.stdout and "execvp" not in res.stdout
        for name in run.VARIABLES + ("--print-env", "--profile"):
            assert name in res.stdout, name
