"""Splitting a variant's range where rebase or release-check starts a new variant."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patchq.authoring.seriesedit import _split_range
from patchq.errors import SeriesError


@pytest.mark.parametrize("old,at,capped,new", [
    (">=0.23.0", "0.26.0", ">=0.23.0,<0.26.0", ">=0.26.0"),
    ("", "0.26.0", "<0.26.0", ">=0.26.0"),
    # a rebase to an older release than a later variant: the new one ends where the old did
    (">=0.23.0,<0.33.0", "0.30.0", ">=0.23.0,<0.30.0", ">=0.30.0,<0.33.0"),
    # the old range already ends at or before the cut: kept as it is, nothing redundant
    (">=0.15,<0.24", "0.24.0", ">=0.15,<0.24", ">=0.24.0"),
    (">=0.23.0,<0.29.0", "0.30.0", ">=0.23.0,<0.29.0", ">=0.30.0"),
    (">=0.23,<=0.33.0", "0.33.0", ">=0.23,<0.33.0", ">=0.33.0,<=0.33.0"),
])
def test_split_range(old, at, capped, new):
    assert _split_range(old, at) == (capped, new)
    # never an overlap, and the cut release is the new variant's
    cut = Version(at)
    assert cut not in SpecifierSet(capped) and cut in SpecifierSet(new)
    for v in ("0.15.1", "0.20.2", "0.23.0", "0.24.0", "0.26.0", "0.29.0", "0.30.0", "0.32.0", "0.33.0", "0.34.0"):
        assert not (Version(v) in SpecifierSet(capped) and Version(v) in SpecifierSet(new)), v


SERIES_PY = '''"""p: a patch."""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'a': [],
}

PATCH = patch(
    id='p',
    summary='s',
    why='w',
    applies='>=0.23.0',
    variants=[
        variant('>=0.23.0', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
'''
OPS_B = {"b": [{"op": "insert", "new": "x = 1\n", "after": None, "before": None}]}


def _variants(text: str) -> list[str]:
    import ast

    call = next(n for n in ast.walk(ast.parse(text))
                if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "patch")
    (lst,) = [k.value for k in call.keywords if k.arg == "variants"]
    return [ast.get_source_segment(text, el) for el in lst.elts]


def test_add_edit_variant_puts_the_new_variant_on_its_own_line(tmp_path):
    """A one-element list spread over lines: the new variant goes on the next line, indented alike."""
    from patchq.authoring.seriesedit import add_edit_variant

    path = tmp_path / "p.py"
    path.write_text(SERIES_PY)
    assert add_edit_variant(path, SpecifierSet(">=0.23.0"), Version("0.26.0"), OPS_B, "a note") == (
        ">=0.23.0", ">=0.23.0,<0.26.0", ">=0.26.0")
    text = path.read_text()
    assert ("        variant('>=0.23.0,<0.26.0', "
            "edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),\n"
            "        variant(\">=0.26.0\", "
            "edits={anchor: statement_edit(ops) for anchor, ops in OPS_0_26_0.items()}),\n"
            "    ],\n") in text
    assert "# vllm 0.26.0: a note\nOPS_0_26_0 = {\n    'b': [" in text
    compile(text, "p.py", "exec")


def test_replace_variant_edits_sets_its_own_operations_in_place(tmp_path):
    """The edits= of an imported variant read one dict nobody else reads: its value changes, nothing else."""
    from patchq.authoring.seriesedit import replace_variant_edits

    path = tmp_path / "p.py"
    path.write_text(SERIES_PY)
    assert replace_variant_edits(path, SpecifierSet(">=0.23.0"), Version("0.23.0"), OPS_B, "a note") == ">=0.23.0"
    text = path.read_text()
    assert text == SERIES_PY.replace("    'a': [],\n", "    'b': [\n        {\n            'op': 'insert',\n"
                                     "            'new': \"\"\"\\\nx = 1\n\"\"\",\n            'after': None,\n"
                                     "            'before': None,\n        },\n    ],\n")


def test_replace_variant_edits_of_a_hand_written_variant(tmp_path):
    """Hand-written edits (a function, a dict shared with another variant): a new OPS_<version>
    dict; the function and the shared dict stay, an operations dict nothing reads any more goes."""
    from patchq.authoring.seriesedit import replace_variant_edits

    text = SERIES_PY.replace(
        "        variant('>=0.23.0', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),\n",
        "        variant('>=0.23.0,<0.26', edits={'a': fn}, note='kept'),\n"
        "        variant('>=0.26', edits={'o': statement_edit(OLD['o'])}),\n"
        "        variant('>=0.30', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),\n").replace(
        "PATCH = ",
        "def fn(d, found, ctx):\n    return d\n\n\n# old operations\nOLD = {\n    'o': [],\n}\n\n\nPATCH = ")
    path = tmp_path / "p.py"
    path.write_text(text)
    replace_variant_edits(path, SpecifierSet(">=0.23.0,<0.26"), Version("0.23.0"), OPS_B, "hand")
    replace_variant_edits(path, SpecifierSet(">=0.26"), Version("0.26"), {"c": []}, "again")
    out = path.read_text()
    assert _variants(out) == [
        "variant('>=0.23.0,<0.26', edits={anchor: statement_edit(ops) for anchor, ops in OPS_0_23_0.items()}, "
        "note='kept')",
        "variant('>=0.26', edits={anchor: statement_edit(ops) for anchor, ops in OPS_0_26.items()})",
        "variant('>=0.30', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()})"]
    assert "def fn(d, found, ctx):" in out and "OPS = {" in out  # a function and a dict still read stay
    assert "OLD" not in out and "# old operations" not in out
    assert "# vllm 0.23.0: hand\nOPS_0_23_0 = {\n    'b': [" in out
    assert "# vllm 0.26: again\nOPS_0_26 = {\n    'c': []," in out
    compile(out, "p.py", "exec")
    with pytest.raises(SeriesError, match=r"expected one variant\(\">=0.40\", edits=...\) call, found 0"):
        replace_variant_edits(path, SpecifierSet(">=0.40"), Version("0.40"), OPS_B, "none")


def test_set_patch_arguments_changes_only_the_named_arguments(tmp_path):
    from patchq.authoring.seriesedit import set_patch_arguments

    path = tmp_path / "p.py"
    text = ('# keep me\nPATCH = patch(\n    id="p",\n    summary="imported",  # say what\n    why="because",\n'
            '    variants=[variant(">=0.1", edits={})],\n)\n')
    path.write_text(text)
    set_patch_arguments(path, {"summary": "mine", "runtime_names": ["A"]})
    assert path.read_text() == text.replace('"imported"', "'mine'").replace(
        "    variants=", "    runtime_names=['A'],\n    variants=")
    path.write_text('PATCH = patch(id="p", summary="s")\n')
    set_patch_arguments(path, {"runtime_names": ["A"]})
    assert path.read_text() == "PATCH = patch(id=\"p\", summary=\"s\", runtime_names=['A'])\n"
    path.write_text("X = 1\n")
    with pytest.raises(SeriesError, match="expected one `PATCH = patch"):
        set_patch_arguments(path, {"summary": "s"})
