"""A series of N patches in N modules of a release, for the fan-out and plan-reuse tests
(``tests/compat/test_fanout.py``, ``test_checkplan.py``): patch ``fan-i`` inserts one statement
at the top of a top-level function, its fingerprint on 0.23.0 recorded."""

from __future__ import annotations

import ast
from pathlib import Path

from patchq.plan.anchors import fingerprint_ast

_PATCH = '''from patchq import edits
from patchq.series import patch, variant


def _insert(defn, found, ctx):
    return edits.prepend_to_block(defn, edits.stmts("_patchq_fan_{i} = {i}\\n"))


PATCH = patch(id="fan-{i}", summary="one statement at the top of {qual}", why="test", applies=">=0.1",
              variants=[variant("", edits={{"def": _insert}})]{relations})
'''


def modules_of(tree: Path, n: int) -> list[tuple[str, str, str]]:
    """[(module, qualname, fingerprint)] of the first top-level function of each of the first
    ``n`` modules of ``tree`` (a release tree) that has one, in path order."""
    modules: list[tuple[str, str, str]] = []
    for path in sorted((tree / "vllm").rglob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        fn = next((s for s in body if isinstance(s, ast.FunctionDef) and s.body[0].lineno > s.lineno), None)
        if fn is not None:
            mod = path.relative_to(tree).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
            modules.append((mod, fn.name, fingerprint_ast(fn)))
        if len(modules) == n:
            break
    return modules


def spread_series(root: Path, tree: Path | None, n: int, relations: dict[int, str] | None = None,
                  modules: list[tuple[str, str, str]] | None = None) -> Path:
    """``root/series``: patch ``fan-i`` inserts one statement at the top of the first
    top-level function of the i-th module of ``tree`` (a release tree) that has one,
    fingerprint recorded on 0.23.0; or of ``modules`` [(module, qualname, fingerprint)]."""
    if modules is None:
        assert tree is not None
        modules = modules_of(tree, n)
    (root / "series").mkdir(parents=True)
    (root / "anchors").mkdir()
    for i, (mod, qual, fp) in enumerate(modules):
        rel = (relations or {}).get(i, "")
        (root / "series" / f"fan_{i}.py").write_text(_PATCH.format(i=i, qual=qual, relations=rel))
        (root / "anchors" / f"fan-{i}.toml").write_text(
            f'[anchors.def]\nmodule = "{mod}"\nqualname = "{qual}"\n\n[anchors.def.fingerprints]\n"0.23.0" = "{fp}"\n')
    ids = ", ".join(f'"fan-{i}"' for i in range(len(modules)))
    (root / "series" / "profiles.toml").write_text(f"[profiles.all]\npatches = [{ids}]\n")
    return root / "series"
