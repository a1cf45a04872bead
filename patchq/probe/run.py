"""The import and probe levels of one vLLM release: apply, import, run the patches' cases.

For a release and a list of *targets* (a profile, or one patch alone), in the release's
CPU environment (:mod:`patchq.probe.env`):

1. a fresh copy of the release's vLLM (``<root>/runs/<dist>-<version>/site``: the cached
   release tree hard-linked, so a copy costs no disk; patchq replaces files, never
   writes through a link), with ``patchq_runtime`` linked beside it;
2. ``pristine`` (when asked): every case of every patch of the targets runs on the
   unpatched copy: evidence of what upstream does, and the check of a case's
   ``pristine=`` claim;
3. per target: ``apply`` (the converge every apply does, so the previous target's
   patches are reverted; a target with the same patches as an earlier one, as the Spark
   series' ``mtp`` and ``base``, takes that one's records, saying so), the environment
   made to import the changed modules (built on first use), then one fresh interpreter
   (:mod:`patchq.probe.child`) that imports every module a patch changed (the **import**
   level: it imports, its file carries the patch's sentinel, the patch's
   ``runtime_names`` resolve there) and runs each applied patch's cases (the **probe**
   level). A module that fails to import is imported again from the pristine release:
   when that fails too, the release's own module does not import here and the cell is
   *not probeable* (never passed), else the patch broke it.

Each result is a levels record (the ``patchq.levels/1`` shape ``patchq matrix --levels``
merges)::

    {"release", "profile", "patch", "hash", "level": "import" | "probe",
     "result": "ok" | "fail" | "skip" | "not-probeable", "detail", "seconds",
     "cases": [CASE]}   # probe records; CASE as in patchq.probe.child

``result``: ``skip`` when the level is not reached for a reason that is no failure (the
patch is not applied there: upstreamed, absent, not applicable; it carries no case;
every case is for other releases); ``not-probeable`` when the environment cannot show it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchq.errors import NotProbeable

if TYPE_CHECKING:
    from patchq.model import Patch
    from patchq.probe.env import ProbeEnv
    from patchq.series import Series

#: the profile name of the records of cases run on the unpatched release
PRISTINE = "pristine"
#: the target name of one patch alone (``patchq test --probe``)
ALONE = "patch:"


@dataclass
class Outcome:
    """What :func:`probe_release` found: the records, per target its apply result, and
    the environment (``env`` None and ``why`` set when the release is not probeable)."""

    release: str
    dist: str
    records: list[dict[str, Any]] = field(default_factory=list)
    applied: dict[str, dict[str, Any]] = field(default_factory=dict)
    env: ProbeEnv | None = None
    why: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def module_of(relpath: str) -> str:
    """``vllm/a/b.py`` -> ``vllm.a.b``; ``vllm/a/__init__.py`` -> ``vllm.a``."""
    mod = relpath[:-3].replace("/", ".") if relpath.endswith(".py") else relpath.replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def fresh_site(env: ProbeEnv, run_dir: Path) -> Path:
    """``run_dir/site``: a new copy of the release's ``vllm/`` and dist-info (hard links to the
    cached tree; copies where links cannot be made) and a link to ``patchq_runtime``
    (patched modules import it; apply checks that they can). The old copy is removed."""
    import importlib.util

    site = run_dir / "site"
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    for part in ("vllm", env.dist_info.name):
        shutil.copytree(env.tree / part, site / part, copy_function=link)
    spec = importlib.util.find_spec("patchq_runtime")
    if spec is not None and spec.submodule_search_locations:
        os.symlink(list(spec.submodule_search_locations)[0], site / "patchq_runtime")
    return site


def target_modules(patches: Mapping[str, list[Patch]], release: str, site: Path) -> list[str]:
    """The modules the patches' anchors name for ``release`` (the variant that applies
    there), those present in ``site``: what the environment must import."""
    out = set()
    for wanted in patches.values():
        for p in wanted:
            variant = p.variant_for(release)
            for aid in (variant.edits if variant is not None else {}):
                spec = p.anchors.get(aid)
                if spec is not None and any((site / rel).is_file() for rel in spec.module_paths):
                    out.add(spec.module)
    return sorted(out)


def _targets_patches(series: Series, targets: Sequence[str]) -> dict[str, list[Patch]]:
    out = {}
    for name in targets:
        out[name] = [series.patch(name[len(ALONE):])] if name.startswith(ALONE) else series.patches_of(name)
    return out


def probe_release(series: Series, release: str, targets: Sequence[str], *, dist: str = "vllm",
                  pristine: bool = False, rebuild: bool = False) -> Outcome:
    """The import and probe records of ``targets`` (profile names, or ``patch:<id>``) on
    ``release`` (module docstring). A release whose environment cannot be had gives
    ``not-probeable`` records for every applied patch, saying why.

    Raises:
        UsageError: unknown profile or patch. SeriesError: broken series data.
        TargetNotFound: the release cannot be had.
    """
    from filelock import FileLock

    from patchq.probe import env as env_mod

    t0 = time.perf_counter()
    patches = _targets_patches(series, targets)
    out = Outcome(release, dist)
    lockdir = env_mod.root() / "envs"
    lockdir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lockdir / f".{env_mod.env_key(release, dist)}.lock")):
        try:
            env = env_mod.load(release, dist, rebuild=rebuild)
        except NotProbeable as exc:
            out.why = str(exc)
            _not_probeable(series, out, release, patches)
            out.seconds["total"] = round(time.perf_counter() - t0, 1)
            return out
        out.release = env.release
        out.env = env
        run_dir = env_mod.root() / "runs" / env_mod.env_key(release, dist)
        links = env_mod.patchq_paths(run_dir / "patchq")
        site = fresh_site(env, run_dir)
        try:
            env.ensure(target_modules(patches, env.release, site), site, [links])  # the scan: many at once
            if pristine:
                every = list({p.id: p for ps in patches.values() for p in ps}.values())
                _pristine(series, env, out, site, links, every)
            done: dict[tuple[str, ...], str] = {}
            for name, wanted in patches.items():
                same = done.get(tuple(p.id for p in wanted))
                if same is not None:  # the same patches as an earlier target (mtp and base): the same copy
                    out.records += [dict(r, profile=name, detail=f"{r['detail']} (as {same}: the same patches)")
                                    for r in out.records if r["profile"] == same]
                    out.applied[name] = out.applied[same]
                    continue
                t1 = time.perf_counter()
                _target(series, env, out, site, links, name, wanted)
                out.seconds[name] = round(time.perf_counter() - t1, 1)
                done[tuple(p.id for p in wanted)] = name
        finally:
            shutil.rmtree(site, ignore_errors=True)
    out.seconds["total"] = round(time.perf_counter() - t0, 1)
    return out


def _not_probeable(series: Series, out: Outcome, release: str, patches: Mapping[str, list[Patch]]) -> None:
    for name, wanted in patches.items():
        for p in wanted:
            for level in ("import", "probe"):
                out.records.append(_record(release, name, p, level, "not-probeable", out.why or ""))


def _record(release: str, target: str, patch: Patch, level: str, result: str, detail: str,
            seconds: float | None = None, **more: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"release": release, "profile": target, "patch": patch.id, "hash": patch.hash,
                           "level": level, "result": result, "detail": detail}
    if seconds is not None:
        rec["seconds"] = round(seconds, 2)
    rec.update(more)
    return rec


def _series_ref(series: Series) -> dict[str, str]:
    return {"dir": str(series.root), "anchors": str(series.anchors_root)}


def _child(env: ProbeEnv, job: dict[str, Any], site: Path, links: Path) -> dict[str, Any]:
    """Run a child; a module a ModuleNotFoundError names that a requirement of the release
    provides is installed and the child run again (a case may import more than the scan saw)."""
    from patchq.probe import env as env_mod

    for _ in range(4):
        res = env_mod.run_child(env, job, site, [links])
        missing = [m for m in res.get("missing", []) if m not in env.doc["unprovided"]]
        if not missing or not env.grow(missing, "imported by a case or a patched module"):
            return res
    return res


def _pristine(series: Series, env: ProbeEnv, out: Outcome, site: Path, links: Path, patches: list[Patch]) -> None:
    with_cases = [p for p in patches if p.cases]
    if not with_cases:
        return
    t0 = time.perf_counter()
    res = _child(env, {"mode": "run", "imports": [], "release": env.release, "series": _series_ref(series),
                       "cases": {p.id: [c.name for c in p.cases] for p in with_cases}}, site, links)
    for p in with_cases:
        rows = res.get("cases", {}).get(p.id)
        if rows is None:
            out.records.append(_record(env.release, PRISTINE, p, "probe", "not-probeable",
                                       res.get("error") or "the cases did not run", time.perf_counter() - t0))
            continue
        claims = {c.name: c.pristine for c in p.cases if c.pristine}
        notes = [f"{r['name']}: claimed to {claims[r['name']].rstrip('s')} on the unpatched release, "
                 f"{'passed' if r['result'] == 'ok' else 'failed'}" for r in rows if r["name"] in claims and
                 r["result"] != "skip" and (r["result"] == "ok") != (claims[r["name"]] == "passes")]
        result, detail = _case_result(rows)
        out.records.append(_record(env.release, PRISTINE, p, "probe", result, detail, time.perf_counter() - t0,
                                   cases=rows, claims_broken=notes))


def _case_result(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """(result, detail) of a patch's case rows."""
    failed = [r for r in rows if r["result"] == "fail"]
    ran = [r for r in rows if r["result"] == "ok"]
    if failed:
        return "fail", "; ".join(f"case {r['name']}: {r['error']} ({r.get('case_frame') or r.get('frame')})"
                                 for r in failed)
    if not ran:
        return "skip", ("every case is for other releases: " + ", ".join(r["name"] for r in rows)) if rows else \
            "the patch carries no case"
    return "ok", f"{len(ran)} case(s) passed: " + ", ".join(r["name"] for r in ran) + \
        (f"; skipped {', '.join(r['name'] for r in rows if r['result'] == 'skip')}" if len(ran) < len(rows) else "")


