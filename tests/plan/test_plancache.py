"""The merged planner: every edit goes through Workspace.replace (index, dirty spans and the
rendered text for the relations checks), removals included; the plan cache keys ``strict``."""

from __future__ import annotations

import libcst as cst

from patchq import series as S
from patchq.vllmdist import cache, sources
from patchq.plan import anchors as A, engine, plancache

from testing.small_series import UTILS_PY, write_series, write_tree

M = "vllm/m.py"
TEXT = ("import os\n\nclass A:\n    def f(self):\n        return 1\n\n\n"
        "class B:\n    def g(self):\n        return 2\n\n    def h(self):\n        return 3\n")


def _ws(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / M).write_text(TEXT)
    src = sources.source_tree(tmp_path, version="0.1.0")
    ws = engine.Workspace(src, src.read_text)
    ws.current(M)
    return ws


def test_removal_goes_through_replace_and_is_compiled(tmp_path):
    ws = _ws(tmp_path)
    assert ws.replace(ws.segment(M, "A.f"), cst.RemovalSentinel.REMOVE) == ""
    assert "A.f" not in ws.index(M)
    err = ws.compile_error(M)  # class A lost its only member: the span compile must see it
    assert err is not None and "indented block" in err.msg


def test_replace_returns_the_rendered_segment_and_keeps_enclosing_spans(tmp_path):
    ws = _ws(tmp_path)
    seg = ws.segment(M, "B")
    ws.replace(seg, seg.node)
    seg = ws.segment(M, "B.h")
    text = ws.replace(seg, seg.node.with_changes(name=cst.Name("h2")))
    assert text == "    def h2(self):\n        return 3\n"
    assert sorted(ws.index(M)) == ["A", "A.f", "B", "B.g", "B.h2"]
    assert any(a <= 8 and b >= 13 for a, b in ws.dirty[M])  # B's span survives the later edit inside it
    assert ws.compile_error(M) is None
    assert engine._rendered_def(text, "B.h2").name == "h2"
    assert ws.current_node(M, "B.h2").lineno == 12 and ws.pristine_node(M, "B.h").lineno == 12


def test_plan_cache_keys_strict_and_serves_results_only(tmp_path, monkeypatch):
    tree = write_tree(tmp_path / "tree")
    fp = A.fingerprint_ast(A.ast_index(UTILS_PY)["Backend"][0])
    patch = S.load(write_series(tmp_path, fingerprint=fp)).patch("bump-default")
    monkeypatch.setattr(cache, "plans", lambda: tmp_path / "plans")
    src = sources.source_tree(tree, version="0.1.0")
    assert plancache.plan_key(src, [patch], True) != plancache.plan_key(src, [patch], False)
    first = plancache.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    hit = plancache.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    strict = plancache.plan(sources.source_tree(tree, version="0.1.0"), [patch], strict=True)
    assert first.workspace is not None and hit.workspace is None and strict.workspace is not None
    assert (hit.patched, hit.pristine) == (first.patched, first.pristine)
    assert [(r.patch_id, r.status, r.reason) for r in hit.results] == \
        [(r.patch_id, r.status, r.reason) for r in first.results]
    assert hit.imports == first.imports == {"vllm/ops/utils.py": []}  # what converge reads instead of the texts
