"""patchq.plan.stmtpatch on small definitions (libcst only): the shapes the importer meets; and on
real vLLM definitions (wheel layer): an edit keeps its place where upstream changed a neighbour."""

from __future__ import annotations

import libcst as cst
import pytest

from patchq.errors import AnchorError
from patchq.plan import stmtpatch
from patchq.plan.anchors import ast_index, cut_segment


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


def test_insert_at_the_top_of_a_body_is_found_by_the_body():
    ops = _roundtrip("def f():\n    a = 1\n", "def f():\n    setup()\n    a = 1\n")
    (op,) = ops
    assert op["at"] == "top"
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


# -- an insertion is an insertion, whatever blank lines or comments surround it (issue 35, 1a) ---------


@pytest.mark.parametrize(("old", "new", "under", "tail"), [
    # a blank line after the inserted block (PEP 8 style): libcst keeps it above the next statement
    ("def f():\n    a = 1\n    b = 2\n", "def f():\n    a = 1\n    x = 3\n\n    b = 2\n", False, "\n"),
    # inserted under the blank line that was above the next statement
    ("def f():\n    a = 1\n\n    b = 2\n", "def f():\n    a = 1\n\n    x = 3\n    b = 2\n", True, ""),
    # inserted under the comment above the next statement (the comment now opens the block)
    ("def f():\n    a = 1\n    # about b\n    b = 2\n", "def f():\n    a = 1\n    # about b\n    x = 3\n    b = 2\n",
     True, ""),
    # ... with a comment of its own for the statement after it
    ("def f():\n    a = 1\n    # about b\n    b = 2\n",
     "def f():\n    a = 1\n    # about b\n    x = 3\n\n    # still b\n    b = 2\n", True, "\n# still b\n"),
    # in a block: a block prepend followed by a blank line
    ("def f(x):\n    if x:\n        a = 1\n    b = 2\n",
     "def f(x):\n    if x:\n        log()\n\n        a = 1\n    b = 2\n", False, "\n"),
])
def test_an_insertion_is_an_insertion_whatever_lines_surround_it(old, new, under, tail):
    (op,) = _roundtrip(old, new)
    assert op["op"] == "insert" and bool(op.get("under")) == under and op["new"].endswith(tail)
    # the statement after it changed: the insertion still places (it never meant to change it)
    changed = _def(old.replace("b = 2", "b = 20"))
    got = _code(stmtpatch.apply_ops(changed, [op]))
    assert "b = 20" in got and ("x = 3" in got or "log()" in got)


def test_a_comment_changed_above_a_kept_statement_is_a_replace_of_it():
    ops = _roundtrip("def f():\n    a = 1\n    # old why\n    b = 2\n",
                     "def f():\n    a = 1\n    # new why\n    b = 2\n")
    assert [o["op"] for o in ops] == ["replace"]


def test_an_insertion_at_the_end_of_a_block_takes_its_trailing_comment():
    _roundtrip("def f(x):\n    if x:\n        y = 1\n    return 2\n",
               "def f(x):\n    if x:\n        y = 1\n        z = 2\n        # note\n    return 2\n")


# -- real definitions: a neighbour changed upstream (wheel layer) -------------------------------------


def _segment(version: str, rel: str, qualname: str, text: str | None = None):
    from patchq.vllmdist.sources import release_source

    text = release_source(version).read_text(rel) if text is None else text
    return cut_segment(text, rel, qualname, ast_index(text)[qualname][0])


def _real_ops(version: str, rel: str, qualname: str, old: str, new: str) -> list[dict]:
    """The operations of a real edit (``old`` -> ``new`` in ``qualname`` at ``version``),
    checked to reproduce it."""
    from patchq.vllmdist.sources import release_source

    text = release_source(version).read_text(rel)
    assert text is not None and text.count(old) == 1, old
    before, after = _segment(version, rel, qualname, text), _segment(version, rel, qualname, text.replace(old, new))
    ops = stmtpatch.diff_definition(before.node, after.node)
    assert before.render(stmtpatch.apply_ops(before.node, ops)) == after.render(after.node)
    return ops


TOPK = "vllm/v1/sample/ops/topk_topp_sampler.py"
MEDIA = "vllm/multimodal/media/connector.py"
KV_MANAGER = "vllm/v1/core/kv_cache_manager.py"


@pytest.mark.wheel
def test_a_real_insertion_followed_by_a_blank_line_survives_a_changed_neighbour():
    """An attribute added in TopKTopPSampler.__init__ at 0.26.0, PEP 8 blank line after it.
    It was recorded as a replace of the whole ``if current_platform.is_cuda(): ... else:``
    chain after it; 0.27.0 changed that chain (PROCESSED_LOGPROBS_MODES), and the patch
    conflicted there. Recorded as the insertion it is, it places."""
    ops = _real_ops("0.26.0", TOPK, "TopKTopPSampler.__init__", "        self.use_fp64_gumbel = use_fp64_gumbel\n",
                    "        self.use_fp64_gumbel = use_fp64_gumbel\n        self.num_topk_calls = 0\n\n")
    assert [(o["op"], o["new"]) for o in ops] == [("insert", "self.num_topk_calls = 0\n\n")]
    target = _segment("0.27.0", TOPK, "TopKTopPSampler.__init__")
    got = target.render(stmtpatch.apply_ops(target.node, ops))
    assert "        self.use_fp64_gumbel = use_fp64_gumbel\n        self.num_topk_calls = 0\n\n" \
           "        if current_platform.is_cuda():\n" in got and "PROCESSED_LOGPROBS_MODES" in got


