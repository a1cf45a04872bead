"""The ``patchq`` command line (typer). Each verb parses options, calls one function in
:mod:`patchq.commands` (or the engine), renders its document, and exits with its code.

Exit codes (see :mod:`patchq.errors`): 0 ok; 1 a patch failed (nothing written);
2 usage; 3 vLLM/release/tree not found; 4 foreign edit refused; 5 read-only target;
6 state journal damaged; 7 status/check found drift (stale, foreign, modified).
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from patchq import report
from patchq.errors import EXIT_OK, EXIT_USAGE, PatchqError, UsageError

app = typer.Typer(
    name="patchq",
    help="Keep a series of anchored libcst patches alive on an installed vLLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

SitePackages = typer.Option(None, "--site-packages", help="site-packages directory holding vllm")
Python = typer.Option(None, "--python", help="interpreter of another environment")
SeriesDir = typer.Option(None, "--series", help="series directory (default: the project's series/)")
Json = typer.Option(False, "--json", help="print the JSON document (schema in README)")


def _fail(exc: PatchqError, as_json: bool) -> None:
    if as_json:
        report.emit_json({"ok": False, "error": str(exc), "exit_code": exc.exit_code})
    else:
        typer.echo(f"patchq: error: {exc}", err=True)
    raise typer.Exit(exc.exit_code)


def _series(path):
    from patchq import series

    return series.load(path)


def _target(site_packages, python):
    from patchq.dist import sources

    return sources.installed(site_packages, python)


@app.command("list")
def list_cmd(series_dir: Optional[str] = SeriesDir, as_json: bool = Json) -> None:
    """Profiles and patches, with summaries and applies-ranges."""
    try:
        s = _series(series_dir)
        for name in s.profiles:  # relations hook: a broken profile is a series error (exit 2)
            s.patches_of(name)
        patches = []
        for pid in s.all_patch_ids():
            p = s.patch(pid)
            patches.append({
                "id": p.id, "hash": p.hash, "summary": p.summary, "applies": str(p.applies),
                "upstream": list(p.upstream),
                **p.relations(),  # relations hook: requires / conflicts / supersedes
                "variants": [{"applies": str(v.applies), "kind": v.kind, "anchors": list(v.edits),
                              "reason": v.upstreamed or v.absent or ""} for v in p.variants],
            })
        doc = {"schema": "patchq.list/1",
               "profiles": [{"name": pr.name, "description": pr.description, "patches": list(pr.patches)}
                            for pr in s.profiles.values()],
               "patches": patches}
    except PatchqError as exc:
        _fail(exc, as_json)
    if as_json:
        report.emit_json(doc)
        return
    con = report.console()
    con.print("[bold]profiles[/]")
    for pr in doc["profiles"]:
        con.print(f"  [bold]{pr['name']}[/]: {', '.join(pr['patches'])}  [dim]{pr['description']}[/]")
    con.print("[bold]patches[/]")
    for p in patches:
        con.print(f"  [bold]{p['id']}[/] [dim]{p['applies']}[/]  {p['summary']}")
        rel = "; ".join(f"{k} {', '.join(p[k])}" for k in ("requires", "conflicts", "supersedes") if p[k])
        if rel:  # relations hook
            con.print(f"      [dim]{rel}[/]")
        for v in p["variants"]:
            con.print(f"      {v['applies'] or 'all'}: {v['kind']} {', '.join(v['anchors'])}{v['reason']}")


@app.command()
def apply(
    profile: str = typer.Option(..., "--profile", "-p", help="profile to apply"),
    site_packages: Optional[str] = SitePackages,
    python: Optional[str] = Python,
    series_dir: Optional[str] = SeriesDir,
    strict: bool = typer.Option(False, "--strict", help="fail on a patch found upstream instead of skipping it"),
    as_json: bool = Json,
) -> None:
    """Apply a profile's patches (validated in memory first; idempotent)."""
    from patchq.commands import apply as cmd

    try:
        target = _target(site_packages, python)
        doc, code = cmd.apply(target, _series(series_dir), profile, strict=strict)
    except PatchqError as exc:
        _fail(exc, as_json)
    _render_apply(doc, as_json)
    raise typer.Exit(code)


