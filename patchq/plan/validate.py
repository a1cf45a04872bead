"""Validating an edit by what it means, not only by whether it compiles.

The engine (:mod:`patchq.plan.engine`) runs these checks on every edit; each failure is
an :class:`AnchorError` of kind ``invalid`` whose message starts with the name of the
check that refused the edit:

``result check``
    a transform must return a libcst definition of the same kind (``def``/``async
    def``/``class``) and name as the anchored one (a ``FlattenSentinel`` holding exactly
    one such definition is accepted: statements placed beside it), or, for an anchor the
    patch lists in ``removes=[...]``, ``libcst.RemovalSentinel.REMOVE``. ``None``, a
    string, a module or any other value is refused with one line naming the patch.
``docstring check``
    a statement pattern must not match a docstring (or any bare string statement): the
    edit would land in documentation.
``undefined-name check`` / ``redefinition check`` (pyflakes)
    the patched definition is checked with pyflakes in its module's context against the
    same definition before the patch: a name that becomes undefined (unless the patch
    declares it in ``runtime_names=[...]``) or a name defined twice where it was not
    (pyflakes' ``RedefinedWhileUnused``) refuses the edit.
``duplicate-member check``
    a class or function body must never get a second definition of a name
    (:func:`patchq.plan.survival.duplicate_members`).

The module context is the module's text with every other top-level ``def``/``class``
reduced to a one-line stub (their names stay bound, their bodies are not analysed), so
a check costs a pyflakes pass over the edited top-level definition, not the module.
"""

from __future__ import annotations

import ast
import functools
from typing import Iterable

import libcst as cst

from patchq.errors import AnchorError


def check_result(patch_id: str, anchor: str, qualname: str, old: cst.CSTNode, new: object,
                 removes: Iterable[str]) -> None:
    """The result check (module docstring).

    Raises:
        AnchorError: kind ``invalid``, naming the patch, the anchor and what came back.
    """
    if new is cst.RemovalSentinel.REMOVE:
        if anchor in set(removes):
            return
        raise AnchorError(f"result check: patch {patch_id}, anchor {anchor}: the transform removes {qualname}; "
                          f"declare removes=['{anchor}'] in patch(...) if that is intended",
                          kind="invalid", anchor=anchor)
    kind = type(old).__name__
    name = getattr(getattr(old, "name", None), "value", None)
    if isinstance(new, (cst.FunctionDef, cst.ClassDef)):
        defs = [new]
    elif isinstance(new, cst.FlattenSentinel):
        defs = [n for n in new.nodes if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
    else:
        defs = None
    if defs is None:
        what = "None" if new is None else f"a {type(new).__name__}"
        raise AnchorError(f"result check: patch {patch_id}, anchor {anchor}: the transform returned {what}, not a "
                          f"definition of {qualname} (a transform returns the edited libcst {kind})",
                          kind="invalid", anchor=anchor)
    same = [d for d in defs if type(d) is type(old) and getattr(getattr(d, "name", None), "value", None) == name
            and _is_async(d) == _is_async(old)]
    if len(defs) == 1 and len(same) == 1 or isinstance(new, cst.FlattenSentinel) and len(same) == 1:
        return
    got = ", ".join(f"{type(d).__name__} {getattr(getattr(d, 'name', None), 'value', '?')}" for d in defs) or "nothing"
    raise AnchorError(f"result check: patch {patch_id}, anchor {anchor}: the transform returned {got}, not the "
                      f"{kind} {name} it was given", kind="invalid", anchor=anchor)


def _is_async(node: object) -> bool:
    return getattr(node, "asynchronous", None) is not None


def check_docstring_matches(patch_id: str, anchor: str, qualname: str, matches: Iterable[cst.CSTNode]) -> None:
    """The docstring check (module docstring).

    Raises:
        AnchorError: kind ``invalid`` when a matched statement is a bare string.
    """
    for node in matches:
        if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Expr) \
                and isinstance(node.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            raise AnchorError(f"docstring check: patch {patch_id}, anchor {anchor}: the statement pattern matches a "
                              f"docstring (a bare string) in {qualname}; anchor on code, not documentation",
                              kind="invalid", anchor=anchor)


# ---------------------------------------------------------------------------
# pyflakes in module context

_REFUSED = {"UndefinedName": "undefined-name check", "UndefinedLocal": "undefined-name check",
            "UndefinedExport": "undefined-name check", "RedefinedWhileUnused": "redefinition check"}


@functools.lru_cache(maxsize=32)
def _context(text: str, top: str) -> tuple[str, int] | None:
    """(context text, number of its lines) of a module without the top-level definition
    ``top``, every other top-level definition reduced to a stub; None when it does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    body = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == top:
                continue
            stub = ast.parse(f"{'class' if isinstance(stmt, ast.ClassDef) else 'def'} {stmt.name}"
                             f"{'' if isinstance(stmt, ast.ClassDef) else '()'}: pass").body[0]
            body.append(stub)
        else:  # imports, assignments, module-level if/try (definitions under them stay bound)
            body.append(stmt)
    code = ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n"
    return code, code.count("\n")


def _messages(code: str, first_line: int) -> list[tuple[str, tuple]]:
    from pyflakes import checker

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    w = checker.Checker(tree, filename="<patchq>")
    out = []
    for m in w.messages:
        if m.lineno > first_line and type(m).__name__ in _REFUSED:
            args = tuple(a for a in m.message_args if isinstance(a, str))
            out.append((type(m).__name__, args[:1], m.message % m.message_args))
    return out


def check_names(patch_id: str, qualname: str, module_text_before: str, top_before: str,
                top_after: str, runtime_names: Iterable[str]) -> None:
    """The undefined-name and redefinition checks (pyflakes, module docstring).

    Args:
        module_text_before: the module's text before the patch's edit of this definition.
        top_before, top_after: source of the top-level definition that holds ``qualname``
            (the class for a method), before and after the patch.
        runtime_names: names the patch declares as provided at run time.
    Raises:
        AnchorError: kind ``invalid``, naming the check, the patch and each new message.
    """
    if top_before == top_after:
        return
    top = qualname.split(".")[0]
    ctx = _context(module_text_before, top)
    if ctx is None:
        return
    code, lines = ctx
    before = _messages(code + top_before, lines)
    after = _messages(code + top_after, lines)
    allowed = set(runtime_names)
    remaining = list(before)
    new = []
    for kind, args, text in after:
        match = next((b for b in remaining if b[0] == kind and b[1] == args), None)
        if match is not None:
            remaining.remove(match)
            continue
        if kind.startswith("Undefined") and args and args[0] in allowed:
            continue
        new.append((kind, text))
    if new:
        check = _REFUSED[new[0][0]]
        raise AnchorError(f"{check}: patch {patch_id} in {qualname}: " + "; ".join(t for _, t in new)
                          + ("" if check != "undefined-name check" else
                             " (declare runtime_names=[...] in patch(...) for names provided at run time)"),
                          kind="invalid")
