"""The verdict corpus: real public stacks that patch vLLM, ported to patchq, with the truth
of every cell read from that release's code.

Each stack is a directory ``tests/verdicts/<stack>/`` with ``series/`` (profiles and
patches), ``anchors/`` (fingerprints on the release each patch was authored against
only) and ``truth.toml``: ``[cells.<patch>."<version>"]`` with ``truth`` and ``reason``.

Truth classes and the verdicts that match them:

``apply``      safe without a person: ``applies``, ``applies-drifted`` or ``moved``, not blocking.
``review``     upstream changed what the patch touches or runs past: ``review`` or
               ``possibly-upstreamed`` (blocking).
``upstreamed`` the release does what the patch does: ``upstreamed``.
``conflict``   the patch cannot apply: ``conflict``, ``gone`` or ``moved`` (blocking).

A **false apply** is a non-blocking verdict that does not match the truth (``review`` or
``conflict``, or ``upstreamed`` called anything but ``upstreamed``: applying would drop or
duplicate upstream behaviour); a **false block** is a blocking verdict where the truth is
``apply`` or ``upstreamed`` (a review nobody needed: applying is right, or the patch can be
dropped), as issue 35 counts them; a **false conflict** is the narrower blocking verdict
where the truth is ``apply``.

``<stack>/site/`` (when there is one) holds modules of the stack's own that its patches
import, as installed beside vLLM (an excerpt of the real module, its source named in it):
it is on ``sys.path`` while that stack is checked, as the stack is in its users' environment.

``<stack>/known.toml`` lists the cells whose verdict is known not to match today (the
verdict patchq gives, and the kind of miss): the corpus test fails on any other miss (a new
false apply or false block) and on a listed cell that now matches, so the list only shrinks.

``python tests/verdicts/verdict_corpus.py`` prints the per-stack tables and per-cell tables in
Markdown (what ``docs/verdicts.md`` holds); ``--known`` rewrites every ``known.toml`` from
this checkout's verdicts (review the diff: each new line is a regression).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from patchq import hashing  # noqa: E402

tomllib = hashing.toml_module()

MATCH = {
    "apply": lambda r: not r.blocking and r.status in ("applies", "applies-drifted", "moved"),
    "review": lambda r: r.blocking and r.status in ("review", "possibly-upstreamed"),
    "upstreamed": lambda r: r.status == "upstreamed",
    "conflict": lambda r: r.blocking and r.status in ("conflict", "gone", "moved"),
}
#: a blocking reason names the upstream lines that caused it, ``vllm/...py:N``, or the files
#: it searched for a definition that is gone (``searched N files``)
WHERE = re.compile(r"vllm/[\w/]+\.py:\d+|searched \d+ files?")


def stacks() -> list[str]:
    """The corpus's stack names, sorted."""
    return sorted(p.parent.name for p in HERE.glob("*/truth.toml"))


def truth(stack: str) -> dict:
    """``truth.toml`` of a stack."""
    return tomllib.loads((HERE / stack / "truth.toml").read_text(encoding="utf-8"))


