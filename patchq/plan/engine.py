"""Planning: run a series of patches over one vLLM in memory.

:func:`plan` resolves every anchor, runs every transform, adds sentinels and compiles
every changed module, without writing anything. It attempts every patch and records
each failure with its reason; a failed patch leaves no trace in the result (its partial
edits are dropped), so the plan of the other patches stays usable for a report.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Iterable

import libcst as cst

from patchq.plan import definitions
from patchq.plan.anchors import (
    Segment,
    cut_segment,
    fingerprint,
    locate_definition,
    match_anchor,
    splice,
)
from patchq.edits import EditContext, add_sentinel
from patchq.errors import AnchorError
from patchq.model import AnchorSpec, Patch
from patchq.dist.sources import CodeSource

# Per-patch outcomes of a plan.
OK = "ok"
FAILED = "failed"
NOT_APPLICABLE = "not-applicable"
UPSTREAMED = "upstreamed"
ABSENT = "absent"


@dataclass
class AnchorResult:
    """Where one anchor resolved.

    Attributes:
        anchor: anchor id. relpath: file. qualname: definition. line: 1-based line of
        the definition in the pristine file. moved: found outside the module hint.
        matches: statements matched. fingerprint: of the pristine definition.
        verified: the recorded release with an identical fingerprint, if any.
    """

    anchor: str
    relpath: str
    qualname: str
    line: int | None
    moved: bool
    matches: int
    fingerprint: str
    verified: str | None


@dataclass
class PatchResult:
    """The outcome of one patch in a plan.

    ``status`` is one of ``ok``, ``failed``, ``not-applicable``, ``upstreamed``,
    ``absent``; ``reason`` explains anything but ``ok``. For ``failed``, ``failure``
    says which step failed: ``gone`` (a definition not found anywhere), ``conflict``
    (found, but the pattern count is wrong, it is ambiguous, the transform fails or the
    result does not compile) or ``uncovered`` (no variant covers the version), and
    ``failed_anchor`` names the anchor when one is to blame.
    """

    patch_id: str
    hash: str
    status: str
    reason: str = ""
    variant: str = ""
    anchors: list[AnchorResult] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    failure: str = ""
    failed_anchor: str = ""


@dataclass
class Plan:
    """Result of :func:`plan`.

    Attributes:
        source: the vLLM planned against.
        results: one PatchResult per patch, in series order.
        pristine: relpath -> pristine text, for every file a patch changed.
        patched: relpath -> new text (sentinels included), same keys.
        workspace: the parsed modules the plan used (``check`` re-resolves anchors in
            them instead of parsing files again).
    """

    source: CodeSource
    results: list[PatchResult]
    pristine: dict[str, str]
    patched: dict[str, str]
    workspace: "Workspace | None" = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when no patch failed."""
        return all(r.status != FAILED for r in self.results)

    def failures(self) -> list[PatchResult]:
        """The failed results."""
        return [r for r in self.results if r.status == FAILED]


