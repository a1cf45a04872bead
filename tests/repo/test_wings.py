"""The two wings (docs/architecture.md, "Two wings"): the tool and its first user, the Spark
stack, which is a series repo of its own (``spark/``) consumed as any installed series is.

* ``spark/`` is laid out as ``patchq init`` writes a series repo;
* the tool's tests name no Spark patch or profile: they run on fixture series
  (``tests/testing/``); the frozen 0.23.0 copy of the drift corpus (``tests/drift/``) is the
  one exception, with the two test modules that check drift with it;
* the wings import nothing of each other's tests, and ``patchq/`` nothing of ``spark/``.

Offline layer.
"""

from __future__ import annotations

import ast
import re
import subprocess

from support import REPO

SPARK = REPO / "spark"
#: test files of the tool that name Spark patch ids through the drift corpus' frozen 0.23.0
#: copy of the Spark series (tests/drift/series-0.23: historical data, its ids are its own)
FROZEN_USERS = {"tests/compat/test_check.py", "tests/compat/test_matrix.py"}


def _tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "--", *paths], capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if line]


def _spark_ids() -> set[str]:
    """The patch ids of the Spark series (``id="..."`` of each series module) and their module names."""
    ids = set()
    for path in sorted((SPARK / "series").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "id" and isinstance(node.value, ast.Constant):
                ids |= {node.value.value, node.value.value.replace("-", "_")}
    return ids


def test_spark_is_laid_out_as_patchq_init_writes_a_series_repo():
    from patchq.authoring import scaffold

    files = scaffold.init_files("spark")
    tracked = set(_tracked("spark"))
    layout = [rel for rel in files if "example" not in rel]  # the example patch is init's, not a layout
    assert [rel for rel in layout if f"spark/{rel}" not in tracked] == []
    assert (SPARK / "patchq.toml").read_text(encoding="utf-8") == files["patchq.toml"]
    assert (SPARK / "pyproject.toml").is_file() and (SPARK / "patchq_spark" / "__init__.py").is_file()


def test_the_tools_tests_name_no_spark_patch_or_profile():
    ids = _spark_ids()
    assert len(ids) >= 2 and all("-" in i or "_" in i for i in ids), ids  # read from spark/series/*.py
    word = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(ids))) + r")(?![\w-])")
    profile = re.compile(r"""["'](?:mtp|dflash|dense)["']""")
    named = sorted(rel for rel in _tracked("tests") if not rel.startswith(("tests/drift/", "tests/verdicts/"))
                   and rel not in FROZEN_USERS and rel.endswith((".py", ".toml"))
                   and (word.search(text := (REPO / rel).read_text(encoding="utf-8")) or profile.search(text)))
    assert named == [], f"test files of the tool naming the Spark series (use a fixture series): {named}"


def test_neither_wing_imports_the_others_tests_and_the_tool_imports_nothing_of_spark():
    for rel in _tracked("spark"):
        if rel.endswith(".py"):
            text = (REPO / rel).read_text(encoding="utf-8")
            assert not re.search(r"^\s*(from|import) (support|testing|conftest)\b", text, re.M), rel
    for rel in _tracked("patchq"):
        if rel.endswith(".py"):
            tree = ast.parse((REPO / rel).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                assert not any(n.split(".")[0] in ("patchq_runtime", "patchq_spark") for n in names), rel
    assert not (REPO / "patchq" / "_bundled").exists()
