"""Helpers for a patch's ``upstream_check``: read one definition of a vLLM as an AST.

A patch's ``upstream_check(source) -> str | None`` (:class:`patchq.model.Patch`) looks at
the code of one vLLM (a :class:`patchq.dist.sources.CodeSource`) and returns a reason when
that release already does what the patch intends (the *post-state*), else None. It must
judge the *release's* code: a definition that carries the patch's own sentinel (an
installed vLLM that patchq already patched) is never evidence of an upstream fix.
Only :mod:`ast` is used (no libcst): a check reads, it never edits.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from patchq.plan.anchors import ast_index, find_definitions
from patchq.model import AnchorSpec
from patchq.sentinels import find_sentinels
from patchq.dist.sources import CodeSource


@dataclass(frozen=True)
class Definition:
    """A definition found in a source.

    Attributes:
        relpath: file that holds it (``vllm/v1/core/kv_cache_utils.py``).
        node: its :mod:`ast` node (``FunctionDef`` or ``ClassDef``) in the whole file's tree.
        line: 1-based line of its ``def``/``class`` keyword.
        sentinels: patch ids of the sentinel comments directly above it.
    """

    relpath: str
    node: ast.FunctionDef | ast.ClassDef
    line: int
    sentinels: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """``relpath:line``."""
        return f"{self.relpath}:{self.line}"

    def patched_by(self, patch_id: str) -> bool:
        """True when the definition carries a sentinel of ``patch_id`` (see module docstring)."""
        return patch_id in self.sentinels


def _sentinels_above(text: str, node: ast.AST) -> tuple[str, ...]:
    lines = text.splitlines()
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    out = []
    i = first - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        out += [pid for pid, _ in find_sentinels(lines[i])]
        i -= 1
    return tuple(out)


def definition(source: CodeSource, qualname: str, *modules: str) -> Definition | None:
    """The one definition ``qualname`` in ``source``, or None when there is not exactly one.

    Args:
        source: the vLLM to read.
        qualname: e.g. ``resolve_kv_cache_block_sizes`` or ``Backend``.
        modules: dotted module hints tried in order (the definition moves between files
            across releases); when none holds it, the whole package is searched
            (:func:`patchq.plan.anchors.find_definitions`, once).
    """
    indexes: dict[str, dict | None] = {}

    def index_of(relpath: str):
        if relpath not in indexes:
            text = source.read_text(relpath)
            try:
                indexes[relpath] = None if text is None else ast_index(text)
            except SyntaxError:
                indexes[relpath] = None
        return indexes[relpath]

    hints = [p for m in modules for p in AnchorSpec(id="hint", module=m, qualname=qualname).module_paths]
    for relpath in hints:  # each hinted file alone: one defining it twice is skipped
        found = (index_of(relpath) or {}).get(qualname, [])
        if len(found) == 1:
            return _definition(source, relpath, found[0])
    if any((index_of(p) or {}).get(qualname) for p in hints):
        return None
    found, _ = find_definitions(source, qualname, (), index_of)  # one package-wide search
    return _definition(source, *found[0]) if len(found) == 1 else None


def _definition(source: CodeSource, relpath: str, node) -> Definition:
    text = source.read_text(relpath) or ""
    return Definition(relpath, node, node.lineno, _sentinels_above(text, node))
