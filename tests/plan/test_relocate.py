"""patchq.plan.relocate: a gone definition searched for in the whole release, for its content
and for the patch's change (small source trees written here)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from patchq.plan import relocate
from patchq.vllmdist import sources

GONE = '''
def pick_port(host, ports):
    for port in ports:
        if probe_socket(host, port):
            return port
    raise RuntimeError("no free port")
'''


def tree(root: Path, files: dict[str, str]):
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip())
    return sources.source_tree(root, version="0.2.0")


def test_files_are_ranked_by_the_rare_names_they_declare(tmp_path):
    src = tree(tmp_path, {
        "vllm/net/ports.py": "def probe_socket(h, p):\n    return True\n\ndef choose_port(h, ports):\n    return 0\n",
        "vllm/misc.py": "def helper():\n    pass\n",
        "vllm/other.py": "def probe_socket(h, p):\n    return False\n\ndef a():\n    pass\n\ndef b():\n    pass\n",
    })
    node = ast.parse(textwrap.dedent(GONE)).body[0]
    ranked = relocate.ranked_files(src, relocate.used_names(node))
    assert ranked[0] in ("vllm/net/ports.py", "vllm/other.py") and "vllm/misc.py" not in ranked


def test_the_nearest_definitions_and_the_change_found_elsewhere(tmp_path):
    moved = GONE.replace("def pick_port(host, ports):", "def choose_free_port(host, ports):") \
        .replace("    raise RuntimeError(\"no free port\")\n", "    raise OSError(\"no free port\")\n")
    src = tree(tmp_path, {"vllm/net/ports.py": "def probe_socket(h, p):\n    return True\n\n" + moved})
    node = ast.parse(textwrap.dedent(GONE)).body[0]
    (best,) = relocate.nearest(src, node, GONE, files=["vllm/net/ports.py"], limit=1)
    assert (best.qualname, best.relpath, best.line) == ("choose_free_port", "vllm/net/ports.py", 5)
    assert best.score > 0.8 and str(best).startswith("choose_free_port (vllm/net/ports.py:5, similarity ")
    # the patch's change (a retry it adds) found in the moved definition by meaning
    patched = ast.parse(textwrap.dedent(GONE.replace(
        "    for port in ports:\n", "    ports = list(ports)\n    for port in ports:\n"))).body[0]
    theirs = tree(tmp_path / "b", {"vllm/net/ports.py": moved.replace(
        "    for port in ports:\n", "    ports = list(ports)\n    for port in ports:\n")})
    group = [patched.body[0]]
    found = relocate.find_change(theirs, group, patched, ["vllm/net/ports.py"])
    assert found is not None and found[0] == "choose_free_port" and found[1].where == "vllm/net/ports.py:2"
    assert relocate.find_change(src, group, patched, ["vllm/net/ports.py"]) is None
