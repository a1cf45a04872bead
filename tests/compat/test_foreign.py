"""patchq.compat.foreign: a module of the stack's own that a patch imports, whose vLLM imports
break on a release (AReaL's router module on 0.23.0), on small source trees."""

from __future__ import annotations

import ast

from patchq.compat import foreign
from patchq.vllmdist import sources

STACK = '''import os
from fastapi import APIRouter
from vllm.entrypoints.utils import with_cancellation
from vllm.logger import init_logger
import vllm.entrypoints.openai.protocol

try:
    from vllm.optional import maybe
except ImportError:
    maybe = None

router = APIRouter()
'''


def tree(tmp_path, name: str, files: dict[str, str]) -> sources.CodeSource:
    for rel, text in {"vllm/__init__.py": "", "vllm/logger.py": "def init_logger(n):\n    pass\n",
                      "vllm/entrypoints/__init__.py": "", "vllm/entrypoints/openai/__init__.py": "",
                      "vllm/entrypoints/openai/protocol.py": "", **files}.items():
        (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name / rel).write_text(text)
    return sources.source_tree(tmp_path / name, version="1.0" if name == "base" else "2.0")


def test_the_modules_a_patch_adds_imports_of(tmp_path):
    before = ast.parse("def build():\n    app = make()\n    return app\n")
    after = ast.parse("def build():\n    app = make()\n    from mystack.server import router\n    import json\n"
                      "    from vllm.x import y\n    return app\n")
    assert foreign.added_modules(before, after) == ["mystack.server", "mystack.server.router"]
    assert [(m, n) for m, n, _, _ in foreign.vllm_imports(STACK)] == [
        ("vllm.entrypoints.utils", "with_cancellation"), ("vllm.logger", "init_logger"),
        ("vllm.entrypoints.openai.protocol", None)]  # the guarded import is the module's own business


def test_an_import_the_reviewed_release_resolves_and_the_target_does_not(tmp_path):
    site = tmp_path / "site"
    (site / "mystack").mkdir(parents=True)
    (site / "mystack" / "__init__.py").write_text("")
    (site / "mystack" / "server.py").write_text(STACK)
    utils = {"vllm/entrypoints/utils.py": "def with_cancellation(f):\n    return f\n"}
    base = tree(tmp_path, "base", utils)
    assert foreign.broken_imports(base, tree(tmp_path, "same", utils), ["mystack.server"], [str(site)]) == []
    looked: dict = {}
    target = tree(tmp_path, "target", {})  # the module is gone
    broken = foreign.broken_imports(base, target, ["mystack.server", "mystack.server.router"], [str(site)], looked)
    assert broken == [f"{site / 'mystack' / 'server.py'}:3 `from vllm.entrypoints.utils import with_cancellation`: "
                      f"vllm 2.0 has no vllm.entrypoints.utils (reviewed vllm 1.0 has, vllm/entrypoints/utils.py:1)"]
    assert looked["mystack.server"].startswith(f"{site / 'mystack' / 'server.py'} ") and \
        looked["mystack.server.router"] is None
    renamed = tree(tmp_path, "renamed", {"vllm/entrypoints/utils.py": "def with_cancel(f):\n    return f\n"})
    assert foreign.broken_imports(base, renamed, ["mystack.server"], [str(site)])[0].endswith(
        "vllm 2.0 has no with_cancellation in vllm.entrypoints.utils (reviewed vllm 1.0 has, "
        "vllm/entrypoints/utils.py:1)")
    assert foreign.broken_imports(base, target, ["notinstalled.mod"], [str(site)]) == []  # not seen: no finding
