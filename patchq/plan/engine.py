"""Planning: run a series of patches over one vLLM in memory.

:func:`plan` resolves every anchor, runs every transform, adds sentinels and compiles
every changed module, without writing anything. It attempts every patch and records
each failure with its reason; a failed patch leaves no trace in the result (its partial
edits are dropped), so the plan of the other patches stays usable for a report.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable

import libcst as cst

from patchq.plan.anchors import (
    Segment,
    ast_index,
    cut_segment,
    fingerprint,
    fingerprint_ast,
    locate_definition,
    match_anchor,
    splice,
)
from patchq.edits import EditContext, add_sentinel
from patchq.errors import AnchorError
from patchq.model import AnchorSpec, Patch
from patchq.dist.sources import CodeSource

from patchq.plan.results import (  # noqa: F401 (re-exported: engine.Plan, engine.OK, ...)
    ABSENT,
    FAILED,
    NOT_APPLICABLE,
    OK,
    UPSTREAMED,
    AnchorResult,
    Plan,
    PatchResult,
)


class Workspace:
    """The texts of one source, pristine and edited, and their indexes.

    Definitions are located with :mod:`ast` (C speed) and only the anchored definition
    is parsed with libcst (:func:`patchq.plan.anchors.cut_segment`), then spliced back into
    the text: everything outside the changed definitions stays byte-identical, and a
    large module costs an ``ast`` parse, not a libcst parse.
    """

    def __init__(self, source: CodeSource, read: Callable[[str], str | None]) -> None:
        self.source = source
        self._read = read
        self.pristine_text: dict[str, str] = {}
        self.text: dict[str, str] = {}
        self._index: dict[str, tuple[str, dict]] = {}
        self._pristine_index: dict[str, dict] = {}
        self._modules: dict[str, tuple[str, cst.Module]] = {}

    def current(self, relpath: str) -> str | None:
        """The current (possibly edited) text, or None when the file does not exist."""
        if relpath not in self.text:
            text = self._read(relpath)
            if text is None:
                return None
            self.pristine_text[relpath] = self.text[relpath] = text
        return self.text[relpath]

    def index(self, relpath: str) -> dict | None:
        """qualname -> ast definitions of the current text (cached per text)."""
        text = self.current(relpath)
        if text is None:
            return None
        cached = self._index.get(relpath)
        if cached is None or cached[0] is not text:
            cached = (text, ast_index(text))
            self._index[relpath] = cached
        return cached[1]

    def pristine_index(self, relpath: str) -> dict:
        """qualname -> ast definitions of the pristine text."""
        if relpath not in self._pristine_index:
            self.current(relpath)
            self._pristine_index[relpath] = ast_index(self.pristine_text[relpath])
        return self._pristine_index[relpath]

    def module(self, relpath: str) -> cst.Module | None:
        """The whole current module parsed with libcst (lazily; for callers that need it)."""
        text = self.current(relpath)
        if text is None:
            return None
        cached = self._modules.get(relpath)
        if cached is None or cached[0] is not text:
            cached = (text, cst.parse_module(text))
            self._modules[relpath] = cached
        return cached[1]

    def locate(self, spec: AnchorSpec) -> tuple[str, bool]:
        """(relpath, moved) of the anchor's definition in the current texts."""
        return locate_definition(spec, self.source, self.index)

    def segment(self, relpath: str, qualname: str) -> Segment:
        """The current definition ``qualname`` of ``relpath``, parsed alone."""
        node = self.index(relpath)[qualname][0]  # type: ignore[index]
        return cut_segment(self.text[relpath], relpath, qualname, node)

    def replace(self, segment: Segment, new_def: cst.CSTNode) -> None:
        """Splice an edited definition back into the current text."""
        self.text[segment.relpath] = splice(self.text[segment.relpath], segment, segment.render(new_def))

    def line_of(self, relpath: str, qualname: str) -> int | None:
        """1-based line of a definition in the pristine file."""
        found = self.pristine_index(relpath).get(qualname)
        return found[0].lineno if found else None

    def pristine_fingerprint(self, relpath: str, qualname: str) -> str | None:
        """Fingerprint of the pristine definition (None when it is not in the pristine file)."""
        found = self.pristine_index(relpath).get(qualname)
        return fingerprint_ast(found[0]) if found and len(found) == 1 else None

    def changed(self) -> list[str]:
        """Relpaths whose text differs from the pristine one, sorted."""
        return sorted(p for p, t in self.text.items() if t != self.pristine_text[p])


def _verified(spec: AnchorSpec, fp: str) -> str | None:
    for version, recorded in spec.fingerprints.items():
        if recorded == fp:
            return version
    return None


