"""``patchq test [--patch ID] [--regen] [--releases SPEC]``: the series' goldens (:mod:`patchq.testing`).

Document ``patchq.test/1``: ``ok``, ``regen``, ``series`` (as in ``list``), ``goldens`` (the
directory), ``cases`` [{``patch``, ``release`` (null: no goldens yet), ``status`` (the
check status observed, or null), ``ok``, ``problems`` [text], ``written`` [paths], ``warnings``
[text]: a blocking expected verdict recorded by a regen (added field)}].
A regen records the named releases (``--releases``) and the patch's authoring releases
(the oldest its anchors have fingerprints for: where it was made), then checks every release of its
``expect.toml``: one whose goldens fail is recorded again, so a regen never leaves
goldens that fail.
Exit 0 when every case passes (or was regenerated), 1 when one fails.
"""

from __future__ import annotations

import os

from patchq import testing
from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, UsageError

SCHEMA = "patchq.test/1"


def run(series_dir: str | None, patches: list[str], regen: bool, releases: str | None) -> tuple[dict, int]:
    """Verify (or regenerate) the goldens of ``patches`` (default: all). Returns (document, exit code).

    Raises:
        UsageError: an unknown patch id, ``--releases`` without ``--regen``, or the bundled
            series of a wheel (no goldens ship with it).
        SeriesError: no series.
    """
    loc = testing.locate(None, series_dir)
    if not regen and loc.origin == "bundled" and not os.path.isdir(testing.goldens_root(loc)):
        raise UsageError("the bundled series ships without goldens (they live in the patchq checkout's "
                         "tests/golden/patches): run patchq test in a series repo (`patchq init DIR`), or in the "
                         "checkout, or pass --series DIR")
    loaded = testing.load_series(loc)
    known = loaded.all_patch_ids()
    unknown = [p for p in patches if p not in known]
    if unknown:
        raise UsageError(f"unknown patch(es) {', '.join(unknown)}; known: {', '.join(known)}")
    if releases and not regen:
        raise UsageError("--releases goes with --regen (the releases to record)")
    wanted = None
    if releases:
        from patchq.vllmdist import releases as rel

        wanted = ([v.strip() for v in releases.split(",") if v.strip()] if _is_list(releases)
                  else [str(v) for v in rel.filter_releases(sorted(rel.cached_releases()), releases)])
    cases = testing.cases(location=loc, patches=patches or None)
    if wanted is not None:  # record exactly these releases
        cases = [testing.Case(loc, pid, None) for pid in dict.fromkeys(c.patch_id for c in cases)]
    rows = []
    for case in cases:
        out = testing.run_case(case, regen=regen, releases=wanted)
        rows.append({"patch": case.patch_id, "release": case.release, "status": out.status,
                     "ok": out.ok, "problems": out.problems, "written": out.written, "warnings": out.warnings})
    if regen and wanted is None:  # each patch's releases as recorded must pass together
        for pid in dict.fromkeys(c.patch_id for c in cases):
            settle = testing.Outcome(testing.Case(loc, pid, None))
            testing._settle_goldens(settle.case, settle)
            if settle.problems or settle.written:
                rows.append({"patch": pid, "release": None, "status": None, "ok": settle.ok,
                             "problems": settle.problems, "written": settle.written, "warnings": settle.warnings})
    ok = all(r["ok"] for r in rows)
    doc = {"schema": SCHEMA, "ok": ok, "regen": regen, "series": loc.as_json(),
           "goldens": str(testing.goldens_root(loc)), "cases": rows}
    return doc, EXIT_OK if ok else EXIT_PATCH_FAILED


def _is_list(spec: str) -> bool:
    return not any(op in spec for op in "<>=!~")


def render_text(doc: dict) -> str:
    """One line per case, then the problems."""
    lines = [f"{'regenerate' if doc['regen'] else 'test'} goldens in {doc['goldens']} "
             f"({doc['series']['dir']})"]
    for r in doc["cases"]:
        mark = "ok  " if r["ok"] else "FAIL"
        wrote = f"  wrote {len(r['written'])} file(s)" if r["written"] else ""
        lines.append(f"  {mark} {r['patch']}@{r['release'] or '-'}  {r['status'] or ''}{wrote}")
        lines += [f"       {line}" for p in r["problems"] for line in p.splitlines()]
        lines += [f"  WARN {w}" for w in r.get("warnings", [])]
    failed = sum(not r["ok"] for r in doc["cases"])
    warned = sum(len(r.get("warnings", [])) for r in doc["cases"])
    lines.append(f"{len(doc['cases'])} case(s), {failed} failed" + (f", {warned} warning(s)" if warned else ""))
    if failed and not doc["regen"]:
        bad = [r for r in doc["cases"] if not r["ok"]]
        ids = " ".join(f"--patch {p}" for p in dict.fromkeys(r["patch"] for r in bad))
        from patchq.report import next_line

        if all(r["release"] is None for r in bad):  # no goldens yet
            lines.append(next_line(f"`patchq test --regen {ids}` records the goldens"))
        else:
            lines.append(next_line(f"fix the patch, or when the change is intended `patchq test --regen {ids}`"))
    return "\n".join(lines) + "\n"
