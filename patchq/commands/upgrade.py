"""``patchq upgrade [--profile P] [--to X] [--write]``: after a vLLM upgrade, in one verb.

What a user otherwise strings together (``status``, ``check``, ``rebase``, ``apply``):

1. the profile: ``--profile``, else the one the environment's journal names (the journal
   outlives ``pip install vllm==X``; :mod:`patchq.env.status`);
2. ``check`` every patch of it on the installed release (``--to X``: on release X from
   PyPI, before installing it);
3. ``rebase`` to that release the patches the check does not call verified: drifted,
   moved, conflicting or gone definitions, and releases no variant covers
   (:data:`REBASE`); the series is written only with ``--write`` (widened variants,
   fingerprints, rendered diffs; conflicts always go to the work directory), and then
   checked again;
4. ``apply`` the profile when nothing blocks and X is the installed release.

It prints per patch what happened (check status, rebase outcome, applied or not) and what
the user must do next. ``--write`` refuses the bundled series inside a patchq install
(it would be lost with the next install; ``patchq init`` makes a series repo).

``patchq.upgrade/1``: ``ok``, ``profile``, ``from`` (the release the journal was written
on, or null), ``to``, ``installed``, ``write``, ``patches`` [{``id``, ``check`` (its
``patchq.check/1`` status after the upgrade), ``reason``, ``blocking``, ``rebase`` (the
``patchq.rebase/1`` status, or null when not rebased), ``written`` [paths], ``next``
[steps], ``applied`` (bool), ``apply_status`` (apply's status for it: ``ok``, ``upstreamed``,
...; null when nothing was applied)}], ``apply`` (the ``patchq.apply/1`` document, or null when
nothing was applied), ``next`` [steps], ``series``. Exit 0 when the installed vLLM carries
the profile (or, with ``--to`` a release not installed, when every patch is ready for it);
1 when a patch needs a human or ``--write``; apply's codes (4, 5, ...) when apply refuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, UsageError
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.compat.check import PatchCheck
    from patchq.documents import ApplyDoc, UpgradeDoc

SCHEMA = "patchq.upgrade/1"

#: check statuses a rebase can carry forward (the definition changed, moved or went).
REBASE = ("applies-drifted", "moved", "conflict", "gone")


def run(series: Series, target: CodeSource, profile: str | None, to: str | None, write: bool,
        workdir: str | None = None) -> tuple[UpgradeDoc, int]:
    """Check, rebase what needs it, apply (module docstring). Returns (document, exit code).

    Raises:
        UsageError: no profile given or applied; an unknown profile; ``--write`` on the
            bundled series; a malformed ``--to``.
        TargetNotFound: release ``to`` cannot be had.
    """
    from patchq.commands import rebase as rebase_cmd
    from patchq.commands import version_arg
    from patchq.compat import check as checking
    from patchq.env.state import StateDir
    from patchq.vllmdist.sources import release_source

    journal = StateDir(target.root).read()
    profile = _profile(series, target, profile, journal.profile)
    if write:  # refused before any check runs, by the rule every series write follows
        from patchq.authoring.repowrite import refuse_bundled

        refuse_bundled(series.root, "--write")
    wanted = version_arg(to, "--to") if to else target.version
    installed = wanted == target.version
    source = target if installed else release_source(str(wanted))
    rows = checking.check(source, series.patches_of(profile), keep_plan=True)  # apply below reuses its plan
    needs = [r.id for r in rows if r.status in REBASE or r.tried_variant]
    rebased: dict[str, dict] = {}
    work = Path(workdir) if workdir else series.root.parent / ".patchq-rebase"
    if needs:
        rebase_doc, _ = rebase_cmd.run(series, str(wanted), None, needs, write, work)
        rebased = {p["id"]: p for p in rebase_doc["patches"]}
        if write and any(p["written"] for p in rebased.values()):
            series = Series(series.root, series.anchors_root, series.profiles, {}, location=series.location)
            # what the written series does now
            rows = checking.check(source, series.patches_of(profile), keep_plan=True)
    blocking = [r for r in rows if r.blocking]
    apply_doc: ApplyDoc | None = None
    code = EXIT_OK if not blocking else EXIT_PATCH_FAILED
    if installed and not blocking:
        from patchq.commands import apply as apply_cmd

        apply_doc, code = apply_cmd.apply(target, series, profile)
    patches = [_row(r, rebased.get(r.id), apply_doc) for r in rows]
    doc: UpgradeDoc = {"schema": SCHEMA, "ok": code == EXIT_OK, "profile": profile, "from": journal.vllm,
                       "to": str(wanted), "installed": str(target.version), "write": write, "patches": patches,
                       "apply": apply_doc, "series": series.location.as_json() if series.location else None,
                       "next": []}
    doc["next"] = _next_steps(doc, work)
    return doc, code


def _profile(series: Series, target: CodeSource, profile: str | None, applied: str | None) -> str:
    """The profile to carry: ``profile``, else the ``applied`` one (the journal's).

    Raises:
        UsageError: none given or applied; the applied one is not of this series; an
            unknown profile.
    """
    if not profile:
        if not applied:
            raise UsageError(f"no profile is applied in {target.root}: give --profile NAME "
                             f"(known: {', '.join(series.profiles)})")
        if profile is None and applied not in series.profiles:
            where = series.location.describe() if series.location else str(series.root)
            raise UsageError(f"the applied profile {applied!r} is not a profile of {where} (known: "
                             f"{', '.join(series.profiles)}): another series applied it; run patchq upgrade in "
                             f"that series repo or give its --series DIR")
        profile = applied
    series.profile(profile)  # an unknown profile: UsageError naming the known ones
    return profile


def _row(check: PatchCheck, rebased: dict | None, apply_doc: ApplyDoc | None) -> dict:
    """One ``patches`` row: the check after the upgrade, the rebase, whether it is applied."""
    row = check.to_dict()
    outcome = next((p["status"] for p in (apply_doc["patches"] if apply_doc else []) if p["id"] == row["id"]), None)
    applied = bool(apply_doc and apply_doc["ok"] and outcome == "ok")
    return {"id": row["id"], "check": row["status"], "reason": row["reason"], "blocking": row["blocking"],
            "rebase": rebased["status"] if rebased else None,
            "written": list(rebased["written"]) if rebased else [],
            "next": list(rebased["next_steps"]) if rebased else [], "applied": applied,
            "apply_status": outcome if apply_doc and apply_doc["ok"] else None}


def _next_steps(doc: UpgradeDoc, work: Path) -> list[str]:
    """What the user does next, most urgent first."""
    out = _blocked_steps(doc, work)
    if any(p["written"] for p in doc["patches"]) and doc["write"]:
        out.append("review and commit the series changes (`git diff`), and `patchq test --regen` for their goldens")
    if out:
        return out
    to = doc["to"]
    if doc["installed"] != to:
        return [f"install it (`pip install vllm=={to}`), then `patchq upgrade`"]
    if doc["apply"] is not None and doc["apply"]["ok"]:
        drifted = [p["id"] for p in doc["patches"] if p["check"] == "applies-drifted"]
        if drifted:
            out.append(f"`patchq upgrade --write` records fingerprints for {', '.join(drifted)} on vllm {to}")
        if not doc["apply"]["noop"]:
            out.append(f"restart the server on the patched files: `patchq serve --profile {doc['profile']}`")
    return out


def _blocked_steps(doc: UpgradeDoc, work: Path) -> list[str]:
    """The steps for what blocks: conflicts to resolve, a rebase to write, patches to
    change by hand, apply's refusal."""
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
    """Per patch: check status, rebase outcome, applied or not; then the next steps."""
    from patchq import report

    head = f"upgrade {doc['profile']}: vllm {doc['from'] or '-'} -> {doc['to']}"
    if doc["installed"] != doc["to"]:
        head += f" (installed: {doc['installed']}; checked on the release, nothing applied)"
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
    apply_doc = doc["apply"]
    if apply_doc is not None:
        last = [ln for ln in report.apply_text(apply_doc).splitlines() if not ln.startswith("next:")]
        out.append(last[-1])
    out += [report.next_line(s) for s in doc["next"]]
    return "\n".join(out) + "\n"
