"""Statements of a definition as the importer and the operations see them (libcst): its
blocks, a statement's text with or without the comment and blank lines above it, its header
as a pattern, statements parsed from an operation's source, and which of the lines above a
statement belong to the operation just before it.

Kept apart from :mod:`patchq.plan.stmtpatch` (the diff and the application of operations) so
that :mod:`patchq.plan.legacyops`, which reads the operations an earlier patchq wrote, needs
nothing of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import libcst as cst

from patchq.plan.anchors import node_code

Op = dict

_ELLIPSIS = cst.SimpleStatementLine(body=[cst.Expr(cst.Ellipsis())])


class _Blocks(cst.CSTVisitor):
    """IndentedBlocks under a node; ``depth1`` stops at the first level."""

    def __init__(self, depth1: bool) -> None:
        self.depth1 = depth1
        self.found: list[cst.IndentedBlock] = []

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        self.found.append(node)
        return not self.depth1


def sub_blocks(stmt: cst.CSTNode) -> list[cst.IndentedBlock]:
    """The blocks directly under a compound statement (body, elif/else, handlers...), in order."""
    v = _Blocks(depth1=True)
    stmt.visit(v)
    return v.found


def all_blocks(defn: cst.CSTNode) -> list[cst.IndentedBlock]:
    """Every block inside ``defn`` at any depth (its own body first), in source order."""
    v = _Blocks(depth1=False)
    defn.visit(v)
    return v.found


class _Headers(cst.CSTTransformer):
    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return False

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=[_ELLIPSIS], footer=[])


def stmt_text(stmt: cst.CSTNode) -> str:
    """A statement's source at column 0, comments above it included."""
    return node_code(stmt)


def header_text(stmt: cst.CSTNode, leading: bool = True) -> str:
    """A statement with every block directly under it reduced to ``...`` (a pattern).

    For a simple statement this is its text. ``leading=False`` leaves out the comment
    lines above it.
    """
    if not leading and hasattr(stmt, "leading_lines"):
        stmt = stmt.with_changes(leading_lines=[])
    if not sub_blocks(stmt):
        return stmt_text(stmt)
    return stmt_text(cast(cst.CSTNode, stmt.visit(_Headers())))  # _Headers removes nothing


def parse_statements(text: str) -> list[cst.BaseStatement]:
    """Statements of ``text`` (at column 0) with the comment and blank lines above the first
    one kept as its ``leading_lines``: a plain :func:`libcst.parse_module` would put them in
    the module header, and an inserted comment would be lost."""
    if not text.strip():
        return []
    return [_unindent_blank_lines(s) for s in cst.parse_module(_LEAD + text).body[1:]]


class _BlankLines(cst.CSTTransformer):
    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine) -> cst.EmptyLine:
        return updated.with_changes(indent=False) if updated.comment is None and not updated.whitespace.value \
            else updated


def _unindent_blank_lines(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """Blank lines parsed at column 0 count as indented; in a block they would render with its
    indentation. An empty line in the source is an empty line in the result."""
    return stmt.visit(_BlankLines())  # type: ignore[return-value]


_LEAD = "pass\n"  # keeps the comments above the first statement out of Module.header


def parse_with_tail(text: str) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
    """:func:`parse_statements`, and the comment and blank lines after the last statement
    (an operation's ``new`` ending with them: they go above the statement that follows it)."""
    if not text.strip():
        return [], []
    module = cst.parse_module(_LEAD + text)
    blank = _BlankLines()
    return ([_unindent_blank_lines(s) for s in module.body[1:]],
            [line.visit(blank) for line in module.footer])  # type: ignore[misc]


#: An operation just emitted, with the statements it puts in place (its ``new``): the
#: comment and blank lines above the statement after it may belong to it (:func:`absorb`).
Emitted = tuple[Op, Sequence[cst.CSTNode]]


def is_docstring(stmt: cst.CSTNode) -> bool:
    """True for a statement that is only a string literal (a docstring where it opens a body)."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def leading(stmt: cst.CSTNode) -> list[cst.EmptyLine]:
    """The comment and blank lines above a statement (none for a node without them)."""
    return list(getattr(stmt, "leading_lines", ()))


def lines_text(lines: Sequence[cst.EmptyLine]) -> list[str]:
    """Each comment or blank line rendered at column 0 (as :func:`stmt_text` renders the lines above a statement)."""
    return [cst.Module(body=[]).code_for_node(line) for line in lines]


def _bare(stmt: cst.CSTNode) -> cst.CSTNode:
    return stmt.with_changes(leading_lines=[]) if hasattr(stmt, "leading_lines") else stmt


def code_text(stmt: cst.CSTNode) -> str:
    """A statement's source at column 0 without the comment and blank lines above it: what
    the importer compares to tell an inserted statement from a changed one."""
    return stmt_text(_bare(stmt))


def absorb(last: Emitted | None, x: cst.CSTNode, y: cst.CSTNode) -> bool:
    """The comment and blank lines above ``y`` (``x`` before the patch) changed right after
    the operation ``last``: when they are the operation's own, it takes them, so an
    insertion stays an insertion whatever blank lines or comments surround it.

    - ``y`` keeps ``x``'s lines, with lines added above them: those end ``last``'s ``new``
      (applied, they go above the statement that follows it);
    - an insertion under the lines above ``x`` (they now open the inserted block; ``y``
      has lines of its own): ``"under": true``, the lines ``y`` has end ``new``.

    Returns:
        True when ``last`` took the change (``last``'s operation is updated in place).
    """
    if last is None or not last[1]:
        return False
    op, new = last
    old, now = lines_text(leading(x)), lines_text(leading(y))
    if len(now) >= len(old) and now[len(now) - len(old):] == old:
        op["new"] += "".join(now[:len(now) - len(old)])
        return True
    first = leading(new[0])
    if op["op"] == "insert" and old and lines_text(first)[:len(old)] == old:
        opened = [new[0].with_changes(leading_lines=first[len(old):]), *new[1:]]
        op["new"] = "".join(stmt_text(s) for s in opened) + "".join(now)
        op["under"] = True
        return True
    return False
