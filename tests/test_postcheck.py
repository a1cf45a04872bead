"""patchq.postcheck: the helper a patch's ``upstream_check`` reads one definition of a vLLM with
(by module hint, else package-wide; never a patched copy's sentinel as evidence)."""

from __future__ import annotations

import ast

from patchq import postcheck
from patchq.sentinels import sentinel_comment
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_tree


def test_the_definition_by_hint_then_anywhere(tmp_path):
    tree = write_tree(tmp_path / "tree")
    source = sources.source_tree(tree, version="0.1.0")
    found = postcheck.definition(source, "Backend", "vllm.ops.utils")
    assert found is not None and isinstance(found.node, ast.ClassDef) and found.where == "vllm/ops/utils.py:4"
    assert postcheck.definition(source, "Backend", "vllm.elsewhere").where == "vllm/ops/utils.py:4"  # searched
    assert postcheck.definition(source, "Backend.get").node.name == "get"
    assert postcheck.definition(source, "Missing") is None


def test_a_definition_twice_in_the_hinted_file_is_not_one(tmp_path):
    tree = write_tree(tmp_path / "tree", utils=UTILS_PY + "\n\nclass Backend:\n    pass\n")
    assert postcheck.definition(sources.source_tree(tree, version="0.1.0"), "Backend", "vllm.ops.utils") is None


def test_patched_by_sees_the_sentinel_above(tmp_path):
    text = UTILS_PY.replace("class Backend:", sentinel_comment("bump-default", "0" * 12) + "\nclass Backend:")
    tree = write_tree(tmp_path / "tree", utils=text)
    found = postcheck.definition(sources.source_tree(tree, version="0.1.0"), "Backend", "vllm.ops.utils")
    assert found.patched_by("bump-default") and not found.patched_by("other")
