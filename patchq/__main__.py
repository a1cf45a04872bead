"""Entry point of the ``patchq`` console script.

``apply`` when nothing needs to change, and ``status``, are answered by
:mod:`patchq.fastpath` with the standard library only (they run at every server
start); ``run`` goes straight to :mod:`patchq.commands.run` (it execs the command);
everything else goes to the typer app in :mod:`patchq.cli`.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:2] == ["run"]:  # run execs the command: no typer, warm start parses nothing
        from patchq.commands import run

        sys.exit(run.main(sys.argv[2:]))
    from patchq import fastpath

    code = fastpath.try_fast(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from patchq.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
