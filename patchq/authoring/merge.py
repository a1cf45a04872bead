"""Node-scoped rebase: carry a patch from one vLLM release to another, definition by definition.

For a patch, the variant that applies at the *from* release is planned there
(:func:`patchq.plan.engine.plan`, that one variant forced) and the definitions it changed are
the *units* of the rebase (a unit nested in another unit of the same file, e.g. a method
of a patched class, is merged as part of the outer one). For each unit, three texts of
just that definition go to ``git merge-file -p``:

* **base**: the pristine definition at the from release;
* **ours**: the same definition as the variant patched it there (sentinel lines left out);
* **theirs**: the definition at the target release, re-resolved by qualified name
  (hinted module, then the whole package: code moves between files). When the name is
  gone, same-kind definitions of the module and then of its package directory are
  ranked by body similarity (:func:`rapidfuzz.fuzz.ratio` of their ``ast.unparse``,
  name and docstring left out); the best is used when it scores at least
  :data:`SIMILARITY_MIN`, and the score is always reported.

A clean merge is checked against the transform: the forced variant is planned at the
target and its definition compared with the merge (``carries-forward`` when equal;
``carries-forward (formatting)`` when equal by normalized AST; ``differs`` or
``fails`` otherwise: the signal that a new variant is needed). A conflicted merge is
written with its markers to ``<workdir>/<target>/<patch>/<qualname>.py``, beside
``<qualname>.transform.py`` when the transform still applies at the target. A module-level
anchor's unit (``<module>``) is its whole file: every other unit of that file merges with
it (:func:`unit_file` names its work files ``module.<dotted module>.py``).

Finally the patch's rendered diff at the two releases is compared hunk by hunk
(:mod:`patchq.authoring.rangediff`). Writing (``--write``) is :func:`record`'s job.
"""

from __future__ import annotations

import ast
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import git
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patchq.authoring import rangediff
from patchq.errors import AnchorError
from patchq.model import MODULE_QUALNAME, AnchorSpec, Patch, Variant
from patchq.plan import definitions, diffs, engine
from patchq.plan.anchors import fingerprint_ast, fingerprint_code, locate_definition, split_lines
from patchq.plan.definitions import Definition, module_of  # noqa: F401 - re-exported
from patchq.sentinels import SENTINEL_RE
from patchq.vllmdist.sources import CodeSource

#: Body similarity (rapidfuzz ratio, 0-100) from which a renamed definition is followed.
SIMILARITY_MIN = 85.0

# Unit outcomes (UnitRebase.merge).
CLEAN = "clean"
CONFLICT = "conflict"
GONE = "gone"
#: a patch status: the patch fails on a target it is recorded as verified on (the series
#: changed, not upstream), or a unit could not be cut out of its patched release
UNSUPPORTED = "unsupported"


# --------------------------------------------------------------------------- definitions


def cut(text: str, relpath: str, qualname: str, index: dict | None = None) -> Definition | None:
    """The one definition ``qualname`` of a module's text, or None (absent or defined twice).

    ``index``: the text's qualname -> entries, when the caller has it
    (:func:`patchq.plan.definitions.cut`).
    """
    return definitions.cut(text, relpath, qualname, index)


def strip_sentinels(text: str) -> str:
    """``text`` without the lines that are only a patchq sentinel comment."""
    return "".join(ln for ln in text.splitlines(keepends=True)
                   if not (ln.strip().startswith("#") and SENTINEL_RE.search(ln)))