@app.command()
def revert(
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="revert this profile's patches"),
    all_: bool = typer.Option(False, "--all", help="revert every patch"),
    force: bool = typer.Option(False, "--force", help="overwrite foreign edits (a copy is kept)"),
    site_packages: Optional[str] = SitePackages,
    python: Optional[str] = Python,
    series_dir: Optional[str] = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Restore byte-exact pristine files (verified against RECORD)."""
    from patchq.commands import apply as cmd

    try:
        if bool(profile) == all_:
            raise UsageError("give --profile NAME or --all")
        target = _target(site_packages, python)
        doc, code = cmd.revert(target, _series(series_dir), profile, force)
    except PatchqError as exc:
        _fail(exc, as_json)
    _render_apply(doc, as_json)
    raise typer.Exit(code)


def _render_apply(doc: dict, as_json: bool) -> None:
    if as_json:
        report.emit_json(doc)
    elif doc["error"]:
        typer.echo(report.apply_text(doc), err=True)
    else:
        typer.echo(report.apply_text(doc))


@app.command()
def status(
    site_packages: Optional[str] = SitePackages,
    python: Optional[str] = Python,
    series_dir: Optional[str] = SeriesDir,
    runtime: bool = typer.Option(False, "--runtime", help="the patches live in running `patchq run` processes, per pid"),
    as_json: bool = Json,
) -> None:
    """Which patches are live (applied / not-applied / stale / foreign) and each file's state."""
    from patchq import series as series_mod
    from patchq.env import status as st

    if runtime:
        _status_runtime(series_dir, as_json)
    try:
        target = _target(site_packages, python)
        root = series_mod.series_dir(series_dir)
        doc = st.collect(target.root, root, series_mod.anchors_dir(root))
    except PatchqError as exc:
        _fail(exc, as_json)
    if as_json:
        report.emit_json(doc)
    else:
        typer.echo(st.render_text(doc))
    raise typer.Exit(st.exit_code(doc))


def _status_runtime(series_dir, as_json: bool) -> None:
    from patchq.env import hookdir, runtime_status
    from patchq import series as series_mod
    from patchq.hashing import series_summary

    try:
        root = series_mod.series_dir(series_dir)
        hashes = series_summary(root, series_mod.anchors_dir(root))["hashes"]
    except PatchqError:
        hashes = None  # no series here: report the processes without the stale check
    doc = runtime_status.collect(hookdir.runtime_dir(), hashes)
    if as_json:
        report.emit_json(doc)
    else:
        typer.echo(runtime_status.render_text(doc))
    raise typer.Exit(runtime_status.exit_code(doc))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    profile: str = typer.Option(..., "--profile", "-p", help="profile to make live at import time"),
    site_packages: Optional[str] = SitePackages,
    python: Optional[str] = Python,
    series_dir: Optional[str] = SeriesDir,
    print_env: bool = typer.Option(False, "--print-env", help="print the environment as export lines; run nothing"),
    as_json: bool = Json,
    command: Optional[list[str]] = typer.Argument(None, help="the command (after --)"),
) -> None:
    """Run COMMAND with the profile patched in at import time (site-packages untouched)."""
    from patchq.commands import run as cmd

    argv = ["--profile", profile]
    for flag, value in (("--site-packages", site_packages), ("--python", python), ("--series", series_dir)):
        if value:
            argv += [flag, value]
    argv += ["--print-env"] * print_env + ["--json"] * as_json + ["--", *(command or [])]
    raise typer.Exit(cmd.main(argv))


@app.command()
def diff(
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="profile to render"),
    site_packages: Optional[str] = SitePackages,
    python: Optional[str] = Python,
    vllm: Optional[str] = typer.Option(None, "--vllm", "--release", help="a release from PyPI instead of the installed vLLM"),
    source: Optional[str] = typer.Option(None, "--source", help="a vLLM source tree instead"),
    write: bool = typer.Option(False, "--write", help="with --release: store each patch's diff in series/diffs/VERSION/"),
    series_dir: Optional[str] = SeriesDir,
    as_json: bool = Json,
) -> None:
    """The unified diff of what apply changes (or changed), paths relative to site-packages."""
    from patchq.plan import diffs, engine
    from patchq.dist import sources
    from patchq.env.converge import PlanFailed, converge

    if write:  # one validated diff per patch (patchq/commands/diffwrite.py)
        from patchq.commands import diffwrite

        try:
            if not vllm:
                raise UsageError("--write needs --release VERSION")
            doc, code = diffwrite.run(_series(series_dir), vllm, profile)
        except PatchqError as exc:
            _fail(exc, as_json)
        report.emit_json(doc) if as_json else typer.echo(diffwrite.render_text(doc), nl=False)
        raise typer.Exit(code)
    try:
        if not profile:
            raise UsageError("give --profile NAME (or --release VERSION --write)")
        s = _series(series_dir)
        patches = s.patches_of(profile)
        if vllm or source:
            target = sources.release_source(vllm) if vllm else sources.source_tree(source)
            plan = engine.plan(target, patches)
            if not plan.ok:
                raise PlanFailed(plan)
        else:
            target = _target(site_packages, python)
            plan = converge(target, patches, profile=profile, dry_run=True).plan
    except PatchqError as exc:
        _fail(exc, as_json)
    text = diffs.unified_all(plan.pristine, plan.patched)
    if as_json:
        report.emit_json({"schema": "patchq.diff/1", "profile": profile, "vllm": str(target.version),
                          "files": sorted(plan.patched), "diff": text, "patches": report.patch_rows(plan)})
    else:
        sys.stdout.write(text)
    raise typer.Exit(EXIT_OK)


