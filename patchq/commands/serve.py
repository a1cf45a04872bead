"""``patchq serve-args --profile NAME`` (the ``vllm serve`` flags a profile declares) and
``patchq serve --profile NAME [-- VLLM_ARGS...]`` (apply the profile, then exec ``vllm serve``).

A profile of ``series/profiles.toml`` may carry a ``serve`` table::

    [profiles.dflash.serve]
    args = ["--speculative-config",
            '{"method":"dflash","model":"${DRAFTER:-/drafter}","num_speculative_tokens":${NUM_SPEC_TOKENS:-12}}']
    env = {VLLM_USE_V1 = "1"}

``args`` are appended to ``vllm serve MODEL ...``; ``env`` is exported first. ``${NAME}``
and ``${NAME:-default}`` in either are expanded from the environment (``$$`` is a literal
``$``), so a profile's defaults stay overridable. A profile without a ``serve`` table
serves with the generic flags only.

``serve-args`` output: one argument per line; with ``--env``, ``NAME=value`` lines
instead. The JSON document ``patchq.serve-args/1``: ``profile``, ``args`` [text], ``env``
{name: value}, ``env_withheld`` (null, or why ``env`` is empty: :func:`env_withheld`),
``series``. Exit 0; 2 for an unknown profile or a malformed table, and for ``--env`` when
the env of a series found by walking up is withheld.

``serve`` (what a series' ``serve.sh`` wrapper runs): the generic flags (:data:`GENERIC`, each
overridable from the environment), then the profile's, then ``$VLLM_EXTRA_ARGS``, then the
arguments after ``--``. It exports ``PATCHQ_EXPECT_PROFILE`` and ``PATCHQ_STRICT`` (the
``patchq`` vLLM plugin checks the profile is live in every process) and the profile's
``env``, applies the profile (the no-op fast path when it is applied already; with
``PATCHQ_MODE=run`` / ``--mode run`` it goes through ``patchq run`` instead and leaves
site-packages untouched), then replaces itself with ``vllm serve``. The ``vllm`` is
``$VLLM``, else the script beside this interpreter (the environment patchq patches),
else ``vllm`` on ``PATH``; none: exit 127 before anything is written. ``--dry-run`` prints
the exports, the apply command and the serve command, and changes nothing; ``--json``
prints that plan as ``patchq.serve/1``: ``profile``, ``mode``, ``vllm``, ``env`` {name:
value}, ``apply`` (argv or null), ``exec`` (argv), ``series``, ``warnings`` (what would stop the
real serve: :func:`dry_run_warnings`; also printed on stderr). A profile whose ``env`` is
withheld (:func:`env_withheld`) is not served, dry run included: exit 2, naming
``--series`` / ``SERIES=``. Exit codes: apply's (1, 4,
5, ...) when the profile does not apply (nothing is served), 2 usage, 127 no vllm, 126
a vLLM installed without torch (``--no-deps``: enough to patch, not to serve).
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

from patchq.errors import (
    EXIT_CANNOT_RUN,
    EXIT_COMMAND_NOT_FOUND,
    EXIT_OK,
    PatchqError,
    SeriesError,
    TargetNotFound,
    UsageError,
    known_names,
)
from patchq.series import Series

if TYPE_CHECKING:
    from patchq.documents import ServeArgsDoc, ServeDoc
    from patchq.vllmdist.sources import CodeSource

SCHEMA = "patchq.serve-args/1"
SERVE_SCHEMA = "patchq.serve/1"
#: how serve's refusals end: they come before anything is written
NOTHING_DONE = "nothing was applied or served"
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand(text: str, environ: dict | None = None) -> str:
    """``text`` with ``${NAME}`` / ``${NAME:-default}`` expanded (``$$``: a literal ``$``)."""
    env = os.environ if environ is None else environ

    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        value = env.get(m.group(1))
        return value if value else (m.group(2) or "")

    return _VAR.sub(one, text)


#: The prefix of patchq's own variables (``PATCHQ_STRICT``, ``PATCHQ_EXPECT_PROFILE``, ...): a
#: profile's ``serve.env`` never sets them (they would turn off the plugin's liveness stop).
OWN_PREFIX = "PATCHQ_"


def serve_table(series: Series, profile: str) -> dict:
    """The ``serve`` table of ``profile`` (``args`` [str], ``env`` {name: str}: empty when
    none), checked as what ``serve`` will exec: no NUL byte in an argument or a value, every
    env name non-empty and free of ``=`` and NUL. ``ignored``: the env names patchq owns
    (``PATCHQ_*``), left out: patchq's own variables win over a profile's.

    Raises:
        UsageError: unknown profile. SeriesError: a malformed table, naming
            ``profiles.toml`` and the field.
    """
    series.profile(profile)  # unknown profile: UsageError listing the known ones
    from patchq.hashing import read_toml

    path = series.root / "profiles.toml"
    where = f"{path}: profiles.{profile}.serve"
    table = read_toml(path)["profiles"][profile].get("serve", {})
    if not isinstance(table, dict):
        raise SeriesError(f"{where} must be a table")
    args, env = table.get("args", []), table.get("env", {})
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise SeriesError(f"{where}.args must be a list of strings")
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise SeriesError(f"{where}.env must map names to strings")
    for i, arg in enumerate(args):
        if "\0" in arg:
            raise SeriesError(f"{where}.args[{i}] holds a NUL byte, which no program argument can carry")
    for name, value in env.items():
        if not name or "=" in name or "\0" in name:
            raise SeriesError(f"{where}.env: {name!r} is not an environment variable name (empty, or holding '=' "
                              f"or a NUL byte)")
        if "\0" in value:
            raise SeriesError(f"{where}.env.{name} holds a NUL byte, which no environment variable can carry")
    ignored = sorted(n for n in env if n.startswith(OWN_PREFIX))
    return {"args": args, "env": {n: v for n, v in env.items() if n not in ignored}, "ignored": ignored,
            "where": where}


def extra_args(environ: dict) -> list[str]:
    """``$VLLM_EXTRA_ARGS`` split as a shell would (``shlex``).

    Raises:
        UsageError: it does not split (an unbalanced quote, a trailing backslash), naming it.
    """
    import shlex

    raw = environ.get("VLLM_EXTRA_ARGS", "")
    try:
        return shlex.split(raw)
    except ValueError as exc:
        raise UsageError(f"VLLM_EXTRA_ARGS={raw[:80]!r}{'...' if len(raw) > 80 else ''} does not split as shell words "
                         f"({exc}); {NOTHING_DONE}") from None


def variables(table: dict, environ: dict | None = None) -> dict[str, dict[str, str]]:
    """The variables a serve ``table`` (:func:`serve_table`) reads, in order of first use:
    name -> {``default``: its ``${NAME:-default}`` ("" when none), ``value``: what it expands
    to in ``environ`` (the default when unset or empty)}."""
    env = os.environ if environ is None else environ
    out: dict[str, dict[str, str]] = {}
    for text in [*table["args"], *table["env"].values()]:
        for m in _VAR.finditer(text):
            if m.group(1) and m.group(1) not in out:
                default = m.group(2) or ""
                out[m.group(1)] = {"default": default, "value": env.get(m.group(1)) or default}
    return out


def env_withheld(series: Series) -> str | None:
    """Why the ``serve.env`` of ``series`` is not passed on, or None.

    A series found by walking up to a ``patchq.toml`` (origin ``config``) was not chosen
    explicitly: its environment (which a series' ``serve.sh`` wrapper exports: ``LD_PRELOAD``,
    ``PYTHONPATH``, ...) is withheld unless the series is named with ``--series`` or
    ``$PATCHQ_SERIES`` (``SERIES=DIR`` for ``serve.sh``); a series an installed distribution
    provides is as trusted as the environment it is installed in.
    """
    loc = series.location
    if loc is None or loc.origin != "config":
        return None
    where = os.path.dirname(loc.config_str or loc.series_str)
    return (f"the serve env of this series is withheld: it was found by walking up to {loc.config_str}, not "
            f"chosen explicitly; pass --series {where} (serve.sh: SERIES={where}) to use it")


def run(series: Series, profile: str, environ: dict | None = None,
        want_env: bool = False) -> tuple[ServeArgsDoc, int]:
    """The expanded flags of ``profile``. Returns (document, exit code).

    ``env`` is ``{}`` and ``env_withheld`` says why when :func:`env_withheld` (an added
    field, null otherwise).

    Raises:
        UsageError: ``want_env`` (``--env``) and the profile's env is withheld.
    """
    table = serve_table(series, profile)
    if table["ignored"]:
        from patchq import report

        report.warn(f"{table['where']}.env sets {', '.join(table['ignored'])}: patchq's own variables are not a "
                    f"profile's to set (they would turn off the plugin's liveness stop); ignored")
    withheld = env_withheld(series) if table["env"] else None
    if withheld and want_env:
        raise UsageError(withheld)
    doc: ServeArgsDoc = {"schema": SCHEMA, "profile": profile,
                         "args": [expand(a, environ) for a in table["args"]],
                         "env": {} if withheld else {k: expand(v, environ) for k, v in table["env"].items()},
                         "env_withheld": withheld,
                         "series": series.location.as_json() if series.location else None,
                         "variables": variables(table, environ)}
    return doc, EXIT_OK


def render_text(doc: ServeArgsDoc, env: bool = False) -> str:
    """One argument (or ``NAME=value``) per line."""
    rows = [f"{k}={v}" for k, v in doc["env"].items()] if env else doc["args"]
    return "".join(r + "\n" for r in rows)


# --------------------------------------------------------------------------- patchq serve

#: The generic ``vllm serve`` flags: (environment variable, default, flag). MODEL is the
#: positional argument; PREFIX_CACHING=1 gives --enable-prefix-caching, else
#: --no-enable-prefix-caching. The defaults are the Spark stack's (they were serve.sh's).
GENERIC = (("SERVED_NAME", "qwen", "--served-model-name"), ("HOST", "0.0.0.0", "--host"),
           ("PORT", "8000", "--port"), ("MAX_MODEL_LEN", "16384", "--max-model-len"),
           ("GPU_MEMORY_UTILIZATION", "0.85", "--gpu-memory-utilization"), ("MAX_NUM_SEQS", "4", "--max-num-seqs"))


class VllmNotFound(PatchqError):
    """No ``vllm`` executable to serve with (exit 127, as a shell's command not found)."""

    exit_code = EXIT_COMMAND_NOT_FOUND


def find_vllm(environ: dict, required: bool = True) -> str | None:
    """The ``vllm`` to exec: ``$VLLM``, else the one beside this interpreter, else on PATH;
    None when there is none and not ``required``.

    Raises:
        VllmNotFound: none of them exists (and ``required``).
    """
    import shutil
    from pathlib import Path

    if environ.get("VLLM"):
        found = shutil.which(environ["VLLM"])
        if found is None and required:
            raise VllmNotFound(f"VLLM={environ['VLLM']} is not an executable; {NOTHING_DONE}")
        return found
    beside = Path(sys.executable).parent / "vllm"
    if os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("vllm", path=environ.get("PATH"))
    if found is None and required:
        raise VllmNotFound(f"{_no_vllm_script()}; {NOTHING_DONE}")
    return found


def _no_vllm_script() -> str:
    """Why there is no ``vllm`` to exec: not installed, or installed without its script."""
    from patchq.vllmdist.sources import installed

    try:
        target = installed()
    except (TargetNotFound, OSError):
        return (f"vllm not found: no vllm beside {sys.executable} and none on PATH; install vllm in this "
                f"environment (`{sys.executable} -m pip install vllm==X.Y.Z`) or set VLLM=/path/to/vllm")
    return (f"vllm {target.version} is installed in {target.root} but has no `vllm` script beside "
            f"{sys.executable} nor on PATH (installed with --target, or the script was removed?): reinstall it "
            f"(`{sys.executable} -m pip install --force-reinstall --no-deps vllm=={target.version}`) or set "
            f"VLLM=/path/to/vllm")


#: Longest single argument or environment string Linux passes to a program (MAX_ARG_STRLEN, 32 pages).
MAX_ARG_STRLEN = 32 * 4096


def too_long(argv: list[str], env: dict[str, str]) -> str | None:
    """Why ``exec`` of ``argv`` with ``env`` would fail with E2BIG, or None: one string
    longer than :data:`MAX_ARG_STRLEN`, or all of them more than ``SC_ARG_MAX`` (a 10 MB
    argument was reported as "not found", exit 127)."""
    strings = [*argv, *(f"{k}={v}" for k, v in env.items())]
    longest = max(strings, key=len, default="")
    if len(longest.encode("utf-8", "surrogateescape")) + 1 > MAX_ARG_STRLEN:
        return (f"one argument or variable of the vllm command is {len(longest.encode('utf-8', 'surrogateescape'))} "
                f"bytes ({longest[:40]!r}...), more than the {MAX_ARG_STRLEN} the kernel passes to a program (E2BIG)")
    try:
        limit = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        return None
    total = sum(len(x.encode("utf-8", "surrogateescape")) + 1 + 8 for x in strings)
    if limit > 0 and total > limit:
        return (f"the vllm command and its environment take {total} bytes, more than the {limit} the kernel passes "
                f"to a program (E2BIG)")
    return None


def dry_run_warnings(plan: ServeDoc) -> list[str]:
    """What would stop ``patchq serve`` from running ``plan`` that a dry run does not check:
    no ``vllm`` to exec (exit 127), a vLLM without torch, a command too long to exec (exit
    126). One line each."""
    out = []
    long = too_long(plan["exec"], {**os.environ, **plan["env"]})
    if long:
        out.append(f"{long}: `patchq serve` would exit {EXIT_CANNOT_RUN}")
    if plan["vllm"] is None:
        out.append(f"{_no_vllm_script()}: `patchq serve` would exit {EXIT_COMMAND_NOT_FOUND}")
    if os.environ.get("PATCHQ_SERVE_NO_TORCH_CHECK", "") in ("", "0"):
        try:
            why = torch_missing()
        except TargetNotFound as exc:  # no vllm distribution: said above when there is no script either
            if plan["vllm"] is not None:
                out.append(f"{exc}: `patchq serve` would exit {exc.exit_code}")
        else:
            if why:
                out.append(f"{why}: `patchq serve` would exit {EXIT_CANNOT_RUN}")
    return out


def serve_plan(series: Series, profile: str | None, mode: str | None, extra: list[str],
               series_dir: str | None = None, environ: dict | None = None, dry_run: bool = False) -> ServeDoc:
    """The ``patchq.serve/1`` document: what ``patchq serve`` exports, applies and execs.

    ``profile`` None: the profile the environment carries (the journal). ``mode``: ``apply``
    or ``run`` (None: ``$PATCHQ_MODE``, default ``apply``). ``series_dir``: the ``--series``
    given, passed on to the printed commands. ``dry_run``: a missing vllm is not an error
    (``vllm`` is null and the command names ``vllm``).

    Raises:
        UsageError: no profile given or applied, an unknown profile or mode, or the
            profile's env is withheld (a series found by walking up).
        VllmNotFound: no vllm to exec. SeriesError: a malformed serve table.
    """
    env = dict(os.environ if environ is None else environ)
    mode = mode or env.get("PATCHQ_MODE") or "apply"
    if mode not in ("apply", "run"):
        raise UsageError(f"--mode {mode!r} (or PATCHQ_MODE): give apply or run")
    if profile is None:
        profile = _applied_profile()
        if profile is None:
            raise UsageError(f"no profile is applied here: give --profile NAME (known: {known_names(series.profiles)})")
    own = run(series, profile, env, want_env=True)[0]  # never serve without the profile's env
    vllm = find_vllm(env, required=not dry_run)
    argv = [vllm or "vllm", "serve", env.get("MODEL") or "/model"]
    for var, default, flag in GENERIC:
        argv += [flag, env.get(var) or default]
    caching = (env.get("PREFIX_CACHING") or "1") == "1"
    argv.append("--enable-prefix-caching" if caching else "--no-enable-prefix-caching")
    argv += own["args"] + extra_args(env) + list(extra)
    # a profile's env holds none of patchq's own variables (serve_table leaves them out): it cannot override these
    exports = {"PATCHQ_EXPECT_PROFILE": profile, "PATCHQ_STRICT": env.get("PATCHQ_STRICT") or "1", **own["env"]}
    series_opt = ["--series", series_dir] if series_dir else []
    patchq = _patchq_script()
    if mode == "run":
        apply_argv, exec_argv = None, [patchq, "run", "--profile", profile, *series_opt, "--", *argv]
    else:
        apply_argv, exec_argv = [patchq, "apply", "--profile", profile, *series_opt], argv
    return {"schema": SERVE_SCHEMA, "profile": profile, "mode": mode, "vllm": vllm, "env": exports,
            "apply": apply_argv, "exec": exec_argv, "series": own["series"], "variables": own["variables"]}


def _applied_profile() -> str | None:
    """The profile the journal of this environment's vLLM names. Raises TargetNotFound."""
    from patchq.env import layout
    from patchq.env.status import read_journal
    from patchq.vllmdist.sources import installed

    return read_journal(layout.state_root(str(installed().root))).get("profile") or None


def _patchq_script() -> str:
    """The ``patchq`` script of this environment (for the printed commands), else ``patchq``."""
    from pathlib import Path

    beside = Path(sys.executable).parent / "patchq"
    return str(beside) if os.access(beside, os.X_OK) else "patchq"


def dry_run_text(plan: ServeDoc) -> str:
    """``export`` lines, the apply command and ``exec ...``, shell-quoted (``--dry-run``)."""
    import shlex

    lines = []
    if plan.get("variables"):  # what the profile's serve table reads: the knobs a user has
        said = ", ".join(f"{k}={v['value']} " + (f"(default {v['default']})" if v["default"] else "(no default)")
                         for k, v in plan["variables"].items())
        lines.append(f"# [profiles.{plan['profile']}.serve] reads {said}; set them to change what is served")
    lines += [f"export {shlex.quote(f'{k}={v}')}" for k, v in plan["env"].items()]
    if plan["apply"]:
        lines.append(shlex.join(plan["apply"]))
    lines.append("exec " + shlex.join(plan["exec"]))
    return "\n".join(lines) + "\n"


class VllmCannotRun(PatchqError):
    """vLLM is installed without what it imports at start (exit 126: found, cannot run)."""

    exit_code = EXIT_CANNOT_RUN


def torch_missing() -> str | None:
    """Why this environment's vLLM cannot import torch (installed with ``--no-deps``), or
    None: a ``torch-*.dist-info`` where vllm is installed or on ``sys.path`` (found from
    dist-info as vLLM is, never imported).

    Raises:
        TargetNotFound: no vLLM installed here.
    """
    return _torch_check()[1]


def _torch_check() -> tuple[CodeSource, str | None]:
    """(the installed vLLM, :func:`torch_missing`'s answer). Raises TargetNotFound."""
    from pathlib import Path

    from patchq.vllmdist.sources import installed

    target = installed()
    roots = [target.root] + [Path(p) for p in sys.path if p]
    if any(next(r.glob("torch-*.dist-info"), None) is not None for r in roots if r.is_dir()):
        return target, None
    return target, f"vllm {target.version} in {target.root} has no torch beside it (installed with --no-deps?)"


def require_torch() -> None:
    """Refuse to serve a vLLM installed without torch (``pip install --no-deps vllm``: enough
    to patch, check and diff, not to serve).

    Raises:
        VllmCannotRun: :func:`torch_missing` says why. TargetNotFound: no vLLM here.
    """
    target, why = _torch_check()
    if why:
        raise VllmCannotRun(f"{why}: `{sys.executable} -m pip install vllm=={target.version}` installs what it "
                            f"needs to serve; {NOTHING_DONE}")


def serve(plan: ServeDoc, series_dir: str | None) -> int:
    """Export, apply (mode ``apply``) and exec ``plan`` (:func:`serve_plan`); returns only
    when the profile does not apply (apply's exit code; its report is printed).

    ``$PATCHQ_SERVE_NO_TORCH_CHECK=1`` skips :func:`require_torch` (a vLLM whose torch comes
    from elsewhere).

    Raises:
        VllmCannotRun: vLLM cannot serve here (no torch). PatchqError: apply refused (a
        foreign edit, a read-only target, ...): nothing served.
    """
    long = too_long(plan["exec"], {**os.environ, **plan["env"]})
    if long:
        raise VllmCannotRun(f"cannot run {plan['exec'][0]}: {long}; {NOTHING_DONE}")
    if os.environ.get("PATCHQ_SERVE_NO_TORCH_CHECK", "") in ("", "0"):
        require_torch()
    os.environ.update(plan["env"])
    if plan["mode"] == "apply":
        code = _apply(plan["profile"], series_dir)
        if code != EXIT_OK:
            sys.stderr.write(f"patchq: error: profile {plan['profile']} was not applied (report above); "
                             f"not serving\n")
            return code
    else:
        from patchq.commands import run as run_cmd

        return run_cmd.main(plan["exec"][2:])  # execs vllm with the import hook
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(plan["exec"][0], plan["exec"])
    except OSError as exc:
        from patchq.errors import exec_failure

        message, code = exec_failure(plan["exec"][0], exc)
        raise (VllmNotFound if code == EXIT_COMMAND_NOT_FOUND else VllmCannotRun)(message) from None
    return EXIT_OK  # not reached


def _apply(profile: str, series_dir: str | None) -> int:
    """``patchq apply --profile`` in this process: the no-op fast path, else a real apply."""
    from patchq import fastpath

    argv = ["apply", "--profile", profile] + (["--series", series_dir] if series_dir else [])
    code = fastpath.try_fast(argv)
    if code is not None:
        return code
    from patchq import report
    from patchq import series as series_mod
    from patchq.commands import apply as apply_cmd
    from patchq.vllmdist import sources

    doc, code = apply_cmd.apply(sources.installed(), series_mod.load(series_dir), profile)
    report.emit_text(report.apply_text(doc), err=bool(doc["error"]))
    return code
