"""``patchq probe --vllm X (--profile P | --patch ID | --all)``: the import and probe levels
of a release, on CPU (:mod:`patchq.probe`).

Document ``patchq.probe/1``::

    {"schema": "patchq.probe/1", "ok": true, "exit_code": 0,
     "release": "0.34.0", "dist": "vllm", "probeable": true, "why": null,
     "targets": ["dense"],
     "env": {"dir", "platform", "python", "torch": {"version", "pin", "exact", "note"},
             "dists": 58, "left_out": {req: why}, "unprovided": {module: why},
             "unresolved": {req: why}, "conflicts": {what: why}, "bytes": {...},
             "seconds": {...}},                          # null when not probeable
     "applied": {"dense": {"ok", "exit_code", "error", "patches": {id: status}}},
     "records": [RECORD, ...],                          # patchq.probe.run's records
     "cells": [{"target", "patch", "import", "probe", "blocking", "status"}],
     "seconds": {"dense": 21.3, "total": 40.2},
     "series": SERIES}

``records`` have the shape ``patchq matrix --levels`` merges, so the document is itself a
levels file. ``cells`` sums the records per (target, patch): ``status`` ``fails-import`` or
``fails-probe`` when that level failed (``blocking``: the cell blocks, as a failed apply
does), else the deepest level reached (``probe``, ``import``) or ``not-probeable`` /
``skip``. Exit 0 when no cell blocks, 1 when one does, 3 when the release's environment
cannot be had here (:class:`patchq.errors.NotProbeable`: every cell is not probeable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from patchq.errors import EXIT_NOT_FOUND, EXIT_OK, EXIT_PATCH_FAILED, UsageError

if TYPE_CHECKING:
    from patchq.documents import ProbeDoc
    from patchq.series import Series

SCHEMA = "patchq.probe/1"


def targets_of(series: Series, profile: str | None, patches: list[str], all_: bool) -> list[str]:
    """The targets to probe: the profile, each patch alone (``patch:<id>``), or every profile.

    Raises:
        UsageError: not exactly one of the three, an unknown profile or patch.
    """
    from patchq.probe.run import ALONE

    if sum(map(bool, (profile, patches, all_))) != 1:
        raise UsageError("give exactly one of --profile NAME, --patch ID or --all")
    if all_:
        return list(series.profiles)
    if profile:
        series.profile_ids(profile)
        return [profile]
    known = series.all_patch_ids()
    unknown = [p for p in patches if p not in known]
    if unknown:
        raise UsageError(f"unknown patch(es) {', '.join(unknown)}; known: {', '.join(known)}")
    return [ALONE + p for p in patches]


def run(series: Series, release: str, targets: list[str], *, dist: str | None = None, pristine: bool = False,
        rebuild: bool = False) -> tuple[ProbeDoc, int]:
    """Probe ``targets`` on ``release``. Returns (document, exit code) (module docstring).

    Raises:
        UsageError: bad version, unknown profile or patch. SeriesError: broken series data.
        TargetNotFound: the release cannot be had.
    """
    from patchq.commands import version_arg
    from patchq.probe import merge
    from patchq.probe.run import probe_release

    version_arg(release, "--vllm")
    out = probe_release(series, release, targets, dist=dist or "vllm", pristine=pristine, rebuild=rebuild)
    cells = merge.cells(out.records)
    blocking = any(c["blocking"] for c in cells)
    code = EXIT_NOT_FOUND if out.why else EXIT_PATCH_FAILED if blocking else EXIT_OK
    env: dict[str, Any] | None = None
    if out.env is not None:
        d = out.env.doc
        env = {"dir": str(out.env.dir), "platform": d["platform"], "python": d["python"], "torch": d["torch"],
               "dists": len(d["dists"]), "left_out": d["left_out"], "unprovided": d["unprovided"],
               "unresolved": d["unresolved"], "conflicts": d["conflicts"], "bytes": d["bytes"],
               "seconds": d["seconds"]}
    loc = series.location
    doc: ProbeDoc = {
        "schema": SCHEMA, "ok": code == EXIT_OK, "exit_code": code, "release": out.release, "dist": out.dist,
        "probeable": out.why is None, "why": out.why, "targets": list(targets), "env": env, "applied": out.applied,
        "records": out.records, "cells": cells, "seconds": out.seconds,
        "series": loc.as_json() if loc is not None else None,
    }
    return doc, code


def level_records(versions: list[str], profiles: list[str], series: Series, dist: str = "vllm") -> list[dict]:
    """The import and probe records of ``profiles`` on each release of ``versions``, as
    ``patchq matrix --levels FILE`` reads them (the matrix's and the upgrade pipeline's
    ``--level probe``); a release that cannot be probed here gives ``not-probeable`` records."""
    from patchq.probe.run import probe_release

    out: list[dict] = []
    for v in versions:
        out += probe_release(series, v, profiles, dist=dist).records
    return out


def render_text(doc: ProbeDoc) -> str:
    """A line per cell, the failing cases, then the environment's torch and cost."""
    from patchq.report import clip, next_line

    lines = [f"probe vllm {doc['release']} ({doc['dist']})"]
    if not doc["probeable"]:
        lines.append(f"  not probeable here: {doc['why']}")
    env = doc.get("env")
    if env:
        t = env["torch"]
        mb = sum(env["bytes"].get(k, 0) for k in ("wheel_bytes", "vllm_tree")) / 1e6
        lines.append(f"  environment: torch {t['version']}{'' if t['exact'] else ' (' + t['note'] + ')'}; "
                     f"{env['dists']} distributions; {mb:.0f} MB fetched to build it")
    for c in doc["cells"]:
        mark = "FAIL" if c["blocking"] else "ok  " if c["status"] in ("probe", "import") else "--  "
        lines.append(f"  {mark} {c['target']:<14} {c['patch']:<18} {c['status']}")
    for r in doc["records"]:
        if r["result"] == "fail" and r["profile"] != "pristine":
            lines.append(f"       {r['patch']} ({r['level']}): {clip(r['detail'], 600)}")
        elif r["result"] == "not-probeable" and r["level"] == "import":
            lines.append(f"       {r['patch']}: not probeable: {clip(r['detail'], 300)}")
    pristine = [r for r in doc["records"] if r["profile"] == "pristine"]
    for r in pristine:
        broken = r.get("claims_broken") or []
        lines.append(f"  pristine {r['patch']}: {r['result']}" + (f" ({'; '.join(broken)})" if broken else ""))
    lines.append(f"{len(doc['cells'])} cell(s), {sum(c['blocking'] for c in doc['cells'])} blocking, "
                 f"{doc['seconds'].get('total', 0):.0f} s")
    if any(c["blocking"] for c in doc["cells"]):
        lines.append(next_line("a failing case names its frame: fix the patch (or the case), then probe again"))
    return "\n".join(lines) + "\n"


def deepen(series: Series, doc: Any, release: str, profile: str | None, patches: list[str], all_: bool,
           dist: str | None) -> tuple[Any, int]:
    """``check --level probe``: the check document ``doc`` with the import and probe levels
    of ``release`` merged in (:func:`patchq.probe.merge.deepen_check`); ``--all`` and
    ``--patch`` probe each patch alone. Returns (document, exit code)."""
    from patchq.probe import merge
    from patchq.probe.run import ALONE, probe_release

    if profile:
        targets, target_of = [profile], {pid: profile for pid in series.profile_ids(profile)}
    else:
        ids = patches or ([r["id"] for r in doc["patches"]] if all_ else [])
        targets, target_of = [ALONE + p for p in ids], {p: ALONE + p for p in ids}
    out = probe_release(series, release, targets, dist=dist or "vllm")
    merge.deepen_check(doc, out.records, target_of, out.why)
    return doc, doc["exit_code"]