@app.command()
def check(
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="profile to check"),
    all_: bool = typer.Option(False, "--all", help="check every patch of the series"),
    vllm: Optional[str] = typer.Option(None, "--vllm", help="a release from PyPI (cached) instead of the installed vLLM"),
    source: Optional[str] = typer.Option(None, "--source", help="a vLLM source tree or git checkout instead"),
    as_version: Optional[str] = typer.Option(None, "--as-version", help="the version of the --source tree"),
    site_packages: Optional[str] = SitePackages,
    python: Optional[str] = Python,
    series_dir: Optional[str] = SeriesDir,
    no_diff: bool = typer.Option(False, "--no-diff", help="do not print the drift diffs"),
    as_json: bool = Json,
) -> None:
    """Dry-run a profile on a vLLM: each patch's status, reason, locations and upstream drift."""
    from patchq.compat.check import target_for
    from patchq.commands import check as cmd

    try:
        if bool(profile) == all_:
            raise UsageError("give --profile NAME or --all")
        target = target_for(vllm, source, as_version, site_packages, python)
        doc, code = cmd.run(target, _series(series_dir), profile)
    except PatchqError as exc:
        _fail(exc, as_json)
    if as_json:
        report.emit_json(doc)
    else:
        report.render_patches(doc, f"check {profile or '--all'} on vllm {doc['vllm']['version']} ({doc['vllm']['kind']})")
        text = cmd.render_text(doc, show_diffs=not no_diff)
        if text:
            typer.echo(text)
    raise typer.Exit(code)


