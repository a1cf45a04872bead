"""A realistic synthetic series of N patches for the scale benchmark (``bench/scale.py``).

``bench/synth.py`` makes a friendly series: one insert at the top of a function, anchored
on the function without a statement pattern. A real stack looks different (issue 25):
patches on methods and functions spread over many modules, each anchored on a
*statement* inside the definition, edits of several kinds, and anchors that drift, move
or disappear in later releases. This generator makes that shape from one vLLM release
(default 0.23.0, whose fingerprints are recorded):

* **Definitions.** The modules of ``vllm/`` in a fixed pseudo-random order (sha256 of the
  path), one definition per module: a method when the module has a suitable one, else a
  top-level function (the two alternate so both kinds stay common). A definition is
  suitable when it is defined once in its module, its qualname has at most two parts
  (``f`` or ``C.m``: what the pyflakes checks analyse) and it holds a statement below.
* **Anchors and edits.** Each anchor is a statement pattern that matches exactly one
  statement of the definition (``count = 1``), chosen by kind, rotating through:

  - ``after``: an assignment ``x = ...`` (pattern: the statement as :func:`ast.unparse`
    spells it); the edit inserts ``_patchq_real_<i> = <i>`` after it;
  - ``before``: a ``return <value>``; the edit inserts the same before it;
  - ``guard``: an ``if <test>:`` (pattern ``if <test>:\\n    ...``); the edit replaces the
    test with ``<i> >= 0 and (<test>)`` (as ``prefix-align`` does);
  - ``prepend``: a ``for``/``with`` block (pattern ``for <target> in <iter>:\\n    ...``);
    the edit puts a statement first in its body.

  Every 8th patch carries a second anchor in the same definition (two edits, as
  ``int8-lmhead``); its transforms see the first edit's result.
* **Fates.** Each definition's fate on a later release (default 0.33.0) is read from
  that release's definition index: ``same`` (equal fingerprint), ``drift`` (changed),
  ``moved`` (only in another module), ``gone`` (nowhere). The picks follow the natural
  order of the modules, so the mix is what vLLM did to them (printed by ``--stats``).

Profiles: ``all`` and ``p1`` .. ``p4`` (the first 1, 2, 3 and 5 patches). Usage::

    python bench/realistic.py --n 200 --out /tmp/real200 [--vllm 0.23.0] [--later 0.33.0] [--stats]

then ``patchq check --series /tmp/real200/series --profile all --vllm 0.26.0`` (the
anchors directory sits beside the series directory). The same N and releases always
give the same series (the first N of a fixed order).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchq.plan import definitions  # noqa: E402
from patchq.plan.anchors import Pattern, ast_index  # noqa: E402
from patchq.vllmdist import releases, sources  # noqa: E402

KINDS = ("after", "before", "guard", "prepend")

_HEAD = '''"""Realistic synthetic patch {pid}: {what}."""

import libcst as cst

from patchq import edits
from patchq.series import patch, variant

'''

_EDITS = {
    "after": '''
def {fn}(defn, found, ctx):
    (stmt,) = found
    return edits.insert_after(defn, stmt, edits.stmts("_patchq_real_{i} = {i}\\n"))
''',
    "before": '''
def {fn}(defn, found, ctx):
    (stmt,) = found
    return edits.insert_before(defn, stmt, edits.stmts("_patchq_real_{i} = {i}\\n"))
''',
    "guard": '''
def {fn}(defn, found, ctx):
    (stmt,) = found
    test = stmt.test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new = cst.BooleanOperation(left=edits.expr("{i} >= 0"), operator=cst.And(), right=test)
    return edits.replace(defn, stmt.test, new)
''',
    "prepend": '''
def {fn}(defn, found, ctx):
    (stmt,) = found
    return edits.replace(defn, stmt, edits.prepend_to_block(stmt, edits.stmts("_patchq_real_{i} = {i}\\n")))
''',
}

_TAIL = '''

PATCH = patch(
    id="{pid}",
    summary="realistic synthetic: {what}",
    why="bench/realistic.py",
    applies=">=0.1",
    variants=[variant("", edits={{{edits}}})],
)
'''


def _module_name(relpath: str) -> str:
    return definitions.module_of(relpath)


def _own_statements(node: ast.AST) -> list[ast.stmt]:
    """The statements of a definition's body, nested blocks included, nested definitions
    and lambdas not entered."""
    out: list[ast.stmt] = []

    def walk(body: list[ast.stmt]) -> None:
        for s in body:
            out.append(s)
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for name in ("body", "orelse", "finalbody"):
                sub = getattr(s, name, None)
                if isinstance(sub, list):
                    walk(sub)
            for h in getattr(s, "handlers", []):
                walk(h.body)
            for c in getattr(s, "cases", []):
                walk(c.body)

    walk(node.body)  # type: ignore[attr-defined]
    return out


_SIMPLE_TESTS = (ast.Name, ast.Attribute, ast.Call, ast.Compare, ast.UnaryOp, ast.Subscript)


def _pattern(kind: str, s: ast.stmt) -> str | None:
    """The anchor pattern of a statement for an edit ``kind``, or None when it does not fit."""
    if kind == "after" and isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
        return ast.unparse(s)
    if kind == "before" and isinstance(s, ast.Return) and s.value is not None:
        return ast.unparse(s)
    if kind == "guard" and isinstance(s, ast.If) and isinstance(s.test, _SIMPLE_TESTS):
        return f"if {ast.unparse(s.test)}:\n    ..."
    if kind == "prepend" and isinstance(s, ast.For):
        return f"for {ast.unparse(s.target)} in {ast.unparse(s.iter)}:\n    ..."
    if kind == "prepend" and isinstance(s, ast.With):
        return f"with {', '.join(ast.unparse(i) for i in s.items)}:\n    ..."
    return None


def _anchors_in(node: ast.AST, lines: list[str]) -> dict[str, list[tuple[int, str]]]:
    """kind -> [(line, pattern)] of the statements of ``node`` an anchor of that kind may
    use: on a line of their own (not a one-line block, no ``;``), matched exactly once in
    the whole definition (as the engine counts)."""
    every = [s for s in ast.walk(node) if isinstance(s, ast.stmt) and s is not node]
    per_line: dict[int, int] = {}
    for s in every:
        per_line[s.lineno] = per_line.get(s.lineno, 0) + 1
    out: dict[str, list[tuple[int, str]]] = {}
    for s in _own_statements(node):
        if per_line.get(s.lineno, 0) != 1 or lines[s.lineno - 1][: s.col_offset].strip():
            continue
        if getattr(s, "end_lineno", s.lineno) != s.lineno and not isinstance(s, (ast.If, ast.For, ast.With)):
            continue  # multi-line simple statements: fine for patchq, but keep patterns short
        if isinstance(s, (ast.If, ast.For, ast.With)) and (s.body[0].lineno == s.lineno):
            continue  # a one-line block: nothing to prepend to
        for kind in KINDS:
            pat = _pattern(kind, s)
            if pat is None or len(pat) > 160:
                continue
            try:
                compiled = Pattern.compile(pat)
            except Exception:  # noqa: BLE001 - a pattern patchq cannot read is skipped
                continue
            if sum(1 for t in every if compiled.matches(t)) == 1 and compiled.matches(s):
                out.setdefault(kind, []).append((s.lineno, pat))
    return out


def _order(files: list[str]) -> list[str]:
    return sorted(files, key=lambda rel: hashlib.sha256(rel.encode()).hexdigest())


def _fate(later_index: definitions.SourceIndex, rel: str, qual: str, fp: str) -> str:
    found = (later_index.file(rel) or {}).get(qual)
    if found:
        return "same" if len(found) == 1 and found[0].fingerprint == fp else "drift"
    return "moved" if later_index.where(qual) else "gone"


def pick(version: str, n: int, later: str) -> list[dict]:
    """``n`` picks ``{rel, qual, fp, kind, anchors: [(kind, pattern)], fate}`` (module docstring)."""
    tree = releases.release_tree(version)
    files = _order([p.relative_to(tree).as_posix() for p in (tree / "vllm").rglob("*.py")])
    later_index = definitions.for_source(sources.release_source(later))
    out: list[dict] = []
    for rel in files:
        text = (tree / rel).read_text(encoding="utf-8")
        try:
            index = ast_index(text)
        except SyntaxError:
            continue
        lines = text.split("\n")
        want_method = len(out) % 2 == 0
        found = None
        for prefer in (want_method, not want_method):
            for qual, nodes in index.items():
                node = nodes[0]
                if len(nodes) != 1 or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if ("." in qual) != prefer or qual.count(".") > 1:
                    continue
                cands = _anchors_in(node, lines)
                if not cands:
                    continue
                i = len(out)
                kind = next((k for k in KINDS[i % 4:] + KINDS[:i % 4] if k in cands), None)
                if kind is None:
                    continue
                anchors = [(kind, cands[kind][0][1])]
                if i % 8 == 7:  # a second edit of the same definition
                    other = next(((k, p) for k in KINDS for _ln, p in cands.get(k, [])
                                  if p != anchors[0][1] and k in ("after", "before")), None)
                    if other is not None:
                        anchors.append(other)
                entry = definitions.file_entries(text) or ()
                fp = next(e.fingerprint for e in entry if e.qualname == qual)
                found = {"rel": rel, "qual": qual, "fp": fp, "anchors": anchors}
                break
            if found:
                break
        if found is None:
            continue
        found["fate"] = _fate(later_index, found["rel"], found["qual"], found["fp"])
        out.append(found)
        if len(out) == n:
            definitions.save_all()
            return out
    raise SystemExit(f"only {len(out)} modules with a suitable definition")


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a TOML basic string (JSON escapes are TOML escapes)


def generate(out: Path, n: int, version: str = "0.23.0", later: str = "0.33.0") -> Path:
    """Write ``out/series`` and ``out/anchors`` (and ``out/fates.json``); return the series directory."""
    series, anchors = out / "series", out / "anchors"
    series.mkdir(parents=True, exist_ok=True)
    anchors.mkdir(parents=True, exist_ok=True)
    ids, fates = [], {}
    for i, p in enumerate(pick(version, n, later)):
        pid = f"real-{i:04d}"
        ids.append(pid)
        fates[pid] = {"qualname": p["qual"], "path": p["rel"], "fate": p["fate"],
                      "kinds": [k for k, _ in p["anchors"]]}
        what = f"{'+'.join(k for k, _ in p['anchors'])} in {p['qual']} ({_module_name(p['rel'])})"
        body = _HEAD.format(pid=pid, what=what)
        names = []
        for j, (kind, _pat) in enumerate(p["anchors"]):
            fn = f"_edit_{j}"
            body += _EDITS[kind].format(fn=fn, i=i * 10 + j)
            names.append(f'"a{j}": {fn}')
        body += _TAIL.format(pid=pid, what=what, edits=", ".join(names))
        (series / f"real_{i:04d}.py").write_text(body, encoding="utf-8")
        toml = "".join(
            f'[anchors.a{j}]\nmodule = "{_module_name(p["rel"])}"\nqualname = "{p["qual"]}"\n'
            f"node = {_toml_string(pat)}\ncount = 1\n\n[anchors.a{j}.fingerprints]\n"
            f'"{version}" = "{p["fp"]}"\n\n'
            for j, (_kind, pat) in enumerate(p["anchors"]))
        (anchors / f"{pid}.toml").write_text(toml, encoding="utf-8")
    profiles = [("all", ids)] + [(f"p{k}", ids[:m]) for k, m in ((1, 1), (2, 2), (3, 3), (4, 5))]
    text = "".join(f'[profiles.{name}]\ndescription = "realistic synthetic"\npatches = {json.dumps(p)}\n\n'
                   for name, p in profiles)
    (series / "profiles.toml").write_text(text, encoding="utf-8")
    (out / "fates.json").write_text(json.dumps(fates, indent=1) + "\n", encoding="utf-8")
    return series


def stats(out: Path) -> dict:
    """Counts of fates and edit kinds of a generated series (``out/fates.json``)."""
    fates = json.loads((out / "fates.json").read_text(encoding="utf-8"))
    counts: dict[str, dict[str, int]] = {"fate": {}, "kind": {}, "definition": {}}
    for f in fates.values():
        counts["fate"][f["fate"]] = counts["fate"].get(f["fate"], 0) + 1
        for k in f["kinds"]:
            counts["kind"][k] = counts["kind"].get(k, 0) + 1
        d = "method" if "." in f["qualname"] else "function"
        counts["definition"][d] = counts["definition"].get(d, 0) + 1
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--vllm", default="0.23.0")
    ap.add_argument("--later", default="0.33.0", help="the release whose index gives each anchor's fate")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stats", action="store_true")
    args = ap.parse_args()
    print(generate(Path(args.out), args.n, args.vllm, args.later))
    if args.stats:
        print(json.dumps(stats(Path(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
