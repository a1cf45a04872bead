r"""Print one vLLM definition across cached releases, for reading a corpus cell's truth.

    python tests/verdicts/definition_history.py vllm/v1/worker/utils.py bind_kv_cache
    python tests/verdicts/definition_history.py vllm/config/scheduler.py SchedulerConfig.__post_init__ --from 0.20.0
    python tests/verdicts/definition_history.py vllm/v1/worker/utils.py bind_kv_cache --grep kv_cache
    python tests/verdicts/definition_history.py vllm/config/speculative.py SpeculativeConfig.__post_init__ \
        --block 'if self.method in \("ngram"'

Releases with the same text (comments and formatting included) are grouped; between two
groups the unified diff is printed, with the line numbers of the release's file. Where
the file or the definition is missing the release says so (a rewrite may have moved it:
search the release tree). ``--block REGEX`` narrows the definition to the statement whose
first line matches (that line and the lines indented under it). ``--grep`` lists, per release,
the file's lines that match a regular expression instead (where a name is set, sized or read
outside the definition).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from patchq.vllmdist import releases  # noqa: E402


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def cached() -> list[str]:
    """The releases in patchq's cache, oldest first."""
    root = Path(releases.release_tree("0.23.0")).parent
    return sorted((p.name for p in root.iterdir() if re.fullmatch(r"\d+\.\d+\.\d+", p.name)), key=_key)


def definition(source: str, qualname: str) -> tuple[int, str] | None:
    """(first line, text) of the definition ``qualname`` (``f``, ``Cls``, ``Cls.m``), decorators
    included; None when it is not defined exactly once."""
    scope: list[ast.stmt] = ast.parse(source).body
    node = None
    for part in qualname.split("."):
        hits = [n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.name == part]
        if len(hits) != 1:
            return None
        node = hits[0]
        scope = node.body
    assert node is not None
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = source.splitlines(keepends=True)
    return first, "".join(lines[first - 1:node.end_lineno])


def block(text: str, start: int, pattern: str) -> tuple[int, str] | None:
    """(first line, text) of the first statement in ``text`` whose first line matches
    ``pattern``, with the lines indented under it; None when no line matches."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.search(pattern, line):
            indent = len(line) - len(line.lstrip())
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent
                                      or lines[j].lstrip().startswith(")")):
                j += 1
            return start + i, "".join(lines[i:j])
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="file inside the vllm package, e.g. vllm/v1/worker/utils.py")
    ap.add_argument("qualname", nargs="?", default="", help="f, Cls or Cls.method (omit with --grep)")
    ap.add_argument("--from", dest="first", default="0.15.1")
    ap.add_argument("--to", dest="last", default="99.0.0")
    ap.add_argument("--grep", help="list the file's lines matching this regex per release")
    ap.add_argument("--block", help="only the statement of the definition whose first line matches this regex")
    args = ap.parse_args()
    prev: tuple[str, str, int] | None = None
    group: list[str] = []
    for v in [v for v in cached() if _key(args.first) <= _key(v) <= _key(args.last)]:
        f = Path(releases.release_tree(v)) / args.path
        if args.grep:
            hits = [f"{n}: {s.rstrip()}" for n, s in enumerate(f.read_text().splitlines(), 1)
                    if re.search(args.grep, s)] if f.exists() else ["(no file)"]
            print(f"== {v}\n  " + "\n  ".join(hits or ["(no match)"]))
            continue
        found = definition(f.read_text(), args.qualname) if f.exists() else None
        if found and args.block:
            found = block(found[1], found[0], args.block)
        text, start = (found[1], found[0]) if found else ("", 0)
        state = text if found else ("(no file)" if not f.exists() else "(not defined once)")
        if prev is not None and state == prev[1]:
            group.append(v)
            continue
        if group:
            print(f"== {', '.join(group)}")
        if prev is None or not found or not prev[1] or prev[1].startswith("("):
            print(f"-- {v}: {state if not found else f'line {start}'}")
            if found:
                print("".join(f"{start + i:5d} {s}" for i, s in enumerate(text.splitlines(keepends=True))))
        else:
            diff = difflib.unified_diff(prev[1].splitlines(keepends=True), text.splitlines(keepends=True),
                                        f"{prev[0]}", f"{v}", n=2)
            out = []
            for line in diff:
                m = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)", line)
                if m:  # renumber to file lines
                    a, b = int(m.group(1)) + prev[2] - 1, int(m.group(2)) + start - 1
                    line = re.sub(r"@@ -\d+", f"@@ -{a}", line, count=1)
                    line = re.sub(r"\+\d+", f"+{b}", line, count=1)
                out.append(line)
            print(f"-- {v}: line {start}, changed:\n" + "".join(out))
        prev = (v, state, start)
        group = [v]
    if group:
        print(f"== {', '.join(group)}")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    main()
