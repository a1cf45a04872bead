"""patchq.plan.stmtviews: statements as the importer compares them, and the lines above a
statement an operation takes (libcst only)."""

from __future__ import annotations

import libcst as cst

from patchq.plan import stmtviews


def _body(code: str) -> list:
    return list(cst.parse_module(code).body[0].body.body)


def test_code_text_leaves_out_the_lines_above_a_statement():
    a, b = _body("def f():\n    a = 1\n\n    # why\n    b = 2\n")
    assert stmtviews.stmt_text(b) == "\n# why\nb = 2\n" and stmtviews.code_text(b) == "b = 2\n"
    assert stmtviews.lines_text(stmtviews.leading(b)) == ["\n", "# why\n"] and stmtviews.leading(a) == []


def test_header_text_reduces_blocks_to_an_ellipsis():
    (st,) = _body("def f(x):\n    # c\n    if x:\n        y = 1\n    else:\n        y = 2\n")
    assert stmtviews.header_text(st, leading=False) == "if x:\n    ...\nelse:\n    ...\n"
    assert stmtviews.header_text(st).startswith("# c\n")


def test_parse_with_tail_keeps_the_lines_after_the_last_statement():
    stmts, tail = stmtviews.parse_with_tail("# why\nx = 1\n\n# about the next one\n")
    assert [stmtviews.stmt_text(s) for s in stmts] == ["# why\nx = 1\n"]
    assert stmtviews.lines_text(tail) == ["\n", "# about the next one\n"] and tail[0].indent is False
    assert stmtviews.parse_with_tail("") == ([], [])
    (stmt,) = stmtviews.parse_statements("# why\nx = 1\n\n")  # the tail is not a statement's
    assert cst.Module(body=[stmt]).code == "# why\nx = 1\n"


def test_docstrings():
    doc, st = _body('def f():\n    """doc"""\n    "not a docstring by place, a string all the same"\n')
    assert stmtviews.is_docstring(doc) and stmtviews.is_docstring(st)
    assert not stmtviews.is_docstring(_body("def f():\n    x = 'doc'\n")[0])


def test_absorb_gives_an_insertion_the_lines_that_changed_above_the_next_statement():
    (x,) = _body("def f():\n    b = 2\n")
    (y,) = _body("def f():\n\n    b = 2\n")  # a blank line now above b
    (new,) = stmtviews.parse_statements("x = 3\n")
    op = {"op": "insert", "new": "x = 3\n"}
    assert stmtviews.absorb((op, [new]), x, y) and op == {"op": "insert", "new": "x = 3\n\n"}
    (x,) = _body("def f():\n    # about b\n    b = 2\n")
    (y,) = _body("def f():\n    b = 2\n")  # the comment moved above the inserted statement
    (new,) = stmtviews.parse_statements("# about b\nx = 3\n")
    op = {"op": "insert", "new": "# about b\nx = 3\n"}
    assert stmtviews.absorb((op, [new]), x, y) and op == {"op": "insert", "new": "x = 3\n", "under": True}
    (y,) = _body("def f():\n    # another comment\n    b = 2\n")  # b's own comment changed: not the insert's
    (plain,) = stmtviews.parse_statements("x = 3\n")
    assert not stmtviews.absorb(({"op": "insert", "new": "x = 3\n"}, [plain]), x, y)
    assert not stmtviews.absorb(None, x, y)
