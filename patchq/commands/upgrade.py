"""``patchq upgrade``: the one release pipeline, from a vLLM upgrade on a laptop to a pull request
in CI.

What a user otherwise strings together (``status``, ``check``, ``rebase``, ``review``,
``fingerprint``, ``diff --write``, ``matrix``, ``apply``, git), in order:

1. **detect** the release: the installed one (``--to X``: release X from the index before
   installing it; ``--to latest``: the newest release the index lists, asked now);
2. the profile: ``--profile``, else the one the environment's journal names (the journal
   outlives ``pip install vllm==X``; :mod:`patchq.env.status`); with ``--to`` and nothing
   applied, every profile of the series;
3. with ``--branch NAME``: refuse uncommitted series changes or an existing branch, and check
   the branch out in the repository holding the series (:mod:`patchq.authoring.gitbranch`),
   before anything is written;
4. **check** every patch on the release;
5. **rebase** to it the patches the check does not call verified: drifted, moved,
   conflicting or gone definitions, and releases no variant covers (:data:`REBASE`). With
   ``--write`` (the series is written only then; conflicts always go to the work directory):
   what the rebase proves (widened variants, fingerprints, rendered diffs); a conflict whose
   definitions upstream only re-formatted (fingerprints unchanged) is resolved with the
   anchored transform's result (the AST anchors carry it, a line merge cannot); a patch whose
   upstream check finds its change in the release gets an ``upstreamed`` variant from it on
   (:func:`patchq.authoring.seriesedit.add_verdict_variant`); then the series is checked again,
   the release's fingerprints are recorded for every patch the check does not block (a
   blocked one needs a person: ``patchq review``) and its diffs stored
   (``series/diffs/X/``);
6. the **matrix** with the evidence levels that can run (``--level``; :data:`LEVELS`), when
   asked (``--matrix``) or with ``--commit``: the default range of ``patchq matrix`` and X;
7. **apply** the profile when nothing blocks and X is the installed release;
8. with ``--commit``: commit the series changes and the conflict files, and write the
   pull-request body (:mod:`patchq.commands.pullrequest`: the matrix, the reviews needed
   with their three-way views, what was rebased) with ``upgrade.json`` into ``--out``.

It prints per patch what happened and what the user must do next. ``--write`` refuses a
series inside an installed distribution (``patchq init`` makes a series repo).

``patchq.upgrade/1``: ``ok``, ``profile`` (null when every profile was carried), ``from``
(the release the journal was written on, or null), ``to``, ``installed``, ``write``,
``patches`` [{``id``, ``check`` (its ``patchq.check/1`` status after the upgrade), ``before``
(added: its status before), ``reason``, ``blocking``, ``rebase`` (the ``patchq.rebase/1``
status, or null when not rebased), ``written`` [paths], ``next`` [steps], ``applied``
(bool), ``apply_status``}], ``apply`` (the ``patchq.apply/1`` document, or null), ``next``
[steps], ``series``; added: ``profiles`` [names], ``rebased`` [{``id``, ``status``,
``merge``, ``transform``, ``reason``, ``files`` (work files: conflicts, proposals),
``notes``}], ``reviews`` [{``id``, ``status``, ``reason``, ``view`` (the ``patchq review``
text)}: with ``--commit`` or ``--out``], ``recorded`` [paths: fingerprints and expected
output of the release], ``matrix`` (null, or {``releases``, ``levels``, ``dir``,
``exit_code``, ``errors``, ``blocking`` (cells), ``column`` {profile: {patch: status
(level)}}, ``changes``}), ``branch``, ``commit``, ``out``, ``newest_release``,
``pull_request`` (the body's path). Exit 0 when nothing needs a person (the installed vLLM
carries the profile, or every patch is ready for ``--to``); 1 when a patch needs a person or
``--write``; apply's codes (4, 5, 7, ...) when apply refuses; 2 usage (also: a dirty series,
an existing branch); 3 the release cannot be had; 5 git refused the commit.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, UsageError
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from packaging.version import Version

    from patchq.authoring.gitbranch import Branch
    from patchq.compat.check import PatchCheck
    from patchq.documents import ApplyDoc, UpgradeDoc

SCHEMA = "patchq.upgrade/1"

#: check statuses a rebase can carry forward (the definition changed, moved or went).
REBASE = ("applies-drifted", "moved", "conflict", "gone")

#: The matrix's evidence levels: ``source`` is the check itself; a level another verb produces
#: names the module whose ``level_records(versions, profiles, series) -> list[dict]`` gives
#: records as ``patchq matrix --levels FILE`` reads them (``probe``: ``patchq probe``, on each
#: release's CPU environment).
LEVELS: dict[str, str | None] = {"source": None, "probe": "patchq.commands.probe"}

#: where the release pipeline's files go without ``--out`` (beside series/, as .patchq-rebase/)
OUT_DIR = ".patchq-upgrade"


@dataclass
class Pipeline:
    """The release-pipeline options of an upgrade.

    Attributes:
        branch: check out this new branch before writing (``--branch``).
        commit: commit what was written and write the pull-request body (``--commit``).
        out: where ``upgrade.json``, ``pull-request.md`` and ``matrix/`` go (default
            ``.patchq-upgrade/X/`` beside series/).
        matrix: render the matrix (None: with ``commit``).
        matrix_releases: the matrix's releases (None: ``patchq matrix``'s default range and X).
        levels: the matrix's evidence levels (:data:`LEVELS`).
        replace: passed to apply (``--replace``: another series' patches may be replaced).
        workers: releases the matrix checks in parallel (0: one per usable CPU).
    """

    branch: str | None = None
    commit: bool = False
    out: str | None = None
    matrix: bool | None = None
    matrix_releases: str | None = None
    levels: tuple[str, ...] = ("source",)
    replace: bool = False
    workers: int = 0

    def check(self, write: bool) -> None:
        """Refuse options that cannot go together, before anything runs.

        Raises:
            UsageError: ``--branch``/``--commit`` without ``--write``; an unknown level.
        """
        if (self.branch or self.commit) and not write:
            raise UsageError("--branch and --commit commit what the upgrade writes: give --write too")
        unknown = [lv for lv in self.levels if lv not in LEVELS]
        if unknown:
            raise UsageError(f"--level {unknown[0]}: unknown; known: {', '.join(LEVELS)}")

    @property
    def wants_matrix(self) -> bool:
        return self.commit if self.matrix is None else self.matrix


def run(series: Series, target: CodeSource | None, profile: str | None, to: str | None, write: bool,
        workdir: str | None = None, pipeline: Pipeline | None = None) -> tuple[UpgradeDoc, int]:
    """Detect, check, rebase what needs it, matrix, apply, commit (module docstring).
    Returns (document, exit code). ``target`` is the installed vLLM, None where there is
    none (a CI job with ``--to``: nothing to apply).

    Raises:
        UsageError: no profile given or applied (on the installed release); an unknown
            profile; ``--write`` on an installed series; a malformed ``--to``; a dirty series
            or an existing branch (``--branch``).
        TargetNotFound: release ``to`` cannot be had.
        RepoWriteError: git refused the branch or the commit.
    """
    from patchq.compat import check as checking
    from patchq.env.state import Journal, StateDir
    from patchq.vllmdist.sources import release_source

    pipe = pipeline or Pipeline()
    pipe.check(write)
    if target is None and to is None:
        raise UsageError("no vllm is installed here: give --to VERSION (a release to check and rebase for)")
    journal = StateDir(target.root).read() if target is not None else Journal()
    wanted = _release(to, target)
    installed = target is not None and wanted == target.version
    names = _profiles(series, target, profile, journal.profile, journal.applied_from, to is not None)
    if write:  # refused before any check runs, by the rule every series write follows
        from patchq.authoring.repowrite import refuse_bundled

        refuse_bundled(series.root, "--write")
    branch: Branch | None = None
    if pipe.branch or pipe.commit:
        from patchq.authoring import gitbranch

        branch = gitbranch.prepare(series.root, series.anchors_root, pipe.branch)
    source = target if installed and target is not None else release_source(str(wanted))
    ids = _patch_ids(series, names)
    rows = checking.check(source, [series.patch(pid) for pid in ids], keep_plan=True)  # apply reuses its plan
    before = {r.id: r.status for r in rows}
    work = Path(workdir) if workdir else series.root.parent / ".patchq-rebase"
    carried = _carry(series, rows, str(wanted), write, work)
    recorded: list[str] = []
    if write:
        series = Series(series.root, series.anchors_root, series.profiles, {}, location=series.location)
        rows = checking.check(source, [series.patch(pid) for pid in ids], keep_plan=True)  # the written series
        recorded = _record_release(series, str(wanted), rows)
    blocking = [r for r in rows if r.blocking]
    apply_doc: ApplyDoc | None = None
    code = EXIT_OK if not blocking and not carried.human else EXIT_PATCH_FAILED
    applied_profile = profile or (journal.profile if journal.profile in names else None)
    if installed and target is not None and not blocking and applied_profile:
        from patchq.commands import apply as apply_cmd

        apply_doc, code = apply_cmd.apply(target, series, applied_profile, replace=pipe.replace)
    patches = [_row(r, before.get(r.id), carried.rebased.get(r.id), apply_doc) for r in rows]
    label = names[0] if len(names) == 1 else None
    doc: UpgradeDoc = {"schema": SCHEMA, "ok": code == EXIT_OK, "profile": label, "from": journal.vllm,
                       "newest_release": None,
                       "to": str(wanted), "installed": str(target.version) if target is not None else None,
                       "write": write, "patches": patches,
                       "apply": apply_doc, "series": series.location.as_json() if series.location else None,
                       "next": [], "profiles": names, "rebased": carried.rows(work), "reviews": [],
                       "recorded": recorded, "matrix": None, "branch": pipe.branch, "commit": None, "out": None,
                       "pull_request": None}
    doc["next"] = _next_steps(doc, work, committing=pipe.commit)
    if to is None and target is not None:  # added: a newer release the index lists than the installed one
        from patchq.commands.check import newer_release

        doc["newest_release"] = newer_release(target)
    if pipe.commit or pipe.out:  # the pull request's: a plain upgrade's next lines name `patchq review`
        doc["reviews"] = _reviews(source, series, [r for r in rows if r.status in ("review", "possibly-upstreamed")])
    out = _out_dir(pipe, series, str(wanted))
    if pipe.wants_matrix:
        doc["matrix"] = _matrix(series, names, str(wanted), pipe, out / "matrix")
    if branch is not None and pipe.commit:
        from patchq.authoring import gitbranch
        from patchq.commands import pullrequest

        doc["commit"] = gitbranch.commit(branch, pullrequest.commit_message(doc), [work / str(wanted)])
        if doc["commit"]:
            where = f"`git push origin {pipe.branch}`" if pipe.branch else "push the commit"
            doc["next"].insert(0, f"{where}, then open its pull request with {out / 'pull-request.md'} as the body")
    if pipe.commit or pipe.out:
        _write_out(doc, out)
    return doc, code


def _release(to: str | None, target: CodeSource | None) -> Version:
    """The release to carry the series to: ``--to`` (``latest``: the newest on the index,
    asked now), else the installed one.

    Raises:
        UsageError: ``--to`` is no version. ReleaseError: ``latest`` and no list to go by.
    """
    from patchq.commands import version_arg

    if to is None:
        assert target is not None  # run() refuses neither
        return target.version
    if to.strip().lower() == "latest":
        from patchq.vllmdist import releases

        return releases.newest(package=(target.dist if target else None) or "vllm", refresh=True)
    return version_arg(to, "--to")


def _profiles(series: Series, target: CodeSource | None, profile: str | None, applied: str | None,
              applied_from: dict, to_given: bool) -> list[str]:
    """The profiles to carry: ``profile``, else the ``applied`` one (the journal's), else
    with ``--to`` every profile of the series.

    Raises:
        UsageError: on the installed release none given or applied; the applied one is
            another series'; an unknown profile.
    """
    from patchq.env.layout import same_series
    from patchq.report import series_text

    if profile:
        series.profile(profile)  # an unknown profile: UsageError naming the known ones
        return [profile]
    other = bool(applied_from) and not same_series(applied_from, str(series.root))
    if applied and (other or applied not in series.profiles):
        where = series.location.describe() if series.location else str(series.root)
        there = (f"{series_text(applied_from)} applied it: `patchq upgrade --series {applied_from.get('dir')}`"
                 if applied_from else "another series applied it: give its --series DIR")
        if not to_given:
            raise UsageError(f"the applied profile {applied!r} is not a profile of {where} (known: "
                             f"{', '.join(series.profiles)}): {there}")
        applied = None
    if applied:
        return [applied]
    if to_given:
        return list(series.profiles)
    env = str(target.root) if target else "this environment"
    raise UsageError(f"no profile is applied in {env}: give --profile NAME (known: "
                     f"{', '.join(series.profiles)}), or `--to X` to check every profile on a release")


def _patch_ids(series: Series, names: list[str]) -> list[str]:
    """The patches of ``names``, in series order (each once)."""
    wanted = {pid for name in names for pid in series.profile(name).patches}
    return [pid for pid in series.all_patch_ids() if pid in wanted]


@dataclass
class _Carried:
    """What the rebase step did: per patch its ``patchq.rebase/1`` row (or the upstreamed
    variant written), notes, and whether a person is needed for it."""

    rebased: dict[str, dict]
    notes: dict[str, list[str]]
    human: list[str]

    def rows(self, work: Path) -> list[dict]:
        """The ``rebased`` field: per patch its outcome, work files and notes."""
        out = []
        for pid, p in self.rebased.items():
            files = [f for u in p.get("units", []) for f in u.get("files", [])]
            files += [w for w in p.get("written", []) if str(work) in str(w) and w not in files]
            out.append({"id": pid, "status": p["status"], "merge": p.get("merge", ""),
                        "transform": p.get("transform", ""), "reason": p.get("reason", ""), "files": files,
                        "written": list(p.get("written", [])), "next": list(p.get("next_steps", [])),
                        "notes": self.notes.get(pid, [])})
        return out


def _carry(series: Series, rows: list[PatchCheck], to: str, write: bool, work: Path) -> _Carried:
    """Step 5 of the module docstring: upstreamed variants (``write``), the rebase of what
    needs it, and re-formatting-only conflicts resolved by the transform (``write``)."""
    from patchq.commands import rebase as rebase_cmd

    carried = _Carried({}, {}, [])
    needs = []
    for r in rows:
        if write and r.status == "upstreamed" and r.variant_kind == "edit":
            carried.rebased[r.id] = _upstreamed_variant(series, r, to)
        elif r.status in REBASE or r.tried_variant:
            needs.append(r.id)
    if needs:
        rebase_doc, _ = rebase_cmd.run(series, to, None, needs, write, work)
        carried.rebased.update({p["id"]: p for p in rebase_doc["patches"]})
    if write:
        for pid, p in list(carried.rebased.items()):
            again = _take_transform(series, p, to, work)
            if again is not None:
                carried.rebased[pid] = again
                carried.notes.setdefault(pid, []).append(
                    "upstream only re-formatted the anchored definition (same fingerprint): the line merge "
                    "conflicted, the anchored transform's result was taken")
    carried.human = [pid for pid, p in carried.rebased.items()
                     if p["status"] in ("conflict", "gone", "failed-at-base", "needs-variant", "unsupported")]
    return carried


def _upstreamed_variant(series: Series, row: PatchCheck, to: str) -> dict:
    """Write ``variant(">=TO", upstreamed=...)`` after the edit variant covering ``to`` (capped
    before it): the patch's upstream check (or generic detection) found its change there.
    Returns a rebase-shaped row (status ``upstreamed``)."""
    from packaging.version import Version

    from patchq.authoring import seriesedit
    from patchq.series import module_file

    patch = series.patch(row.id)
    variant = patch.variant_for(Version(to))
    assert variant is not None  # variant_kind "edit": check planned it
    reason = (row.upstream_check or {}).get("reason") or row.reason
    path = module_file(series.root, patch.id)
    old, capped = seriesedit.add_verdict_variant(path, variant.applies, Version(to), "upstreamed",
                                                 f"vLLM {to}: {reason}")
    return {"id": row.id, "status": "upstreamed", "merge": "", "transform": "", "units": [],
            "reason": f"upstream check: {reason}", "written": [str(path)],
            "next_steps": [f"wrote variant \">={to}\" upstreamed; the edit variant {old} now ends: \"{capped}\""]}


def _take_transform(series: Series, p: dict, to: str, work: Path) -> dict | None:
    """A conflict whose every conflicted definition upstream only re-formatted (its
    fingerprint unchanged) and whose anchored transform still applies: the transform's
    result (beside the conflict file) is taken as the resolution (``rebase --continue``).
    Returns the resumed rebase row when that gives a clean carry, else None (the conflict
    file is put back)."""
    from patchq.commands import rebase as rebase_cmd

    if p["status"] != "conflict" or p.get("transform") != "applies":
        return None
    units = [u for u in p.get("units", []) if u.get("merge") == "conflict"]
    if not units or any(u.get("upstream_changed") or len(u.get("files", [])) < 2 for u in units):
        return None
    kept = {}
    for u in units:
        conflict, transformed = Path(u["files"][0]), Path(u["files"][1])
        kept[conflict] = conflict.read_text(encoding="utf-8")
        shutil.copyfile(transformed, conflict)
    fresh = Series(series.root, series.anchors_root, series.profiles, {}, location=series.location)
    again = rebase_cmd.run(fresh, to, None, [p["id"]], True, work, True)[0]["patches"][0]
    if again["status"] == "clean":
        shutil.rmtree(work / to / p["id"], ignore_errors=True)
        return again
    for path, text in kept.items():  # not carried after all: the conflict stays as the rebase wrote it
        path.write_text(text, encoding="utf-8")
    return None


def _record_release(series: Series, to: str, rows: list[PatchCheck]) -> list[str]:
    """The release in the series, for every patch the check does not block (a blocked one is a
    person's review): its fingerprints in ``anchors/``, and its expected output in the store
    (``series/diffs/<patch>.expect.toml`` and ``series/diffs/TO/<patch>.diff``, as ``patchq test
    --regen --releases TO`` records them), so ``patchq test`` checks the release from now on.
    Returns the paths written."""
    from patchq import discovery, testing
    from patchq.authoring import fingerprints

    ok = [r.id for r in rows if not r.blocking]
    written = [str(p) for p in fingerprints.record(series, [to], patch_ids=ok)] if ok else []
    loc = series.location or discovery.Location(series.root, series.anchors_root, "--series")
    for pid in ok:
        done = testing.run_case(testing.Case(loc, pid, to), regen=True)
        written += [w for w in done.written if w not in written]
    return written


def _reviews(source: CodeSource, series: Series, rows: list[PatchCheck]) -> list[dict]:
    """The reviews a person must make: per patch ``patchq review``'s text (the three-way view
    of each drifted definition and the upstream lines behind each finding)."""
    from patchq.commands import review

    out = []
    for r in rows:
        doc, _ = review.run(source, series, r.id, accept=False)
        out.append({"id": r.id, "status": r.status, "reason": r.reason, "view": review.render_text(doc)})
    return out


def _out_dir(pipe: Pipeline, series: Series, to: str) -> Path:
    return Path(pipe.out) if pipe.out else series.root.parent / OUT_DIR / to


def _matrix(series: Series, names: list[str], to: str, pipe: Pipeline, out: Path) -> dict:
    """Step 6: the matrix of ``names`` over ``patchq matrix``'s default range (or
    ``pipe.matrix_releases``) and ``to``, at ``pipe.levels``, written into ``out``; its summary."""
    from patchq.compat import matrix

    versions = _matrix_releases(series, to, pipe.matrix_releases)
    levels = _level_records(pipe.levels, versions, names, series)
    doc = matrix.build(versions, names, str(series.root), pipe.workers, levels, [])
    matrix.write(doc, out)
    blocking = sum(c["blocking"] for per in doc["cells"].values() for row in per.values() for c in row.values())
    column = {name: {pid: _cell(row.get(to)) for pid, row in doc["cells"][name].items()} for name in names}
    return {"releases": doc["releases"], "levels": list(pipe.levels), "dir": str(out), "exit_code": doc["exit_code"],
            "errors": doc["errors"], "blocking": blocking, "column": column,
            "changes": {name: {pid: [c for c in ch if c["release"] == to] for pid, ch in per.items()
                               if any(c["release"] == to for c in ch)}
                        for name, per in doc["changes"].items()}}


def _cell(cell: dict | None) -> str:
    """A matrix cell as the column shows it: ``applies (src)``; a blocking one in bold."""
    if not cell:
        return "-"
    if cell.get("blocking"):
        return f"**{cell['status']}**"
    from patchq.compat.matrix_render import LEVEL_SHORT

    return f"{cell['status']} ({LEVEL_SHORT.get(cell.get('level'), cell.get('level'))})"


def _matrix_releases(series: Series, to: str, spec: str | None) -> list[str]:
    """``spec`` among the releases the index lists, those cached and ``to``; without it
    ``patchq matrix``'s default range (from its floor to the newest release the index lists,
    or, when no list can be had, the releases the series has fingerprints for). ``to`` is
    always in it."""
    from packaging.version import Version

    from patchq.commands import matrix as matrix_cmd
    from patchq.vllmdist import releases

    try:
        known = releases.list_releases()
    except releases.ReleaseError:
        known = []
    if spec is None:
        if known:
            chosen = [Version(v) for v in matrix_cmd.default_releases(installed=None)]
        else:  # no release list: what the series was verified on
            seen = {v for pid in series.all_patch_ids() for a in series.patch(pid).anchors.values()
                    for v in a.fingerprints}
            chosen = releases.filter_releases(seen, f">={matrix_cmd.DEFAULT_FLOOR}")
    else:
        try:
            chosen = releases.filter_releases({*known, *releases.cached_releases(), Version(to)}, spec)
        except releases.ReleaseError as exc:
            raise UsageError(f"--matrix-releases: {exc}") from None
    return [str(v) for v in sorted({*chosen, Version(to)})]


def _level_records(levels: tuple[str, ...], versions: list[str], names: list[str], series: Series) -> list[dict]:
    """The records of every evidence level beyond ``source`` (:data:`LEVELS`), from the module
    that produces it.

    Raises:
        UsageError: that module is not in this patchq.
    """
    import importlib

    out: list[dict] = []
    for level in levels:
        module = LEVELS[level]
        if module is None:
            continue
        try:
            producer = importlib.import_module(module)
        except ModuleNotFoundError:
            raise UsageError(f"--level {level}: this patchq has no {level} verb ({module}); the matrix runs "
                             f"at the source level (--level source)") from None
        out += producer.level_records(versions, names, series)
    return out


def _write_out(doc: UpgradeDoc, out: Path) -> None:
    """``upgrade.json`` and ``pull-request.md`` into ``out`` (the document's ``out`` and
    ``pull_request`` set first)."""
    from patchq.authoring import repowrite
    from patchq.commands import pullrequest

    doc["out"] = str(out)
    doc["pull_request"] = str(out / "pull-request.md")
    repowrite.write_file(out / "upgrade.json", json.dumps(doc, indent=1) + "\n")
    repowrite.write_file(out / "pull-request.md", pullrequest.render(doc))


def _row(check: PatchCheck, before: str | None, rebased: dict | None, apply_doc: ApplyDoc | None) -> dict:
    """One ``patches`` row: the check after the upgrade, the rebase, whether it is applied."""
    row = check.to_dict()
    outcome = next((p["status"] for p in (apply_doc["patches"] if apply_doc else []) if p["id"] == row["id"]), None)
    applied = bool(apply_doc and apply_doc["ok"] and outcome == "ok")
    return {"id": row["id"], "check": row["status"], "before": before, "reason": row["reason"],
            "blocking": row["blocking"], "rebase": rebased["status"] if rebased else None,
            "written": list(rebased["written"]) if rebased else [],
            "next": list(rebased["next_steps"]) if rebased else [], "applied": applied,
            "apply_status": outcome if apply_doc and apply_doc["ok"] else None}


def _next_steps(doc: UpgradeDoc, work: Path, committing: bool = False) -> list[str]:
    """What the user does next, most urgent first (``committing``: ``--commit`` commits what
    was written)."""
    out = _blocked_steps(doc, work)
    in_series = [w for p in doc["patches"] for w in p["written"] if not Path(w).is_relative_to(work)]
    if (in_series or doc["recorded"]) and doc["write"] and not committing:
        out.append("review and commit the series changes (`git diff`; --branch NAME --commit does it)")
    if out:
        return out
    to = doc["to"]
    if doc["installed"] is None:
        return []
    if doc["installed"] != to:
        again = "`patchq upgrade`" if doc["profile"] else "`patchq upgrade --profile NAME`"
        return [f"install it (`pip install vllm=={to}`), then {again}"]
    if doc["apply"] is not None and doc["apply"]["ok"]:
        drifted = [p["id"] for p in doc["patches"] if p["check"] == "applies-drifted"]
        if drifted and not doc["write"]:
            out.append(f"`patchq upgrade --write` records fingerprints for {', '.join(drifted)} on vllm {to}")
        if not doc["apply"]["noop"]:
            out.append(f"restart the server on the patched files: `patchq serve --profile {doc['apply']['profile']}`")
    elif doc["apply"] is None and doc["profile"] is None:
        out.append("`patchq apply --profile NAME` applies a profile here (`patchq list` shows them)")
    return out


def _blocked_steps(doc: UpgradeDoc, work: Path) -> list[str]:
    """The steps for what blocks: conflicts to resolve, a rebase to write, patches to
    review or change by hand, apply's refusal."""
    out: list[str] = []
    to, rows = doc["to"], doc["patches"]
    conflicts = [p["id"] for p in rows if p["rebase"] in ("conflict", "gone", "needs-variant", "failed-at-base")]
    unwritten = [p["id"] for p in rows if p["rebase"] == "clean" and not doc["write"]]
    review = [p["id"] for p in rows if p["check"] in ("review", "possibly-upstreamed") and p["id"] not in conflicts]
    by_hand = [p["id"] for p in rows if p["blocking"] and p["id"] not in conflicts + unwritten + review]
    out += [f"`patchq review {pid} --vllm {to}` shows what upstream changed under {pid}; `--accept` records "
            f"that you reviewed it, then `patchq upgrade` again" for pid in review]
    if conflicts:
        out.append(f"resolve {', '.join(conflicts)} in {work / to} (the steps above), then "
                   f"`patchq rebase --to {to} --continue --write` and `patchq upgrade` again")
    if unwritten:
        out.append(f"`patchq upgrade --write` records what the rebase proved for {', '.join(unwritten)} "
                   f"(variants, fingerprints, diffs) and applies")
    if by_hand:
        out.append(f"{', '.join(by_hand)} block(s) on vllm {to} (reasons above): change the series by hand, "
                   f"then `patchq upgrade` again")
    if doc["apply"] is not None and not doc["apply"]["ok"]:
        out.append(f"apply refused: {doc['apply']['error']}")
    return out


