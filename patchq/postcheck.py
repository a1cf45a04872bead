"""Helpers for a patch's ``upstream_check``: read one definition of a vLLM as an AST.

A patch's ``upstream_check(source) -> str | None`` (:class:`patchq.model.Patch`) looks at
the code of one vLLM (a :class:`patchq.vllmdist.sources.CodeSource`) and returns a reason when
that release already does what the patch intends (the *post-state*), else None. It must
judge the *release's* code: a definition that carries the patch's own sentinel (an
installed vLLM that patchq already patched) is never evidence of an upstream fix.
Only :mod:`ast` is used (no libcst): a check reads, it never edits.
"""

from __future__ import annotations

from patchq.model import AnchorSpec
from patchq.plan import definitions
from patchq.plan.anchors import find_definitions
from patchq.plan.definitions import Definition  # noqa: F401 - the type series code receives
from patchq.vllmdist.sources import CodeSource


def definition(source: CodeSource, qualname: str, *modules: str) -> Definition | None:
    """The one definition ``qualname`` in ``source``, or None when there is not exactly one.

    Args:
        source: the vLLM to read.
        qualname: e.g. ``resolve_kv_cache_block_sizes`` or ``Backend``.
        modules: dotted module hints tried in order (the definition moves between files
            across releases); when none holds it, the whole package is searched
            (:func:`patchq.plan.anchors.find_definitions`, once).
    Returns:
        A :class:`patchq.plan.definitions.Definition`: ``node`` is its :mod:`ast` node (line
        numbers of the whole file), ``line`` its keyword's line, ``where`` ``relpath:line``,
        ``patched_by(id)`` whether a sentinel of that patch sits directly above it.
    """
    index = definitions.for_source(source)

    def index_of(relpath: str) -> dict[str, list[definitions.Entry]] | None:
        return index.file(relpath)

    hints = [p for m in modules for p in AnchorSpec(id="hint", module=m, qualname=qualname).module_paths]
    for relpath in hints:  # each hinted file alone: one defining it twice is skipped
        found = (index_of(relpath) or {}).get(qualname, [])
        if len(found) == 1:
            return _definition(source, relpath, found[0])
    if any((index_of(p) or {}).get(qualname) for p in hints):
        return None
    anywhere, _ = find_definitions(source, qualname, (), index_of, index.candidates)  # one package-wide search
    return _definition(source, *anywhere[0]) if len(anywhere) == 1 else None


def _definition(source: CodeSource, relpath: str, entry: definitions.Entry) -> Definition:
    return definitions.definition_from(source.read_text(relpath) or "", relpath, entry)
