"""Write (or check) ``docs/cli.md``: every ``patchq`` command's ``--help``, from the typer app.

The reference is generated, never edited: ``python ci/cli_reference.py`` rewrites it, and
``tests/test_cli.py`` (offline layer) fails when the app and the file differ, so
the reference cannot drift from the CLI. Help texts are rendered by click at a fixed width
(:data:`WIDTH`), whatever the terminal.

Usage::

    python ci/cli_reference.py           # rewrite docs/cli.md
    python ci/cli_reference.py --check   # exit 1 when docs/cli.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "cli.md"
#: columns the help texts are wrapped to (click's formatter)
WIDTH = 100


def _commands(group, path: list[str]):
    """(argv path, click command) for ``group`` and every command under it, in the app's order
    (typer vendors click: contexts are made with the command's own ``context_class``)."""
    yield path, group
    if hasattr(group, "list_commands"):
        ctx = group.context_class(group)
        for name in group.list_commands(ctx):
            sub = group.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _commands(sub, [*path, name])


def render() -> str:
    """The whole reference (Markdown): one section per command with its ``--help`` text."""
    import typer

    from patchq.cli import app

    root = typer.main.get_command(app)
    parts = ["# patchq command reference\n",
             "Generated from the CLI by `python ci/cli_reference.py`; do not edit "
             "(`tests/test_cli.py` fails when it drifts). Exit codes and JSON documents: "
             "[exit-codes.md](exit-codes.md).\n"]
    for path, cmd in _commands(root, ["patchq"]):
        parent = None
        for i, name in enumerate(path):
            parent = cmd.context_class(cmd if i == len(path) - 1 else root, info_name=name, parent=parent,
                                       terminal_width=WIDTH, max_content_width=WIDTH)
        text = cmd.get_help(parent).rstrip()
        parts.append(f"## `{' '.join(path)}`\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        current = OUT.read_text(encoding="utf-8") if OUT.is_file() else ""
        if current != text:
            print(f"{OUT} is out of date: run `python ci/cli_reference.py`", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