def _run_edits(ws: Workspace, patch: Patch, variant, ctx: EditContext, result: PatchResult) -> None:
    """Run a variant's edits in order. Consecutive edits of the same definition share one
    libcst parse and one render; each edited definition gets the patch's sentinel.

    Raises:
        AnchorError: an anchor does not resolve or match, or a transform fails.
    """
    seg = None  # the definition being edited, and its edited node
    node = None

    def flush() -> None:
        if seg is not None:
            ws.replace(seg, add_sentinel(node, patch.id, patch.hash))

    for anchor_id, edit in variant.edits.items():
        spec = patch.anchors[anchor_id]
        relpath, moved = ws.locate(spec)
        tree = None
        if seg is None or (seg.relpath, seg.qualname) != (relpath, spec.qualname):
            flush()
            seg = ws.segment(relpath, spec.qualname)
            node = seg.node
            tree = ws.index(relpath)[spec.qualname][0]  # the unedited definition's ast
        fp = ws.pristine_fingerprint(relpath, spec.qualname) or fingerprint(seg.node)
        matches = match_anchor(spec, node, tree)
        try:
            node = edit(node, matches, ctx)
        except AnchorError as exc:
            exc.anchor = exc.anchor or anchor_id
            raise
        except Exception as exc:  # a transform bug or an unexpected shape
            raise AnchorError(f"anchor {anchor_id}: transform failed in {spec.qualname}: "
                              f"{type(exc).__name__}: {exc}", kind="conflict", anchor=anchor_id) from exc
        result.anchors.append(AnchorResult(
            anchor_id, relpath, spec.qualname, ws.line_of(relpath, spec.qualname),
            moved, len(matches), fp, _verified(spec, fp)))
        if relpath not in result.files:
            result.files.append(relpath)
    flush()


def plan(
    source: CodeSource,
    patches: Iterable[Patch],
    read: Callable[[str], str | None] | None = None,
) -> Plan:
    """Apply ``patches`` in order to ``source`` in memory.

    Args:
        source: the vLLM to patch (its version selects each patch's variant).
        patches: in series order.
        read: relpath -> pristine text (default: ``source.read_text``); an installed
            target passes the journal's pristine copy for files patchq already changed.
    Returns:
        A :class:`Plan`; nothing is written.
    """
    ws = Workspace(source, read or source.read_text)
    results: list[PatchResult] = []

    def lookup(qualname: str, module: str):
        """A pristine definition elsewhere (e.g. a base class hook), read-only."""
        spec = AnchorSpec(id="lookup", module=module, qualname=qualname)
        try:
            relpath, _ = locate_definition(spec, source, lambda p: ws.pristine_index(p) if ws.current(p) is not None else None)
        except AnchorError:
            return None
        node = ws.pristine_index(relpath)[qualname][0]
        return cut_segment(ws.pristine_text[relpath], relpath, qualname, node).node

    for patch in patches:
        variant = patch.variant_for(source.version)
        if variant is None:
            if source.version in patch.applies:
                results.append(PatchResult(patch.id, patch.hash, FAILED,
                                           f"no variant of {patch.id} covers vllm {source.version}",
                                           failure="uncovered"))
            else:
                results.append(PatchResult(patch.id, patch.hash, NOT_APPLICABLE,
                                           f"vllm {source.version} is outside {patch.id}'s applies-range {patch.applies}"))
            continue
        label = str(variant.applies) or "all"
        if variant.kind != "edit":
            results.append(PatchResult(patch.id, patch.hash, variant.kind,
                                       variant.upstreamed or variant.absent or "", label))
            continue
        before = dict(ws.text)
        result = PatchResult(patch.id, patch.hash, OK, variant=label)
        ctx = EditContext(patch.id, patch.hash, source.version, source, lookup)
        try:
            _run_edits(ws, patch, variant, ctx, result)
        except (AnchorError, SyntaxError, cst.ParserSyntaxError) as exc:
            ws.text = before
            result.status, result.reason = FAILED, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            result.failure = getattr(exc, "kind", "conflict")
            result.failed_anchor = getattr(exc, "anchor", "") or ""
            result.anchors.clear()
            result.files.clear()
        results.append(result)

    pristine: dict[str, str] = {}
    patched: dict[str, str] = {}
    for relpath in ws.changed():
        code = ws.text[relpath]
        try:
            compile(code, relpath, "exec", dont_inherit=True)
        except SyntaxError as exc:
            for r in results:
                if relpath in r.files and r.status == OK:
                    r.status, r.reason = FAILED, f"{relpath}: result does not compile: line {exc.lineno}: {exc.msg}"
                    r.failure = "conflict"
            continue
        pristine[relpath] = ws.pristine_text[relpath]
        patched[relpath] = code
    # a file whose patches all failed to compile is not written at all
    bad = {f for r in results if r.status == FAILED for f in r.files}
    for relpath in bad:
        pristine.pop(relpath, None)
        patched.pop(relpath, None)
    return Plan(source, results, pristine, patched, workspace=ws)
