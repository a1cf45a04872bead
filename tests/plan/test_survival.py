"""patchq.plan.survival: what an edit added and removed (normalized AST), whether it survives
the profile, and whether the release already has it (real ast parses)."""

from __future__ import annotations

import ast
import textwrap

from patchq.plan import survival


def _def(code: str) -> ast.stmt:
    return ast.parse(textwrap.dedent(code)).body[0]


BEFORE = _def('''
    def f(cfg, groups):
        if len(groups) <= 1:
            return cfg.block
        sizes = [g.size for g in groups]
        return max(sizes)
''')


def test_an_insertion_inside_a_branch_is_the_inserted_statement():
    after = _def('''
        def f(cfg, groups):
            if len(groups) <= 1:
                log("one group")   # a comment and formatting do not count
                return cfg.block
            sizes = [g.size for g in groups]
            return max(sizes)
    ''')
    added, removed = survival.diff_definition(BEFORE, after)
    assert [i.code for i in added] == ["log('one group')"] and removed == []


def test_a_changed_header_adds_the_statement_whole_and_a_changed_signature_the_definition():
    guarded = _def(ast.unparse(BEFORE).replace("if len(groups) <= 1:", "if not groups or len(groups) <= 1:"))
    added, removed = survival.diff_definition(BEFORE, guarded)
    assert [i.code for i in added] == ["if not groups or len(groups) <= 1: ..."]
    assert [i.code for i in removed] == ["if len(groups) <= 1: ..."]
    resigned = _def(ast.unparse(BEFORE).replace("def f(cfg, groups)", "def f(cfg, groups, dcp=1)"))
    added, removed = survival.diff_definition(BEFORE, resigned)
    assert [i.code for i in added] == ["def f(cfg, groups, dcp=1): ..."] and len(removed) == 1


def test_survival_and_upstream_by_statement_key():
    after = _def(ast.unparse(BEFORE).replace("    sizes =", "    groups = sorted(groups)\n    sizes ="))
    added, _ = survival.diff_definition(BEFORE, after)
    change = survival.EditChange("p", "a", "vllm/m.py", "f", added=added)
    assert survival.missing_items(added, after) == [] and survival.missing_items(added, BEFORE) == added
    assert survival.missing_items(added, None) == added  # the definition is gone
    release = _def('''
        def f(cfg, groups):
            groups = sorted(groups)
            if len(groups) <= 1:
                return cfg.block
            return max([g.size for g in groups])
    ''')
    # line 3 of the text, plus 10
    assert survival.upstream_items(change, release, "vllm/m.py", offset=10) == [(added[0], "vllm/m.py:13")]
    change.upstream = survival.upstream_items(change, release, "vllm/m.py")
    assert change.is_upstream
    assert survival.upstream_items(change, BEFORE, "vllm/m.py") == []


def test_members_and_duplicates():
    cls = _def("class C:\n    def a(self): ...\n    if X:\n        def b(self): ...\n"
               "    else:\n        def b(self): ...\n")
    assert {k: len(v) for k, v in survival.member_names(cls).items()} == {"a": 1, "b": 2}
    twice = _def("class C:\n    def a(self): ...\n    def a(self): return 1\n")
    assert survival.duplicate_members(_def("class C:\n    def a(self): ...\n"), twice) == ["a"]
    assert survival.duplicate_members(cls, cls) == []  # already twice before: not the edit's
    assert survival.statement_key(_def("x = (1)")) == survival.statement_key(_def("x = 1"))
    assert survival.one_line(BEFORE) == "def f(cfg, groups): ..."


def test_a_statement_is_upstream_only_at_the_depth_the_edit_adds_it():
    """vllm-gaudi's no-op inserts a bare `return` first in check_shm_free_space (0.27.1), whose
    body already returns inside `if not os.path.isdir(...)` (corpus-b D13): that `return` is not
    the inserted one, so the patch is not upstream on the release it was made on."""
    release = _def('''
        def check(path):
            if not isdir(path):
                return
            if size(path) > 1:
                raise RuntimeError(path)
    ''')
    after = _def(ast.unparse(release).replace("def check(path):\n", "def check(path):\n    return\n"))
    added, _ = survival.diff_definition(release, after)
    assert [(i.code, i.depth) for i in added] == [("return", 1)]
    change = survival.EditChange("p", "a", "vllm/m.py", "check", added=added)
    assert survival.upstream_items(change, release, "vllm/m.py") == []
    upstream = _def(ast.unparse(after))
    assert survival.upstream_items(change, upstream, "vllm/m.py") == [(added[0], "vllm/m.py:2")]
