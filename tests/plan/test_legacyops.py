"""patchq.plan.legacyops: an insertion an earlier patchq recorded as a replace of the next
statement is read as the insertion it is: the same bytes where the replace placed, the
insertion's robustness where it did not (small definitions; a real patch in the wheel layer)."""

from __future__ import annotations

import libcst as cst
import pytest

from patchq.errors import AnchorError
from patchq.plan import legacyops, stmtpatch, stmtviews
from patchq.plan.anchors import ast_index, cut_segment


def _def(code: str):
    return cst.parse_module(code).body[0]


def _code(node) -> str:
    return cst.Module(body=[node]).code


#: what patchq wrote before for `x = 3` inserted after `a = 1`, a blank line after it
OLD_BLANK_AFTER = {"op": "replace", "old": "b = 2\n", "new": "x = 3\n\nb = 2\n", "after": "a = 1\n", "before": None}
#: ... and for `x = 3` inserted under the comment above `b = 2`
OLD_UNDER_COMMENT = {"op": "replace", "old": "# about b\nb = 2\n", "new": "# about b\nx = 3\nb = 2\n",
                     "after": "a = 1\n", "before": None}


@pytest.mark.parametrize("old", [OLD_BLANK_AFTER, OLD_UNDER_COMMENT])
def test_a_replace_that_keeps_its_statement_is_read_as_an_insertion(old):
    (op,) = legacyops.read([old])
    assert op["op"] == "insert" and op["before"] == "b = 2\n" and op["_legacy"] is old
    pristine = "def f():\n    a = 1\n" + ("    # about b\n" if "#" in old["old"] else "") + "    b = 2\n"
    # where the replace placed: the same bytes as before
    assert _code(stmtpatch.apply_ops(_def(pristine), [op])) == _code(stmtpatch.apply_ops(_def(pristine), [old]))
    # where upstream changed the statement the replace kept: the replace has no place, the insertion has
    changed = _def(pristine.replace("b = 2", "b = 20"))
    with pytest.raises(AnchorError, match="no place"):
        stmtpatch.apply_ops(changed, [old])
    got = _code(stmtpatch.apply_ops(changed, [op]))
    assert got == _code(stmtpatch.apply_ops(_def(pristine), [old])).replace("b = 2", "b = 20")


def test_a_statement_kept_first_is_an_insertion_after_it():
    old = {"op": "replace", "old": "a = 1\n", "new": "a = 1\nx = 3\n", "after": None, "before": "b = 2\n"}
    (op,) = legacyops.read([old])
    assert (op["op"], op["after"], op["before"], op["new"]) == ("insert", "a = 1\n", "b = 2\n", "x = 3\n")


@pytest.mark.parametrize("old", [
    {"op": "replace", "old": "b = 2\n", "new": "b = 3\n", "after": None, "before": None},  # a real change
    {"op": "replace", "old": "b = 2\n", "new": "", "after": None, "before": None},  # a deletion
    {"op": "replace", "old": "b = 2\nc = 3\n", "new": "x = 1\nb = 2\nc = 3\n", "after": None, "before": None},
    dict(OLD_BLANK_AFTER, nth=0, of=2),  # alike places are counted per kind of operation
    {"op": "insert", "new": "x = 3\n", "after": "a = 1\n", "before": "b = 2\n"},
])
def test_anything_else_stays_as_it_was(old):
    assert legacyops.read([old]) == [old]


def test_the_series_file_is_read_not_rewritten():
    ops = [dict(OLD_BLANK_AFTER)]
    edit = stmtpatch.statement_edit(ops)
    edit(_def("def f():\n    a = 1\n    b = 2\n"), [], None)
    assert ops == [OLD_BLANK_AFTER] and edit.statement_ops == [OLD_BLANK_AFTER]


# -- a real patch recorded the old way (wheel layer) ----------------------------------------------------

TOPK, QUAL = "vllm/v1/sample/ops/topk_topp_sampler.py", "TopKTopPSampler.__init__"


def _segment(version: str):
    from patchq.vllmdist.sources import release_source

    text = release_source(version).read_text(TOPK)
    return cut_segment(text, TOPK, QUAL, ast_index(text)[QUAL][0])


@pytest.mark.wheel
def test_a_real_patch_recorded_the_old_way_keeps_its_bytes_and_gains_the_insertions_robustness():
    """count-topk as the previous patchq recorded it from a diff of vLLM 0.26.0 (an attribute
    added in TopKTopPSampler.__init__, PEP 8 blank line after it: issue 37, item 1): a
    replace of the whole ``if current_platform.is_cuda(): ... else:`` chain after it. Read as
    the insertion, it gives the same bytes on 0.26.0 and places on 0.27.0, where upstream
    changed that chain and the replace had no place."""
    base = _segment("0.26.0")
    chain = next(st for st in base.node.body.body if isinstance(st, cst.If))
    old = {"op": "replace", "old": stmtviews.stmt_text(chain),
           "new": "self.num_topk_calls = 0\n\n" + stmtviews.stmt_text(chain),
           "after": "self.use_fp64_gumbel = use_fp64_gumbel\n", "before": None}
    assert old["old"].startswith("if current_platform.is_cuda():\n    # FlashInfer doesn't expose")
    (op,) = legacyops.read([old])
    assert op["op"] == "insert" and op["new"] == "self.num_topk_calls = 0\n\n"
    assert base.render(stmtpatch.apply_ops(base.node, [op])) == base.render(stmtpatch.apply_ops(base.node, [old]))
    target = _segment("0.27.0")
    with pytest.raises(AnchorError, match="no place"):
        stmtpatch.apply_ops(target.node, [old])
    got = target.render(stmtpatch.apply_ops(target.node, [op]))
    assert "        self.use_fp64_gumbel = use_fp64_gumbel\n        self.num_topk_calls = 0\n\n" \
           "        if current_platform.is_cuda():\n" in got
