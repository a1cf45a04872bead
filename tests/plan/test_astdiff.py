"""patchq.plan.astdiff: the element diff of two versions of a definition, on small parsed
definitions (pure functions of the :mod:`ast` nodes)."""

from __future__ import annotations

import ast
import textwrap

from patchq.plan import astdiff

BASE = '''
def resolve(cfg, groups):
    """Doc."""
    dcp = cfg.dcp
    if len(groups) <= 1:
        return cfg.block, cfg.block
    sizes = [g.size for g in groups]
    self.table[dcp] = sizes
    out.append(dcp)
    return max(sizes), min(sizes)
'''


def defn(text: str) -> ast.AST:
    return ast.parse(textwrap.dedent(text).lstrip("\n")).body[0]


def test_flatten_gives_headers_blocks_and_statements_in_order_without_the_docstring():
    elems = astdiff.flatten(defn(BASE))
    assert [(e.kind, e.depth) for e in elems] == [("def", 0), ("stmt", 1), ("head", 1), ("stmt", 2),
                                                  ("stmt", 1), ("stmt", 1), ("stmt", 1), ("stmt", 1)]
    assert elems[2].stop == 4 and elems[0].stop == len(elems)  # an element's extent holds its descendants
    assert elems[1].code == "dcp = cfg.dcp" and elems[1].line == 3


def test_names_read_and_written_per_element():
    elems = astdiff.flatten(defn(BASE))
    assert elems[0].writes == {"resolve::cfg", "resolve::groups"}  # parameters bind in the function
    assert elems[1].reads == {"resolve::cfg", "cfg.dcp"} and elems[1].writes == {"resolve::dcp"}
    assert "resolve::g" not in elems[4].reads  # a comprehension's variable is not the function's
    assert "self.table" in elems[5].writes  # an item stored writes the container
    assert "resolve::out" in elems[6].writes  # a mutating method call writes its object


def test_hunks_in_base_positions_and_what_they_add_or_replace():
    base = astdiff.flatten(defn(BASE))
    other_node = defn(BASE.replace("    dcp = cfg.dcp\n", "    dcp = cfg.dcp\n    dcp *= 2\n"))
    other = astdiff.flatten(other_node)
    (h,) = astdiff.hunks(base, other)
    assert (h.i1, h.i2, h.j1, h.j2) == (2, 2, 2, 3)
    assert [ast.unparse(n) for n in astdiff.added(other, [h])] == ["dcp *= 2"]
    assert astdiff.replaced(base, [h]) == []
    assert h.touches(astdiff.Hunk(2, 3, 2, 3)) and not h.touches(astdiff.Hunk(4, 5, 4, 5))


def test_formatting_and_comments_do_not_count():
    reformatted = BASE.replace("    dcp = cfg.dcp\n", "    dcp = (cfg.dcp)  # the same\n")
    assert astdiff.hunks(astdiff.flatten(defn(BASE)), astdiff.flatten(defn(reformatted))) == []


def test_module_tree_is_none_for_a_text_that_does_not_parse():
    assert astdiff.module_tree("def f(:\n") is None
    assert isinstance(astdiff.module_tree("x = 1\n"), ast.Module)
