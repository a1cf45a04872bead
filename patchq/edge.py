"""The error edge: the one place where an exception becomes a line and an exit status.

Every front door (the typer app, the fast path, ``patchq run``) runs inside
:func:`guard`, in the manner of pre-commit's ``error_handler``:

* a :class:`~patchq.errors.PatchqError` prints ``patchq: error: MESSAGE`` on stderr and
  exits with its code;
* an exception raised by a series file (a syntax error, a module that raises on import,
  a transform that raises) is a series error: ``FILE:LINE: ...``, exit 2;
* a click usage error (unknown option, missing value) prints one line, exit 2;
* an ``OSError`` the environment caused (a full disk or quota, a read-only filesystem, a
  permission, a path missing or in the way, a failing device: the errno classes of
  :data:`patchq.errors.ENV_ERRNOS`) prints one line naming the file and the errno, exit 5;
* any other exception is a bug in patchq: one line naming the log file that holds the
  traceback (``<patchq cache>/logs/``), exit 70;
* a closed stdout (``patchq list | head -1``) exits 141 quietly; Ctrl-C exits 130.

With ``--json`` (before any ``--``) the line is the JSON error document
``{"ok": false, "error": ..., "exit_code": ...}`` on stdout instead. No traceback ever
reaches the terminal. Standard library only: the fast path runs inside it.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

from patchq.errors import (  # noqa: E402 - after the TYPE_CHECKING block, which must not import typing
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_READ_ONLY,
    EXIT_USAGE,
    PatchqError,
    series_error,
)

_json_mode: bool | None = None


def set_json(as_json: bool) -> None:
    """Tell the edge whether the running command prints JSON (a parser that knows better
    than the ``--json`` scan of :func:`wants_json`, e.g. ``patchq run``)."""
    global _json_mode
    _json_mode = bool(as_json)


def wants_json(argv: Sequence[str]) -> bool:
    """True when ``--json`` is among the options, i.e. before any ``--``."""
    if _json_mode is not None:
        return _json_mode
    for arg in argv:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def hoist_json(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--json`` and ``--series DIR`` (or ``--series=DIR``) given before the
    verb (``patchq --json --series s list``) moved to the verb's options (before any
    ``--``), where the verbs take them (a verb without ``--series`` says so)."""
    argv = list(argv)
    hoisted: list[str] = []
    while len(argv) > 1:
        if argv[0] == "--json":
            hoisted.append(argv.pop(0))
        elif argv[0] == "--series" and len(argv) > 2:
            hoisted += [argv.pop(0), argv.pop(0)]
        elif argv[0].startswith("--series="):
            hoisted.append(argv.pop(0))
        else:
            break
    if hoisted:
        at = argv.index("--") if "--" in argv else len(argv)
        argv[at:at] = hoisted
    return argv


def asks_help(argv: Sequence[str]) -> bool:
    """True for ``--version``, and for ``--help`` among the options (before any ``--``): they
    answer without checking patchq's cache, so a misconfigured one does not hide the help."""
    argv = list(argv)
    if not argv or argv == ["--version"]:  # a bare `patchq` prints the help
        return True
    return "--help" in (argv[:argv.index("--")] if "--" in argv else argv)


def cache_root() -> str:
    """patchq's cache root (as :func:`patchq.env.hookdir.cache_root`, stdlib only):
    ``$PATCHQ_CACHE_DIR``, else ``$XDG_CACHE_HOME/patchq``, else ``~/.cache/patchq``."""
    env = os.environ.get("PATCHQ_CACHE_DIR")
    if env:
        return os.path.expanduser(env)
    try:
        from patchq.env.hookdir import cache_root as hook_cache_root

        return str(hook_cache_root())
    except Exception:  # the edge must work even when patchq itself is broken
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "patchq")


