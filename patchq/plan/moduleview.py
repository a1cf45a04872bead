"""A module's own statements seen as a definition: what a module-level anchor anchors.

A module-level anchor (``qualname = "<module>"``, anchors format 2) anchors the module's
own statements: imports, assignments, calls, ``__all__``, and the *names* of its top-level
``def``s and ``class``es, not their bodies. Its fingerprint
(:func:`patchq.plan.anchors.module_fingerprint`) is taken over exactly that, so a change to
a function's body is no drift of the module. This module gives the same view to the
three-way comparison (:mod:`patchq.compat.threeway`), the drift diff
(:mod:`patchq.compat.drift`) and the rebase (:mod:`patchq.authoring.merge`):

* :func:`flatten` -- the module's elements (:class:`patchq.plan.astdiff.Elem`), each
  top-level statement flattened as a definition's statements are, each top-level
  ``def``/``class`` one element keyed by its kind and name alone (as the fingerprint sees
  it) that writes its name; the module docstring left out;
* :func:`outline` -- the module's text with the body of every top-level ``def``/``class``
  cut to ``...``: what a person reads in a three-way view or a drift diff of the module.

Everything here is a pure function of the text and the :mod:`ast` it is given.
"""

from __future__ import annotations

import ast
import copy

from patchq.plan import astdiff
from patchq.plan.astdiff import Elem
from patchq.plan.definitions import split_lines


def flatten(tree: ast.Module) -> list[Elem]:
    """The elements of a module's own statements, in source order (module docstring).

    Args:
        tree: the whole module's :mod:`ast` (file line numbers).
    Returns:
        Elements with ``stop`` indices into the returned list; a top-level ``def``/``class``
        is one ``def`` element (its header's lines, its node the header without
        decorators and body) whose key is its kind and name and which writes
        ``::name``; every other statement is flattened by
        :func:`patchq.plan.astdiff.flatten` (compound statements with their blocks,
        names scoped to the module, ``::x``).
    """
    out: list[Elem] = []
    body = tree.body[1:] if tree.body and astdiff.is_docstring(tree.body[0]) else tree.body
    for stmt in body:
        base = len(out)
        if isinstance(stmt, astdiff.DEFS):
            first = stmt.body[0].lineno if stmt.body else stmt.end_lineno or stmt.lineno
            end = max(stmt.lineno, first - 1)
            name = ast.Name(id=stmt.name, ctx=ast.Store())
            header = copy.copy(stmt)  # shown as `def name(...): ...` (its own line numbers kept)
            header.decorator_list, header.body = [], [ast.Expr(ast.Constant(...))]
            out.append(Elem(hash(("def", 0, type(stmt).__name__, stmt.name)), "def", 0, header, stmt.lineno, end,
                            "", stop=base + 1, names_from=((name,), "")))
            continue
        for e in astdiff.flatten(stmt):
            e.stop += base
            out.append(e)
    return out


def outline(text: str, tree: ast.Module | None = None) -> str:
    """``text`` with the body of every top-level ``def``/``class`` replaced by one ``...``
    line at the body's indentation (a one-line definition is kept whole); comments,
    blank lines and every other statement kept as written.

    Args:
        tree: ``text``'s :mod:`ast` when the caller has it (else parsed here).
    Returns:
        The outline (ends with a newline when ``text`` does); ``text`` itself when it does
        not parse.
    """
    if tree is None:
        tree = astdiff.module_tree(text)
        if tree is None:
            return text
    lines = split_lines(text)
    cuts = []
    for stmt in tree.body:
        if not isinstance(stmt, astdiff.DEFS) or not stmt.body:
            continue
        first, last = stmt.body[0].lineno, stmt.end_lineno or stmt.body[-1].lineno
        if first <= stmt.lineno:  # `def f(): pass` on one line: nothing to cut
            continue
        indent = lines[first - 1][:len(lines[first - 1]) - len(lines[first - 1].lstrip())] or "    "
        cuts.append((first, last, indent + "...\n"))
    for first, last, new in reversed(cuts):
        lines[first - 1:last] = [new]
    return "".join(lines)
