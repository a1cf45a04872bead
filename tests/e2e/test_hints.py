"""Every command patchq suggests runs as printed: the ``next:`` steps and the commands quoted
in reasons and errors (a user copies them). Offline: the small series and its release 0.1.0 in
the layer's own cache; the CLI's own parser (typer's click command) for every quoted command."""

from __future__ import annotations

import ast
import itertools
import os
import re
import shlex
from pathlib import Path

import pytest
import typer

from patchq import cli as cli_mod
from patchq import hashing
from support import REPO
from testing.small_series import write_release

tomllib = hashing.toml_module()

#: a command quoted in a message: `patchq ...` in backticks, or an indented line that starts with
#: it (``next (in that directory):`` lists of ``init``), up to a ``#`` comment
QUOTED = re.compile(r"`(patchq [^`]*)`|^\s+(patchq [^#\n]*?)\s*(?:#.*)?$", re.M)
#: quoted commands that name a command in prose (what wrote a file), not a step to run
PROSE = {"patchq rebase --write"}


def test_the_fingerprint_command_check_suggests_records_the_release(small, cli):
    """``check`` on a definition never recorded names ``patchq fingerprint --patch P
    --releases V``; run as printed, it records V and ``check`` then says ``applies``."""
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    toml = small.root / "anchors" / "bump-default.toml"
    toml.write_text(toml.read_text().split("[anchors.default.fingerprints]")[0])
    args = ("check", "--patch", "bump-default", "--vllm", "0.1.0", "--series", small.series.root, "--json")
    res = cli(*args)
    row = res.json["patches"][0]
    assert (res.rc, row["status"]) == (0, "applies-drifted"), res.stdout + res.stderr
    (command,) = re.findall(r"`(patchq fingerprint [^`]*)`", row["reason"])
    assert command == "patchq fingerprint --patch bump-default --releases 0.1.0"
    res = cli(*shlex.split(command)[1:], "--series", small.series.root)
    assert res.rc == 0, res.stderr
    data = tomllib.loads(toml.read_text())
    assert list(data["anchors"]["default"]["fingerprints"]) == ["0.1.0"] and data["reviews"]["0.1.0"]["how"] \
        == "fingerprint"
    row = cli(*args).json["patches"][0]
    assert (row["status"], row["reviewed"]) == ("applies", True)


def test_an_anchor_that_fails_on_its_verified_release_points_at_the_anchors_file(small, cli):
    """A qualname typo: the anchor is gone on 0.1.0, the very release its fingerprint was
    recorded on. Upstream did not move, so no rebase is suggested (it would answer "already
    carried"); the reason and the next step name the anchors file."""
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    toml = small.root / "anchors" / "bump-default.toml"
    toml.write_text(toml.read_text().replace('qualname = "Backend"', 'qualname = "Backnd"'))
    res = cli("check", "--patch", "bump-default", "--vllm", "0.1.0", "--series", small.series.root)
    text = " ".join(res.stdout.split())  # the text rendering wraps reasons
    assert res.rc == 1, res.stdout + res.stderr
    assert "this release is recorded as verified for anchor default in anchors/bump-default.toml" in text, text
    assert "next: fix anchors/bump-default.toml or the patch: bump-default fails on vllm 0.1.0" in text
    assert "patchq rebase" not in text
    # and a rebase to that release does not call the broken patch "already carried"
    res = cli("rebase", "--to", "0.1.0", "--series", small.series.root, "--json")
    (row,) = res.json["patches"]
    assert (res.rc, row["status"]) == (1, "unsupported"), res.stdout + res.stderr
    assert row["reason"].startswith("recorded as verified on vllm 0.1.0, but check gives gone: "), row["reason"]
    assert row["reason"].endswith("fix anchors/bump-default.toml or the patch (a rebase cannot help)")
    assert "already carried" not in res.stdout
    toml.write_text(toml.read_text().replace('qualname = "Backnd"', 'qualname = "Backend"'))
    res = cli("rebase", "--to", "0.1.0", "--series", small.series.root, "--json")
    assert (res.rc, res.json["patches"][0]["status"]) == (0, "skipped"), res.stdout + res.stderr
    assert res.json["patches"][0]["reason"].startswith("already carried: ")