def write_log(exc: BaseException, argv: Sequence[str]) -> str:
    """Write the traceback of ``exc`` with the command line and versions to a new file
    under ``<cache>/logs/`` (the system temp dir when that is not writable).

    Returns:
        The log file's path.
    Raises:
        OSError: neither directory is writable.
    """
    import tempfile
    import time
    import traceback

    from patchq import __version__

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    text = (f"patchq {__version__}, Python {sys.version.split()[0]} ({sys.executable})\n"
            f"argv: {['patchq', *argv]!r}\ncwd: {os.getcwd()}\n\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    last: OSError | None = None
    for base in (os.path.join(cache_root(), "logs"), os.path.join(tempfile.gettempdir(), "patchq-logs")):
        try:
            os.makedirs(base, exist_ok=True)
            path = os.path.join(base, f"patchq-{stamp}-{os.getpid()}.log")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return path
        except OSError as err:
            last = err
    assert last is not None
    raise last


def _click_usage(exc: BaseException) -> tuple[str, int] | None:
    """(message, exit code) of a click exception (typer may vendor click: matched by
    shape), else None."""
    if type(exc).__name__ == "Abort":  # click's form of Ctrl-C inside a command
        return "interrupted", EXIT_INTERRUPTED
    fmt = getattr(exc, "format_message", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and fmt is not None:  # a bare `patchq` / `patchq upstream`: the help
        sys.stderr.write(fmt().rstrip("\n") + "\n")
        ctx = getattr(exc, "ctx", None)
        path = ctx.command_path if ctx is not None else "patchq"
        return f"no command given: `{path} COMMAND` (the commands are listed above)", EXIT_USAGE
    code = getattr(exc, "exit_code", None)
    if fmt is None or not isinstance(code, int):
        return None
    ctx = getattr(exc, "ctx", None)
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None and code == EXIT_USAGE else ""
    message = fmt()
    return (message + hint if message else ""), code


def environment_error(exc: BaseException) -> str | None:
    """The one-line message of an ``OSError`` the environment caused (an errno class of
    :data:`patchq.errors.ENV_ERRNOS`: a full disk, a read-only filesystem, a permission, a
    path missing or in the way, a failing device), else None."""
    from patchq.errors import ENV_ERRNOS, errno_name

    name = errno_name(exc)
    if not isinstance(exc, OSError) or name not in ENV_ERRNOS:
        return None
    where = f" {exc.filename}" if exc.filename else ""
    what = "write" if name in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS") else "access"
    return f"cannot {what}{where}: {exc.strerror} ({name}); nothing more was written"


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def report_error(message: str, code: int, as_json: bool) -> int:
    """Print one error line (or the JSON error document) and return ``code``."""
    if as_json:
        import json  # here: the fast path's no-op never reports an error

        sys.stdout.write(json.dumps({"ok": False, "error": message, "exit_code": code}, indent=2) + "\n")
    elif message:
        flat = " ".join(part.strip() for part in message.splitlines() if part.strip())
        prefix = "patchq: error:"
        try:
            from patchq.report import paint  # red on a colour terminal (stdlib only)

            prefix = paint(prefix, "bad", err=True)
        except Exception:  # the edge must work even when patchq itself is broken
            pass
        sys.stderr.write(f"{prefix} {flat}\n")  # one line, always
    return code


def guard(fn: Callable[[list[str]], int | None], argv: Sequence[str]) -> int:
    """Run ``fn(argv)`` and return its exit code, turning every exception into one
    line and a documented exit code (module docstring). Never raises, except
    ``SystemExit`` from ``fn`` (an exit status already decided)."""
    argv = list(argv)
    try:
        try:
            code = fn(argv)
            sys.stdout.flush()  # a closed pipe surfaces here, inside the edge
            return EXIT_OK if code is None else code
        except BrokenPipeError:
            raise
        except KeyboardInterrupt:
            sys.stderr.write("patchq: interrupted\n")
            return EXIT_INTERRUPTED
        except PatchqError as exc:
            return report_error(str(exc), exc.exit_code, wants_json(argv))
        except Exception as exc:
            as_json = wants_json(argv)
            series = series_error(exc)
            if series is not None:
                return report_error(str(series), series.exit_code, as_json)
            usage = _click_usage(exc)
            if usage is not None:
                return report_error(usage[0], usage[1], as_json)
            env = environment_error(exc)
            if env is not None:
                return report_error(env, EXIT_READ_ONLY, as_json)
            try:
                where = f"the traceback is in {write_log(exc, argv)}"
            except OSError as err:
                where = f"no log could be written ({err.strerror})"
            first = (str(exc).splitlines() or [""])[0]
            return report_error(f"internal error ({type(exc).__name__}: {first}); a bug in patchq, "
                                f"{where}", EXIT_INTERNAL, as_json)
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
