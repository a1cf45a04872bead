"""``patchq test [--patch ID] [--regen | --migrate] [--releases SPEC]``: the series' expected
output (:mod:`patchq.testing`).

Document ``patchq.test/1``: ``ok``, ``regen``, ``series`` (as in ``list``), ``goldens`` (the
directory: the store, ``series/diffs``; layout 1's when every case is in layout 1),
``cases`` [{``patch``, ``release`` (null: no expected output yet), ``status`` (the check
status observed, or null), ``ok``, ``problems`` [text], ``written`` [paths], ``warnings``
[text]: a blocking expected verdict recorded by a regen (added field), ``layout`` (added:
``diffs``, the store, or ``goldens``, layout 1 of a series repo written by an earlier
patchq)}], ``migrate`` (added: bool).
A regen records the named releases (``--releases``) and the patch's authoring releases
(the oldest its anchors have fingerprints for: where it was made), then checks every
recorded release: one that fails is recorded again, so a regen never leaves expected
output that fails. A blocking verdict on the release the patch was made on, or on one its
anchors record as verified, is never recorded as expected (:func:`patchq.testing.authored_on`,
:func:`patchq.testing.verified_on`): that case fails, naming why.
``--migrate`` moves layout-1 patches into the store (:func:`patchq.testing.migrate`).
``--probe`` also runs each patch's behavioural cases (``cases=``, :mod:`patchq.probe`) on
every release the store holds output of, each patch applied alone in the release's CPU
environment: one row per (patch, release) with ``level`` ``probe`` (added field; the other
rows have no ``level``), failing when the patched module does not import or a case fails;
a release whose environment cannot be had here is a failing row naming why (never a pass).
Exit 0 when every case passes (or was regenerated, or migrated), 1 when one fails.
"""

from __future__ import annotations

from patchq import testing
from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from patchq.documents import TestDoc

SCHEMA = "patchq.test/1"


def run(series_dir: str | None, patches: list[str], regen: bool, releases: str | None,
        migrate: bool = False, probe: bool = False) -> tuple[TestDoc, int]:
    """Verify (regenerate, migrate) the expected output of ``patches`` (default: all).
    Returns (document, exit code).

    Raises:
        UsageError: an unknown patch id, ``--releases`` without ``--regen``, ``--regen``
            with ``--migrate``.
        SeriesError: no series.
    """
    loc = testing.locate(None, series_dir)
    loaded = testing.load_series(loc)
    known = loaded.all_patch_ids()
    unknown = [p for p in patches if p not in known]
    if unknown:
        raise UsageError(f"unknown patch(es) {', '.join(unknown)}; known: {', '.join(known)}")
    if releases and not regen:
        raise UsageError("--releases goes with --regen (the releases to record)")
    if regen and migrate:
        raise UsageError("--migrate moves the recorded output as it is; run --regen before or after it")
    if migrate:
        rows = [_row(testing.migrate(loc, pid)) for pid in patches or known]
    else:
        rows = _test(loc, patches, regen, _wanted(releases))
    if probe:
        rows += _probe(loc, patches or known)
    ok = all(r["ok"] for r in rows)
    old = rows and all(r["layout"] == testing.LAYOUT1 for r in rows)  # a repo of an earlier patchq: as it said
    doc: TestDoc = {"schema": SCHEMA, "ok": ok, "regen": regen, "migrate": migrate, "series": loc.as_json(),
           "goldens": str(testing.goldens_root(loc) if old else testing.store_root(loc)), "cases": rows}
    return doc, EXIT_OK if ok else EXIT_PATCH_FAILED


def _wanted(releases: str | None) -> list[str] | None:
    """``--releases``: a list as given, or a range among the cached releases; None without it."""
    if not releases:
        return None
    if not any(op in releases for op in "<>=!~"):
        return [v.strip() for v in releases.split(",") if v.strip()]
    from patchq.vllmdist import releases as rel

    return [str(v) for v in rel.filter_releases(sorted(rel.cached_releases()), releases)]


