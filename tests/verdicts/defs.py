"""Print one vLLM definition across releases, to read a verdict corpus cell's truth.

    python tests/verdicts/defs.py vllm/v1/core/sched/scheduler.py Scheduler._free_request
    python tests/verdicts/defs.py vllm/logger.py '<module>' --releases 0.25.1,0.34.0
    python tests/verdicts/defs.py vllm/x.py Cls.method --find 'pattern'
    python tests/verdicts/defs.py vllm/config/speculative.py SpeculativeConfig.__post_init__ --block 'if self.method in'
    python tests/verdicts/defs.py vllm/v1/worker/utils.py --grep kv_cache

The definition (``Cls.method``, nested functions too: ``Cls.method.inner``) is read from
each release's tree (:func:`patchq.vllmdist.releases.release_tree`). Releases whose
text is identical are grouped; the first text is printed whole, then the unified diff
from each distinct text to the next, its hunk headers in *file* line numbers, so a
reason can cite ``file:line`` directly. ``<module>`` is the module's own statements,
every def/class body elided to ``...``. ``--find REGEX`` lists, per release, the files
under ``vllm/`` with a matching line (where a definition went when it is gone); ``--grep
REGEX`` lists the matching lines of FILE itself per release (where a name is set, sized or
read outside the definition); ``--block REGEX`` narrows the definition to the statement
whose first line matches (that line and the lines indented under it).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from patchq.vllmdist import releases  # noqa: E402

#: the releases the corpus judges by default (authoring releases of its stacks included)
DEFAULT = ("0.15.1,0.17.0,0.19.0,0.20.0,0.21.0,0.22.0,0.23.0,0.24.0,0.25.0,0.25.1,0.26.0,"
           "0.27.0,0.28.0,0.29.0,0.30.0,0.31.0,0.32.0,0.33.0,0.34.0")


def find_def(tree: ast.Module, qualname: str) -> ast.AST | None:
    """The definition ``qualname`` (dotted, through classes and functions), or None when it
    is absent; the last one bound when a body defines the name several times."""
    node: ast.AST = tree
    for part in qualname.split("."):
        found = None
        for child in _body_defs(node):
            if child.name == part:
                found = child
        if found is None:
            return None
        node = found
    return node


def _body_defs(node: ast.AST) -> list:
    """Definitions directly in ``node``'s body, also inside its if/try/with blocks."""
    out: list = []
    stack = list(getattr(node, "body", []))
    while stack:
        child = stack.pop(0)
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(child)
        elif isinstance(child, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(child, field, []))
        elif isinstance(child, ast.ExceptHandler):
            stack.extend(child.body)
    return out