class Workspace:
    """The texts of one source, pristine and edited, and their definition indexes.

    Definitions are located with the release's definition index
    (:mod:`patchq.plan.definitions`: qualname, span and fingerprint of every definition,
    cached by content, so an unchanged file is not parsed at all) and only the anchored
    definition is parsed with libcst (:func:`patchq.plan.anchors.cut_segment`), then
    spliced back into the text: everything outside the changed definitions stays
    byte-identical. After an edit the file's index is updated from the new definition's
    text alone (the other entries shift), never by re-parsing the module.
    """

    def __init__(self, source: CodeSource, read: Callable[[str], str | None]) -> None:
        self.source = source
        self._read = read
        self.defs = definitions.for_source(source)
        self.pristine_text: dict[str, str] = {}
        self.text: dict[str, str] = {}
        self._index: dict[str, tuple[str, list, dict]] = {}
        self._pristine_index: dict[str, dict | None] = {}
        self._modules: dict[str, tuple[str, cst.Module]] = {}
        #: relpath -> 1-based inclusive line spans of the current text that edits wrote
        self.dirty: dict[str, list[tuple[int, int]]] = {}
        #: True once a definition was searched for in the whole package
        self.searched = False

    def current(self, relpath: str) -> str | None:
        """The current (possibly edited) text, or None when the file does not exist."""
        if relpath not in self.text:
            text = self._read(relpath)
            if text is None:
                return None
            self.pristine_text[relpath] = self.text[relpath] = text
        return self.text[relpath]

    def index(self, relpath: str) -> dict | None:
        """qualname -> :class:`patchq.plan.definitions.Entry` list of the current text."""
        text = self.current(relpath)
        if text is None:
            return None
        cached = self._index.get(relpath)
        if cached is not None and cached[0] is text:
            return cached[2]
        if text is self.pristine_text[relpath]:
            return self.pristine_index(relpath)
        return definitions.text_index(text)  # pragma: no cover - texts change only through replace()

    def pristine_index(self, relpath: str) -> dict | None:
        """qualname -> entries of the pristine text (None when it does not parse).

        Raises:
            SyntaxError: the pristine text does not parse (as :func:`ast.parse` would).
        """
        if relpath not in self._pristine_index:
            self.current(relpath)
            text = self.pristine_text[relpath]
            got = self.defs.text_index(relpath, text)
            if got is None:
                ast.parse(text)  # raises the parser's own SyntaxError
            self._pristine_index[relpath] = got
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

    def package(self, qualname: str) -> list[str]:
        """Files that can hold ``qualname`` (for the package-wide search): those the
        source's index says define it, and every file this plan has read."""
        self.searched = True
        return self.defs.candidates(qualname, self.text)

    def locate(self, spec: AnchorSpec) -> tuple[str, bool]:
        """(relpath, moved) of the anchor's definition in the current texts."""
        return locate_definition(spec, self.source, self.index, self.package)

    def segment(self, relpath: str, qualname: str) -> Segment:
        """The current definition ``qualname`` of ``relpath``, parsed alone."""
        entry = self.index(relpath)[qualname][0]  # type: ignore[index]
        return cut_segment(self.text[relpath], relpath, qualname, entry)

    def replace(self, segment: Segment, new_def: cst.CSTNode) -> None:
        """Splice an edited definition back into the current text; update its index."""
        relpath = segment.relpath
        old_text = self.text[relpath]
        old_entries = self._entries(relpath)
        new_seg = segment.render(new_def)
        text = splice(old_text, segment, new_seg)
        self.text[relpath] = text
        n_new = len(definitions.split_lines(new_seg)) if new_seg else 0
        delta = n_new - (segment.end - segment.start)
        lo, hi = segment.start + 1, segment.end  # 1-based inclusive lines replaced
        # the entries of the new segment, then the others shifted
        prefix = segment.qualname.rsplit(".", 1)[0] + "." if "." in segment.qualname else ""
        try:
            if segment.wrapped:
                tree = ast.parse("class _patchq_segment_:\n" + new_seg)
                inner = ast.Module(body=tree.body[0].body, type_ignores=[])  # type: ignore[attr-defined]
                fresh = definitions.entries_of_tree(inner, prefix, segment.start - 1, with_fingerprints=False)
            else:
                fresh = definitions.entries_of_tree(ast.parse(new_seg), prefix, segment.start,
                                                    with_fingerprints=False)
        except SyntaxError:
            self._index.pop(relpath, None)
            fresh = None
        if fresh is not None:
            out, placed = [], False
            for e in old_entries:
                if e.start >= lo and e.end <= hi:  # inside the replaced lines
                    if not placed:
                        out += fresh
                        placed = True
                    continue
                if e.start > hi:
                    e = e._replace(line=e.line + delta, start=e.start + delta, end=e.end + delta)
                elif e.end >= hi:  # encloses the segment
                    e = e._replace(end=e.end + delta)
                out.append(e)
            if not placed:  # pragma: no cover - a segment always holds its definition
                out = list(definitions.file_entries(text) or ())
            self._index[relpath] = (text, out, definitions.group(out))
        spans = []
        for a, b in self.dirty.get(relpath, []):
            if b < lo:
                spans.append((a, b))
            elif a > hi:
                spans.append((a + delta, b + delta))
            # spans inside the replaced lines are covered by the new one
        spans.append((lo, lo + n_new - 1))
        self.dirty[relpath] = sorted(spans)

    def _entries(self, relpath: str) -> list:
        cached = self._index.get(relpath)
        if cached is not None and cached[0] is self.text[relpath]:
            return cached[1]
        if self.text[relpath] is self.pristine_text[relpath]:
            return list(self.defs.entries(relpath, self.pristine_text[relpath]) or ())
        return list(definitions.file_entries(self.text[relpath]) or ())

    def snapshot(self) -> tuple:
        """The edited state (texts, their indexes, dirty spans), for :meth:`restore`."""
        return dict(self.text), dict(self._index), {k: list(v) for k, v in self.dirty.items()}

    def restore(self, state: tuple) -> None:
        """Back to a :meth:`snapshot` (a failed patch leaves no trace)."""
        self.text, self._index, self.dirty = dict(state[0]), dict(state[1]), dict(state[2])

    def line_of(self, relpath: str, qualname: str) -> int | None:
        """1-based line of a definition in the pristine file."""
        found = (self.pristine_index(relpath) or {}).get(qualname)
        return found[0].line if found else None

    def pristine_fingerprint(self, relpath: str, qualname: str) -> str | None:
        """Fingerprint of the pristine definition (None when it is not in the pristine file)."""
        found = (self.pristine_index(relpath) or {}).get(qualname)
        return found[0].fingerprint if found and len(found) == 1 else None

    def changed(self) -> list[str]:
        """Relpaths whose text differs from the pristine one, sorted."""
        return sorted(p for p, t in self.text.items() if t != self.pristine_text[p])

    def compile_error(self, relpath: str) -> SyntaxError | None:
        """The SyntaxError compiling the current text raises, or None.

        Only the lines edits wrote are compiled (each span alone, an indented one inside a
        dummy class): the rest of the file is the pristine release's code. When a span
        fails, the whole file is compiled, so the error is exactly the one the whole
        file gives.
        """
        text = self.text[relpath]
        lines = definitions.split_lines(text)
        for a, b in self.dirty.get(relpath, []):
            seg = "".join(lines[a - 1:b])
            first = seg.lstrip("\n")
            code = ("class _patchq_segment_:\n" + seg) if first[:1] in (" ", "\t") else seg
            try:
                compile(code, relpath, "exec", dont_inherit=True)
            except SyntaxError:
                break
        else:
            if relpath in self.dirty:
                return None
        try:
            compile(text, relpath, "exec", dont_inherit=True)
        except SyntaxError as exc:
            return exc
        return None


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
            tree = seg.tree() if spec.node is not None else None  # the unedited definition's ast
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
            relpath, _ = locate_definition(spec, source, lambda p: ws.pristine_index(p) if ws.current(p) is not None else None,
                                           ws.package)
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
        before = ws.snapshot()
        result = PatchResult(patch.id, patch.hash, OK, variant=label)
        ctx = EditContext(patch.id, patch.hash, source.version, source, lookup)
        try:
            _run_edits(ws, patch, variant, ctx, result)
        except (AnchorError, SyntaxError, cst.ParserSyntaxError) as exc:
            ws.restore(before)
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
        exc = ws.compile_error(relpath)
        if exc is not None:
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
    definitions.save_all()
    return Plan(source, results, pristine, patched, workspace=ws)
