"""The drift corpus: real vLLM 0.23.0 trees, copied and edited the way upstream drifts.

Each case is ``tests/drift/cases/<name>.toml``: a description, a list of edits applied in
order to a hard-linked copy of the 0.23.0 release tree (``vllm/`` only, no dist-info, so
the copy reads like a source checkout and new files are found), and the status
``patchq check`` must give every patch of the ``dense`` profile there.

Edit operations (each must find its target exactly once, so the corpus fails loudly
instead of silently testing nothing):

``[[replace]] file, old, new``
    replace the text ``old`` by ``new``.
``[[delete]] file, qualname``
    delete a definition (decorators and the comment lines right above included).
``[[move]] file, qualname, to, header``
    cut a definition out of ``file`` and append it to ``to`` (created with ``header``
    when missing); ``import`` (optional) replaces it in ``file``.
``[[reindent]] file, qualname, scale | shift``
    re-indent a definition's lines: ``scale`` multiplies each leading run of spaces
    (``0.5``: 4 -> 2), ``shift`` adds that many spaces to every non-blank line.
``[[append]] file, text``
    append ``text`` to a file (created when missing).

Expectations: ``[expect.<patch-id>]`` with ``status`` and optional ``blocking``,
``path`` / ``qualname`` (of the first anchor location), ``reason`` (substrings, all must
occur), ``verified`` (release every anchor was verified on), ``diff`` (substrings of the
drift diff). Patches without an entry must be ``applies``. ``exit_code`` (default 0) is
what ``patchq check --source`` returns.
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CASES = Path(__file__).resolve().parent / "cases"


def case_names() -> list[str]:
    """The corpus case names, sorted."""
    return sorted(p.stem for p in CASES.glob("*.toml"))


def load_case(name: str) -> dict:
    """A case's TOML table."""
    return tomllib.loads((CASES / f"{name}.toml").read_text(encoding="utf-8"))


def link_tree(src: Path, dst: Path) -> None:
    """Hard-link every file of ``src`` into ``dst`` (edits below replace, never write through)."""
    for dirpath, _, files in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            try:
                os.link(Path(dirpath) / f, dst / rel / f)
            except OSError:  # another filesystem: copy
                shutil.copy2(Path(dirpath) / f, dst / rel / f)


def _write(path: Path, text: str) -> None:
    """Replace a file (unlink first: it may be a hard link into the release cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    path.write_text(text, encoding="utf-8")


def _span(text: str, qualname: str) -> tuple[int, int]:
    """0-based [start, end) line range of the one definition ``qualname``, with decorators
    and the comment lines right above it."""
    parts = qualname.split(".")
    body = ast.parse(text).body
    node = None
    for part in parts:
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == part]
        assert len(found) == 1, f"{qualname}: {len(found)} definitions named {part}"
        node = found[0]
        body = node.body
    lines = text.splitlines(keepends=True)
    start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return start, node.end_lineno


def apply_edit(root: Path, kind: str, op: dict) -> None:
    """Apply one edit operation (module docstring) under ``root``."""
    allowed = {"replace": {"file", "old", "new"}, "append": {"file", "text"},
               "delete": {"file", "qualname"}, "move": {"file", "qualname", "to", "header", "import"},
               "reindent": {"file", "qualname", "scale", "shift"}}
    extra = set(op) - allowed.get(kind, set())
    assert not extra, f"{kind} edit has unknown keys {sorted(extra)} (a TOML key after its table?)"
    path = root / op["file"]
    text = path.read_text(encoding="utf-8") if path.exists() else None
    if kind == "replace":
        n = text.count(op["old"])
        assert n == 1, f"{op['file']}: replace target found {n} times: {op['old'][:60]!r}"
        _write(path, text.replace(op["old"], op["new"]))
    elif kind == "append":
        _write(path, (text or "") + op["text"])
    elif kind in ("delete", "move"):
        start, end = _span(text, op["qualname"])
        lines = text.splitlines(keepends=True)
        cut = "".join(lines[start:end])
        keep = "".join(lines[:start]) + op.get("import", "") + "".join(lines[end:])
        _write(path, keep)
        if kind == "move":
            target = root / op["to"]
            before = target.read_text(encoding="utf-8") if target.exists() else op.get("header", "")
            _write(target, before.rstrip("\n") + "\n\n\n" + cut)
    elif kind == "reindent":
        start, end = _span(text, op["qualname"])
        lines = text.splitlines(keepends=True)
        out = []
        for line in lines[start:end]:
            stripped = line.lstrip(" ")
            n = len(line) - len(stripped)
            if not stripped.strip():
                out.append(line)
            elif "scale" in op:
                out.append(" " * int(n * op["scale"]) + stripped)
            else:
                out.append(" " * (n + op["shift"]) + stripped)
        _write(path, "".join(lines[:start] + out + lines[end:]))
    else:
        raise ValueError(f"unknown edit {kind}")


OPS = ("replace", "delete", "move", "reindent", "append")


def build(name: str, base: Path, dest: Path) -> Path:
    """Build case ``name`` from the release tree ``base`` into ``dest``; returns ``dest``.

    Edits run in the order of the case's ``edits`` list when given (``edits = ["move",
    "replace"]``), else in :data:`OPS` order.
    """
    case = load_case(name)
    link_tree(base / "vllm", dest / "vllm")
    for kind in case.get("edits", OPS):
        for op in case.get(kind, []):
            apply_edit(dest, kind, op)
    return dest
