#!/usr/bin/env python3
"""The compatibility matrix as a job matrix: split the releases into shards, merge the shards' matrices.

    ci/matrix_merge.py shards --releases SPEC [--count N]     # JSON list of comma lists, for a job matrix
    ci/matrix_merge.py merge OUT_DIR SHARD.json...

``shards`` resolves SPEC (a range against the index's release list, or an explicit list,
as ``patchq matrix --releases``) and deals the releases round-robin into at most N shards.
Each shard job runs ``ci/matrix.sh`` with ``PATCHQ_RELEASES`` set to its list. ``merge``
takes the shards' ``matrix.json`` (``patchq.matrix/1``), unions releases, cells, boot rows,
errors and timings, recomputes the per-patch changes and the exit code, and writes
``matrix.{json,md,html}`` into OUT_DIR with patchq's renderer. Exit: 0 merged and nothing
blocks, 1 merged and some cell blocks (or a release was not checked), 2 usage or a shard
that is not a matrix document.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def shards(spec: str, count: int) -> list[str]:
    """The releases of ``spec`` dealt into at most ``count`` comma lists."""
    from patchq.vllmdist import releases

    versions = [str(v) for v in releases.list_releases(spec)]
    count = max(1, min(count, len(versions)))
    return [",".join(versions[i::count]) for i in range(count) if versions[i::count]]


def _changes(versions: list[str], row: dict) -> list[dict]:
    out, prev = [], None
    for v in versions:
        cell = row.get(v)
        if cell is None:
            continue
        if prev is not None and cell["status"] != prev["status"]:
            out.append({"release": v, "from": prev["status"], "to": cell["status"], "reason": cell["reason"]})
        prev = cell
    return out


def merge(docs: list[dict]) -> dict:
    """One ``patchq.matrix/1`` document from shard documents over the same profiles.

    Raises:
        ValueError: a document is not ``patchq.matrix/1`` or its profiles differ.
    """
    from packaging.version import Version

    if not docs:
        raise ValueError("no shard to merge")
    first = docs[0]
    for d in docs:
        if d.get("schema") != "patchq.matrix/1":
            raise ValueError(f"not a patchq.matrix/1 document: schema {d.get('schema')!r}")
        if list(d["profiles"]) != list(first["profiles"]):
            raise ValueError(f"shards disagree on the profiles: {list(d['profiles'])} vs {list(first['profiles'])}")
    versions = sorted({v for d in docs for v in d["releases"]}, key=Version)
    cells: dict = {name: {pid: {} for pid in meta["patches"]} for name, meta in first["profiles"].items()}
    boot: dict = {name: {} for name in first["profiles"]}
    cpu_boot: dict = {name: {} for name in first["profiles"]}
    errors, per_release, wall = {}, {}, 0.0
    for d in docs:
        for name, per in d["cells"].items():
            for pid, row in per.items():
                cells[name].setdefault(pid, {}).update(row)
        for name, rows in d.get("boot", {}).items():
            boot[name].update(rows)
        for name, rows in d.get("cpu_boot", {}).items():  # the cpu-boot level's rows (issue 29), as boot's
            cpu_boot[name].update(rows)
        errors.update(d.get("errors", {}))
        per_release.update(d.get("timing", {}).get("per_release_s", {}))
        wall = max(wall, d.get("timing", {}).get("wall_s", 0.0))
    for name, per in cells.items():
        for pid in per:
            per[pid] = dict(sorted(per[pid].items(), key=lambda kv: Version(kv[0])))
    changes = {name: {pid: _changes(versions, row) for pid, row in per.items()} for name, per in cells.items()}
    blocking = any(c["blocking"] for per in cells.values() for row in per.values() for c in row.values())
    return {
        **first,
        "releases": versions,
        "cells": cells,
        "boot": {name: dict(sorted(rows.items(), key=lambda kv: Version(kv[0]))) for name, rows in boot.items()},
        **({"cpu_boot": {name: dict(sorted(rows.items(), key=lambda kv: Version(kv[0])))
                         for name, rows in cpu_boot.items()}} if "cpu_boot" in first else {}),
        "changes": changes,
        "first_change": {name: {pid: (ch[0]["release"] if ch else None) for pid, ch in per.items()}
                         for name, per in changes.items()},
        "errors": errors,
        "exit_code": 1 if blocking or errors else 0,
        "timing": {"wall_s": wall, "workers": first.get("timing", {}).get("workers"), "shards": len(docs),
                   "per_release_s": per_release},
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point (module docstring)."""
    ap = argparse.ArgumentParser(prog="ci/matrix_merge.py", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shards")
    s.add_argument("--releases", required=True)
    s.add_argument("--count", type=int, default=4)
    m = sub.add_parser("merge")
    m.add_argument("out")
    m.add_argument("shards", nargs="+")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    if args.cmd == "shards":
        from patchq.vllmdist import releases

        try:
            print(json.dumps(shards(args.releases, args.count)))
        except releases.ReleaseError as exc:
            print(f"matrix_merge: error: {exc}", file=sys.stderr)
            return 2
        return 0
    from patchq.compat import matrix

    try:
        doc = merge([json.loads(Path(p).read_text(encoding="utf-8")) for p in args.shards])
    except (OSError, ValueError, KeyError) as exc:
        print(f"matrix_merge: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    paths = matrix.write(doc, args.out)
    print(f"merged {len(args.shards)} shard(s): {len(doc['releases'])} releases -> {paths['md']}")
    return doc["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
