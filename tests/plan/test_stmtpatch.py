"""patchq.plan.stmtpatch on small definitions (libcst only): the shapes the importer meets."""

from __future__ import annotations

import libcst as cst
import pytest

from patchq.errors import AnchorError
from patchq.plan import stmtpatch


def _def(code: str):
    return cst.parse_module(code).body[0]


def _code(node) -> str:
    return cst.Module(body=[node]).code


def _roundtrip(old: str, new: str) -> list[dict]:
    a, b = _def(old), _def(new)
    ops = stmtpatch.diff_definition(a, b)
    assert _code(stmtpatch.apply_ops(a, ops)) == new
    return ops


def test_inserted_comments_and_blank_lines_are_kept():
    ops = _roundtrip("def f():\n    a = 1\n    b = 2\n",
                     "def f():\n    a = 1\n\n    # why b is 3\n    b = 3\n")
    assert [o["op"] for o in ops] == ["replace"]


def test_the_same_statement_twice_is_told_apart_by_its_ordinal():
    old = "def f(x):\n    x.append(1)\n    x.append(1)\n"
    ops = _roundtrip(old, "def f(x):\n    x.append(1)\n    x.append(1)\n    x.append(2)\n")
    assert ops[0]["op"] == "insert"
    ops = _roundtrip(old, "def f(x):\n    x.append(1)\n    x.append(3)\n")
    (op,) = ops
    assert op["op"] == "replace" and (op.get("nth"), op.get("of")) in ((1, 2), (None, None))
    # where the number of alike places changed, the operation refuses instead of guessing
    with_nth = {"op": "replace", "old": "x.append(1)\n", "new": "x.append(3)\n", "after": None, "before": None,
                "nth": 1, "of": 2}
    with pytest.raises(AnchorError, match="made where 2 matched"):
        stmtpatch.apply_ops(_def("def f(x):\n    x.append(1)\n    x.append(1)\n    x.append(1)\n"), [with_nth])


def test_insert_at_the_top_of_a_body_is_a_block_prepend():
    ops = _roundtrip("def f():\n    a = 1\n", "def f():\n    setup()\n    a = 1\n")
    (op,) = ops
    assert op["at"] == "start" and op["block"] is None
    # the statement after it changed upstream: the prepend still finds its block
    moved = stmtpatch.apply_ops(_def("def f():\n    a = 2\n"), ops)
    assert _code(moved) == "def f():\n    setup()\n    a = 2\n"


def test_a_comment_ending_a_block_is_a_footer_operation():
    ops = _roundtrip("def f(x):\n    if x:\n        y = 1\n    return 2\n",
                     "def f(x):\n    if x:\n        y = 1\n        # note\n    return 2\n")
    assert [o["op"] for o in ops] == ["footer"]


def test_module_operations_stay_at_module_level():
    old = cst.parse_module("import os\n\nX = 1\n\n\ndef f():\n    return X\n")
    new = cst.parse_module("import os\nimport sys\n\nX = 2\n\n\ndef f():\n    return X\n")
    ops = stmtpatch.diff_module(old, new)
    assert ops and stmtpatch.apply_ops(old, ops).code == new.code


def test_parse_statements_keeps_a_leading_comment():
    (stmt,) = stmtpatch.parse_statements("# why\nx = 1\n")
    assert cst.Module(body=[stmt]).code == "# why\nx = 1\n"


def test_a_result_operation_wraps_every_return_and_survives_what_is_returned():
    """{"op": "result"} is anchored on the definition: the same operation applies where the
    returned call gained arguments (prime-rl's harmony wrapper on 0.17.0 vs 0.24.0)."""
    op = {"op": "result", "name": "params", "new": "params.stop = 1\nreturn params\n"}
    for ret in ("return build(n=self.n)\n", "return build(\n        n=self.n,\n        seed=self.seed,\n    )\n"):
        got = _code(stmtpatch.apply_ops(_def("def f(self):\n    " + ret), [op]))
        assert got.startswith("def f(self):\n    params = build(") and got.endswith(
            "    params.stop = 1\n    return params\n"), got
    with pytest.raises(AnchorError, match="f: wrap the result: f is a generator"):
        stmtpatch.apply_ops(_def("def f():\n    yield 1\n"), [op])
    edit = stmtpatch.statement_edit([op])
    assert edit.ops == (op,)  # the three-way view reads it


def test_a_comment_ending_the_module_is_a_footer_operation():
    """genesis PN362 appends a block to vllm/env_override.py that ends with a comment line
    (corpus-b D1): the comment is the module's footer, not a statement."""
    old = cst.parse_module("import os\n\nos.environ.setdefault('A', '1')\n")
    new = cst.parse_module("import os\n\nos.environ.setdefault('A', '1')\n\nif os.environ.get('B'):\n    pass\n"
                           "# end of the appended block\n")
    ops = stmtpatch.diff_module(old, new)
    assert [o["op"] for o in ops] == ["insert", "footer"]
    assert stmtpatch.apply_ops(old, ops).code == new.code
