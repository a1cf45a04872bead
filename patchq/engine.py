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

from patchq.anchors import (
    DefinitionHit,
    definition_lines,
    fingerprint,
    index_definitions,
    match_anchor,
    replace_definition,
    resolve_definition,
)
from patchq.edits import EditContext, add_sentinel
from patchq.errors import AnchorError
from patchq.model import AnchorSpec, Patch
from patchq.sources import CodeSource

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
    """Parsed modules of one source, pristine and edited (each file parsed once)."""

    def __init__(self, source: CodeSource, read: Callable[[str], str | None]) -> None:
        self.source = source
        self._read = read
        self.pristine_text: dict[str, str] = {}
        self.pristine_tree: dict[str, cst.Module] = {}
        self.tree: dict[str, cst.Module] = {}
        self._lines: dict[str, dict[str, int]] = {}

    def module(self, relpath: str) -> cst.Module | None:
        """The current (possibly edited) module, or None when the file does not exist."""
        if relpath not in self.tree:
            text = self._read(relpath)
            if text is None:
                return None
            self.pristine_text[relpath] = text
            self.pristine_tree[relpath] = self.tree[relpath] = cst.parse_module(text)
        return self.tree[relpath]

    def line_of(self, relpath: str, qualname: str) -> int | None:
        """1-based line of a definition in the pristine file."""
        if relpath not in self._lines:
            self._lines[relpath] = definition_lines(self.pristine_text[relpath])
        return self._lines[relpath].get(qualname)

    def pristine_definition(self, hit: DefinitionHit) -> cst.CSTNode:
        """The pristine version of a definition that earlier patches may have edited."""
        if self.tree[hit.relpath] is self.pristine_tree[hit.relpath]:
            return hit.node
        found = index_definitions(self.pristine_tree[hit.relpath]).get(hit.qualname, [])
        return found[0] if len(found) == 1 else hit.node

    def changed(self) -> list[str]:
        """Relpaths whose tree differs from the pristine one, sorted."""
        return sorted(p for p, t in self.tree.items() if t is not self.pristine_tree[p])


def _verified(spec: AnchorSpec, fp: str) -> str | None:
    for version, recorded in spec.fingerprints.items():
        if recorded == fp:
            return version
    return None


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

    def pristine_module(relpath: str) -> cst.Module | None:
        return ws.pristine_tree[relpath] if ws.module(relpath) is not None else None

    def lookup(qualname: str, module: str):
        spec = AnchorSpec(id="lookup", module=module, qualname=qualname)
        try:
            return resolve_definition(spec, source, pristine_module).node
        except AnchorError:
            return None

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
        before = dict(ws.tree)
        result = PatchResult(patch.id, patch.hash, OK, variant=label)
        ctx = EditContext(patch.id, patch.hash, source.version, source, lookup)
        try:
            for anchor_id, edit in variant.edits.items():
                spec = patch.anchors[anchor_id]
                hit = resolve_definition(spec, source, ws.module)
                fp = fingerprint(ws.pristine_definition(hit))  # type: ignore[arg-type]
                matches = match_anchor(spec, hit.node)
                try:
                    new_def = edit(hit.node, matches, ctx)
                except AnchorError as exc:
                    exc.anchor = exc.anchor or anchor_id
                    raise
                except Exception as exc:  # a transform bug or an unexpected shape
                    raise AnchorError(f"anchor {anchor_id}: transform failed in {hit.qualname}: "
                                      f"{type(exc).__name__}: {exc}", kind="conflict",
                                      anchor=anchor_id) from exc
                new_def = add_sentinel(new_def, patch.id, patch.hash)
                ws.tree[hit.relpath] = replace_definition(ws.tree[hit.relpath], hit.node, new_def)
                result.anchors.append(AnchorResult(
                    anchor_id, hit.relpath, hit.qualname, ws.line_of(hit.relpath, hit.qualname),
                    hit.moved, len(matches), fp, _verified(spec, fp)))
                if hit.relpath not in result.files:
                    result.files.append(hit.relpath)
        except AnchorError as exc:
            ws.tree = before
            result.status, result.reason = FAILED, str(exc)
            result.failure, result.failed_anchor = exc.kind, exc.anchor or ""
            result.anchors.clear()
            result.files.clear()
        results.append(result)

    pristine: dict[str, str] = {}
    patched: dict[str, str] = {}
    for relpath in ws.changed():
        code = ws.tree[relpath].code
        try:
            compile(code, relpath, "exec", flags=ast.PyCF_ONLY_AST)
            compile(code, relpath, "exec")
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