def splice_many(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with each 1-based line range ``(start, end)`` replaced by its new text."""
    lines = split_lines(text)
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1:end] = [new]
    return "".join(lines)


# --------------------------------------------------------------------------- merge-file


def merge_file(ours: str, base: str, theirs: str, labels: tuple[str, str, str]) -> tuple[str, int]:
    """Three-way merge of three texts with ``git merge-file -p`` (run through gitpython).

    Returns:
        (merged text, number of conflicts); the text carries ``<<<<<<<``/``=======``/
        ``>>>>>>>`` markers, labelled with ``labels`` (ours, base, theirs), when > 0.
    Raises:
        RuntimeError: git merge-file failed (negative status).
    """
    with tempfile.TemporaryDirectory(prefix="patchq-merge-") as tmp:
        paths = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            p = Path(tmp) / name
            p.write_text(text, encoding="utf-8")
            paths.append(str(p))
        cmd = ["git", "merge-file", "-p", "-L", labels[0], "-L", labels[1], "-L", labels[2], *paths]
        status, out, err = git.Git(tmp).execute(cmd, with_extended_output=True, with_exceptions=False,
                                                 strip_newline_in_stdout=False)
    if status < 0 or status > 127:
        raise RuntimeError(f"git merge-file failed ({status}): {err}")
    return out, status


# --------------------------------------------------------------------------- renamed definitions


@dataclass(frozen=True)
class Candidate:
    """A definition that may be a renamed one: where, and its body similarity (0-100)."""

    relpath: str
    qualname: str
    score: float


def _body_text(node: ast.AST) -> str:
    """``ast.unparse`` of a definition with its name blanked and its docstring dropped."""
    import copy

    node = copy.deepcopy(node)
    node.name = "_"  # type: ignore[attr-defined]
    body = node.body  # type: ignore[attr-defined]
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.unparse(node)


def similar_definitions(base: Definition, source: CodeSource, hints: list[str],
                        exclude: set[str], limit: int = 3) -> list[Candidate]:
    """Same-kind definitions of ``source`` ranked by body similarity to ``base``.

    Searched: the ``hints`` files (the module the definition was in, and the anchor's
    hint), then, when nothing scores :data:`SIMILARITY_MIN`, every file of the package
    directory of the first hint. Qualnames in ``exclude`` (those that already existed
    beside the definition) are not candidates.
    """
    from rapidfuzz import fuzz

    want = _body_text(base.node)
    scored: dict[tuple[str, str], float] = {}

    index = definitions.for_source(source)

    def scan(relpaths: list[str]) -> None:
        for rel in relpaths:
            text = source.read_text(rel)
            if text is None:
                continue
            found = index.text_index(rel, text)
            if found is None:
                continue
            lines = split_lines(text)
            for qual, entries in found.items():
                if qual in exclude or len(entries) != 1 or entries[0].kind != base.kind:
                    continue
                node = definitions.definition_from(text, rel, entries[0], lines).node
                scored[(rel, qual)] = fuzz.ratio(want, _body_text(node))

    scan(hints)
    if not scored or max(scored.values()) < SIMILARITY_MIN:
        folder = hints[0].rsplit("/", 1)[0] + "/"
        scan([p for p in source.py_files() if p.startswith(folder) and p not in hints])
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [Candidate(rel, qual, round(score, 1)) for (rel, qual), score in ranked]


# --------------------------------------------------------------------------- results


@dataclass
class UnitRebase:
    """The rebase of one definition (a unit) of a patch.

    Attributes:
        qualname, anchors: the unit and the anchor ids inside it.
        base_path: its file at the from release. target_path / target_qualname: at the
            target (None when gone).
        resolution: ``same``, ``moved`` (other file), ``renamed`` (by similarity),
            ``gone``, ``ambiguous``, or ``resolved`` (a conflict resolved by hand, ``--continue``).
        candidates: similarity candidates (when the name was gone), best first.
        upstream_changed: the target's fingerprint differs from the base's.
        merge: ``clean``, ``conflict`` or ``gone``; conflicts: number of conflict blocks.
        merged: the merged definition (markers included on a conflict).
        transform: ``carries-forward``, ``carries-forward (formatting)``, ``differs``,
            ``fails`` or ``""`` (not checked); transform_reason explains ``fails``.
        transform_text: the transform's definition at the target (sentinels left out).
        reason: one line for anything not clean.
        files: work files written for this unit.
        by_structure: git merge-file conflicted, and the merge is the transform's result:
            its edits are statement operations, which found their places at the target by
            structure (:func:`_statement_ops_only`).
    """

    qualname: str
    anchors: list[str]
    base_path: str
    target_path: str | None = None
    target_qualname: str | None = None
    resolution: str = "same"
    candidates: list[Candidate] = field(default_factory=list)
    upstream_changed: bool = False
    base_fingerprint: str = ""
    target_fingerprint: str = ""
    merge: str = CLEAN
    conflicts: int = 0
    merged: str | None = None
    transform: str = ""
    transform_reason: str = ""
    transform_text: str | None = None
    reason: str = ""
    files: list[str] = field(default_factory=list)
    target_span: tuple[int, int] | None = None
    by_structure: bool = False


@dataclass
class PatchRebase:
    """The rebase of one patch from one release to another.

    Attributes:
        patch_id, from_version, to_version, variant (the from release's variant's range).
        status: ``clean`` (every unit merged cleanly and the transform carries forward),
            ``needs-variant`` (merged cleanly, but the transform differs or fails at the
            target: a new variant is needed), ``conflict``, ``gone``,
            ``failed-at-base`` (the variant does not apply at the from release),
            ``skipped`` (no edit variant at the from release, or already carried: verified
            at the target), ``unsupported`` (a unit that cannot be cut out; or a variant verified at
            the target that check blocks there), or the series' own
            verdict at the target, ``upstreamed`` / ``absent`` (the merge is still run
            and shown).
        merge: the merge outcome alone: ``clean``, ``conflict``, ``gone`` or ``""``.
        transform: ``carries-forward`` when every unit's transform result equals its
            merge, else ``differs`` / ``fails`` / ``""``.
        target_variant: what the series says at the target (``edit >=a,<b``,
            ``upstreamed``, ``absent``, ``none``).
        old_diff / new_diff: the patch rendered at both releases; new_diff_source says
            where the new one comes from (``transform``, ``merge`` or ``""``).
        range_diff: hunk pairs (:mod:`patchq.authoring.rangediff`).
        fingerprints: anchor id -> {version: fingerprint} verified by this rebase.
        written: paths written.
    """

    patch_id: str
    from_version: str
    to_version: str
    variant: str = ""
    status: str = ""
    reason: str = ""
    merge: str = ""
    transform: str = ""
    target_variant: str = ""
    units: list[UnitRebase] = field(default_factory=list)
    old_diff: str = ""
    new_diff: str = ""
    new_diff_source: str = ""
    range_diff: list[rangediff.Pair] = field(default_factory=list)
    fingerprints: dict[str, dict[str, str]] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    forced: Patch | None = field(default=None, repr=False)
    variant_obj: Variant | None = field(default=None, repr=False)


def describe_variant(patch: Patch, version: Version) -> str:
    """What the series says at ``version``: ``edit <range>``, ``upstreamed``, ``absent``, ``none``."""
    v = patch.variant_for(version)
    if v is None:
        return "none"
    return f"edit {v.applies or 'all'}" if v.kind == "edit" else v.kind


def forced(patch: Patch, variant: Variant) -> Patch:
    """``patch`` with only ``variant``, applying to every version (to plan it anywhere)."""
    return replace(patch, applies=SpecifierSet(), variants=(replace(variant, applies=SpecifierSet()),))


def _outermost(units: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """Each unit folded into its outermost enclosing unit of the same file; a module-level
    unit (``<module>``) encloses every unit of its file (the file is merged whole)."""
    out: dict[tuple[str, str], list[str]] = {}
    for (rel, q), ids in units.items():
        outer = [(r2, q2) for (r2, q2) in units if r2 == rel and q.startswith(q2 + ".")]
        if (rel, MODULE_QUALNAME) in units and q != MODULE_QUALNAME:
            outer = [(rel, MODULE_QUALNAME)]
        key = min(outer, key=lambda k: len(k[1])) if outer else (rel, q)
        out.setdefault(key, [])
        out[key] += [i for i in ids if i not in out[key]]
    return out


class _Indexes:
    """qualname -> definition entries per file of one source (its definition index)."""

    def __init__(self, source: CodeSource) -> None:
        self.source = source
        self.index = definitions.for_source(source)

    def __call__(self, relpath: str) -> dict | None:
        return self.index.file(relpath)

    def package(self, qualname: str) -> list[str]:
        """Files that can hold ``qualname`` (for the package-wide search)."""
        return self.index.candidates(qualname)


# --------------------------------------------------------------------------- rebase


def rebase_patch(patch: Patch, from_source: CodeSource, to_source: CodeSource,
                 workdir: Path, *, to_index: Callable | None = None, resume: bool = False) -> PatchRebase:
    """Rebase one patch from ``from_source``'s release to ``to_source``'s (module docstring).

    Conflicted definitions are written to ``workdir/<to>/<patch>/`` (always: a conflict
    is never only printed); nothing else is written here (see :func:`record`).
    With ``resume`` (``--continue``), a conflicted definition whose work file no longer
    holds conflict markers is taken as resolved by hand: the file's text becomes the
    merge, checked against the transform like any clean merge.
    """
    fv, tv = from_source.version, to_source.version
    res = PatchRebase(patch.id, str(fv), str(tv), target_variant=describe_variant(patch, tv))
    variant = patch.variant_for(fv)
    if variant is None or variant.kind != "edit":
        res.status = "skipped"
        res.reason = (f"no variant of {patch.id} applies at vllm {fv}" if variant is None
                      else f"the variant at vllm {fv} is '{variant.kind}': nothing to carry")
        return res
    res.variant = str(variant.applies) or "all"
    res.variant_obj = variant
    fp = res.forced = forced(patch, variant)
    plan_f = engine.plan(from_source, [fp])
    rf = plan_f.results[0]
    if rf.status != engine.OK:
        res.status, res.reason = "failed-at-base", f"the variant {res.variant} does not apply at vllm {fv}: {rf.reason}"
        return res
    res.old_diff = diffs.unified_all(plan_f.pristine, plan_f.patched)
    for a in rf.anchors:
        res.fingerprints.setdefault(a.anchor, {})[str(fv)] = a.fingerprint
    plan_t = engine.plan(to_source, [fp])
    rt = plan_t.results[0]
    if rt.status == engine.OK:
        for a in rt.anchors:
            res.fingerprints.setdefault(a.anchor, {})[str(tv)] = a.fingerprint

    sides = _Sides(patch, from_source, to_source, to_index or _Indexes(to_source), plan_f, plan_t, rt)
    target_texts: dict[str, str] = {}
    for (rel, q), ids in _units(rf.anchors).items():
        unit = UnitRebase(q, ids, rel)
        res.units.append(unit)
        if not _merge_unit(res, unit, sides, target_texts, workdir, resume):
            return res
    _check_parses(res, target_texts)
    _write_conflicts(res, workdir)
    _summarize(res, rt, plan_t, target_texts)
    return res


def _units(anchors: list[engine.AnchorResult]) -> dict[tuple[str, str], list[str]]:
    """(relpath, outermost qualname) -> the anchors inside that definition: the units merged."""
    units = _outermost({(a.relpath, a.qualname): [] for a in anchors})
    for a in anchors:
        for (rel, q), ids in units.items():
            inside = a.qualname == q or a.qualname.startswith(q + ".") or q == MODULE_QUALNAME
            if rel == a.relpath and inside and a.anchor not in ids:
                ids.append(a.anchor)
    return units


@dataclass
class _Sides:
    """What every unit of one patch's rebase merges between: the patch, both releases,
    the target's definition index, and the forced variant's plans (``rt``: its result at
    the target)."""

    patch: Patch
    from_source: CodeSource
    to_source: CodeSource
    index_t: Callable
    plan_f: engine.Plan
    plan_t: engine.Plan
    rt: engine.PatchResult


def _merge_unit(res: PatchRebase, unit: UnitRebase, sides: _Sides, target_texts: dict[str, str],
                workdir: Path, resume: bool) -> bool:
    """Merge one unit three-way (base, ours at the old release, theirs at the target) and
    compare with the transform; the target file's text is kept in ``target_texts``.
    Returns False when the rebase stops here (``res`` says why)."""
    patch, fv, tv = sides.patch, sides.from_source.version, sides.to_source.version
    rel, q = unit.base_path, unit.qualname
    if q == MODULE_QUALNAME:  # the module itself: its whole file is merged three-way
        base, ours = _module_definition(sides.plan_f.pristine[rel], rel), \
            _module_definition(sides.plan_f.patched[rel], rel)
    else:
        base, ours = cut(sides.plan_f.pristine[rel], rel, q), cut(sides.plan_f.patched[rel], rel, q)
    if base is None or ours is None:  # pragma: no cover - the plan changed (and parsed) this definition
        res.units = []
        res.status = UNSUPPORTED
        res.reason = f"{q} in {rel} could not be cut out of the patched vllm {fv}: nothing to merge"
        res.next_steps.append(f"re-record {patch.id} on vllm {tv} (`patchq edit {patch.id}`, then `patchq record`)")
        return False
    unit.base_fingerprint = base.fingerprint
    theirs = _resolve_target(unit, base, patch, sides.to_source, sides.index_t, sides.from_source)
    if theirs is None:
        return True
    unit.target_fingerprint = theirs.fingerprint
    unit.upstream_changed = theirs.fingerprint != base.fingerprint
    unit.target_span = (theirs.start, theirs.end)
    target_texts.setdefault(theirs.relpath, sides.to_source.read_text(theirs.relpath) or "")
    labels = (f"{patch.id} on vllm {fv}", f"vllm {fv}", f"vllm {tv}")
    unit.merged, unit.conflicts = merge_file(strip_sentinels(ours.text), base.text, theirs.text, labels)
    unit.merge = CONFLICT if unit.conflicts else CLEAN
    if unit.conflicts:
        unit.reason = f"{unit.conflicts} conflict(s) in {q}"
        resolved = unit_dir(workdir, str(tv), patch.id) / unit_file(q, rel)
        if resume and resolved.is_file() and not _MARKERS.search(resolved.read_text(encoding="utf-8")):
            unit.merged, unit.merge, unit.resolution = resolved.read_text(encoding="utf-8"), CLEAN, "resolved"
            unit.reason = f"{unit.conflicts} conflict(s) in {q}, resolved by hand in {resolved}"
    _check_transform(unit, theirs, sides.rt, sides.plan_t)
    if unit.merge == CONFLICT and unit.transform_text is not None and _statement_ops_only(res.variant_obj, unit):
        unit.merged, unit.merge, unit.transform, unit.by_structure = unit.transform_text, CLEAN, "carries-forward", True
    return True


def _statement_ops_only(variant: Variant | None, unit: UnitRebase) -> bool:
    """True when every edit of the unit is statement operations (:func:`patchq.statements.statement_edit`).

    Such a transform that applies at the target is a three-way merge by structure: each
    statement it replaces or removes was found there as the patch recorded it (normalized
    AST), each insertion by its block or its neighbours, and every other statement of the
    target is kept. git merge-file's conflicts on it are lines next to the patch's, which a
    line merge cannot order (an insert at the top of a body whose docstring and first
    statement both changed: issue 35, class 1c); whether upstream's change there matters is
    ``check``'s three-way verdict.
    """
    if variant is None:
        return False
    return all(hasattr(variant.edits.get(a), "statement_ops") for a in unit.anchors)


def _check_parses(res: PatchRebase, target_texts: dict[str, str]) -> None:
    """A clean merge must also parse in its file: otherwise its units become conflicts."""
    for rel, text in target_texts.items():
        mine = [u for u in res.units if u.target_path == rel and u.merge == CLEAN]
        if mine:
            try:
                ast.parse(splice_many(text, [(*u.target_span, u.merged) for u in mine]))  # type: ignore[misc]
            except SyntaxError as exc:
                for u in mine:
                    u.merge, u.reason = CONFLICT, f"the merged file does not parse: line {exc.lineno}: {exc.msg}"


def _module_definition(text: str, relpath: str) -> Definition | None:
    """A whole module as the :class:`Definition` a module-level unit merges (lines 1..n,
    fingerprint :func:`patchq.plan.anchors.module_fingerprint`); None when it does not parse."""
    from patchq.plan.anchors import module_fingerprint

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    body = text if text.endswith("\n") or not text else text + "\n"
    return Definition(relpath, MODULE_QUALNAME, 1, max(1, len(split_lines(text))), body, module_fingerprint(text),
                      "module", tree)  # type: ignore[arg-type]


def _resolve_target(unit: UnitRebase, base: Definition, patch: Patch, to_source: CodeSource,
                    index_t: Callable, from_source: CodeSource) -> Definition | None:
    """The unit's definition at the target, or None (unit.merge set to gone/conflict)."""
    spec = AnchorSpec(id=unit.qualname, module=module_of(unit.base_path), qualname=unit.qualname)
    if unit.qualname == MODULE_QUALNAME:  # the module, at its file (or the other spelling of its path)
        try:
            rel, moved = locate_definition(spec, to_source, index_t, getattr(index_t, "package", None))
        except AnchorError as exc:
            unit.resolution, unit.merge, unit.reason = "gone", GONE, str(exc)
            return None
        theirs = _module_definition(to_source.read_text(rel) or "", rel)
        if theirs is None:
            unit.merge, unit.reason = CONFLICT, f"{rel} does not parse in vllm {to_source.version}"
            return None
        unit.resolution = "moved" if rel != unit.base_path else "same"
        unit.target_path, unit.target_qualname = theirs.relpath, theirs.qualname
        return theirs
    try:
        rel, moved = locate_definition(spec, to_source, index_t, getattr(index_t, "package", None))
    except AnchorError as exc:
        if exc.kind != "gone":
            unit.resolution, unit.merge, unit.reason = "ambiguous", CONFLICT, str(exc)
            return None
        found = _follow_similar(unit, base, patch, to_source, from_source, spec)
        if found is None:
            return None
        rel, theirs = found
    else:
        unit.resolution = "moved" if rel != unit.base_path else "same"
        theirs = cut(to_source.read_text(rel) or "", rel, unit.qualname, index_t(rel))
    if theirs is None:  # pragma: no cover - locate_definition found exactly one
        unit.merge, unit.reason = CONFLICT, f"{unit.qualname} could not be cut out of {rel}"
        return None
    unit.target_path, unit.target_qualname = theirs.relpath, theirs.qualname
    return theirs


def _follow_similar(unit: UnitRebase, base: Definition, patch: Patch, to_source: CodeSource,
                    from_source: CodeSource, spec: AnchorSpec) -> tuple[str, Definition | None] | None:
    """The unit's name is gone at the target: follow the most similar definition there
    (``renamed``), or None when none is similar enough (unit.merge set to gone). Returns
    its file and its definition cut out of it."""
    hints = [unit.base_path] + [p for p in spec.module_paths if p != unit.base_path]
    hints += [p for a in unit.anchors for p in patch.anchors[a].module_paths if p not in hints]
    existing = set(definitions.for_source(from_source).file(unit.base_path) or {})
    unit.candidates = similar_definitions(base, to_source, [h for h in hints if to_source.exists(h)]
                                          or [unit.base_path], existing)
    best = unit.candidates[0] if unit.candidates else None
    if best is None or best.score < SIMILARITY_MIN:
        unit.resolution, unit.merge = "gone", GONE
        unit.reason = (f"{unit.qualname} is not in vllm {to_source.version}"
                       + (f"; the most similar {base.kind} is {best.qualname} in {best.relpath} "
                          f"(similarity {best.score:g} < {SIMILARITY_MIN:g})" if best else ""))
        return None
    unit.resolution = "renamed"
    unit.reason = (f"{unit.qualname} is not in vllm {to_source.version}: following {best.qualname} "
                   f"in {best.relpath} by body similarity {best.score:g}")
    return best.relpath, cut(to_source.read_text(best.relpath) or "", best.relpath, best.qualname)


def _check_transform(unit: UnitRebase, theirs: Definition, rt: engine.PatchResult, plan_t: engine.Plan) -> None:
    """Compare the forced variant's result at the target with the merge."""
    if rt.status != engine.OK:
        unit.transform, unit.transform_reason = "fails", rt.reason
        return
    text = plan_t.patched.get(theirs.relpath)
    if theirs.qualname == MODULE_QUALNAME:
        mine = _module_definition(text, theirs.relpath) if text is not None else None
    else:
        mine = cut(text, theirs.relpath, theirs.qualname) if text is not None else None
    if mine is None:
        unit.transform, unit.transform_reason = "fails", f"the transform does not change {theirs.qualname}"
        return
    unit.transform_text = strip_sentinels(mine.text)
    if unit.merge != CLEAN:
        return
    if unit.transform_text == unit.merged:
        unit.transform = "carries-forward"
    else:
        try:
            if theirs.qualname == MODULE_QUALNAME:
                same = fingerprint_code(unit.transform_text) == fingerprint_code(unit.merged or "")
            else:
                same = fingerprint_ast(ast.parse(_dedent_def(unit.transform_text)).body[0]) == \
                    fingerprint_ast(ast.parse(_dedent_def(unit.merged or "")).body[0])
        except SyntaxError:
            same = False
        unit.transform = "carries-forward (formatting)" if same else "differs"


def _dedent_def(text: str) -> str:
    """An indented definition made parseable alone (wrapped in a class when indented)."""
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first[:1] in (" ", "\t"):
        tree_text = "class _patchq_:\n" + text
        cls = ast.parse(tree_text).body[0]
        return ast.unparse(cls.body[0])  # type: ignore[attr-defined]
    return text


_MARKERS = re.compile(r"^(<<<<<<<|>>>>>>>|=======$)", re.M)


def unit_file(qualname: str, relpath: str) -> str:
    """The work file name of a unit: ``<qualname>.py``; a module-level unit's,
    ``module.<dotted module>.py`` (``module.vllm.logger.py``)."""
    if qualname == MODULE_QUALNAME:
        return f"module.{module_of(relpath)}.py"
    return qualname.replace("/", "_") + ".py"


def unit_dir(workdir: Path, version: str, patch_id: str) -> Path:
    """``<workdir>/<version>/<patch>/``."""
    return Path(workdir) / version / patch_id


def _write_conflicts(res: PatchRebase, workdir: Path) -> None:
    for u in res.units:
        if u.merge != CONFLICT or u.merged is None:
            continue
        from patchq.authoring import repowrite

        d = unit_dir(workdir, res.to_version, res.patch_id)
        path = d / unit_file(u.qualname, u.base_path)
        repowrite.write_file(path, u.merged)  # atomic and verified, as every write into the repo
        u.files.append(str(path))
        if u.transform_text is not None:
            tpath = d / (unit_file(u.qualname, u.base_path)[:-3] + ".transform.py")
            repowrite.write_file(tpath, u.transform_text)
            u.files.append(str(tpath))
        res.written += u.files


def _summarize(res: PatchRebase, rt: engine.PatchResult, plan_t: engine.Plan, target_texts: dict[str, str]) -> None:
    """The patch's merge, transform and status from its units'; the diff at the target;
    the next steps."""
    merges = {u.merge for u in res.units}
    res.merge = CONFLICT if CONFLICT in merges else GONE if GONE in merges else CLEAN
    res.transform = _transform_verdict(res.merge, {u.transform for u in res.units}, rt)
    tv = res.to_version
    verdict = res.target_variant
    if verdict in ("upstreamed", "absent"):
        res.status = verdict
        res.reason = f"the series says {verdict} at vllm {tv}; the merge of the {res.variant} variant is {res.merge}"
    else:
        res.status = res.merge
        if res.merge == CLEAN and res.transform != "carries-forward":
            res.status = "needs-variant"
        res.reason = "; ".join(u.reason for u in res.units if u.reason)
    _new_diff(res, rt, plan_t, target_texts)
    if res.old_diff or res.new_diff:
        res.range_diff = rangediff.compare(res.old_diff, res.new_diff)
    _next_steps(res)


def _transform_verdict(merge: str, transforms: set[str], rt: engine.PatchResult) -> str:
    """The patch's transform verdict from its merge and its units' transform verdicts."""
    if merge != CLEAN:
        return "applies" if rt.status == engine.OK else "fails"
    if transforms <= {"carries-forward", "carries-forward (formatting)"}:
        return "carries-forward"
    return "fails" if "fails" in transforms else "differs"


def _new_diff(res: PatchRebase, rt: engine.PatchResult, plan_t: engine.Plan, target_texts: dict[str, str]) -> None:
    """The rendered diff at the target: the transform's when it carries forward (or the
    merge is not clean but the transform applies), else the merge's."""
    if res.transform == "carries-forward":
        res.new_diff, res.new_diff_source = diffs.unified_all(plan_t.pristine, plan_t.patched), "transform"
    elif res.merge == CLEAN:
        new_texts = {}
        for rel, text in target_texts.items():
            mine = [u for u in res.units if u.target_path == rel]
            new_texts[rel] = splice_many(text, [(*u.target_span, u.merged) for u in mine])  # type: ignore[misc]
        res.new_diff, res.new_diff_source = diffs.unified_all(target_texts, new_texts), "merge"
    elif rt.status == engine.OK:
        res.new_diff, res.new_diff_source = diffs.unified_all(plan_t.pristine, plan_t.patched), "transform"


def _next_steps(res: PatchRebase) -> None:
    tv = res.to_version
    for u in res.units:
        if u.merge == CONFLICT and u.files:
            tip = " (the current transform's result is beside it)" if u.transform_text is not None else ""
            res.next_steps.append(f"resolve {u.files[0]}{tip}")
        if u.resolution == "renamed":
            res.next_steps.append(f"anchors/{res.patch_id}.toml: qualname {u.qualname} -> {u.target_qualname} "
                                  f"(similarity {u.candidates[0].score:g})")
        if u.merge == GONE:
            res.next_steps.append(f"{u.qualname} is gone at vllm {tv}: "
                                  f"add a variant (absent/upstreamed) or new anchors")
    if res.merge == CLEAN and res.transform != "carries-forward":
        res.next_steps.append(f"the transform does not give the merge at vllm {tv}: `--write` puts the merged "
                              f"definitions in the work directory, then `patchq rebase --to {tv} --patch "
                              f"{res.patch_id} --continue --write` writes the variant that gives them")
    if res.merge == CLEAN and res.transform == "carries-forward" and res.target_variant == "none":
        res.next_steps.append(f"widen the variant {res.variant} to cover vllm {tv} (--write does it)")
