"""JSON documents and human renderings of command results.

The JSON documents are the CLI's contract for CI and other tools; their schemas are
documented in README.md ("JSON output") and versioned by the ``schema`` field.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from patchq.plan import engine


def patch_rows(plan: engine.Plan) -> list[dict]:
    """One dict per patch result of a plan (``patches`` in every document)."""
    rows = []
    for r in plan.results:
        row = asdict(r)
        row["id"] = row.pop("patch_id")
        for a in row["anchors"]:
            a["path"] = a.pop("relpath")
        rows.append(row)
    return rows


def emit_json(doc: dict) -> None:
    """Print a JSON document to stdout."""
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")


def console():
    """A rich console on stderr-free stdout (imported lazily)."""
    from rich.console import Console

    return Console(highlight=False)


_STYLE = {
    "ok": "green", "applied": "green", "applies": "green", "not-applicable": "dim",
    "upstreamed": "cyan", "absent": "dim", "failed": "red", "conflict": "red", "gone": "red",
    "stale": "yellow", "foreign": "red", "not-applied": "dim", "applies-drifted": "yellow",
    "moved": "yellow", "superseded": "cyan", "interaction": "red", "partially-upstreamed": "red",
}


def render_patches(doc: dict, title: str) -> None:
    """Render a document's ``patches`` as a table, then its summary line."""
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in ("patch", "status", "where", "reason"):
        table.add_column(col)
    for p in doc["patches"]:
        where = "; ".join(f"{a['qualname']} ({a['path'].rsplit('/', 1)[-1]}:{a['line']})" for a in p.get("anchors", [])[:2])
        if len(p.get("anchors", [])) > 2:
            where += f"; +{len(p['anchors']) - 2} more"
        style = _STYLE.get(p["status"], "")
        table.add_row(p["id"], f"[{style}]{p['status']}[/]", where, p.get("reason", ""))
    console().print(table)


def apply_text(doc: dict) -> str:
    """Plain-text rendering of a ``patchq.apply/1`` document (no rich: apply runs at
    every server start, and its output is read in logs)."""
    lines = []
    head = f"{doc['command']} {doc['profile'] or '--all'} on vllm {doc['vllm']['version']}"
    if doc["patches"] and (not doc["ok"] or not doc["noop"]):
        lines.append(head + ":")
        width = max(len(p["id"]) for p in doc["patches"])
        for p in doc["patches"]:
            where = ", ".join(dict.fromkeys(f"{a['qualname']} ({a['path'].rsplit('/', 1)[-1]}:{a['line']})"
                              for a in p.get("anchors", [])))
            detail = p.get("reason") or where
            lines.append(f"  {p['id']:<{width}}  {p['status']:<14}  {detail}")
    if doc["error"]:
        lines.append(f"patchq: error: {doc['error']}")
    elif doc["noop"]:
        lines.append(f"{doc['command']}: nothing to do (vllm {doc['vllm']['version']} already as wanted)")
    else:
        for rel, kept in doc["foreign_kept"].items():
            lines.append(f"kept the foreign edit of {rel} at {kept}")
        if doc["recovered"]:
            lines.append(f"completed an interrupted write of {', '.join(doc['recovered'])}")
        lines.append(f"{doc['command']}: wrote {len(doc['written'])} file(s); "
                     f"added {', '.join(doc['added']) or '-'}; removed {', '.join(doc['removed']) or '-'}")
    return "\n".join(lines)
