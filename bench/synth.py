"""A synthetic series of N patches for the scale benchmarks (``bench/scale.py``).

Each patch inserts one statement (``_patchq_synth_<i> = <i>``) at the top of one
function of a vLLM release (default 0.23.0), anchored on the function itself (no
statement pattern), with the function's fingerprint at that release recorded in
``anchors/<id>.toml``. Two layouts:

* ``spread``: one function per module, modules in sorted path order (the first
  top-level function of each module whose body is an indented block);
* ``dense``: every patch in the one module with the most such functions and methods.

Profiles: ``all`` (every patch) and, for the 5-patch matrix, ``p1`` .. ``p4`` (the first
1, 2, 3 and 5 patches). Usage::

    python bench/synth.py --n 200 --layout spread --out /tmp/synth200 [--vllm 0.23.0]

then ``patchq check --series /tmp/synth200/series --profile all --vllm 0.26.0``
(the anchors directory sits beside the series directory).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchq.vllmdist import releases  # noqa: E402
from patchq.plan.anchors import ast_index, fingerprint_ast  # noqa: E402

_MODULE = '''"""Synthetic patch {pid}: one statement at the top of {qualname}."""

from patchq import edits
from patchq.series import patch, variant


def _insert(defn, found, ctx):
    return edits.prepend_to_block(defn, edits.stmts("_patchq_synth_{i} = {i}\\n"))


PATCH = patch(
    id="{pid}",
    summary="synthetic: insert one statement into {qualname}",
    why="bench/synth.py",
    applies=">=0.1",
    variants=[variant("", edits={{"def": _insert}})],
)
'''

_ANCHOR = '''[anchors.def]
module = "{module}"
qualname = "{qualname}"

[anchors.def.fingerprints]
"{version}" = "{fp}"
'''


def _module_name(relpath: str) -> str:
    mod = relpath[:-3]
    if mod.endswith("/__init__"):
        mod = mod[: -len("/__init__")]
    return mod.replace("/", ".")


def _candidates(text: str, top_level_only: bool) -> list[tuple[str, ast.AST]]:
    """(qualname, node) of functions with an indented body, defined once in the module."""
    try:
        index = ast_index(text)
    except SyntaxError:
        return []
    lines = text.split("\n")
    out = []
    for qual, nodes in index.items():
        node = nodes[0]
        if len(nodes) != 1 or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if top_level_only and node.col_offset != 0:
            continue
        first = node.body[0]
        if lines[first.lineno - 1][: first.col_offset].strip():
            continue  # a one-line body (``def f(): pass``): nothing to prepend to
        out.append((qual, node))
    return out


def pick(version: str, n: int, layout: str) -> list[tuple[str, str, str]]:
    """[(relpath, qualname, fingerprint)] of ``n`` functions of ``version`` (module docstring)."""
    tree = releases.release_tree(version)
    files = sorted(p.relative_to(tree).as_posix() for p in (tree / "vllm").rglob("*.py"))
    if layout == "spread":
        out = []
        for rel in files:
            cands = _candidates((tree / rel).read_text(encoding="utf-8"), top_level_only=True)
            if cands:
                qual, node = cands[0]
                out.append((rel, qual, fingerprint_ast(node)))
                if len(out) == n:
                    return out
        raise SystemExit(f"only {len(out)} modules with a top-level function")
    best: list = []
    best_rel = ""
    for rel in files:
        cands = _candidates((tree / rel).read_text(encoding="utf-8"), top_level_only=False)
        if len(cands) > len(best):
            best, best_rel = cands, rel
    if len(best) < n:
        raise SystemExit(f"the densest module {best_rel} has only {len(best)} functions")
    return [(best_rel, q, fingerprint_ast(node)) for q, node in best[:n]]


def generate(out: Path, n: int, layout: str = "spread", version: str = "0.23.0") -> Path:
    """Write ``out/series`` and ``out/anchors``; return the series directory."""
    series, anchors = out / "series", out / "anchors"
    series.mkdir(parents=True, exist_ok=True)
    anchors.mkdir(parents=True, exist_ok=True)
    ids = []
    for i, (rel, qual, fp) in enumerate(pick(version, n, layout)):
        pid = f"synth-{i:04d}"
        ids.append(pid)
        (series / f"synth_{i:04d}.py").write_text(_MODULE.format(pid=pid, qualname=qual, i=i), encoding="utf-8")
        (anchors / f"{pid}.toml").write_text(
            _ANCHOR.format(module=_module_name(rel), qualname=qual, version=version, fp=fp), encoding="utf-8")
    profiles = [("all", ids)] + [(f"p{k}", ids[:m]) for k, m in ((1, 1), (2, 2), (3, 3), (4, 5))]
    text = "".join(f'[profiles.{name}]\ndescription = "synthetic"\npatches = {list(p)!r}\n\n'.replace("'", '"')
                   for name, p in profiles)
    (series / "profiles.toml").write_text(text, encoding="utf-8")
    return series


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--layout", choices=("spread", "dense"), default="spread")
    ap.add_argument("--vllm", default="0.23.0")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    print(generate(Path(args.out), args.n, args.layout, args.vllm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
