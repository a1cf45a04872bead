"""JSON documents and human renderings of command results.

The JSON documents are the CLI's contract for CI and other tools; their schemas are
documented in README.md ("JSON output") and versioned by the ``schema`` field.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from patchq import engine


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
    "moved": "yellow",
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
