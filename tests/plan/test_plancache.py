"""The merged planner: every edit goes through Workspace.replace (index, dirty spans and the
rendered text for the relations checks), removals included; the plan cache keys ``strict``."""

from __future__ import annotations

import libcst as cst

from patchq import series as S
from patchq.plan import anchors as A
from patchq.plan import engine, plancache
from patchq.vllmdist import cache, sources
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


def _planned(tmp_path, monkeypatch):
    tree = write_tree(tmp_path / "tree")
    fp = A.fingerprint_ast(A.ast_index(UTILS_PY)["Backend"][0])
    patch = S.load(write_series(tmp_path, fingerprint=fp)).patch("bump-default")
    monkeypatch.setattr(cache, "plans", lambda: tmp_path / "plans")
    first = plancache.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    key = plancache.plan_key(sources.source_tree(tree, version="0.1.0"), [patch])
    return tree, patch, first, key


def test_a_plan_entry_is_plain_json(tmp_path, monkeypatch):
    import json

    _tree, _patch, first, key = _planned(tmp_path, monkeypatch)
    head, _, body = (tmp_path / "plans" / f"{key}.json").read_bytes().partition(b"\n")
    assert head.startswith(b"patchq.plan-cache/3 ")
    doc = json.loads(body)
    assert doc["key"] == key and doc["vllm"] == "0.1.0" and set(doc["patched"]) == set(first.patched)
    assert [plancache.result_from(r) for r in doc["results"]] == first.results
    assert doc["results"][0]["anchors"][0]["qualname"] == "Backend"


def test_a_planted_pickle_is_never_executed(tmp_path, monkeypatch):
    """issue 38: a planted pickle in plans/ ran code on `apply` (exit 0)."""
    import hashlib
    import pickle

    tree, patch, first, key = _planned(tmp_path, monkeypatch)
    marker = tmp_path / "PWNED"

    class Planted:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').write('ran')",))

    payload = pickle.dumps({"format": 2, "results": Planted()})
    for name in (f"{key}.json", f"{key}.pickle"):
        (tmp_path / "plans" / name).write_bytes(hashlib.sha256(payload).digest() + payload)
    again = plancache.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    assert not marker.exists() and again.patched == first.patched and again.workspace is not None


def test_another_users_patched_text_is_not_written(tmp_path, monkeypatch, capsys):
    """A patched text is what apply writes into site-packages: one another user could have
    written is never served (a note, then planned again and stored as ours)."""
    import os

    import pytest

    tree, patch, first, key = _planned(tmp_path, monkeypatch)
    (text,) = [p for p in (tmp_path / "plans" / "texts").rglob("*") if p.is_file()]
    os.chmod(text, 0o666)
    capsys.readouterr()
    again = plancache.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    assert again.workspace is not None and again.patched == first.patched  # planned, not served
    assert f"patchq: note: ignoring the cached patched text {text}" in capsys.readouterr().err
    assert (text.stat().st_mode & 0o777) == 0o644  # stored again, as patchq's
    hit = plancache.plan(sources.source_tree(tree, version="0.1.0"), [patch])
    assert hit.workspace is None
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    os.chown(tmp_path / "plans" / f"{key}.json", 65534, 65534)
    assert plancache.plan(sources.source_tree(tree, version="0.1.0"), [patch]).workspace is not None