@app.command()
def matrix(
    releases: str = typer.Option(">=0.20.2,<=0.33.0", "--releases", help="range ('>=0.20.2,<=0.33.0') or list ('0.23.0,0.26.0')"),
    profiles: str = typer.Option("base,mtp,dflash,dense", "--profiles", help="comma-separated profiles"),
    out: str = typer.Option("matrix", "--out", help="directory for matrix.json, matrix.md, matrix.html"),
    workers: int = typer.Option(2, "--workers", help="releases checked in parallel"),
    levels: list[str] = typer.Option([], "--levels", help="import/probe records (lab/cpu_levels.py JSON); repeatable"),
    boot: list[str] = typer.Option([], "--boot", help="boot records JSON; repeatable"),
    series_dir: Optional[str] = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Check every profile on every release: JSON, Markdown and HTML grids, cell by cell explained."""
    from patchq.commands import matrix as cmd

    try:
        doc, paths, code = cmd.run(releases, profiles, out, series_dir=series_dir, workers=workers,
                                   levels=levels, boot=boot)
    except PatchqError as exc:
        _fail(exc, as_json)
    if as_json:
        report.emit_json(doc)
    else:
        blocking = sum(c["blocking"] for per in doc["cells"].values() for row in per.values() for c in row.values())
        typer.echo(f"matrix: {len(doc['releases'])} releases x {len(doc['profiles'])} profiles in "
                   f"{doc['timing']['wall_s']} s; {blocking} blocking cell(s); "
                   f"{len(doc['errors'])} release(s) not checked")
        for kind, path in paths.items():
            typer.echo(f"  {kind}: {path}")
    raise typer.Exit(code)


# -- upstream tracking, rebase and import (patchq/commands/upstream.py, rebase.py, import_.py)

upstream_app = typer.Typer(help="A git history of vLLM releases, and what upstream changed under a patch.",
                           no_args_is_help=True)
app.add_typer(upstream_app, name="upstream")
UpstreamRepo = typer.Option(None, "--repo", help="an existing vLLM clone (vX.Y.Z tags) instead of the releases history")


@upstream_app.command("sync")
def upstream_sync(
    releases: Optional[str] = typer.Option(None, "--releases", help="list ('0.23.0,0.24.0') or range ('>=0.23,<=0.26')"),
    repo: Optional[str] = UpstreamRepo,
    as_json: bool = Json,
) -> None:
    """Commit each release's vllm/**/*.py, in release order, tagged vX.Y.Z (incremental)."""
    from patchq.commands import upstream as cmd

    try:
        doc, code = cmd.sync(releases, repo)
    except PatchqError as exc:
        _fail(exc, as_json)
    report.emit_json(doc) if as_json else typer.echo(cmd.render_sync(doc), nl=False)
    raise typer.Exit(code)


@upstream_app.command("log")
def upstream_log(
    patch: str = typer.Argument(..., help="patch id"),
    releases: Optional[str] = typer.Option(None, "--releases", help="among the tagged releases (default: all)"),
    repo: Optional[str] = UpstreamRepo,
    commits: Optional[bool] = typer.Option(None, "--commits/--no-commits", help="list commits between tags (default: with --repo)"),
    no_diff: bool = typer.Option(False, "--no-diff", help="do not print the definition diffs"),
    series_dir: Optional[str] = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Releases where each anchored definition changed (by fingerprint), with its diff."""
    from patchq.commands import upstream as cmd

    try:
        doc, code = cmd.log(_series(series_dir), patch, releases, repo, commits)
    except PatchqError as exc:
        _fail(exc, as_json)
    report.emit_json(doc) if as_json else typer.echo(cmd.render_log(doc, show_diff=not no_diff), nl=False)
    raise typer.Exit(code)


@app.command()
def rebase(
    to: str = typer.Option(..., "--to", help="the release to carry the series to"),
    from_: Optional[str] = typer.Option(None, "--from", help="the release to carry it from (default: last verified)"),
    patch: list[str] = typer.Option([], "--patch", help="only this patch (repeatable; default: all)"),
    write: bool = typer.Option(False, "--write", help="record fingerprints, diffs, widened ranges; proposals to the work dir"),
    workdir: Optional[str] = typer.Option(None, "--workdir", help="where conflicts go (default: .patchq-rebase/ beside series/)"),
    resume: bool = typer.Option(False, "--continue", help="take the conflicts resolved by hand in the work dir"),
    series_dir: Optional[str] = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Carry each patch to another release: node-scoped three-way merges (git merge-file)."""
    from patchq.commands import rebase as cmd

    try:
        s = _series(series_dir)
        doc, code = cmd.run(s, to, from_, cmd.check_ids(s, patch), write, workdir, resume)
    except PatchqError as exc:
        _fail(exc, as_json)
    report.emit_json(doc) if as_json else typer.echo(cmd.render_text(doc), nl=False)
    raise typer.Exit(code)


@app.command("import")
def import_cmd(
    file: str = typer.Argument(..., help="a unified diff (git, quilt or patch-package format)"),
    id_: str = typer.Option(..., "--id", help="the new patch's id (kebab-case)"),
    release: Optional[str] = typer.Option(None, "--release", help="the release the diff was made against (default: guessed)"),
    summary: Optional[str] = typer.Option(None, "--summary", help="one-line summary"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing patch of that id"),
    series_dir: Optional[str] = SeriesDir,
    as_json: bool = Json,
) -> None:
    """Turn a unified diff into an anchored, node-scoped patch (series/<id>.py + anchors/<id>.toml)."""
    from patchq.commands import import_ as cmd

    try:
        doc, code = cmd.run(_series(series_dir), file, id_, release, summary, force)
    except PatchqError as exc:
        _fail(exc, as_json)
    report.emit_json(doc) if as_json else typer.echo(cmd.render_text(doc), nl=False)
    raise typer.Exit(code)


def main() -> None:
    """Run the typer app; a usage error is one line on stderr and exit code 2."""
    try:
        code = app(standalone_mode=False)
    except Exception as exc:  # click's exceptions (typer may vendor click: match by shape)
        if type(exc).__name__ == "Abort":
            typer.echo("patchq: aborted", err=True)
            sys.exit(1)
        fmt = getattr(exc, "format_message", None)
        if fmt is None or not isinstance(getattr(exc, "exit_code", None), int):
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None and exc.exit_code == EXIT_USAGE else ""
        if "--json" in sys.argv[1:]:  # the contract holds for option errors too
            report.emit_json({"ok": False, "error": fmt(), "exit_code": exc.exit_code})
        elif fmt():  # empty for a bare `patchq`, whose help was already printed
            typer.echo(f"patchq: error: {fmt()}{hint}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else EXIT_OK)
