"""patchq.options: one declaration of the options of apply, status, list and run, read by
the typer app, the fast path and ``patchq run``'s standard-library parser."""

from __future__ import annotations

import pytest

from patchq import fastpath, options
from patchq.commands import run
from patchq.errors import UsageError


def test_parse_values_flags_and_repeats():
    values, rest = options.parse(["-p", "full", "--site-packages=/sp", "--json", "--patch", "a", "--patch=b"],
                                 options.COMMANDS["apply"])
    assert values == {"profile": "full", "site_packages": "/sp", "json": True, "strict": False, "replace": False,
                      "patch": ["a", "b"]}
    assert rest == []


@pytest.mark.parametrize("argv, arg, why, message", [
    (["--profile"], "--profile", "no-value", "--profile needs a value"),
    (["-p", " "], "-p", "empty", "-p must not be empty"),
    (["--series="], "--series", "empty", "--series must not be empty"),
    (["--json=1"], "--json=1", "unknown", "unknown option --json=1"),
    (["--bogus"], "--bogus", "unknown", "unknown option --bogus"),
    (["stray"], "stray", "unknown", "unknown option stray"),
    (["--"], "--", "unknown", "unknown option --"),
])
def test_parse_refuses(argv, arg, why, message):
    with pytest.raises(options.Unparsed) as caught:
        options.parse(argv, options.COMMANDS["apply"])
    assert (caught.value.arg, caught.value.why, caught.value.message) == (arg, why, message)


def test_parse_command_starts_at_the_first_argument_or_after_dashes():
    declared = options.COMMANDS["run"]
    assert options.parse(["-p", "x", "python", "-c", "--json"], declared, command=True)[1] == \
        ["python", "-c", "--json"]
    values, rest = options.parse(["-p", "x", "--json", "--", "--print-env"], declared, command=True)
    assert values["json"] and not values["print_env"] and rest == ["--print-env"]


def test_fast_path_reads_the_declaration():
    assert fastpath._parse(["--profile", "p", "--json"], "apply") == {"profile": "p", "json": True}
    assert fastpath._parse(["--series", "s"], "list") == {"series": "s", "json": False}
    # declared but not answered on the fast path, or not declared for the command: the full CLI decides
    for argv, command in ((["--profile", "p", "--python", "x"], "apply"), (["--strict"], "apply"),
                          (["--profile", "p"], "status"), (["--site-packages", "s"], "list"),
                          (["--profile", ""], "apply")):
        assert fastpath._parse(argv, command) is None, argv


def test_run_reads_the_declaration():
    opts = run.parse(["--profile=p", "--python", "/py", "--print-env"])
    assert (opts.profile, opts.python, opts.print_env, opts.as_json, opts.command) == ("p", "/py", True, False, [])
    for argv, message in ((["--profile", "p", "--strict", "--", "x"], "unknown option --strict"),
                          (["--", "true"], "--profile NAME is required"),
                          (["-p", "p"], "no command to run")):
        with pytest.raises(UsageError, match=message):
            run.parse(argv)


def test_typer_app_declares_the_same_options():
    import typer

    from patchq import cli

    group = typer.main.get_command(cli.app)
    for name, declared in options.COMMANDS.items():
        command = group.commands[name]  # type: ignore[attr-defined]
        typer_opts = {tuple(p.opts): p for p in command.params if p.param_type_name == "option"}
        for o in declared:
            param = typer_opts[o.names]
            assert param.help == o.help and param.is_flag == o.flag, (name, o.names)
            assert param.metavar == o.metavar and param.multiple == o.many, (name, o.names)
