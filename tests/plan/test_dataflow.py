"""patchq.plan.dataflow: what a change reads and writes and where its effects flow, on small
parsed definitions (pure functions of flattened definitions)."""

from __future__ import annotations

import ast
import textwrap

from patchq.plan import astdiff, dataflow

BASE = '''
def f(self, a, b=1):
    x = a
    if x:
        return 1
    elif b:
        y = 2
    else:
        y = 3
    z = y + 1
    self.out.append(z)
    return z
'''


def flat(text: str) -> list[astdiff.Elem]:
    return astdiff.flatten(ast.parse(textwrap.dedent(text).lstrip("\n")).body[0])


def test_names_clash_when_equal_or_one_is_an_attribute_of_the_other():
    assert dataflow.clash("self.x", "self.x.y") and dataflow.clash("self.x.y", "self.x")
    assert not dataflow.clash("self.x", "self.xy") and not dataflow.clash("f::x", "f::x.y")
    assert dataflow.clash("f::x", "f::x") and not dataflow.clash("f::x", "g::x")


def test_parameter_changes_are_bindings_not_decorators_or_annotations():
    def header(src):
        return ast.parse(src + "\n    pass\n").body[0]
    assert dataflow.param_changes(header("def f(a, b=1):"), header("def f(a, b=1, c=None):")) == {"c"}
    assert dataflow.param_changes(header("def f(a, b=1):"), header("@cache\ndef f(a: int, b=1) -> int:")) == set()
    assert dataflow.param_changes(header("def f(a, b=1):"), header("def f(new, a, b=1):")) == {"new", "a", "b"}
    assert dataflow.param_changes(header("def f(a, b=1):"), header("def f(a, b=2):")) == {"b"}
    assert dataflow.param_changes(header("class C(A):"), header("class C(A, B):")) == {"<bases>"}


def test_a_change_reads_what_it_adds_and_writes_what_it_adds_or_removes():
    base = flat(BASE)
    other = flat(BASE.replace("    z = y + 1\n", "    z = y + b\n    w = z\n"))
    (h,) = astdiff.hunks(base, other)
    ch = dataflow.change(base, other, h)
    assert set(ch.reads) == {"f::y", "f::b", "f::z"} and set(ch.writes) == {"f::z", "f::w"}
    assert ch.jumps == []
    header = flat(BASE.replace("def f(self, a, b=1):", "@cache\ndef f(self, a, b=1, c=0):"))
    (h,) = astdiff.hunks(base, header)
    assert set(dataflow.change(base, header, h).writes) == {"f::c"}  # the decorator rebinds nothing


def test_effects_flow_through_statements_and_conditions():
    elems = flat(BASE)
    got = dataflow.flows(elems, ["f::a"])
    assert {"f::x", "f::y", "f::z", "self.out"} <= set(got)  # x = a; if x: ... y; z = y + 1; append(z)
    assert got["f::y"].code == "if x: ..."  # through the condition that decides the branch
    assert "f::b" not in dataflow.flows(elems, ["f::z"])


def test_what_a_return_skips():
    elems = flat(BASE)
    # a return inserted right after `x = a` (position 2) skips everything after it
    assert dataflow.skipped(elems, 2, 1, "return") == [(2, len(elems))]
    # one at the end of the `if x:` body skips the rest of the function, not the elif/else
    inside = dataflow.skipped(elems, 4, 2, "return")
    assert dataflow.in_ranges(len(elems) - 1, inside) and not dataflow.in_ranges(6, inside)


def test_an_effect_beyond_the_locals():
    base = flat(BASE)

    def effect(new: str):
        other = flat(new)
        (h,) = astdiff.hunks(base, other)
        return dataflow.effect(dataflow.change(base, other, h), other, dataflow.roots_of(other))

    assert effect(BASE.replace("    z = y + 1\n", "    z = y + 2\n")) == "changes what flows into `self.out.append(z)`"
    assert effect(BASE.replace("    z = y + 1\n", "    z = y + 1\n    self.n = z\n")) == "writes self.n"
    assert effect(BASE.replace("    z = y + 1\n", "    z = y + 1\n    logger.info(self.out)\n")) is None
    assert effect(BASE.replace("    z = y + 1\n", "    z = y + 1\n    assert z\n")) is None
    assert effect(BASE.replace("    z = y + 1\n", "    z = y + 1\n    notify(self)\n")) == "calls notify"
