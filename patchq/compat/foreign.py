"""A module of the stack's own that a patch imports, and whether its vLLM imports hold.

A patch may insert ``from mystack.server import router``: code of the stack's own that runs
inside the patched vLLM. That module imports vLLM in turn, and a release that renamed or
removed what it imports makes the patched definition raise ``ImportError``, though the
patch's own statements and the definition around them are untouched (AReaL's
``areal_vllm_server`` imports ``vllm.entrypoints.utils``, gone since 0.23.0).

Where such a module is installed beside patchq (found on ``sys.path`` by file, never
imported: :func:`locate`), each ``vllm`` import of it that the reviewed release resolves
and the target does not is a finding (:func:`broken_imports`), naming the import's line.
An import inside ``try:`` that catches ``ImportError`` (or ``Exception``), or under
``if TYPE_CHECKING:``, is the module's own business and is left out. A module that cannot
be found gives no finding: patchq cannot see it (docs/verdicts.md, Limits).
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from patchq.vllmdist.sources import PACKAGE, CodeSource

#: (module, name or None, line, code) of one ``vllm`` import
Import = tuple[str, str | None, int, str]


def added_modules(before: ast.AST | None, after: ast.AST | None) -> list[str]:
    """The dotted modules ``after`` imports absolutely that ``before`` does not, apart from
    the standard library, ``__future__`` and ``vllm`` (the stack's own and third-party
    modules), in first-seen order; ``from a.b import c`` gives ``a.b`` and ``a.b.c`` (``c``
    may be a submodule)."""

    def of(tree: ast.AST | None) -> list[str]:
        out: list[str] = []
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Import):
                out += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                out += [node.module] + [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
        return out

    skip = set(sys.stdlib_module_names) | {"__future__", PACKAGE}
    old = set(of(before))
    return list(dict.fromkeys(m for m in of(after) if m not in old and m.split(".")[0] not in skip))


def locate(module: str, path: Sequence[str] | None = None) -> Path | None:
    """The source file of ``module`` (``a/b.py`` or ``a/b/__init__.py``) on ``path``
    (default ``sys.path``), found without importing anything; None when there is none."""
    parts = module.split(".")
    for entry in sys.path if path is None else path:
        base = Path(entry or os.getcwd(), *parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _guarded(parents: list[ast.AST]) -> bool:
    for p in parents:
        if isinstance(p, ast.Try) and any(
                h.type is None or any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError",
                                                                           "Exception", "BaseException")
                                      for n in ast.walk(h.type)) for h in p.handlers):
            return True
        if isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test):
            return True
    return False


def vllm_imports(text: str) -> list[Import]:
    """The unguarded ``vllm`` imports of a module's text (module docstring), in line order:
    ``import vllm.a.b`` gives (``vllm.a.b``, None, ...), ``from vllm.a import c`` gives
    (``vllm.a``, ``c``, ...); [] when the text does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out: list[Import] = []

    def walk(node: ast.AST, parents: list[ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            here = [*parents, node]
            if isinstance(child, (ast.Import, ast.ImportFrom)) and not _guarded(here):
                code = ast.unparse(child)
                if isinstance(child, ast.Import):
                    out.extend((a.name, None, child.lineno, code) for a in child.names
                               if a.name.split(".")[0] == PACKAGE)
                elif not child.level and child.module and child.module.split(".")[0] == PACKAGE:
                    out.extend((child.module, a.name, child.lineno, code) for a in child.names if a.name != "*")
            walk(child, here)

    walk(tree, [])
    return sorted(out, key=lambda i: i[2])


def _module_file(source: CodeSource, module: str) -> str | None:
    rel = module.replace(".", "/")
    for cand in (f"{rel}.py", f"{rel}/__init__.py"):
        if source.read_text(cand) is not None:
            return cand
    return None


def _binding(text: str, name: str) -> int | None:
    """The line where a module's text may give ``name``: a top-level definition, assignment
    or import of it, or a ``from ... import *`` / module ``__getattr__`` (anything may be);
    1 when the text does not parse (it may); None when nothing gives it."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return 1
    for node in tree.body:
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else (node,):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                    sub.name in (name, "__getattr__"):
                return sub.lineno
            if isinstance(sub, (ast.Import, ast.ImportFrom)) and any(
                    (a.asname or a.name.split(".")[0]) == name or a.name == "*" for a in sub.names):
                return sub.lineno
            if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                    return sub.lineno
    return None


def resolves(source: CodeSource, module: str, name: str | None) -> str | None:
    """``path:line`` where ``source`` gives ``module`` (line 1) or, for ``from module import
    name``, a submodule ``name`` (line 1) or a binding of it (:func:`_binding`); None when
    it does not."""
    rel = _module_file(source, module)
    if rel is None:
        return None
    if name is None:
        return f"{rel}:1"
    sub = _module_file(source, f"{module}.{name}")
    if sub is not None:
        return f"{sub}:1"
    line = _binding(source.read_text(rel) or "", name)
    return f"{rel}:{line}" if line is not None else None


def stamp(module: str, path: Sequence[str] | None = None) -> str | None:
    """``<file> <sha256>`` of ``module``'s source as :func:`locate` finds it, or None: what a
    verdict that read it depends on (the verdict cache compares it on load)."""
    import hashlib

    found = locate(module, path)
    if found is None:
        return None
    try:
        return f"{found} {hashlib.sha256(found.read_bytes()).hexdigest()}"
    except OSError:
        return f"{found} unreadable"


def broken_imports(base: CodeSource, target: CodeSource, modules: Iterable[str],
                   path: Sequence[str] | None = None, looked: dict | None = None) -> list[str]:
    """One line per ``vllm`` import of the stack's ``modules`` (found by :func:`locate`) that
    ``base`` (the reviewed release) resolves and ``target`` does not: ``file:line `code`:
    vllm X has no ...``. Modules not found, and imports already broken on ``base``, give none.
    ``looked`` (when given) gets ``{module: stamp(module)}`` of every module looked for."""
    out: list[str] = []
    for module in modules:
        if looked is not None:
            looked[module] = stamp(module, path)
        found = locate(module, path)
        if found is None:
            continue
        try:
            text = found.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        reported: set[int] = set()
        for mod, name, line, code in vllm_imports(text):
            if line in reported:  # one line per import statement: its first broken name
                continue
            had = resolves(base, mod, name)
            if had is not None and resolves(target, mod, name) is None:
                what = mod if _module_file(target, mod) is None else f"{name} in {mod}"
                out.append(f"{found}:{line} `{code}`: vllm {target.version} has no {what} "
                           f"(reviewed vllm {base.version} has, {had})")
                reported.add(line)
    return out