def block(text: str, start: int, pattern: str) -> tuple[str, int] | str:
    """(text, first line) of the first statement in ``text`` (which starts at file line
    ``start``) whose first line matches ``pattern``, with the lines indented under it."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.search(pattern, line):
            indent = len(line) - len(line.lstrip())
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent
                                      or lines[j].lstrip().startswith(")")):
                j += 1
            return "".join(lines[i:j]), start + i
    return "no-block"


def text_of(path: Path, qualname: str) -> tuple[str, int] | str:
    """(text, first line) of the definition in ``path``, or a one-word reason it is not there."""
    if not path.is_file():
        return "no-file"
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    if qualname == "<module>":
        keep = [True] * len(lines)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = node.body[0].lineno - 1
                for i in range(first, node.end_lineno):
                    keep[i] = False
                keep[first] = True
                lines[first] = " " * node.body[0].col_offset + "...\n"
        return "".join(line for line, k in zip(lines, keep, strict=True) if k), 1
    node = find_def(tree, qualname)
    if node is None:
        return "no-def"
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "".join(lines[start - 1:node.end_lineno]), start


def _renumber(diff: list[str], old_start: int, new_start: int) -> list[str]:
    out = []
    for line in diff:
        m = re.match(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@(.*)", line)
        if m:
            line = (f"@@ -{int(m[1]) + old_start - 1}{m[2] or ''} "
                    f"+{int(m[3]) + new_start - 1}{m[4] or ''} @@{m[5]}\n")
        out.append(line)
    return out


def show(rel: str, qualname: str, versions: list[str], narrow: str | None = None) -> None:
    """Print the grouped texts and the diffs between consecutive distinct ones (only the
    statement matching ``narrow`` when given)."""
    groups: list[tuple[list[str], tuple[str, int] | str]] = []
    for v in versions:
        got = text_of(releases.release_tree(v) / rel, qualname)
        if narrow and not isinstance(got, str):
            got = block(got[0], got[1], narrow)
        key = got if isinstance(got, str) else got[0]
        last = groups[-1][1] if groups else None
        lastkey = last if isinstance(last, str) or last is None else last[0]
        if groups and lastkey == key:
            groups[-1][0].append(v)
            if not isinstance(got, str):
                groups[-1][0][-1] = f"{v}@{got[1]}"
        else:
            groups.append(([v if isinstance(got, str) else f"{v}@{got[1]}"], got))
    print(f"# {rel} {qualname}")
    for vs, got in groups:
        where = got if isinstance(got, str) else f"{got[0].count(chr(10))} lines"
        print(f"#   {' '.join(vs)}: {where}")
    prev: tuple[str, int] | None = None
    prev_v = ""
    for vs, got in groups:
        if isinstance(got, str):
            continue
        if prev is None:
            print(f"\n## {vs[0]} (line {got[1]})\n")
            print(got[0], end="")
        else:
            diff = list(difflib.unified_diff(prev[0].splitlines(keepends=True), got[0].splitlines(keepends=True),
                                             f"{prev_v}", f"{vs[0].split('@')[0]}", n=2))
            print(f"\n## {prev_v} -> {vs[0]}\n")
            print("".join(_renumber(diff, prev[1], got[1])), end="")
        prev, prev_v = got, vs[0].split("@")[0]


def find(pattern: str, versions: list[str]) -> None:
    """Per release, the files under vllm/ with a line matching ``pattern`` (file:line)."""
    rx = re.compile(pattern)
    for v in versions:
        root = releases.release_tree(v)
        hits = []
        for path in sorted((root / "vllm").rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{path.relative_to(root)}:{n}")
        print(f"{v}: {' '.join(hits) or '-'}")


def grep(rel: str, pattern: str, versions: list[str]) -> None:
    """Per release, the lines of ``rel`` matching ``pattern`` (line: text)."""
    rx = re.compile(pattern)
    for v in versions:
        path = releases.release_tree(v) / rel
        if not path.is_file():
            print(f"== {v}\n  (no file)")
            continue
        hits = [f"{n}: {line.rstrip()}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if rx.search(line)]
        print(f"== {v}\n  " + "\n  ".join(hits or ["(no match)"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", help="path under the release tree, e.g. vllm/v1/worker/gpu_model_runner.py")
    ap.add_argument("qualname", nargs="?", help="Cls.method, a function, or <module>")
    ap.add_argument("--releases", default=DEFAULT, help="comma-separated versions (default: the corpus's)")
    ap.add_argument("--find", metavar="REGEX", help="list matching lines per release instead")
    ap.add_argument("--grep", metavar="REGEX", help="list FILE's lines matching REGEX per release instead")
    ap.add_argument("--block", metavar="REGEX", help="only the statement whose first line matches REGEX")
    args = ap.parse_args(argv)
    versions = [v.strip() for v in args.releases.split(",") if v.strip()]
    if args.find:
        find(args.find, versions)
    elif args.file and args.grep:
        grep(args.file, args.grep, versions)
    elif args.file and args.qualname:
        show(args.file, args.qualname, versions, args.block)
    else:
        ap.error("give FILE QUALNAME, FILE --grep REGEX, or --find REGEX")
    return 0


if __name__ == "__main__":
    sys.exit(main())