@pytest.mark.wheel
def test_a_block_insert_is_found_by_its_neighbour_when_the_if_changed():
    """A debug line at the start of get_computed_blocks' early-return branch (0.26.0); 0.27.0
    rewrote the condition (``not self.prefix_cache_lookup_enabled(request)``) and kept the
    ``return`` it is found by (issue 35, 1b)."""
    ret = "            return self.empty_kv_cache_blocks, 0, 0\n"
    line = "            logger.debug(\"prefix cache lookup skipped for %s\", request.request_id)\n"
    ops = _real_ops("0.26.0", KV_MANAGER, "KVCacheManager.get_computed_blocks", ret, line + ret)
    (op,) = ops
    assert op["at"] == "start" and op["block"].startswith("if not self.enable_caching")
    for version in ("0.27.0", "0.34.0"):
        target = _segment(version, KV_MANAGER, "KVCacheManager.get_computed_blocks")
        got = target.render(stmtpatch.apply_ops(target.node, ops))
        assert "        if not self.prefix_cache_lookup_enabled(request):\n" + line + ret in got


@pytest.mark.wheel
def test_an_insert_at_the_top_of_a_body_places_when_the_docstring_and_first_statement_changed():
    """A guard at the top of MediaConnector.fetch_image (0.26.0), after the docstring, a
    blank line after it. 0.27.0 changed both the docstring and the first statement; it was
    found by those two, and conflicted (issue 35, 1c). At the top of the body it places."""
    doc_end = "        By default, the image is converted into RGB format.\n        \"\"\"\n"
    guard = "        if image_url.startswith(\"file:\"):\n            raise ValueError(\"no local files\")\n\n"
    from patchq.vllmdist.sources import release_source

    text = release_source("0.26.0").read_text(MEDIA)
    at = text.index("    def fetch_image(")
    edited = text[:at] + text[at:].replace(doc_end, doc_end + guard, 1)
    before, after = _segment("0.26.0", MEDIA, "MediaConnector.fetch_image", text), \
        _segment("0.26.0", MEDIA, "MediaConnector.fetch_image", edited)
    (op,) = stmtpatch.diff_definition(before.node, after.node)
    assert (op["op"], op["at"]) == ("insert", "top")
    for version, first in (("0.27.0", "image_io = ImageMediaIO("), ("0.34.0", "image_io = self._image_io(")):
        target = _segment(version, MEDIA, "MediaConnector.fetch_image")
        got = target.render(stmtpatch.apply_ops(target.node, [op]))
        assert f'keep the\n        original image mode (e.g. preserving the alpha channel).\n        """\n{guard}' \
               f"        {first}" in got


@pytest.mark.wheel
def test_a_docstring_replacement_places_on_the_docstring_there():
    """A stack's get_mamba_chunk_size with a docstring of its own (0.30.0); 0.31.0 changed
    only vLLM's docstring, which fingerprints leave out: the replacement of the docstring
    still places (issue 35, 1d)."""
    rel, q = "vllm/config/model.py", "ModelConfig.get_mamba_chunk_size"
    ops = _real_ops("0.30.0", rel, q, '        """\n        Returns the mamba chunk size if it exists\n        """\n',
                    '        """The model\'s mamba chunk size, else 256 (the NPU kernels\' tile)."""\n')
    assert [o["op"] for o in ops] == ["replace"] and ops[0]["after"] is None
    target = _segment("0.31.0", rel, q)
    got = target.render(stmtpatch.apply_ops(target.node, ops))
    assert '"""The model\'s mamba chunk size, else 256' in got and "Returns the mamba chunk size" not in got


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
    assert edit.statement_ops == [op]  # the three-way view reads it


def test_a_comment_ending_the_module_is_a_footer_operation():
    """genesis PN362 appends a block to vllm/env_override.py that ends with a comment line
    (corpus-b D1): the comment is the module's footer, not a statement."""
    old = cst.parse_module("import os\n\nos.environ.setdefault('A', '1')\n")
    new = cst.parse_module("import os\n\nos.environ.setdefault('A', '1')\n\nif os.environ.get('B'):\n    pass\n"
                           "# end of the appended block\n")
    ops = stmtpatch.diff_module(old, new)
    assert [o["op"] for o in ops] == ["insert", "footer"]
    assert stmtpatch.apply_ops(old, ops).code == new.code
