"""``patchq run --profile NAME -- COMMAND...``: run a command with a profile live at import time.

site-packages is left untouched: the command (and every Python process below it) gets
patchq's import hook through a generated ``sitecustomize`` on ``PYTHONPATH`` (see
:mod:`patchq.env.hookdir` and ``patchq/runtime/hook.py``). The served texts come
from the same plan as ``patchq apply`` (byte-identical to what apply writes).

Before the command starts, ``run`` plans the profile (or reuses the hook directory when
nothing changed: a warm start parses nothing); a patch that does not apply prints the
report and exits 1 without running anything. Then it replaces itself (``execvp``) with
the command, whose exit status becomes ``patchq run``'s, in this environment:

``PYTHONPATH``                 the hook directory first (other patchq hook dirs removed)
``PATCHQ_RUNTIME_MANIFEST``    the hook's ``manifest.json``
``PATCHQ_RUNTIME_DIR``         where processes leave ``<pid>.json`` (``status --runtime``)
``PATCHQ_EXPECT_PROFILE``      the profile (the vLLM plugin checks it in every process);
                               a different value already set is a usage error
``PATCHQ_STRICT``              ``1`` unless already set (the plugin stops a process
                               where the profile is not live)
``VLLM_CACHE_ROOT``            the root vLLM would use, with ``patchq/<profile>-<digest>``
                               folded in (``docs/compile-cache.md``)

``--print-env`` prints those as ``export`` lines instead of running anything; with
``--json`` it prints the ``patchq.run-env/1`` document instead: ``ok``, ``profile``,
``vllm``, ``digest``, ``hook_dir``, ``warm``, ``env`` {name: value} (the variables above,
in that order). ``run --json`` otherwise prints JSON only when patchq itself fails (the
``patchq.apply/1`` report of a patch that does not apply, or the error document): the
command's own output is the command's.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from patchq.errors import EXIT_OK, PatchqError, RunPlanFailed, UsageError

if TYPE_CHECKING:
    from patchq.documents import RunEnvDoc

#: One line for error messages (the rest of the usage is in ``patchq run --help``).
USAGE_LINE = "usage: patchq run --profile NAME [options] [--] COMMAND [ARG...] (see `patchq run --help`)"
#: The variables ``run`` sets (in this order in ``--print-env``).
VARIABLES = ("PYTHONPATH", "PATCHQ_RUNTIME_MANIFEST", "PATCHQ_RUNTIME_DIR", "PATCHQ_EXPECT_PROFILE",
             "PATCHQ_STRICT", "VLLM_CACHE_ROOT")


@dataclass
class RunOptions:
    """Parsed ``patchq run`` arguments."""

    profile: str | None = None
    site_packages: str | None = None
    python: str | None = None
    series: str | None = None
    print_env: bool = False
    as_json: bool = False
    command: list[str] = field(default_factory=list)


def parse(argv: list[str]) -> RunOptions:
    """Parse ``run``'s arguments (:data:`patchq.options.COMMANDS`, read by the typer app
    too): options, then ``--`` (optional) and the command.

    Raises:
        UsageError: unknown option, missing value, no ``--profile``, no command.
    """
    from patchq import options

    try:
        values, command = options.parse(argv, options.COMMANDS["run"], command=True)
    except options.Unparsed as exc:
        raise UsageError(f"{exc.message}; {USAGE_LINE}") from None
    return checked(RunOptions(values.get("profile"), values.get("site_packages"), values.get("python"),
                              values.get("series"), values["print_env"], values["json"], command))


def checked(opts: RunOptions) -> RunOptions:
    """``opts`` when it names a profile and a command (or ``--print-env``).

    Raises:
        UsageError: it does not.
    """
    if not opts.profile:
        raise UsageError(f"--profile NAME is required; {USAGE_LINE}")
    if not opts.command and not opts.print_env:
        raise UsageError(f"no command to run; {USAGE_LINE}")
    return opts


def prepare(opts: RunOptions) -> dict:
    """The hook manifest for ``opts`` (warm when possible, else planned and written).

    Raises:
        TargetNotFound, UsageError, SeriesError, ForeignEditError, RunPlanFailed.
    """
    from patchq import series as series_mod
    from patchq.env import hookdir
    from patchq.hashing import profile_hashes, series_summary
    from patchq.runtime.cachefold import profile_digest
    from patchq.vllmdist import sources

    target = sources.installed(opts.site_packages, opts.python)
    root = series_mod.series_dir(opts.series)
    summary = series_summary(root, series_mod.anchors_dir(root))
    profile = opts.profile
    if not profile:  # parse() refuses this; prepare() may be given options built by hand
        raise UsageError(f"--profile NAME is required; {USAGE_LINE}")
    digest = profile_digest(profile_hashes(summary, profile))  # only this profile must resolve
    hook_dir = hookdir.hook_dir_for(target.root, str(target.version), profile, digest)
    manifest = hookdir.load_warm(hook_dir, target.root)
    if manifest is not None:
        manifest["hook_dir"] = str(hook_dir)
        manifest["warm"] = True
        return manifest
    from patchq.env.converge import PlanFailed

    try:
        manifest = hookdir.build(target, series_mod.load(opts.series), profile, summary)
    except PlanFailed as exc:
        from patchq import report
        from patchq.commands.apply import document

        doc = document("run", target, opts.profile, None, exc, plan=exc.plan)
        raise RunPlanFailed(exc, doc, report.apply_text(doc)) from None
    manifest["warm"] = False
    return manifest


def environment(manifest: dict, base: dict[str, str]) -> dict[str, str]:
    """``base`` plus the variables ``run`` sets (module docstring).

    Raises:
        UsageError: ``PATCHQ_EXPECT_PROFILE`` is set to another profile.
    """
    from patchq.env.hookdir import runtime_dir
    from patchq.runtime.cachefold import fold
    from patchq.runtime.hook import MARKER

    profile = manifest["profile"]
    expect = base.get("PATCHQ_EXPECT_PROFILE")
    if expect and expect != profile:
        raise UsageError(f"PATCHQ_EXPECT_PROFILE={expect} but `patchq run --profile {profile}`: "
                         f"the vLLM plugin would stop every process")
    env = dict(base)
    hook_dir = manifest["hook_dir"]
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and not os.path.exists(os.path.join(p, MARKER))]
    env["PYTHONPATH"] = os.pathsep.join([hook_dir, *rest])
    env["PATCHQ_RUNTIME_MANIFEST"] = os.path.join(hook_dir, "manifest.json")
    env["PATCHQ_RUNTIME_DIR"] = env.get("PATCHQ_RUNTIME_DIR") or str(runtime_dir())
    env["PATCHQ_EXPECT_PROFILE"] = profile
    env.setdefault("PATCHQ_STRICT", "1")
    env["VLLM_CACHE_ROOT"] = fold(profile, manifest["digest"], env)[0]
    return env


SCHEMA_ENV = "patchq.run-env/1"


def env_document(manifest: dict, env: dict[str, str]) -> RunEnvDoc:
    """The ``patchq.run-env/1`` document of ``--print-env --json`` (module docstring)."""
    return {"schema": SCHEMA_ENV, "ok": True, "profile": manifest["profile"], "vllm": manifest["vllm"],
            "digest": manifest["digest"], "hook_dir": manifest["hook_dir"], "warm": bool(manifest.get("warm")),
            "env": {name: env[name] for name in VARIABLES}}


def _warn_without_torch() -> None:
    """Say so on stderr when this environment's vLLM has no torch (``pip install --no-deps``):
    the command may not import vllm, so it still runs; if it does, its own traceback follows."""
    from patchq.commands.serve import torch_missing

    try:
        why = torch_missing()
    except PatchqError:
        return  # no vllm to look at: prepare() would have said so
    if why:
        sys.stderr.write(f"patchq: warning: {why}: a command that imports vllm fails there "
                         f"(PATCHQ_SERVE_NO_TORCH_CHECK=1 silences this)\n")


def main(argv: list[str]) -> int:
    """Run ``patchq run ARGV``; returns an exit status, or does not return (exec).

    Exit codes: those of patchq before the command starts (1 a patch failed, 2 usage,
    3 vLLM not found, 4 foreign edit), 127 when the command is not found, 126 when it
    cannot be run; after the exec, the command's own.

    Raises:
        PatchqError: reported by :func:`patchq.edge.guard` (the one error edge).
    """
    from patchq import edge

    edge.set_json("--json" in argv[:argv.index("--")] if "--" in argv else "--json" in argv)
    return execute(parse(argv))


def execute(opts: RunOptions) -> int:
    """Run parsed options (:func:`main`, the typer app's ``run``); returns an exit status,
    or does not return (exec). Exit codes and errors as :func:`main`'s."""
    from patchq import edge, report

    edge.set_json(opts.as_json)
    try:
        manifest = prepare(opts)
    except RunPlanFailed as exc:
        if opts.as_json:
            report.emit_json(exc.doc)
        else:
            lines = exc.text.rstrip("\n").splitlines()
            at = max((i for i, ln in enumerate(lines) if "patchq: error:" in ln), default=len(lines) - 1)
            lines[at] += "; nothing was run"
            report.emit_text("\n".join(lines), err=True)
        return exc.exit_code
    env = environment(manifest, dict(os.environ))
    if opts.print_env:
        doc = env_document(manifest, env)
        report.emit_json(doc) if opts.as_json else report.emit_text(report.run_env_text(doc))
        return EXIT_OK
    sys.stderr.write(report.run_summary_text(manifest, env) + "\n")
    if opts.site_packages is None and opts.python is None and \
            os.environ.get("PATCHQ_SERVE_NO_TORCH_CHECK", "") in ("", "0"):
        _warn_without_torch()
    sys.stderr.flush()
    sys.stdout.flush()
    try:
        os.execvpe(opts.command[0], opts.command, env)
    except OSError as exc:
        from patchq.errors import exec_failure

        message, code = exec_failure(opts.command[0], exc)
        sys.stderr.write(f"patchq: error: {message}\n")
        return code
    return EXIT_OK  # not reached
