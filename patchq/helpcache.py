"""``--help`` at interpreter cost: the typer app's help text, kept in a stat stamp.

Rendering help imports typer, click and rich, which costs several interpreter starts. The
text is a function of the command words, of patchq's own sources, of the installed typer,
click and rich, and of what the renderer looks at in the environment (the terminal's
width and whether it is one, colour variables, the output's encoding). So the first
``patchq [WORDS...] --help`` runs the typer app as always while keeping a copy of what it
writes to stdout, and stores it in a stamp (:mod:`patchq.env.stamp`) whose key holds the
command words, those environment values and ``sys.path`` (where typer, click and rich
come from), and whose inputs are the files of the patchq modules that rendered it (as
every stamp's) and the ``__init__.py`` of typer, click and rich; a later identical request whose inputs stat as
stamped writes the stored text and exits 0 without importing them.

Only plain requests are kept: ``--help`` last, after command words only, on a UTF-8
stdout, exit 0, nothing written to stderr and nothing written past the copy (the binary
buffer untouched). ``PATCHQ_STAMPS=0`` turns it off with the other stamps.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from collections.abc import Callable

#: Environment variables the renderer (rich, click, typer) or patchq's front door reads;
#: typer's rich_utils reads GITHUB_ACTIONS, PY_COLORS and TERMINAL_WIDTH at import (they
#: force a terminal or a width once rich renders help), rich DATABRICKS_RUNTIME_VERSION.
_ENV = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
        "TERM_PROGRAM", "CLICOLOR", "CLICOLOR_FORCE", "JUPYTER_COLUMNS", "JUPYTER_LINES", "LANG", "LC_ALL",
        "LC_CTYPE", "PYTHONIOENCODING", "GITHUB_ACTIONS", "PY_COLORS", "TERMINAL_WIDTH",
        "DATABRICKS_RUNTIME_VERSION")
#: Prefixes of further variables in the key: patchq's own, click's completion (``_PATCHQ_COMPLETE``),
#: typer's (``TYPER_USE_RICH``, ``_TYPER_FORCE_DISABLE_TERMINAL``, ...).
_ENV_PREFIXES = ("PATCHQ_", "_PATCHQ", "TYPER_", "_TYPER")


def is_plain_help(argv: list[str]) -> bool:
    """True for ``[WORDS...] --help`` with command words only before it."""
    return bool(argv) and argv[-1] == "--help" and all(a and not a.startswith("-") for a in argv[:-1])


def _key(argv: list[str]) -> dict[str, str]:
    from patchq import __version__

    tty = sys.stdout.isatty()
    try:
        size = f"{os.get_terminal_size(sys.stdout.fileno())}" if tty else "-"
    except (OSError, ValueError):
        size = "?"
    env = {k: v for k, v in sorted(os.environ.items()) if k in _ENV or k.startswith(_ENV_PREFIXES)}
    return {"command": "help", "argv": "\x1f".join(argv), "tty": str(tty), "size": size,
            "encoding": str(getattr(sys.stdout, "encoding", "")), "env": repr(env), "patchq": __version__,
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "path": "\x1f".join(sys.path)}  # where typer, click and rich are imported from


def _inputs() -> list[str]:
    """The ``__init__.py`` of the renderer's packages (every stamp also holds the files of the
    patchq modules loaded: :func:`patchq.env.stamp.own_sources`)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for name in ("typer", "click", "rich"):
        spec = importlib.util.find_spec(name)  # found, not imported
        out.append(spec.origin if spec is not None and spec.origin else os.path.join(here, f".no-{name}"))
    return out


class _Tee:
    """sys.stdout, keeping a copy of what is written through it; it behaves as the real
    stream (bytes raise TypeError, as click's probe expects). Anything that reaches for the
    binary ``buffer`` may write past the copy: then the copy is ``tainted`` (never kept)."""

    def __init__(self, real) -> None:
        self._real = real
        self.parts: list[str] = []
        self.tainted = False

    def write(self, text: str) -> int:
        n = self._real.write(text)  # TypeError for bytes, as the real text stream
        self.parts.append(text)
        return n

    def __getattr__(self, name: str):
        if name in ("buffer", "detach", "reconfigure"):
            self.tainted = True
        return getattr(self._real, name)


def run(argv: list[str], render: Callable[[list[str]], int]) -> int:
    """``render(argv)`` (the typer app), or the stamped text of the same plain ``--help``
    request (module docstring)."""
    if not is_plain_help(argv) or str(getattr(sys.stdout, "encoding", "")).lower().replace("-", "") != "utf8":
        return render(argv)  # click rewraps a stream of another encoding: nothing to keep a copy of
    from patchq.env import stamp

    key = _key(argv)
    hit = stamp.load(key)
    if hit is not None:
        try:
            text = bytes.fromhex(hit).decode("utf-8")
        except ValueError:
            text = None
        if text is not None:
            sys.stdout.write(text)
            return 0
    taken = stamp.now()
    tee, err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = tee, err  # type: ignore[assignment]
    try:
        code = render(argv)
    finally:
        sys.stdout, sys.stderr = tee._real, err._real
    if code == 0 and not err.parts and not tee.tainted and not err.tainted and tee.parts:
        stamp.save(key, _inputs(), [], "".join(tee.parts).encode("utf-8").hex(), taken)
    return code
