"""The definition index (patchq.plan.definitions) and the plan cache (patchq.plan.plancache)
give exactly what parsing whole files gives, on a real vLLM 0.23.0 install."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from patchq.plan import definitions, engine, plancache
from patchq.plan.anchors import ast_index, definition_span, fingerprint_ast
from patchq.vllmdist import sources

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

# a few modules with classes, decorators, conditional and nested definitions
FILES = ["vllm/v1/core/kv_cache_utils.py", "vllm/model_executor/layers/quantization/inc.py",
         "vllm/model_executor/layers/logits_processor.py", "vllm/config/cache.py"]


@pytest.fixture(scope="module")
def source(pristine_site) -> sources.CodeSource:
    return sources.installed(pristine_site)


def test_entries_equal_whole_file_parse(source):
    for rel in FILES:
        text = source.read_text(rel)
        if text is None:
            continue
        want = ast_index(text)
        got = definitions.for_source(source).file(rel)
        assert list(got) == list(want), rel
        lines = definitions.split_lines(text)
        full = definitions.group(definitions.file_entries(text) or ())  # with fingerprints, in one pass
        for qual, nodes in want.items():
            for node, entry in zip(nodes, got[qual], strict=True):
                assert (entry.start, entry.end) == definition_span(node)
                assert (entry.line, entry.col) == (node.lineno, node.col_offset)
                assert entry.fingerprint == ""  # the index leaves fingerprints out (computed when asked)
                d = definitions.definition_from(text, rel, entry, lines)
                assert d.fingerprint == fingerprint_ast(node) == full[qual][nodes.index(node)].fingerprint
                assert (d.node.lineno, d.node.end_lineno) == (node.lineno, node.end_lineno)
                assert ast.dump(d.node) == ast.dump(node)


def test_declared_names_is_declares(source):
    from patchq.plan.anchors import declares

    text = source.read_text(FILES[0])
    names = definitions.declared_names(text)
    for name in ["resolve_kv_cache_block_sizes", "KVCacheBlock", "_not_there", "get", "Kv"]:
        assert (name in names) == declares(text, name)


def test_incremental_index_after_many_edits_in_one_module(source, tmp_path):
    import synth

    series = synth.generate(tmp_path / "full", 12, "full")
    from patchq import series as series_mod

    patches = series_mod.load(series).patches_of("all")
    plan = engine.plan(source, patches)
    assert plan.ok
    ws = plan.workspace
    for rel in plan.patched:
        fresh = definitions.file_entries(ws.text[rel])
        kept = ws._index[rel][1]
        assert [(e.qualname, e.line, e.start, e.end, e.col) for e in kept] == \
            [(e.qualname, e.line, e.start, e.end, e.col) for e in fresh]


def test_compile_error_is_the_whole_files(source):
    ws = engine.Workspace(source, source.read_text)
    rel = FILES[0]
    text = ws.current(rel)
    lines = definitions.split_lines(text)
    entry = ws.index(rel)["resolve_kv_cache_block_sizes"][0]
    broken = lines[: entry.line] + ["    return (\n"] + lines[entry.line:]
    ws.text[rel] = "".join(broken)
    ws.dirty[rel] = [(entry.start, entry.end + 1)]
    err = ws.compile_error(rel)
    with pytest.raises(SyntaxError) as whole:
        compile(ws.text[rel], rel, "exec", dont_inherit=True)
    assert err is not None and (err.lineno, err.msg) == (whole.value.lineno, whole.value.msg)


def test_plan_cache_reuses_and_revalidates(source, tmp_path, monkeypatch):
    from patchq import series as series_mod
    from testing import stack

    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    patches = series_mod.load(stack.SERIES).patches_of("full")
    first = plancache.plan(source, patches)
    assert first.ok and first.workspace is not None
    second = plancache.plan(source, patches)
    assert second.workspace is None  # from the cache
    assert second.patched == first.patched and second.pristine == first.pristine
    assert [r.__dict__ for r in second.results] == [r.__dict__ for r in first.results]
    # a file read by the plan reads differently: planned again
    rel = sorted(first.patched)[0]
    changed = {rel: first.pristine[rel] + "\n# edited\n"}
    third = plancache.plan(source, patches, read=lambda p: changed.get(p, source.read_text(p)))
    assert third.workspace is not None


def test_another_users_index_database_is_not_opened(tmp_path, monkeypatch, capsys):
    """issue 38: a definition index another user could write is not used (it steers the rename
    search); the index is then kept in memory for the process."""
    import os

    from patchq.vllmdist import cache

    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    path = cache.definition_index()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    assert definitions._Store()._conn() is not None
    os.chmod(path, 0o666)
    store = definitions._Store()
    assert store._conn() is None and store.broken
    assert f"ignoring the cached definition index {path}" in capsys.readouterr().err


def test_declares_from_the_names_map_is_the_regex_over_the_text(source):
    """What a package-wide search asks of every candidate file, answered from the index's
    names map for the texts the source handed out (the regex over the file otherwise)."""
    from patchq.plan.anchors import declares

    index = definitions.for_source(source)
    names = ["forward", "__init__", "Backend", "get_kv_cache_config", "KVCacheManager", "nope_zz", "forw"]
    rels = list(index.names())[:300]
    for rel in rels:
        text = source.read_text(rel) or ""
        for name in names:
            assert index.declares(rel, text, name) == declares(text, name), (rel, name)
    edited = source.read_text(rels[0]) + "\ndef nope_zz():\n    pass\n"  # not the source's text: read, not looked up
    assert index.declares(rels[0], edited, "nope_zz")
