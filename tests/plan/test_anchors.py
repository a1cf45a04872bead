"""patchq.plan.anchors on small modules: qualname index, statement patterns, fingerprints."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest

from patchq.errors import AnchorError
from patchq.model import AnchorSpec
from patchq.plan import anchors as A

MODULE = textwrap.dedent('''
    import os

    class Backend:
        """Shared-memory sizes."""
        DEFAULT = 102400

        def get(self, name):
            if name in self.table:
                return self.table[name]
            return self.DEFAULT

    def unify(specs, max_page):
        for name, spec in specs.items():
            ratio = max_page // spec.page
            new_spec = replace(spec, block_size=spec.block * ratio)
            assert new_spec.page == max_page
            specs[name] = new_spec
        return specs

    if os.environ.get("X"):
        def conditional():
            return 1
    else:
        def conditional():
            return 2

    def outer():
        def inner():
            return 3
        return inner
''')


def cst_def(text: str, qualname: str):
    (node,) = A.index_definitions(cst.parse_module(text))[qualname]
    return node


def test_ast_index_qualnames_include_methods_and_conditional_definitions():
    index = A.ast_index(MODULE)
    assert set(index) == {"Backend", "Backend.get", "unify", "conditional", "outer"}
    assert len(index["conditional"]) == 2  # both branches of the module-level if
    assert "inner" not in index and "outer.inner" not in index  # nested functions do not count
    assert A.definition_span(index["Backend.get"][0]) == (8, 11)


def test_index_definitions_agrees_with_ast_index():
    by_cst = A.index_definitions(cst.parse_module(MODULE))
    assert {k: len(v) for k, v in by_cst.items()} == {k: len(v) for k, v in A.ast_index(MODULE).items()}


def test_declares_is_a_line_anchored_def_or_class():
    assert A.declares(MODULE, "Backend") and A.declares(MODULE, "unify")
    assert A.declares("    async def go():\n        pass\n", "go")
    assert not A.declares("x = Backend()\n", "Backend")
    assert not A.declares("def unify_all(): pass\n", "unify")  # whole names only


@pytest.mark.parametrize("pattern, count", [
    ("new_spec = replace(spec, block_size=spec.block * ratio)", 1),
    ("new_spec   =   replace(spec,\n  block_size = spec.block*ratio)", 1),  # re-wrapped
    ("new_spec = replace(..., block_size=...)", 1),  # ... is one expression each
    ("new_spec = replace(...)", 0),               # ... is one argument, not an argument list
    ("new_spec = replace(**...)", 1),             # **... : any arguments
    ("new_spec = replace(spec, block_size=...)", 1),
    ("new_spec = replace(spec, block_size=spec.block)", 0),
    ("assert ...", 1),
    ("for name, spec in specs.items(): ...", 1),  # ... as a block
    ("specs[...] = ...", 1),
    ("replace(spec, block_size=...)", 1),         # an expression: the statement containing it
    ("ratio = ...", 1),
])
def test_statement_patterns(pattern, count):
    found = A.find_statements(cst_def(MODULE, "unify"), A.Pattern.compile(pattern))
    assert len(found) == count


def test_a_matched_statement_is_the_real_node():
    (found,) = A.find_statements(cst_def(MODULE, "unify"), A.Pattern.compile("assert ..."))
    assert A.node_code(found) == "assert new_spec.page == max_page\n"


def test_if_pattern_with_ellipsis_body_matches_any_else():
    text = "def f(x):\n    if x:\n        a()\n    else:\n        b()\n    if x:\n        c()\n"
    assert len(A.find_statements(cst_def(text, "f"), A.Pattern.compile("if x: ..."))) == 2
    assert len(A.find_statements(cst_def(text, "f"), A.Pattern.compile("if x:\n    c()"))) == 1


def test_pattern_must_be_one_statement():
    with pytest.raises(AnchorError, match="one statement"):
        A.Pattern.compile("a = 1\nb = 2")
    with pytest.raises(AnchorError, match="does not parse"):
        A.Pattern.compile("def (")


def test_match_anchor_counts():
    defn = cst_def(MODULE, "Backend.get")
    one = AnchorSpec(id="ret", module="m", qualname="Backend.get", node="return ...", min_count=1, max_count=1)
    with pytest.raises(AnchorError, match=r"expected 1 match\(es\) of `return \.\.\.` in Backend.get, found 2"):
        A.match_anchor(one, defn)
    two_plus = AnchorSpec(id="ret", module="m", qualname="Backend.get", node="return ...", min_count=2, max_count=None)
    assert len(A.match_anchor(two_plus, defn)) == 2
    whole = AnchorSpec(id="def", module="m", qualname="Backend.get")
    assert A.match_anchor(whole, defn) == [defn]


def test_fingerprint_ignores_formatting_comments_and_docstrings():
    base = "def f(a, b):\n    '''Doc.'''\n    return a + b\n"
    same = "def f(a,\n      b):  # reformatted\n    # a comment\n    return (a + b)\n"
    other = "def f(a, b):\n    return a - b\n"
    fp = A.fingerprint_code(base)
    assert len(fp) == 16 and int(fp, 16) >= 0
    assert A.fingerprint_code(same) == fp
    assert A.fingerprint_code(other) != fp
    # the libcst and ast routes give the same value
    assert A.fingerprint(cst_def(base, "f")) == fp
    assert A.fingerprint_ast(ast.parse(base).body[0]) == fp


def test_fingerprint_of_a_class_sees_its_methods():
    a = "class C:\n    def m(self):\n        return 1\n"
    b = "class C:\n    def m(self):\n        return 2\n"
    assert A.fingerprint_code(a) != A.fingerprint_code(b)


@pytest.mark.parametrize("qualname", ["Backend", "Backend.get"])
def test_lines_a_transform_inserts_follow_the_files_newline_convention(qualname):
    """A CRLF file got LF-only inserted lines (and an LF-only sentinel): the segment is parsed
    with the file's line end, so what a transform adds (statements, a comment) ends in CRLF."""
    from patchq import edits

    text = MODULE.replace("\n", "\r\n")
    node = A.ast_index(text)[qualname][0]
    seg = A.cut_segment(text, "vllm/x.py", qualname, node)
    assert seg.newline == "\r\n"
    body = seg.node.body.body
    new = edits.insert_after(seg.node, body[-1], edits.stmts("A = 1\nif A:\n    B = 2\n"))
    new = edits.add_sentinel(new, "p", "0" * 12)
    out = A.splice(text, seg, seg.render(new))
    assert "A = 1\r\n" in out and "    B = 2\r\n" in out and "# patchq:p:" in out
    assert out.replace("\r\n", "").count("\n") == 0  # no LF-only line anywhere
    lf = A.cut_segment(MODULE, "vllm/x.py", qualname, A.ast_index(MODULE)[qualname][0])
    assert lf.newline == "\n" and "\r" not in A.splice(MODULE, lf, lf.render(lf.node))
