"""patchq.documents: every JSON document has one builder; the apply document's fields."""

from __future__ import annotations

import ast
import collections
import json
from pathlib import Path

from patchq import documents

PACKAGE = Path(documents.__file__).parent


def _builders() -> dict[str, list[str]]:
    """schema -> the places (file:line) where a dict literal with that ``schema`` is built."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        consts = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                  and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                  for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Dict):
                continue
            for key, value in zip(node.keys, node.values, strict=True):
                if not (isinstance(key, ast.Constant) and key.value == "schema"):
                    continue
                if isinstance(value, ast.Name) and value.id == "str":
                    continue  # a functional TypedDict's field type in documents.py
                name = value.value if isinstance(value, ast.Constant) else \
                    consts.get(value.id, value.id) if isinstance(value, ast.Name) else ast.unparse(value)
                found[str(name)].append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_every_document_has_one_builder():
    builders = _builders()
    assert "patchq.apply/1" in builders and "patchq.check/1" in builders
    twice = {schema: where for schema, where in builders.items() if len(where) > 1}
    assert not twice, twice


def test_apply_document_fields_in_order():
    doc = documents.apply_document("apply", "full", {"version": "0.23.0", "site_packages": "/sp", "dist": "vllm"},
                                   noop=True, patches=[{"id": "p"}])
    assert list(doc) == ["schema", "command", "ok", "error", "noop", "profile", "vllm", "patches", "written",
                         "restored", "added", "removed", "foreign_kept", "recovered"]
    assert json.loads(json.dumps(doc)) == {
        "schema": "patchq.apply/1", "command": "apply", "ok": True, "error": None, "noop": True, "profile": "full",
        "vllm": {"version": "0.23.0", "site_packages": "/sp", "dist": "vllm"}, "patches": [{"id": "p"}],
        "written": [], "restored": [], "added": [], "removed": [], "foreign_kept": {}, "recovered": []}
    failed = documents.apply_document("revert", None, doc["vllm"], error="why")
    assert failed["ok"] is False and failed["error"] == "why" and failed["noop"] is False
