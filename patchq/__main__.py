"""Entry point of the ``patchq`` console script.

``apply`` when nothing needs to change, ``status`` and ``list`` are answered by
:mod:`patchq.fastpath` with the standard library (and packaging, for list) only (they run at every server
start); ``run`` goes straight to :mod:`patchq.commands.run` (it execs the command);
``--version`` is answered here; everything else goes to the typer app in
:mod:`patchq.cli`. Every command but ``--version`` and ``--help`` first checks patchq's
cache directory (:func:`patchq.vllmdist.cache.check_root`: a directory, patchq's alone,
not another user's). All of them run inside :func:`patchq.edge.guard`, the one place
where an exception becomes an error line and an exit code.
"""

from __future__ import annotations

import sys


def dispatch(argv: list[str]) -> int | None:
    """Run the command ``argv`` (without the program name); returns its exit code.

    Raises:
        PatchqError, or anything else: :func:`patchq.edge.guard` reports it.
    """
    from patchq.edge import asks_help, hoist_json

    argv = hoist_json(argv)  # `patchq --json list` is `patchq list --json`
    if not asks_help(argv):
        from patchq.vllmdist import cache

        cache.check_root()  # patchq's alone, usable, and shared-locked (exit 2 / 5 otherwise)
    if argv[:2] in (["run", "-h"], ["run", "--help"]):  # the help every verb has: typer's
        argv = ["run", "--help"]
    elif argv[:1] == ["run"]:  # run execs the command: no typer, warm start parses nothing
        from patchq.commands import run

        return run.main(argv[1:])
    if argv == ["--version"]:
        from patchq import __version__
        from patchq.errors import EXIT_OK

        sys.stdout.write(f"patchq {__version__}\n")
        return EXIT_OK
    from patchq import fastpath

    code = fastpath.try_fast(argv)
    if code is not None:
        return code
    from patchq import helpcache  # a plain `--help` comes from a stamp when it can

    return helpcache.run(argv, _cli)


def _cli(argv: list[str]) -> int:
    from patchq.cli import main as cli_main

    return cli_main(argv)


def main() -> None:
    """Console-script entry point: :func:`dispatch` inside :func:`patchq.edge.guard`."""
    from patchq.edge import guard

    sys.exit(guard(dispatch, sys.argv[1:]))


if __name__ == "__main__":
    main()
