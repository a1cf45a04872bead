"""patchq.commands.serve: a profile's serve flags (``serve-args``) and the serve plan."""

from __future__ import annotations

import pytest

from patchq import series as series_mod
from patchq.commands import serve
from patchq.errors import SeriesError, UsageError

SERVE = '''
[profiles.base.serve]
args = ["--max-model-len", "${MAX_LEN:-4096}", "--cost", "$$5"]
env = {VLLM_USE_V1 = "1", EXTRA = "${EXTRA}"}
'''


@pytest.fixture
def served(small):
    path = small.series.root / "profiles.toml"
    path.write_text(path.read_text() + SERVE)
    return series_mod.load(small.series.root)


def test_expand():
    assert serve.expand("${A:-x} ${B} $$HOME", {"A": "", "B": "b"}) == "x b $HOME"


def test_serve_args_are_expanded(served):
    doc, code = serve.run(served, "base", {"MAX_LEN": "8192"})
    assert code == 0 and doc["schema"] == "patchq.serve-args/1"
    assert doc["args"] == ["--max-model-len", "8192", "--cost", "$5"]
    assert doc["env"] == {"VLLM_USE_V1": "1", "EXTRA": ""} and doc["env_withheld"] is None
    assert serve.render_text(doc).splitlines() == doc["args"]
    assert serve.run(served, "none", {})[0]["args"] == []  # no serve table


def test_bad_tables_and_profiles(served):
    path = served.root / "profiles.toml"
    with pytest.raises(UsageError, match="unknown profile"):
        serve.run(served, "nope")
    path.write_text(path.read_text().replace('args = ["--max-model-len"', 'args = [1, "--max-model-len"'))
    with pytest.raises(SeriesError, match="serve.args must be a list of strings"):
        serve.run(series_mod.load(served.root), "base")


def test_the_variables_a_profile_reads_are_named(served, monkeypatch):
    """``[profiles.base.serve]`` reads MAX_LEN and EXTRA: the dry run names them with the value each
    takes, serve-args' JSON lists them, and ``serve --help`` says where to look (issue 39: the help
    hid the variables a profile's serve table reads)."""
    from support import run_cli

    doc, _ = serve.run(served, "base", {"MAX_LEN": "8192"})
    assert doc["variables"] == {"MAX_LEN": {"default": "4096", "value": "8192"},
                                "EXTRA": {"default": "", "value": ""}}
    monkeypatch.setenv("MAX_LEN", "8192")
    plan = serve.serve_plan(served, "base", None, [], dry_run=True)
    text = serve.dry_run_text(plan)
    assert text.splitlines()[0] == ("# [profiles.base.serve] reads MAX_LEN=8192 (default 4096), EXTRA= (no default); "
                                    "set them to change what is served")
    res = run_cli("serve", "--help", env={"COLUMNS": "1000"})
    assert "--dry-run lists each with the value it takes" in res.stdout


@pytest.mark.parametrize("table, message", [
    ('args = ["a\\u0000b"]', r"serve.args\[0\] holds a NUL byte"),
    ('env = {"A=B" = "x"}', "serve.env: 'A=B' is not an environment variable name"),
    ('env = {"" = "x"}', "serve.env: '' is not an environment variable name"),
    ('env = {A = "x\\u0000"}', "serve.env.A holds a NUL byte"),
])
def test_what_serve_would_exec_is_checked_when_the_table_loads(small, table, message):
    """A NUL byte or a name no environment can hold was exit 70 at exec (also for
    --dry-run / --json): it is a series error naming profiles.toml, before anything runs."""
    path = small.series.root / "profiles.toml"
    path.write_text(path.read_text() + f"\n[profiles.base.serve]\n{table}\n")
    loaded = series_mod.load(small.series.root)
    for call in (lambda: serve.run(loaded, "base", {}),
                 lambda: serve.serve_plan(loaded, "base", None, [], environ={"VLLM": "/bin/true"}, dry_run=True)):
        with pytest.raises(SeriesError, match=f"^{path}: profiles.base.{message}"):
            call()


def test_patchqs_own_variables_win_over_a_profiles_env(small, capsys):
    """A profile's serve.env cannot set PATCHQ_STRICT=0 or another PATCHQ_EXPECT_PROFILE (it
    silently turned off the plugin's liveness stop): they are left out, with a warning."""
    path = small.series.root / "profiles.toml"
    path.write_text(path.read_text() + '\n[profiles.base.serve]\nenv = {PATCHQ_STRICT = "0", '
                                       'PATCHQ_EXPECT_PROFILE = "none", PATCHQ_SAFE_DIRECTORIES = "*", KEEP = "1"}\n')
    loaded = series_mod.load(small.series.root)
    doc, _ = serve.run(loaded, "base", {})
    assert doc["env"] == {"KEEP": "1"}
    assert "sets PATCHQ_EXPECT_PROFILE, PATCHQ_SAFE_DIRECTORIES, PATCHQ_STRICT" in capsys.readouterr().err
    plan = serve.serve_plan(loaded, "base", None, [], environ={"VLLM": "/bin/true"}, dry_run=True)
    assert plan["env"] == {"PATCHQ_EXPECT_PROFILE": "base", "PATCHQ_STRICT": "1", "KEEP": "1"}
    user = serve.serve_plan(loaded, "base", None, [], environ={"VLLM": "/bin/true", "PATCHQ_STRICT": "0"},
                            dry_run=True)
    assert user["env"]["PATCHQ_STRICT"] == "0"  # the user's own environment still decides


def test_vllm_extra_args_that_do_not_split_are_a_usage_error(small):
    with pytest.raises(UsageError, match="VLLM_EXTRA_ARGS=.* does not split as shell words .No closing quotation"):
        serve.serve_plan(small.series, "base", None, [], environ={"VLLM": "/bin/true",
                                                                  "VLLM_EXTRA_ARGS": "--x 'open"}, dry_run=True)


def test_a_command_too_long_to_exec_is_named_e2big_exit_126_not_found_127(small, monkeypatch):
    """A 10 MB argument exited 127 "not found": the true reason (E2BIG) and 126, before
    anything is applied; a dry run lists it among its warnings."""
    from patchq.errors import EXIT_CANNOT_RUN, exec_failure

    plan = serve.serve_plan(small.series, "base", None, ["x" * (10 << 20)], environ={"VLLM": "/bin/true"},
                            dry_run=True)
    assert any("E2BIG" in w and "would exit 126" in w for w in serve.dry_run_warnings(plan))
    monkeypatch.setattr(serve, "_apply", lambda *a: pytest.fail("applied before the exec was checked"))
    with pytest.raises(serve.VllmCannotRun, match="more than the 131072 the kernel passes to a program .E2BIG.; "
                                                  "nothing was applied"):
        serve.serve(plan, None)
    import errno

    message, code = exec_failure("vllm", OSError(errno.E2BIG, "Argument list too long"))
    assert code == EXIT_CANNOT_RUN and "E2BIG" in message and "not found" not in message
    assert exec_failure("vllm", FileNotFoundError(errno.ENOENT, "No such file"))[1] == 127