def test_a_node_pattern_that_fails_on_its_verified_release_points_at_the_anchors_file(small, cli):
    """The definition is there with the fingerprint recorded for 0.1.0, but the node pattern
    was edited to match nothing: a conflict the series made, not upstream."""
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    toml = small.root / "anchors" / "bump-default.toml"
    toml.write_text(toml.read_text().replace('node = "DEFAULT = ..."', 'node = "DEFAULTS = ..."'))
    res = cli("check", "--patch", "bump-default", "--vllm", "0.1.0", "--series", small.series.root, "--json")
    row = res.json["patches"][0]
    assert (res.rc, row["status"]) == (1, "conflict"), res.stdout + res.stderr
    assert "this release is recorded as verified for anchor default in anchors/bump-default.toml" in row["reason"]


def _literals(path: Path):
    """(line, text) of every string literal of a module except docstrings; an f-string's
    fields read ``{}``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body \
                and isinstance(node.body[0], ast.Expr):
            skip.add(id(node.body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def suggested_commands() -> list[tuple[str, str]]:
    """(where, command) of every ``patchq ...`` command patchq's messages quote."""
    out = []
    for path in sorted((REPO / "patchq").rglob("*.py")):
        for line, text in _literals(path):
            for m in QUOTED.finditer(text):
                for command in (m.group(1) or m.group(2)).split("&&"):
                    if command.strip().startswith("patchq "):
                        out.append((f"{path.relative_to(REPO)}:{line}", command.strip()))
    return out


def parse_problem(command: str) -> str | None:
    """Why the CLI's parser refuses ``command``, or None. Each f-string field standing
    alone is read as a value (``--vllm {}``) or as options that may be empty (``patchq test
    {ids}``): the command parses when one reading does."""
    words = [w.replace("{}", "X") if w != "{}" else w for w in shlex.split(command)[1:]]
    fields = [i for i, w in enumerate(words) if w == "{}"]
    problems = []
    for values in itertools.product(("X", None), repeat=len(fields)):
        chosen = dict(zip(fields, values, strict=True))
        problem = _parse([chosen.get(i, w) for i, w in enumerate(words) if chosen.get(i, w) is not None])
        if problem is None:
            return None
        problems.append(problem)
    return problems[0]


def _parse(args: list[str]) -> str | None:
    """Why the CLI's parser refuses ``patchq ARGS``, or None (a bare command name is a
    reference to the command, not a step: not parsed).

    typer carries its own click (``typer._click``): its classes are reached through the
    command objects, not imported."""
    cmd = typer.main.get_command(cli_mod.app)
    words = ["patchq"]
    while hasattr(cmd, "commands") and args and args[0] in cmd.commands:
        words.append(args[0])
        cmd = cmd.commands[args.pop(0)]
    if hasattr(cmd, "commands"):
        return f"no command {args[:1]} in {' '.join(words)}"
    if not args:
        return None
    try:
        cmd.make_context(" ".join(words), args)
    except Exception as exc:  # noqa: BLE001 - click's UsageError family, from typer's copy of click
        if type(exc).__name__ == "Exit":  # --help
            return None
        return exc.format_message() if hasattr(exc, "format_message") else repr(exc)
    return None


def test_every_suggested_command_parses_against_the_cli():
    found = suggested_commands()
    assert len(found) > 50 and any("--releases" in c for _, c in found if c.startswith("patchq fingerprint"))
    bad = [f"{where}: {command}: {problem}" for where, command in found
           if command not in PROSE and (problem := parse_problem(command)) is not None]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("command", ["patchq check --nope", "patchq fingerprint --patch", "patchq cache nope",
                                     "patchq new X", "patchq rebase {} --to"])
def test_the_parse_check_catches_a_wrong_command(command):
    assert parse_problem(command) is not None
