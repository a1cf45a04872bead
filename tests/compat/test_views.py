"""patchq.compat.views: several profiles from one plan, and when a view equals checking the
profile alone (the matrix's shortcut)."""

from __future__ import annotations

from dataclasses import dataclass, field

from patchq import series as series_mod
from patchq.compat import views
from patchq.vllmdist import sources
from testing.small_series import write_tree


@dataclass
class Row:
    touched: set = field(default_factory=set)
    blocking: bool = False
    compile_failed: bool = False
    left_edits: bool = True


def test_union_order_starts_with_the_longest_profile():
    assert views.union_order({"a": ["x"], "b": ["y", "x", "z"], "c": ["w", "x"]}) == ["y", "x", "z", "w"]


def test_a_view_is_exact_unless_an_excluded_patch_changed_a_shared_file_first():
    order = ["p", "q", "r"]
    rows = {"p": Row({"f.py"}), "q": Row({"f.py"}), "r": Row({"g.py"})}
    assert views.view_is_exact(["q", "r"], order, rows) is False  # p wrote f.py before q
    assert views.view_is_exact(["p", "r"], order, rows)  # q comes after p
    assert views.view_is_exact(["p", "q"], order, rows)  # r shares nothing
    assert not views.view_is_exact(["r", "p"], order, rows)  # not in the plan's order
    rows["q"] = Row({"f.py"}, blocking=True, left_edits=False)  # a failed patch leaves no trace...
    assert views.view_is_exact(["p", "r"], order, rows)
    rows["q"] = Row({"f.py"}, blocking=True, compile_failed=True, left_edits=False)  # ...unless it broke the file
    assert not views.view_is_exact(["p", "r"], order, rows)
    # a blocking patch whose edits the plan kept (check says review) is planned under the next one
    rows = {"p": Row({"f.py"}, blocking=True), "q": Row({"f.py"}), "r": Row({"g.py"})}
    assert not views.view_is_exact(["q", "r"], order, rows)


def test_check_profiles_gives_each_profile_its_rows(small, tmp_path):
    tree = write_tree(tmp_path / "tree")
    out = views.check_profiles(sources.source_tree(tree, version="0.1.0"), series_mod.load(small.series.root),
                               ["base", "none"])
    assert [r.id for r in out["base"]] == ["bump-default"] and out["none"] == []
    assert out["base"][0].status == "applies"
