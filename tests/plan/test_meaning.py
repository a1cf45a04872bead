"""patchq.plan.meaning: upstream detection by normalized AST, on small parsed definitions
(no release: the rules are pure functions of the definitions)."""

from __future__ import annotations

import ast
import textwrap

from patchq.plan import meaning


def stmts(code: str) -> list[ast.stmt]:
    return ast.parse(textwrap.dedent(code)).body


def test_equivalent_constructs_and_local_names_match():
    release = stmts('''
        def f(spec, top):
            scaled = spec.size * 2
            if not scaled == top:
                scaled = pad(spec, width=top, size=scaled)
            return scaled
    ''')[0]
    group = stmts('''
        if new != top:
            new = pad(spec, size=new, width=top)
    ''')
    match = meaning.group_found(group, release, "vllm/m.py", keep=())
    assert match is not None and match.where == "vllm/m.py:4"
    assert meaning.group_found(stmts("x += 1"), stmts("def f(x):\n    x = x + 1\n")[0], "m.py") is not None


def test_class_attributes_are_never_renamed():
    release = stmts("class Backend:\n    ADA = 101376\n    DEFAULT = 102400\n")[0]
    group = stmts("DEFAULT = 101376")
    assert meaning.group_found(group, release, "m.py", group_root=stmts("class Backend:\n    DEFAULT = 101376\n")[0]) \
        is None


def test_a_helper_under_another_name_with_the_same_body():
    mine = stmts("def _merge(a, b):\n    '''doc'''\n    out = set(a)\n    out |= set(b)\n    return out\n")
    theirs = stmts("def _union_ids(a, b):\n    s = set(a)\n    s = s | set(b)\n    return s\n"
                   "def other(a, b):\n    return a\n")
    renames = meaning.helper_renames(mine, [(n, f"m.py:{n.lineno}") for n in theirs])
    assert renames == {"_merge": ("_union_ids", "m.py:1")}


def test_same_definition_up_to_locals_and_helpers():
    ours = stmts("def f(a):\n    limit = _mine(a)\n    return limit + 1\n")[0]
    theirs = stmts("def f(a):\n    max_len = _theirs(a)\n    return max_len + 1\n")[0]
    assert meaning.same_definition(ours, theirs, {"_mine": "_theirs"})
    assert not meaning.same_definition(ours, theirs)


def test_similarity_compares_what_each_change_adds():
    base = stmts("return a or b")
    ours = stmts("return (a or b) or self.delayed()")
    theirs = stmts("return a or b or (self.ec is not None and self.ec.pending())")
    alike = stmts("return (a or b) or self.delayed_frees()")
    assert meaning.similarity(ours, alike, base=base) >= meaning.POSSIBLE
    assert meaning.similarity(ours, theirs, base=base) < meaning.POSSIBLE


def test_a_helper_counts_only_when_the_patch_calls_it():
    renames = {"_merge": ("_union_ids", "m.py:1"), "maybe_update_config": ("_hook", "m.py:9")}
    group = stmts("ids = self._merge(a, b)")
    assert meaning.used_by(renames, group) == {"_merge": ("_union_ids", "m.py:1")}


def test_canonical_text_ignores_docstrings_local_names_and_formatting():
    a = stmts('''
        def f(self, n):
            """Doc."""
            total = 0
            for i in range(n):
                total += i
            return total
    ''')[0]
    b = stmts("def f(self, n):\n    acc = 0\n    for k in range(n): acc = acc + k\n    return acc\n")[0]
    assert meaning.body_key(a) == meaning.body_key(b)
    c = stmts("def f(self, n):\n    acc = 1\n    for k in range(n): acc = acc + k\n    return acc\n")[0]
    assert meaning.body_key(a) != meaning.body_key(c)


def test_bound_names_in_order():
    nodes = stmts("x = 1\nfor i, j in pairs:\n    y: int = i\nwith open(p) as fh:\n    pass\n")
    assert meaning.bound_names(nodes) == ["x", "i", "j", "y", "fh"]
    (fn,) = stmts("def g(a, *rest, key=None):\n    b = a\n")
    assert meaning.bound_names([fn], params=True)[:3] == ["a", "rest", "key"]
