"""Unified diffs of patched files, valid for ``git apply`` and ``patch -p1``.

Paths are relative to site-packages (``a/vllm/...``, ``b/vllm/...``), so a diff made
from an installed vLLM applies in a site-packages directory or a wheel's unpacked tree.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

NO_EOL = "\\ No newline at end of file\n"


def unified(relpath: str, before: str, after: str, context: int = 3) -> str:
    """The unified diff of one file ('' when equal), with git-style a/ b/ headers."""
    if before == after:
        return ""
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    out = [f"diff --git a/{relpath} b/{relpath}\n"]
    for line in difflib.unified_diff(a, b, f"a/{relpath}", f"b/{relpath}", n=context):
        if line.endswith("\n"):
            out.append(line)
        else:  # the last line of a file without a final newline
            out.append(line + "\n" + NO_EOL)
    return "".join(out)


def unified_all(pristine: Mapping[str, str], patched: Mapping[str, str]) -> str:
    """Concatenated diffs of every file, sorted by path."""
    return "".join(unified(p, pristine[p], patched[p]) for p in sorted(patched))
