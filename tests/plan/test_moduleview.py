"""patchq.plan.moduleview: a module's own statements as a definition (a module-level anchor),
on a small module and on vllm/logger.py of two real releases."""

from __future__ import annotations

import ast

import pytest

from patchq.plan import astdiff, moduleview
from patchq.plan.anchors import module_fingerprint

MODULE = '''"""Doc."""
import os

LIMIT = 4


@cache
def helper(x: int) -> int:
    """Helper."""
    return x * LIMIT


class Box:
    size = LIMIT

if os.name == "nt":
    LIMIT = 2
'''


def test_the_module_elements_are_its_statements_and_the_names_of_its_definitions():
    elems = moduleview.flatten(ast.parse(MODULE))
    assert [(e.kind, e.code) for e in elems] == [
        ("stmt", "import os"), ("stmt", "LIMIT = 4"), ("def", "def helper(x: int) -> int: ..."),
        ("def", "class Box: ..."), ("head", "if os.name == 'nt': ..."), ("stmt", "LIMIT = 2")]
    assert elems[2].writes == {"::helper"} and elems[2].stop == 3  # its name; its body is not the module's
    assert elems[4].stop == 6 and elems[1].writes == {"::LIMIT"}
    assert (elems[2].line, elems[2].end) == (8, 8)  # the header's lines


def test_a_body_or_signature_change_is_no_change_of_the_module_as_its_fingerprint_says():
    other = MODULE.replace("return x * LIMIT", "return x + LIMIT").replace("(x: int)", "(x: int, y=0)")
    a, b = moduleview.flatten(ast.parse(MODULE)), moduleview.flatten(ast.parse(other))
    assert astdiff.hunks(a, b) == [] and module_fingerprint(MODULE) == module_fingerprint(other)
    renamed = moduleview.flatten(ast.parse(MODULE.replace("LIMIT = 4", "LIMIT = 8")))
    assert [(h.i1, h.i2) for h in astdiff.hunks(a, renamed)] == [(1, 2)]


def test_the_outline_cuts_definition_bodies_and_keeps_the_rest():
    out = moduleview.outline(MODULE)
    assert out.startswith('"""Doc."""\nimport os\n\nLIMIT = 4\n\n\n@cache\ndef helper(x: int) -> int:\n    ...\n')
    assert "class Box:\n    ...\n\nif os.name == \"nt\":\n    LIMIT = 2\n" in out
    assert moduleview.outline("def f(:\n") == "def f(:\n"  # not Python: as it is


@pytest.mark.wheel  # vllm/logger.py of 0.30.0 and 0.31.0
def test_upstreams_changes_around_a_module_constant_in_real_releases():
    from patchq.vllmdist import releases

    old, new = ((releases.release_tree(v) / "vllm/logger.py").read_text() for v in ("0.30.0", "0.31.0"))
    a, b = moduleview.flatten(ast.parse(old)), moduleview.flatten(ast.parse(new))
    date = next(i for i, e in enumerate(a) if e.code == "_DATE_FORMAT = '%m-%d %H:%M:%S'")
    near = [h for h in astdiff.hunks(a, b) if h.touches(astdiff.Hunk(date, date + 1, 0, 0))]
    # 0.31.0 rewrote _FORMAT right above it and added _vllm_process_info and two definitions below it
    assert [b[j].code for h in near for j in range(h.j1, h.j2)][-3:] == [
        "_vllm_process_info: tuple[str, int] | None = None", "class _VllmLogRecordFactory: ...",
        "def set_vllm_process_name(process_name: str, *, skip_if_set: bool=False) -> None: ..."]
    assert "def _use_color() -> bool:\n    ...\n" in moduleview.outline(new)