def evaluate(stack: str) -> list[dict]:
    """Every cell of ``stack``: {patch, version, truth, reason, status, blocking, verdict
    reason, match, false_apply, false_block, false_conflict, names_lines}, in truth-file order."""
    from patchq import series
    from patchq.compat import check
    from patchq.vllmdist import sources

    data = truth(stack)
    loaded = series.load(HERE / stack / "series")
    patches = [loaded.patch(pid) for pid in loaded.all_patch_ids()]
    versions = sorted({v for cells in data["cells"].values() for v in cells},
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    rows = {}
    site = HERE / stack / "site"
    if site.is_dir():
        sys.path.insert(0, str(site))
    try:
        for v in versions:
            for r in check.check(sources.release_source(v), patches):
                rows[(r.id, v)] = r
    finally:
        if site.is_dir():
            sys.path.remove(str(site))
    out = []
    for pid, cells in data["cells"].items():
        for v, cell in cells.items():
            r = rows[(pid, v)]
            ok = MATCH[cell["truth"]](r)
            out.append({"patch": pid, "version": v, "truth": cell["truth"], "why": cell["reason"],
                        "status": r.status, "blocking": r.blocking, "reason": r.reason, "match": ok,
                        "false_apply": not r.blocking and cell["truth"] != "apply" and not ok,
                        "false_block": r.blocking and cell["truth"] in ("apply", "upstreamed"),
                        "false_conflict": r.blocking and cell["truth"] == "apply",
                        "names_lines": (not r.blocking) or bool(WHERE.search(r.reason))})
    return out


def summary(cells: list[dict]) -> dict:
    """cells, matches, false applies, false blocks, false conflicts, blocking verdicts without
    upstream lines."""
    return {"cells": len(cells), "matches": sum(c["match"] for c in cells),
            "false_applies": sum(c["false_apply"] for c in cells),
            "false_blocks": sum(c["false_block"] for c in cells),
            "false_conflicts": sum(c["false_conflict"] for c in cells),
            "unnamed_blocking": sum(not c["names_lines"] for c in cells)}


def verdict(cell: dict) -> str:
    """A cell's verdict as ``known.toml`` spells it: the status, `` (blocking)`` when it blocks."""
    return cell["status"] + (" (blocking)" if cell["blocking"] else "")


def miss_kind(cell: dict) -> str:
    """``false apply``, ``false block`` or ``other`` (a blocking verdict of the wrong kind,
    e.g. ``conflict`` where the truth is ``review``) for a cell that does not match."""
    return "false apply" if cell["false_apply"] else "false block" if cell["false_block"] else "other"


def known(stack: str) -> dict[tuple[str, str], str]:
    """``{(patch, release): verdict}`` of ``<stack>/known.toml`` (empty when there is none)."""
    path = HERE / stack / "known.toml"
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {(pid, v): entry["verdict"] for pid, cells in data.get("cells", {}).items()
            for v, entry in cells.items()}


def write_known(stack: str, cells: list[dict]) -> Path | None:
    """Write ``<stack>/known.toml`` from ``cells`` (those that do not match); remove it when
    every cell matches. Returns the path written, or None."""
    path = HERE / stack / "known.toml"
    misses = [c for c in cells if not c["match"]]
    if not misses:
        path.unlink(missing_ok=True)
        return None
    out = [f"# {stack}: the cells whose verdict does not match the truth today (issue 35), written by",
           "# `python tests/verdicts/verdict_corpus.py --known`. tests/e2e/test_verdict_corpus.py fails on",
           "# any miss not listed here and on a listed cell that now matches: this list only shrinks.", ""]
    for c in misses:
        out += [f'[cells.{c["patch"]}."{c["version"]}"]', f'truth = "{c["truth"]}"',
                f'verdict = "{verdict(c)}"', f'miss = "{miss_kind(c)}"', ""]
    path.write_text("\n".join(out), encoding="utf-8")
    return path


def markdown() -> str:
    """The per-stack table, then one per-cell table per stack."""
    lines = ["| stack | cells | matches | false applies | false blocks | of which truth apply | "
             "blocking without upstream lines |",
             "|---|---|---|---|---|---|---|"]
    per = {s: evaluate(s) for s in stacks()}
    for s, cells in per.items():
        m = summary(cells)
        lines.append(f"| {s} | {m['cells']} | {m['matches']} | {m['false_applies']} | {m['false_blocks']} | "
                     f"{m['false_conflicts']} | "
                     f"{m['unnamed_blocking']} |")
    m = summary([c for cells in per.values() for c in cells])
    lines.append(f"| **all {len(per)}** | **{m['cells']}** | **{m['matches']}** | **{m['false_applies']}** | "
                 f"**{m['false_blocks']}** ({100 * m['false_blocks'] / max(m['cells'], 1):.1f}%) | "
                 f"{m['false_conflicts']} | {m['unnamed_blocking']} |")
    for s, cells in per.items():
        lines += ["", f"### {s}", "", "| patch | release | truth | verdict | match | why (truth) |",
                  "|---|---|---|---|---|---|"]
        for c in cells:
            verdict = c["status"] + (" (blocking)" if c["blocking"] else "")
            why = c["why"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {c['patch']} | {c['version']} | {c['truth']} | {verdict} | "
                         f"{'yes' if c['match'] else '**no**'} | {why} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--known"]:
        for name in stacks():
            print(name, write_known(name, evaluate(name)))
    else:
        print(markdown())
