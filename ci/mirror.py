"""How far tests/ mirrors patchq/: which modules with logic have a test module named after them.

A module has logic when it defines a function or a method (declarations only, such as an empty
``__init__.py``, need no test module). Its test module is named after it (docs/testing.md)::

    patchq/<module>.py                 ->  tests/test_<module>.py
    patchq/<package>/<module>.py       ->  tests/<package>/test_<module>.py
    patchq/<package>/__init__.py       ->  tests/<package>/test_<package>.py
    patchq/__main__.py                 ->  tests/test_main.py

A trailing underscore that dodges a keyword or builtin is dropped
(``commands/import_.py`` -> ``tests/commands/test_import.py``).

``python ci/mirror.py`` prints the count and the modules without one;
``tests/repo/test_mirror.py`` keeps the count from going down.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "patchq"
TESTS = REPO / "tests"


def has_logic(path: Path) -> bool:
    """True when the module at ``path`` defines a function or a method (at any depth)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for node in ast.walk(tree))


def modules_with_logic() -> list[str]:
    """Module paths relative to ``patchq/`` (``plan/engine.py``), sorted, of every module with logic."""
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                  if "_bundled" not in p.parts and has_logic(p))


def test_module_for(module: str) -> str:
    """The test module's path relative to the repository root for ``module`` (``plan/engine.py``)."""
    rel = Path(module)
    name = rel.stem
    if name == "__init__":
        name = rel.parent.name
    elif name == "__main__":
        name = "main"
    return str(Path("tests") / rel.parent / f"test_{name.rstrip('_')}.py")


def unmirrored() -> list[str]:
    """Modules with logic that have no test module named after them."""
    return [m for m in modules_with_logic() if not (REPO / test_module_for(m)).is_file()]


def main() -> int:
    modules = modules_with_logic()
    missing = unmirrored()
    print(f"{len(modules) - len(missing)} of {len(modules)} modules with logic have a test module named after them")
    for module in missing:
        print(f"  patchq/{module}: no {test_module_for(module)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
