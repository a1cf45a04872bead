"""patchq.plan.validate: each check that refuses an edit by what it means (real libcst and ast
parses, real pyflakes)."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest

from patchq.errors import AnchorError
from patchq.plan import validate

MODULE = textwrap.dedent('''\
    import os

    LIMIT = 4


    def helper(x):
        return x * 2


    class Backend:
        DEFAULT = 1

        def get(self):
            return helper(self.DEFAULT) + LIMIT
''')


def _cst(code: str):
    return cst.parse_module(textwrap.dedent(code)).body[0]


def _ast(code: str) -> ast.stmt:
    return ast.parse(textwrap.dedent(code)).body[0]


def test_result_check_takes_only_the_same_definition_back():
    old = _cst("def f(x):\n    return x\n")
    validate.check_result("p", "a", "f", old, _cst("def f(x):\n    return x + 1\n"), ())
    validate.check_result("p", "a", "f", old, cst.FlattenSentinel([_cst("Y = 1\n"), _cst("def f(x):\n    pass\n")]), ())
    validate.check_result("p", "a", "f", old, cst.RemovalSentinel.REMOVE, ("a",))
    for new, why in [(None, "returned None, not a definition of f"),
                     (_cst("def g(x):\n    pass\n"), "returned FunctionDef g"),
                     (_cst("class f:\n    pass\n"), "returned ClassDef f"),
                     (cst.RemovalSentinel.REMOVE, "removes f; declare removes=['a']")]:
        with pytest.raises(AnchorError, match="result check: patch p, anchor a: .*" + why.replace("[", r"\[")) as err:
            validate.check_result("p", "a", "f", old, new, ())
        assert err.value.kind == "invalid" and err.value.anchor == "a"


def test_a_pattern_matching_a_docstring_is_refused():
    fn = _cst('def f():\n    """Docs."""\n    x = 1\n')
    doc, body = fn.body.body
    validate.check_docstring_matches("p", "a", "f", [body])
    with pytest.raises(AnchorError, match="docstring check: patch p, anchor a: .*matches a docstring"):
        validate.check_docstring_matches("p", "a", "f", [doc])


def test_a_name_the_patch_makes_undefined_is_refused_unless_declared():
    before = _ast("def helper(x):\n    return x * 2\n")
    after = _ast("def helper(x):\n    return scale(x) * 2\n")
    with pytest.raises(AnchorError, match="undefined-name check: patch p in helper: .*undefined name 'scale'"):
        validate.check_names("p", "helper", MODULE, before, after, None, ())
    validate.check_names("p", "helper", MODULE, before, after, None, ("scale",))
    validate.check_names("p", "helper", MODULE, before, _ast("def helper(x):\n    return os.sep * LIMIT\n"), None, ())


def test_a_method_is_checked_inside_its_class():
    owner = _ast(MODULE.split("\n\n\n")[-1])
    before = owner.body[1]
    after = _ast("def get(self):\n    return helper(self.DEFAULT) + LIMT\n")
    with pytest.raises(AnchorError, match="undefined name 'LIMT'"):
        validate.check_names("p", "Backend.get", MODULE, before, after, owner, ())


def test_a_module_edit_that_redefines_a_name_is_refused():
    after = MODULE.replace("LIMIT = 4\n", "LIMIT = 4\nimport os\n")
    with pytest.raises(AnchorError, match="redefinition check: patch p in module vllm/m.py: .*redefinition"):
        validate.check_module_names("p", "vllm/m.py", MODULE, after, ())
    validate.check_module_names("p", "vllm/m.py", MODULE, MODULE.replace("LIMIT = 4", "LIMIT = 8"), ())


SPEC = textwrap.dedent('''\
    class Base:
        def shared(self):
            return 1


    class Config(Base):
        method: str = "ngram"

        def __post_init__(self):
            self.ready = True
            return self

        def use_eagle(self):
            return self.method == "eagle"
''')


def test_class_members_are_known_statically_or_not_at_all():
    members = validate.class_members(SPEC, "Config")
    assert members is not None and {"method", "ready", "use_eagle", "__post_init__", "shared"} <= members
    assert "use_dspark" not in members
    assert validate.class_members("from x import Remote\nclass C(Remote):\n    pass\n", "C") is None
    assert validate.class_members("class C:\n    def __getattr__(self, n):\n        return n\n", "C") is None
    assert validate.class_members("@register\nclass C:\n    pass\n", "C") is None


def test_a_call_of_a_method_the_class_lacks_is_refused():
    """vllm-ascend's DSpark code calls self.use_dspark(), which SpeculativeConfig defines only
    from 0.25.0 (corpus-b, four false applies on 0.22.0-0.24.0)."""
    before = _ast("def __post_init__(self):\n    self.ready = True\n    return self\n")
    after = _ast("def __post_init__(self):\n    self.ready = True\n    if self.use_dspark():\n        pass\n"
                 "    return self\n")
    with pytest.raises(AnchorError, match=r"undefined-method check: .*self\.use_dspark\(\), which Config "
                                          r"\(vllm/config/spec\.py:6\) does not define here"):
        validate.undefined_self_calls("p", "Config.__post_init__", SPEC, before, after, "vllm/config/spec.py")
    ok = _ast("def __post_init__(self):\n    if self.use_eagle() or self.shared():\n        pass\n    return self\n")
    validate.undefined_self_calls("p", "Config.__post_init__", SPEC, before, ok)
    with_dspark = SPEC + "\n    def use_dspark(self):\n        return False\n"
    validate.undefined_self_calls("p", "Config.__post_init__", with_dspark, before, after)


def test_a_name_only_in_a_local_annotation_is_not_undefined():
    """Optional in `x: Optional[int] = 0` inside a function is never evaluated (PEP 526); in a
    parameter's annotation it is, when the def runs: refused."""
    before = _ast("def helper(x):\n    return x * 2\n")
    local = _ast("def helper(x):\n    y: Optional[int] = x\n    return y * 2\n")
    validate.check_names("p", "helper", MODULE, before, local, None, ())
    param = _ast("def helper(x: Optional[int]):\n    return x * 2\n")
    with pytest.raises(AnchorError, match="undefined name 'Optional'"):
        validate.check_names("p", "helper", MODULE, before, param, None, ())