def render_text(doc: UpgradeDoc) -> str:
    """Per patch: check status, rebase outcome, applied or not; the matrix, the commit and the
    pull-request body when there are; then the next steps."""
    from patchq import report

    what = doc["profile"] or f"{len(doc['profiles'])} profiles ({', '.join(doc['profiles'])})"
    head = f"upgrade {what}: vllm {doc['from'] or '-'} -> {doc['to']}"
    if doc["installed"] != doc["to"]:
        head += f" (installed: {doc['installed'] or 'none'}; checked on the release, nothing applied)"
    out = [head]
    width = max((len(p["id"]) for p in doc["patches"]), default=0)
    for p in doc["patches"]:
        steps = [report.status_word(p["check"])]
        if p["rebase"]:
            steps.append("rebase " + report.status_word(p["rebase"])
                         + ("" if doc["write"] or p["rebase"] != "clean" else " (not written)"))
        if doc["apply"] is not None:
            skipped = p.get("apply_status") not in (None, "ok")  # upstreamed, superseded, ...: apply skips it
            steps.append(report.status_word("applied" if p["applied"] else "not applied")
                         + (f" ({p['apply_status']}: apply skips it)" if skipped else ""))
        out.append(f"  {p['id']:<{width}}  {' -> '.join(steps)}")
        if p["reason"] and (p["blocking"] or p["check"] != "applies"):
            out += report.wrap_lines(report.ranges_lower_first(p["reason"]), 6, "      ")
        out += [f"      wrote {w}" for w in p["written"]]
        out += [f"      {report.ranges_lower_first(s)}" for s in p["next"]]
    if doc["recorded"]:
        out.append(f"recorded vllm {doc['to']}: {len(doc['recorded'])} file(s) (fingerprints, diffs)")
    apply_doc = doc["apply"]
    if apply_doc is not None:
        last = [ln for ln in report.apply_text(apply_doc).splitlines() if not ln.startswith("next:")]
        out.append(last[-1])
    m = doc["matrix"]
    if m is not None:
        out.append(f"matrix: {len(m['releases'])} releases ({m['releases'][0]} .. {m['releases'][-1]}) x "
                   f"{len(doc['profiles'])} profiles at level(s) {', '.join(m['levels'])}; {m['blocking']} "
                   f"blocking cell(s): {m['dir']}")
    if doc["branch"] or doc["commit"]:
        out.append(f"branch {doc['branch'] or '(current)'}: " + (f"committed {doc['commit']}" if doc["commit"]
                                                                 else "nothing to commit"))
    if doc["pull_request"]:
        out.append(f"pull-request body: {doc['pull_request']}")
    out += [report.next_line(s) for s in doc["next"]]
    note = report.newer_note(doc.get("newest_release"), doc["profile"])
    if note:
        out.append(f"note: {note}")
    return "\n".join(out) + "\n"