def _probe(loc, patches: list[str]) -> list[dict]:
    """One row per (patch with cases, release of the store): the patch alone, probed."""
    from patchq.probe import merge
    from patchq.probe.run import ALONE, probe_release

    loaded = testing.load_series(loc)
    per_release: dict[str, list[str]] = {}
    for pid in patches:
        if loaded.patch(pid).cases:
            for rel in testing.case_releases(loc, pid):
                per_release.setdefault(rel, []).append(pid)
    rows = []
    for rel, pids in per_release.items():
        out = probe_release(loaded, rel, [ALONE + p for p in pids])
        cells = merge.by_cell(out.records)
        for pid in pids:
            levels = cells.get((ALONE + pid, pid), {})
            problems = [f"{pid} on vllm {rel}: {lv} level {r['result']}: {r.get('detail', '')}"
                        for lv, r in levels.items() if r.get("result") in ("fail", "not-probeable")]
            status = merge.failure(levels)
            rows.append({"patch": pid, "release": rel, "status": status[0] if status else
                         levels.get("probe", {}).get("result"), "ok": not problems, "problems": problems,
                         "written": [], "warnings": [], "layout": testing.layout_of(loc, pid), "level": "probe"})
    return rows


def _row(out: testing.Outcome) -> dict:
    case = out.case
    return {"patch": case.patch_id, "release": case.release, "status": out.status, "ok": out.ok,
            "problems": out.problems, "written": out.written, "warnings": out.warnings, "layout": case.layout}


def _test(loc, patches: list[str], regen: bool, wanted: list[str] | None) -> list[dict]:
    """Every case verified (or regenerated); with ``wanted``, exactly those releases recorded."""
    cases = testing.cases(location=loc, patches=patches or None)
    if wanted is not None:
        cases = [testing.Case(loc, pid, None) for pid in dict.fromkeys(c.patch_id for c in cases)]
    rows = [_row(testing.run_case(case, regen=regen, releases=wanted)) for case in cases]
    if regen and wanted is None:  # each patch's releases as recorded must pass together
        for pid in dict.fromkeys(c.patch_id for c in cases):
            settle = testing.Outcome(testing.Case(loc, pid, None))
            testing._settle_goldens(settle.case, settle)
            if settle.problems or settle.written:
                rows.append(_row(settle))
    return rows


def render_text(doc: TestDoc) -> str:
    """One line per case, then the problems."""
    verb = "migrate" if doc.get("migrate") else "regenerate" if doc["regen"] else "test"
    lines = [f"{verb} expected output in {doc['goldens']} ({doc['series']['dir']})"]
    for r in doc["cases"]:
        lines += _case_lines(r)
    failed = sum(not r["ok"] for r in doc["cases"])
    warned = sum(len(r.get("warnings", [])) for r in doc["cases"])
    lines.append(f"{len(doc['cases'])} case(s), {failed} failed" + (f", {warned} warning(s)" if warned else ""))
    old = list(dict.fromkeys(r["patch"] for r in doc["cases"] if r.get("layout") == testing.LAYOUT1))
    if old and not doc.get("migrate"):
        lines.append(f"{len(old)} patch(es) in layout 1 ({', '.join(old)}): `patchq test --migrate` moves them "
                     f"to the store (series/diffs)")
    if failed and not doc["regen"]:
        lines.append(_next(doc))
    return "\n".join(lines) + "\n"


def _case_lines(r: dict) -> list[str]:
    mark = "ok  " if r["ok"] else "FAIL"
    wrote = f"  wrote {len(r['written'])} file(s)" if r["written"] else ""
    case = f"{r['patch']}@{r['release']}" if r["release"] else \
        f"{r['patch']} ({'its first expected output' if r['written'] else 'no expected output yet'})"
    lines = [f"  {mark} {case}  {r['status'] or ''}{wrote}".rstrip()]
    lines += [f"       {line}" for p in r["problems"] for line in p.splitlines()]
    return lines + [f"  WARN {w}" for w in r.get("warnings", [])]


def _next(doc: TestDoc) -> str:
    from patchq.report import next_line

    bad = [r for r in doc["cases"] if not r["ok"]]
    ids = " ".join(f"--patch {p}" for p in dict.fromkeys(r["patch"] for r in bad))
    if doc.get("migrate"):
        return next_line(f"make its layout-1 goldens pass (`patchq test {ids}`), then `patchq test --migrate {ids}`")
    if all(r["release"] is None for r in bad):  # no expected output yet
        return next_line(f"`patchq test --regen {ids}` records the expected output")
    return next_line(f"fix the patch, or when the change is intended `patchq test --regen {ids}`")