def _target(series: Series, env: ProbeEnv, out: Outcome, site: Path, links: Path, name: str,
            wanted: list[Patch]) -> None:
    """Apply one target, then its import and probe levels (module docstring)."""
    from patchq.env.converge import converge
    from patchq.errors import PatchqError, PlanFailed
    from patchq.hashing import series_summary
    from patchq.report import patch_rows
    from patchq.vllmdist.sources import installed

    target = installed(site)
    digest = series_summary(series.root, series.anchors_root, syntax=True)
    modules = sorted({rel for rels in digest["modules"].values() for rel in rels})
    profile = None if name.startswith(ALONE) else name
    try:  # apply's converge (patchq apply); the copy is no environment this interpreter runs
        converged = converge(target, wanted, profile=profile, summary=digest, modules=modules)
        doc: dict[str, Any] = {"error": None, "patches": patch_rows(converged.plan)}
        code = 0
    except PlanFailed as exc:
        doc, code = {"error": str(exc), "patches": patch_rows(exc.plan)}, exc.exit_code
    except PatchqError as exc:
        doc, code = {"error": str(exc), "patches": []}, exc.exit_code
    rows = {r["id"]: r for r in doc["patches"]}
    out.applied[name] = {"ok": code == 0, "exit_code": code, "error": doc.get("error"),
                         "patches": {pid: r["status"] for pid, r in rows.items()}}
    applied = [p for p in wanted if code == 0 and rows.get(p.id, {}).get("status") == "ok"]
    for p in wanted:
        if p in applied:
            continue
        row = rows.get(p.id)
        why = (f"not applied: {row['status']}" + (f" ({row.get('reason')})" if row.get("reason") else "")) if row \
            and code == 0 else f"apply failed (exit {code}): {doc.get('error') or 'see patchq check'}"
        for level in ("import", "probe"):
            out.records.append(_record(env.release, name, p, level, "skip", why))
    if not applied:
        return
    imports = [{"module": module_of(f), "patch": p.id, "sentinel": f"patchq:{p.id}:"}
               for p in applied for f in rows[p.id]["files"] if f.endswith(".py")]
    t0 = time.perf_counter()
    env.ensure([i["module"] for i in imports], site, [links])
    res = _child(env, {"mode": "run", "imports": imports, "release": env.release, "series": _series_ref(series),
                       "runtime_names": {p.id: list(p.runtime_names) for p in applied if p.runtime_names},
                       "cases": {p.id: [c.name for c in p.cases] for p in applied if p.cases}}, site, links)
    spent = time.perf_counter() - t0
    if res.get("error"):
        for p in applied:
            for level in ("import", "probe"):
                out.records.append(_record(env.release, name, p, level, "fail", res["error"], spent))
        return
    failed = [m for m, r in res["imports"].items() if not r["ok"] and "lacks the sentinel" not in r["detail"]]
    pristine_errors = _pristine_imports(env, failed, links) if failed else {}
    for p in applied:
        mine = [i["module"] for i in imports if i["patch"] == p.id]
        bad = {m: res["imports"][m] for m in mine if not res["imports"].get(m, {}).get("ok")}
        names = {k: v for k, v in res.get("runtime_names", {}).get(p.id, {}).items() if v}
        upstream = {m: pristine_errors[m] for m in bad if pristine_errors.get(m)}
        secs = max((res["imports"].get(m, {}).get("seconds", 0) for m in mine), default=0)
        if bad and len(upstream) == len(bad):
            detail = "; ".join(f"{m}: the release's own module does not import here either: {e}"
                               for m, e in upstream.items())
            note = env.torch.note if not env.torch.exact else ""
            out.records.append(_record(env.release, name, p, "import", "not-probeable",
                                       detail + (f" (torch {env.torch.version}: {note})" if note else ""), secs))
            out.records.append(_record(env.release, name, p, "probe", "not-probeable", "the patched module(s) do "
                                       "not import here (see the import level)"))
            continue
        problems = [f"{m}: {r['detail']}" for m, r in bad.items() if m not in upstream]
        problems += [f"runtime name {n!r}: {why}" for n, why in names.items()]
        ok = not problems
        out.records.append(_record(env.release, name, p, "import", "ok" if ok else "fail",
                                   ("imported " + ", ".join(mine) + " (sentinel present"
                                    + (f"; runtime names {', '.join(p.runtime_names)} bound" if p.runtime_names
                                       else "") + ")") if ok else "; ".join(problems), secs))
        rows_ = res.get("cases", {}).get(p.id, [])
        if not ok and not names:
            out.records.append(_record(env.release, name, p, "probe", "skip", "not run: the import level failed"))
            continue
        result, detail = _case_result(rows_)
        out.records.append(_record(env.release, name, p, "probe", result, detail,
                                   sum(r.get("seconds", 0) for r in rows_), cases=rows_))


def _pristine_imports(env: ProbeEnv, modules: list[str], links: Path) -> dict[str, str | None]:
    """{module: its import error on the unpatched release, or None when it imports there}
    (imported from the cached release tree; byte code goes to the pycache prefix)."""
    from patchq.probe import env as env_mod

    res = env_mod.run_child(env, {"mode": "run", "imports": [{"module": m, "patch": "", "sentinel": ""}
                                                               for m in modules]}, env.tree, [links])
    if res.get("error"):
        return {m: res["error"] for m in modules}
    return {m: (None if r["ok"] else r["detail"]) for m, r in res["imports"].items()}
