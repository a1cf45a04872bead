"""Upstream detection forwards, by meaning: the engine's hook after statement identity.

An edit whose added statements are all in the release's definition by statement identity
(:func:`patchq.plan.survival.upstream_items`) is upstream there. Upstream often merges a
fix in another form: :func:`by_meaning` compares the edit's added statements with the
release's definition canonically (:func:`patchq.plan.meaning.group_found`), a helper the
patch adds being upstream's helper with the same body under another name
(:func:`patchq.plan.meaning.helper_renames`). Sure matches only: a likeness is never
upstream. The backward detection (:mod:`patchq.plan.backward`) shares
:func:`helper_candidates`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import TYPE_CHECKING

from patchq.plan import astdiff, meaning

if TYPE_CHECKING:
    from patchq.plan.engine import Workspace
    from patchq.plan.survival import EditChange


def helper_candidates(ws: Workspace, relpath: str, pristine: ast.AST) -> list:
    """The release's definitions a patch helper may equal: the edited definition's members
    and the module's top-level definitions (pristine), each with ``path:line``."""
    from patchq.plan.survival import member_names

    out = [(n, f"{relpath}:{getattr(n, 'lineno', 0)}") for defs in member_names(pristine).values() for n in defs]
    tree = astdiff.module_tree(ws.pristine_text.get(relpath, ""))
    if tree is not None:
        out += [(n, f"{relpath}:{n.lineno}") for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return out


def _module_helpers(ws: Workspace, relpath: str) -> list:
    """Top-level definitions the plan added to ``relpath`` so far (beside an edited one)."""
    before = ws.pristine_index(relpath) or {}
    now = ws.index(relpath) or {}
    out = []
    for qual in now:
        if "." not in qual and qual not in before:
            node = ws.current_node(relpath, qual)
            if node is not None:
                out.append(node)
    return out


def by_meaning(ws: Workspace, changes: Iterable[EditChange]) -> None:
    """Fill ``upstream`` of each change whose added statements are not all found by
    identity but are in the release's definition by meaning
    (:func:`patchq.plan.meaning.group_found`, helpers matched by body under another
    name: :func:`patchq.plan.meaning.helper_renames`). Sets ``meaning`` (evidence
    lines, score 1.0) on those changes. Sure matches only: a likeness is never upstream."""
    for ch in changes:
        if ch.added and not ch.is_upstream and ch.after is not None:
            _change_by_meaning(ws, ch)


def _change_by_meaning(ws: Workspace, ch: EditChange) -> None:
    """:func:`by_meaning` for one change with added statements (``ch.after`` set)."""
    after = ch.after
    pristine = ws.pristine_node(ch.relpath, ch.qualname)
    if after is None or pristine is None:
        return
    keys = {i.key for i in ch.added}
    nodes = meaning.added_nodes(after, keys)
    if not nodes:
        return
    renames, group = _renamed_helpers(ws, ch, nodes, pristine)
    if not group:
        return
    evidence = [f"helper `{a}` has the body of upstream's `{b}` ({w})" for a, (b, w) in renames.items()]
    match = meaning.group_found(group, pristine, ch.relpath, {a: b for a, (b, _) in renames.items()},
                                keep=lambda a=after, g=group: meaning.reads_outside(a, g),
                                group_root=after)
    if match is None:
        return
    evidence.append(f"{match.what} ({match.where})")
    where = match.where
    ch.upstream = [(item, where) for item in ch.added]
    ch.meaning = evidence


def _renamed_helpers(ws: Workspace, ch: EditChange, nodes: list,
                     pristine: ast.AST) -> tuple[dict[str, tuple[str, str]], list]:
    """The added helpers upstream has under another name, as {helper: (upstream's name,
    why)}, and the rest of the added ``nodes`` (the group to find)."""
    names = {i.member for i in ch.added if i.member}
    helpers = [n for n in nodes if getattr(n, "name", None) in names]
    helpers += _module_helpers(ws, ch.relpath)
    renames = meaning.helper_renames(helpers, helper_candidates(ws, ch.relpath, pristine)) if helpers else {}
    group = [n for n in nodes if getattr(n, "name", None) not in renames]
    renames = meaning.used_by(renames, group)  # a helper only a framework calls is no evidence
    return renames, [n for n in nodes if getattr(n, "name", None) not in renames]


def called_helpers(module_text: str, qualname: str, defn: ast.AST) -> list[tuple[str, ast.AST]]:
    """The definitions ``defn`` (the definition ``qualname`` of a module whose text is
    ``module_text``) calls, one level: the methods of its class it calls on ``self``/``cls``
    and the module-level functions it calls by name, each (qualified name, node with the
    file's line numbers), in the order of their first call, each once. Upstream often moves
    a fix into such a helper (issue 35 class 5)."""
    tree = astdiff.module_tree(module_text)
    if tree is None:
        return []
    module_funcs = {n.name: n for n in tree.body if isinstance(n, astdiff.FUNCS)}
    methods: dict[str, ast.AST] = {}
    cls_q = qualname.rsplit(".", 1)[0] if "." in qualname else ""
    if cls_q:
        body: list = tree.body
        cls = None
        for part in cls_q.split("."):
            cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
            if cls is None:
                break
            body = cls.body
        if cls is not None:
            methods = {n.name: n for n in cls.body if isinstance(n, astdiff.FUNCS)}
    out: list[tuple[str, ast.AST]] = []
    seen: set[str] = set()
    calls = sorted((n for n in ast.walk(defn) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls") \
                and f.attr in methods:
            name, node = f"{cls_q}.{f.attr}", methods[f.attr]
        elif isinstance(f, ast.Name) and f.id in module_funcs:
            name, node = f.id, module_funcs[f.id]
        else:
            continue
        if name not in seen and node is not defn and name != qualname:
            seen.add(name)
            out.append((name, node))
    return out
