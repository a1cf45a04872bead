"""Helpers of the Spark series' own tests: where the series is, a site-packages holding a real
vLLM release, the patchq CLI on this series, and the store's diffs applied.

Everything here reads real files: a release tree from patchq's cache
(:func:`patchq.vllmdist.releases.release_tree`: the wheel's ``.py`` files and dist-info,
fetched from PyPI once), copied, and ``python -m patchq`` in a subprocess.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: the series repo (this file is spark/tests/spark_support.py)
SPARK = Path(__file__).resolve().parents[1]
SERIES = SPARK / "series"
ANCHORS = SPARK / "anchors"
#: the ``.pth`` each site gets: the patched vLLM imports ``patchq_runtime``, which lives here
RUNTIME_PTH = "patchq_spark_runtime.pth"


def site_of(version: str, dst: Path, runtime: bool = True) -> Path:
    """``dst`` as a site-packages holding vLLM ``version`` as pip installs it from the wheel
    (what patchq reads of it: the ``.py`` files and the dist-info with RECORD), copied from
    patchq's release cache; with ``runtime``, a ``.pth`` that makes ``patchq_runtime``
    importable there (as ``pip install patchq-spark`` would)."""
    from patchq.vllmdist import releases

    tree = releases.release_tree(version)
    (dist,) = tree.glob("vllm-*.dist-info")
    for part in (tree / "vllm", dist):
        shutil.copytree(part, dst / part.name)
    if runtime:
        (dst / RUNTIME_PTH).write_text(str(SPARK) + "\n")
    return dst


@dataclass
class Run:
    """One CLI run: exit code, output, and the parsed JSON document (None when stdout is not JSON)."""

    rc: int
    stdout: str
    stderr: str
    json: dict | None


def patchq(*args, env: dict | None = None, cwd: Path | str | None = None, series: bool = True,
           timeout: float = 600) -> Run:
    """``python -m patchq ARGS`` on this series (``--series`` it, unless ``series`` is False:
    then the series is what discovery finds from ``cwd``)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHQ_SERIES", "PATCHQ_ANCHORS"))}
    full.update({"NO_COLOR": "1", "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"}, **(env or {}))
    argv = [str(a) for a in args] + (["--series", str(SERIES)] if series else [])
    proc = subprocess.run([sys.executable, "-m", "patchq", *argv], cwd=cwd or SPARK, env=full,
                          capture_output=True, text=True, timeout=timeout)
    doc = None
    if proc.stdout.lstrip().startswith("{"):
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = None
    return Run(proc.returncode, proc.stdout, proc.stderr, doc)


def stored_patched(version: str, patch_id: str, pristine: dict[str, str] | None = None) -> dict[str, str]:
    """relpath -> text of every file the stored diff ``series/diffs/<version>/<patch>.diff``
    changes, applied to the pristine release (``pristine``: relpath -> text; default: read
    from the release): what the store says the patch alone makes of that release."""
    from unidiff import PatchSet

    from patchq.authoring import diffstore

    text = diffstore.diff_path(SERIES, version, patch_id).read_text(encoding="utf-8")
    if pristine is None:
        from patchq.vllmdist.sources import release_source

        src = release_source(version)
        pristine = {pf.path: src.read_text(pf.path) or "" for pf in PatchSet(text)}
    return diffstore.apply_diff(pristine, text)


def _find(body: list[ast.stmt], parts: list[str]) -> list[ast.AST]:
    hits: list[ast.AST] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == parts[0]:
                if len(parts) == 1:
                    hits.append(stmt)
                elif isinstance(stmt, ast.ClassDef):
                    hits += _find(stmt.body, parts[1:])
        elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
            for block in (getattr(stmt, "body", []), getattr(stmt, "orelse", []), getattr(stmt, "finalbody", []),
                          *[h.body for h in getattr(stmt, "handlers", [])]):
                hits += _find(block, parts)
    return hits


def definition_source(text: str, qualname: str) -> str:
    """The exact source of the one definition ``qualname`` in module ``text``, from the
    comment lines directly above it (where patchq's sentinel sits) or its first decorator to
    its last line, dedented. AssertionError when there is not exactly one."""
    hits = _find(ast.parse(text).body, qualname.split("."))
    assert len(hits) == 1, f"{qualname}: {len(hits)} definitions"
    node = hits[0]
    lines = text.splitlines(keepends=True)
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])  # type: ignore[attr-defined]
    while start > 1 and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    indent = " " * node.col_offset  # type: ignore[attr-defined]
    return "".join(line[len(indent):] if line.startswith(indent) else line
                   for line in lines[start - 1: node.end_lineno])  # type: ignore[attr-defined]
