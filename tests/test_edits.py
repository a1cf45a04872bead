"""patchq.edits: the libcst helpers transforms are written with, on small definitions."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from patchq import edits
from patchq.plan.anchors import Pattern, find_statements, index_definitions, node_code

FUNC = textwrap.dedent('''\
    def unify(specs, max_page):
        for name, spec in specs.items():
            # scale the block size
            new_spec = replace(spec, block_size=spec.block * 2)
            assert new_spec.page == max_page
        return specs
''')


def parse_def(text: str, qualname: str):
    (node,) = index_definitions(cst.parse_module(text))[qualname]
    return node


def one(defn, pattern: str):
    (found,) = find_statements(defn, Pattern.compile(pattern))
    return found


def render(defn) -> str:
    return node_code(defn)


def test_stmts_stmt_expr_parse_indented_text():
    assert [node_code(s) for s in edits.stmts("\n    a = 1\n    b = 2\n")] == ["a = 1\n", "b = 2\n"]
    assert node_code(edits.stmt("    return x")) == "return x\n"
    with pytest.raises(ValueError, match="expected one statement, got 2"):
        edits.stmt("a = 1\nb = 2")
    assert cst.Module(body=[]).code_for_node(edits.expr("  a + b ")) == "a + b"


def test_insert_after_keeps_the_anchor_and_its_comment():
    defn = parse_def(FUNC, "unify")
    new = edits.insert_after(defn, one(defn, "new_spec = replace(..., block_size=...)"),
                             edits.stmts("new_spec = pad(new_spec, max_page)"))
    assert render(new) == FUNC.replace(
        "block_size=spec.block * 2)\n", "block_size=spec.block * 2)\n        new_spec = pad(new_spec, max_page)\n")


def test_insert_before_moves_comments_above_the_insertion():
    defn = parse_def(FUNC, "unify")
    target = one(defn, "new_spec = replace(..., block_size=...)")
    new = edits.insert_before(defn, target, edits.stmts("spec = fix(spec)"))
    assert render(new) == FUNC.replace(
        "        # scale the block size\n",
        "        # scale the block size\n        spec = fix(spec)\n")


def test_replace_with_statements_keeps_leading_comment():
    defn = parse_def(FUNC, "unify")
    target = one(defn, "new_spec = replace(..., block_size=...)")
    new = edits.replace(defn, target, edits.stmts("new_spec = spec\nnew_spec.pad = True"))
    assert render(new) == FUNC.replace(
        "        new_spec = replace(spec, block_size=spec.block * 2)\n",
        "        new_spec = spec\n        new_spec.pad = True\n")


def test_replace_an_expression_node():
    defn = parse_def(FUNC, "unify")
    target = one(defn, "assert ...")
    new = edits.replace(defn, target.body[0].test, edits.expr("new_spec.page <= max_page"))
    assert "assert new_spec.page <= max_page\n" in render(new)


def test_an_edit_target_must_be_in_the_definition():
    defn = parse_def(FUNC, "unify")
    stranger = edits.stmt("x = 1")
    with pytest.raises(ValueError, match="found 0 times"):
        edits.insert_after(defn, stranger, edits.stmts("y = 2"))


def test_append_members_spaces_methods():
    cls = parse_def("class C:\n    a = 1\n", "C")
    new = edits.append_members(cls, edits.stmts("def m(self):\n    return self.a"))
    assert render(new) == "class C:\n    a = 1\n\n    def m(self):\n        return self.a\n"
    with pytest.raises(ValueError, match="one-line body"):
        edits.append_members(parse_def("class D: pass\n", "D"), edits.stmts("b = 2"))


def test_prepend_to_block():
    defn = parse_def(FUNC, "unify")
    loop = one(defn, "for name, spec in specs.items(): ...")
    new_loop = edits.prepend_to_block(loop, edits.stmts("if spec is None:\n    continue"))
    new = edits.replace(defn, loop, new_loop)
    assert "    for name, spec in specs.items():\n        if spec is None:\n            continue\n" in render(new)


def test_replace_each_and_missing_target():
    text = "def f():\n    a(1)\n    a(2)\n    b(3)\n"
    defn = parse_def(text, "f")
    calls = find_statements(defn, Pattern.compile("a(...)"))
    assert len(calls) == 2
    new = edits.replace_each(defn, calls, lambda s: edits.stmt("a_fast()"))
    assert render(new) == "def f():\n    a_fast()\n    a_fast()\n    b(3)\n"
    with pytest.raises(ValueError, match="1 edit target"):
        edits.replace_each(defn, [edits.stmt("zz()")], lambda s: s)


def test_add_sentinel_replaces_its_own_and_keeps_others():
    # (a comment above the first statement of a module belongs to the module's header)
    defn = parse_def("x = 1\n# patchq:other:0123456789ab (x)\ndef f():\n    pass\n", "f")
    once = edits.add_sentinel(defn, "mine", "aaaaaaaaaaaa")
    twice = edits.add_sentinel(once, "mine", "bbbbbbbbbbbb")
    text = render(twice)
    assert edits.find_sentinels(text) == [("other", "0123456789ab"), ("mine", "bbbbbbbbbbbb")]
    assert text.endswith("def f():\n    pass\n")


def test_signature_text():
    defn = parse_def("def hook(self, a: int, /, b=None, *args, c: str = 'x', **kw) -> None:\n    pass\n", "hook")
    assert edits.signature_text(defn.params) == "self, a, /, b=None, *args, c='x', **kw"
    kwonly = parse_def("def g(a, *, b):\n    pass\n", "g")
    assert edits.signature_text(kwonly.params) == "a, *, b"


def test_replace_twice_with_statements_matched_before_the_first():
    import libcst as cst

    from patchq.plan.anchors import Pattern, find_statements

    d = cst.parse_module("def f(x):\n    a = 1\n    if x:\n        a = 1\n    return a\n").body[0]
    first, second = find_statements(d, Pattern.compile("a = 1"))
    d = edits.replace(d, first, edits.stmts("a = 2"))
    d = edits.replace(d, second, edits.stmts("a = 3"))
    assert cst.Module(body=[d]).code == "def f(x):\n    a = 2\n    if x:\n        a = 3\n    return a\n"


def test_stmts_keeps_a_leading_comment():
    import libcst as cst

    assert cst.Module(body=edits.stmts("\n    # why\n    x = 1\n")).code == "# why\nx = 1\n"


# -- wrap_result: a wrapper's code after the original, on every way out (issue 37, item 2) -----------

#: the shape of vLLM's ChatCompletionRequest.to_sampling_params (0.24.0): early returns, one final
#: call spread over lines, a one-line branch; prime-rl's wrapper merges stop ids into its result
TO_PARAMS = textwrap.dedent('''\
    def to_sampling_params(self, max_tokens, default_sampling_params):
        """Build the sampling parameters."""
        if self.beam:
            return BeamParams(max_tokens)
        if self.cached: return self.cached
        # the request's own parameters
        return SamplingParams.from_optional(
            n=self.n,
            stop_token_ids=self.stop_token_ids,
        )
''')
MERGE = "extra = default_sampling_params.get('stop_token_ids') or []\nif extra:\n" \
        "    params.stop_token_ids = sorted(set(params.stop_token_ids or []) | set(extra))\nreturn params\n"


def test_wrap_result_binds_every_returned_value_and_runs_the_code_on_it():
    out = render(edits.wrap_result(parse_def(TO_PARAMS, "to_sampling_params"), "params", edits.stmts(MERGE)))
    assert out.count("extra = default_sampling_params.get('stop_token_ids') or []") == 3
    assert "    if self.beam:\n        params = BeamParams(max_tokens)\n        extra = " in out
    # a one-line branch becomes a block; the comment above the return stays above the code replacing it
    assert "    if self.cached:\n        params = self.cached\n        extra = " in out
    assert "    # the request's own parameters\n    params = SamplingParams.from_optional(\n        n=self.n," in out
    assert out.count("return params") == 3 and '"""Build the sampling parameters."""' in out
    compile(out, "<wrapped>", "exec")


def test_wrap_result_after_the_original_keeps_what_it_returns():
    """A wrapper that calls __post_init__ and then adds code (vllm-ascend's DSpark): the code
    runs before each `return self` and at the end; the value returned stays vLLM's own text."""
    src = "def __post_init__(self):\n    if self.a:\n        return self\n    self.b = 1\n    return self\n"
    out = render(edits.wrap_result(parse_def(src, "__post_init__"), "result", edits.stmts("self.c = 2\n")))
    assert out == ("def __post_init__(self):\n    if self.a:\n        self.c = 2\n        return self\n"
                   "    self.b = 1\n    self.c = 2\n    return self\n")
    init = "def __init__(self, x):\n    self.x = x\n    if x is None:\n        return\n    self.y = x\n"
    out = render(edits.wrap_result(parse_def(init, "__init__"), "result", edits.stmts("self.z = 3\n")))
    assert out == ("def __init__(self, x):\n    self.x = x\n    if x is None:\n        self.z = 3\n        return\n"
                   "    self.y = x\n    self.z = 3\n")


def test_wrap_result_binds_a_value_the_code_could_change():
    src = "def f(self):\n    return self.value\n"
    out = render(edits.wrap_result(parse_def(src, "f"), "result", edits.stmts("self.value = None\n")))
    assert out == "def f(self):\n    result = self.value\n    self.value = None\n    return result\n"


@pytest.mark.parametrize("src, why", [
    ("def f():\n    yield 1\n", "is a generator"),
    ("def f(lock):\n    with lock:\n        return 1\n", "lies under a `with`"),
    ("def f():\n    try:\n        return 1\n    finally:\n        pass\n", "under a `try/finally`"),
    ("def f():\n    return extra\n", "uses extra as a name it does not bind"),
])
def test_wrap_result_refuses_what_would_change_meaning(src, why):
    with pytest.raises(ValueError, match=why):
        edits.wrap_result(parse_def(src, "f"), "params", edits.stmts("extra = 1\nreturn params\n"))
    with pytest.raises(ValueError, match="not a function"):
        edits.wrap_result(parse_def("class C:\n    x = 1\n", "C"), "params", edits.stmts("return params\n"))


def test_scope_names_are_one_scopes_own():
    import ast

    loads, stores, declared = edits.scope_names(ast.parse(
        "x = [a for a in items]\ndef g(b):\n    return c\nglobal q\nf = lambda z: w\ny.attr = v\n").body)
    assert loads == {"items", "y", "v"} and stores == {"x", "g", "f"} and declared == {"q"}
