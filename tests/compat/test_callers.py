"""patchq.compat.callers: a patch that disables a function meets callers its reviewed release
did not have (vllm-gaudi's check_shm_free_space no-op on 0.28.0), on small parsed functions
and source trees."""

from __future__ import annotations

import ast

from patchq.compat import callers
from patchq.vllmdist import sources

CHECK = '''def check_free(required, path="/dev/shm"):
    """Raise when path cannot fit required bytes."""
    if not exists(path):
        return
    if free(path) < required:
        raise RuntimeError("no room")
'''


def fn(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


def test_an_unconditional_early_jump_is_a_short_circuit():
    noop = CHECK.replace('    """Raise when path cannot fit required bytes."""\n',
                         '    """Raise when path cannot fit required bytes."""\n    return None\n')
    jump = callers.short_circuit(fn(CHECK), fn(noop))
    assert isinstance(jump, ast.Return) and ast.unparse(jump) == "return None"
    # a jump inside a condition, one that ends the body, or one already there is none
    guarded = CHECK.replace("    if not exists(path):\n", "    if skip:\n        return\n    if not exists(path):\n")
    assert callers.short_circuit(fn(CHECK), fn(guarded)) is None
    assert callers.short_circuit(fn(CHECK), fn(CHECK + "    return None\n")) is None
    assert callers.short_circuit(fn(noop), fn(noop)) is None
    assert callers.short_circuit(fn("class C:\n    pass\n"), fn(noop)) is None


def test_new_callers_are_the_modules_that_call_it_now_and_did_not(tmp_path):
    def tree(name: str, files: dict[str, str]) -> sources.CodeSource:
        for rel, text in {"vllm/__init__.py": "", "vllm/shm.py": CHECK + "\n\ncheck_free(10)\n", **files}.items():
            (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / rel).write_text(text)
        return sources.source_tree(tmp_path / name, version="1.0" if name == "base" else "2.0")

    base = tree("base", {"vllm/ring.py": "from vllm.shm import check_free\n\ncheck_free(1)\n"})
    target = tree("target", {"vllm/ring.py": "from vllm.shm import check_free\n\ncheck_free(1)\n",
                             "vllm/offload.py": "import vllm.shm\n\n\ndef alloc(n):\n    shm.check_free(n)\n"
                                                "    return check_free(n)\n",
                             "vllm/other.py": "def my_check_free(n):\n    return n\n\nx.check_free(2)\n"})
    assert callers.calls(target, "check_free") == {"vllm/offload.py": 6, "vllm/ring.py": 3, "vllm/shm.py": 9}
    assert callers.new_callers(base, target, "check_free") == ["vllm/offload.py:6"]
    assert callers.new_callers(target, target, "check_free") == []
