"""Upstream detection backwards: is the release what the patch would have produced?

When an anchor of a patch no longer resolves on a release (the statement it matched is
gone), the forward detection of :mod:`patchq.plan.engine` has nothing to compare. This
module plans the patch on its **last verified release** (the newest release at or below
the target with a recorded fingerprint in ``anchors/<patch>.toml``; for a definition gone
from a release older than every recorded one, the oldest recorded; read from patchq's
release cache only: it never downloads) and compares the result with the target:

1. every definition the patch changed there equals (normalized AST, docstrings and
   formatting aside: :func:`patchq.plan.anchors.fingerprint_ast`) the target's
   definition of the same qualified name -> ``upstreamed``;
2. else, per edit, the statements it added there are all in the target's definition
   (:func:`patchq.plan.survival.upstream_items`): every edit -> ``upstreamed``, some ->
   ``partially-upstreamed``;
3. else the reason says that generic detection cannot prove the change upstream (the
   patch stays failed: blocking, never ``applies``).
"""

from __future__ import annotations

import ast

from packaging.version import Version

from patchq.errors import AnchorError
from patchq.model import MODULE_QUALNAME, AnchorSpec, Patch
from patchq.plan import astdiff, forward, meaning, survival
from patchq.plan.anchors import ast_index, fingerprint_ast, locate_definition
from patchq.vllmdist.sources import CodeSource


def last_verified(patch: Patch, version: Version, above: bool = False) -> str | None:
    """The newest release at or below ``version`` with a recorded fingerprint of any of
    the patch's anchors; else, with ``above`` (a release older than every recorded one: a
    stack carried back), the oldest recorded above it; else None."""
    known = sorted({v for spec in patch.anchors.values() for v in spec.fingerprints}, key=Version)
    below = [v for v in known if Version(v) <= version]
    return below[-1] if below else (known[0] if known and above else None)


_SOURCES: dict[str, CodeSource] = {}


def cached_release(version: str) -> CodeSource | None:
    """A release from patchq's cache only (never downloads); None when not cached. One
    source per release and process (its texts and definition index are read once).

    Raises:
        CacheError: its cached tree is damaged and could not be fetched again.
    """
    from patchq.errors import CacheError, ReadOnlyError
    from patchq.vllmdist import releases, sources

    key = f"{releases.cache_dir()}\0{version}"  # one cache root per process in use, but never assumed
    if key in _SOURCES:
        return _SOURCES[key]
    try:
        tree = releases.cache_dir() / "releases" / releases.version_key(version)
        if not (tree / "vllm").is_dir() and Version(version) not in releases.cached_wheels():
            return None
        _SOURCES[key] = sources.release_source(version)
        return _SOURCES[key]
    except (CacheError, ReadOnlyError):  # damaged and not fetched again, or held by `cache clean`: never a
        raise  # verdict without it (issue 38)
    except Exception:  # a release that cannot be read for another reason must not break a plan
        releases.note_unreadable(version)  # the answer may change: no verdict kept
        return None


def _target_def(source: CodeSource, ws, spec: AnchorSpec) -> tuple[str, ast.stmt] | None:
    def index(relpath):
        return ws.pristine_index(relpath) if ws.current(relpath) is not None else None

    try:  # the files the index says declare the name: the ones a scan of the whole package would read
        relpath, _ = locate_definition(spec, source, index, ws.defs.candidates, ws.defs.declares)
        node = ws.pristine_node(relpath, spec.qualname)  # the ast (the index holds definition entries)
    except (AnchorError, SyntaxError, ValueError):  # a target that does not parse (a NUL byte): no verdict
        return None
    return (relpath, node) if node is not None else None


def detect(patch: Patch, source: CodeSource, ws, gone: bool = False) -> tuple[str, str] | None:
    """The backward verdict for ``patch`` on ``source`` (module docstring).

    Args:
        ws: the plan's :class:`patchq.plan.engine.Workspace` (pristine texts of ``source``).
        gone: the failure is an anchored definition found nowhere: on a release older than
            every reviewed one the oldest reviewed one is compared with (the release is
            searched for the definition); a conflict there is not (planning every such
            patch on another release cost 1.6x a cold check of prime-rl on 0.15.1).
    Returns:
        (``upstreamed`` | ``partially-upstreamed`` | ``not-upstreamed``, reason), or None
        when there is no cached verified release to compare with.
    """
    from patchq.plan import engine

    ref_version = last_verified(patch, source.version, above=gone)
    ref = cached_release(ref_version) if ref_version else None
    if ref is None or ref_version is None:
        return None
    ref_plan = _ref_plan(patch, ref, ref_version)
    result = ref_plan.results[0]
    changes = ref_plan.changes.get(patch.id) or []
    if result.status != engine.OK or not changes:
        return None
    specs = {(a.relpath, a.qualname): patch.anchors[a.anchor] for a in result.anchors}
    equal, targets = [], {}
    for (relpath, qualname), spec in specs.items():
        found = _target_def(source, ws, spec)
        if found is None:
            continue
        targets[(relpath, qualname)] = found
        patched = _patched_def(ref_plan, relpath, qualname)
        if patched is not None and fingerprint_ast(patched) == fingerprint_ast(found[1]):
            equal.append(f"{qualname} ({found[0]}:{found[1].lineno})")
    if equal and len(equal) == len(specs):
        return engine.UPSTREAMED, (f"{', '.join(equal)} equals what {patch.id} produced on verified vllm "
                                   f"{ref_version} (normalized AST)")
    helpers = {key: forward.called_helpers(ws.pristine_text.get(rel, ""), key[1], node)
               for key, (rel, node) in targets.items()}
    verdict = _by_statements(patch, changes, targets, source, str(ref_version), called=helpers)
    if verdict is not None:
        return verdict
    by_meaning = _by_meaning(patch, ref_plan, changes, targets, source, ws, str(ref_version), called=helpers)
    if by_meaning is not None:
        return by_meaning
    missing = [key for key in specs if key not in targets and key[1] != MODULE_QUALNAME]  # a module is no definition
    tail = ""
    if missing:
        moved, tail = _relocated(patch, ref_plan, changes, missing, source, str(ref_version))
        if moved is not None:
            return moved
    return "not-upstreamed", (f"generic upstream detection cannot prove {patch.id}'s change (as made on verified "
                              f"vllm {ref_version}) present in vllm {source.version}" + tail)


#: a group of added statements this small (AST nodes) is no evidence found outside its definition
_SUBSTANTIAL = 12


def _substantial(group: list) -> bool:
    return len(group) > 1 or sum(1 for n in group for _ in ast.walk(n)) >= _SUBSTANTIAL


def _relocated(patch: Patch, ref_plan, changes: list, gone: list[tuple[str, str]], source: CodeSource,
               ref_version: str) -> tuple[tuple[str, str] | None, str]:
    """Gone definitions searched for in the whole release (:mod:`patchq.plan.relocate`):
    each gone definition's change (what the patch adds there, by meaning; or what it
    produced, when a definition of the release equals it) found elsewhere, and every
    other edit upstream already -> (``upstreamed`` with the places, ''); else (None, the
    phrase naming what was searched and the nearest candidates)."""
    from patchq.plan import relocate

    ws_ref = ref_plan.workspace
    hits, notes = [], []
    for rel, qual in gone:
        base = ws_ref.pristine_node(rel, qual) if ws_ref is not None else None
        if base is None:
            notes.append(f"{qual}: not read on verified vllm {ref_version}")
            continue
        mine = [c for c in changes if (c.relpath, c.qualname) == (rel, qual)]
        groups = {id(c): [n for n in meaning.added_nodes(c.after, {i.key for i in c.added})] if c.after is not None
                  else [] for c in mine}
        names = relocate.used_names(base) | {n for g in groups.values() for s in g for n in relocate.used_names(s)}
        files = relocate.ranked_files(source, names, strong=qual.split("."), near=rel)
        found = []
        for c in mine:
            group = groups[id(c)]
            got = relocate.find_change(source, group, c.after, files, keep=meaning.reads_outside(c.after, group)) \
                if _substantial(group) and c.after is not None else None
            if got is not None:
                found.append(f"{c.anchor}: {got[1].what} ({got[1].where}, in {got[0]})")
        if mine and len(found) == len(mine):
            hits += found
            continue
        lines = definitions_text(ws_ref, rel, base)
        cands = relocate.nearest(source, base, lines, files=files)
        ours = _patched_def(ref_plan, rel, qual)
        same = None
        for cand in cands:
            node = _release_def(source, cand.relpath, cand.qualname)
            if ours is not None and node is not None and meaning.same_definition(ours, node):
                same = cand
                break
        if same is not None:
            hits.append(f"{qual} as patched on verified vllm {ref_version} is {same.qualname} "
                        f"({same.relpath}:{same.line}) up to local names and equivalent constructs")
            continue
        where = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        near = "; ".join(str(c) for c in cands) if cands else "none alike"
        notes.append(f"{qual} is gone: searched {len(files)} files (those declaring the most names it uses, then "
                     f"its own directory: {where}) for its content and for the patch's change by meaning: nearest "
                     f"candidates: {near}")
    rest = [c for c in changes if (c.relpath, c.qualname) not in gone]
    if hits and not notes and all(c.is_upstream for c in rest):
        return ("upstreamed", f"by meaning (similarity 1.00): {patch.id}'s change (as made on verified vllm "
                              f"{ref_version}) is in vllm {source.version} elsewhere: {'; '.join(hits)}"), ""
    return None, ("; " + "; ".join(notes)) if notes else ""


def definitions_text(ws, relpath: str, node: ast.AST) -> str:
    """The lines of ``node`` (a definition of ``relpath`` in ``ws``'s pristine texts), decorators included."""
    from patchq.plan import definitions

    text = ws.pristine_text.get(relpath, "") if ws is not None else ""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
    return definitions.span_text(text, first, node.end_lineno)  # type: ignore[attr-defined]


def _release_def(source: CodeSource, relpath: str, qualname: str) -> ast.AST | None:
    from patchq.plan import definitions

    d = definitions.for_source(source).definition(relpath, qualname)
    return d.node if d is not None else None


_REF_PLANS: dict[tuple, object] = {}


def _ref_plan(patch: Patch, ref: CodeSource, ref_version: str):
    """The patch planned alone on its last verified release, kept per process (a matrix
    asks for the same one on every later release where an anchor no longer resolves)."""
    from patchq.plan import engine

    key = (patch.id, patch.hash, patch.source_file, ref_version, str(ref.root),
           tuple((str(v.applies), v.kind) for v in patch.variants),
           tuple(sorted((a, tuple(sorted(s.fingerprints.items()))) for a, s in patch.anchors.items())))
    if key not in _REF_PLANS:
        if len(_REF_PLANS) > 1024:
            _REF_PLANS.clear()
        _REF_PLANS[key] = engine.plan(ref, [patch], backward=False)
    return _REF_PLANS[key]


def _patched_def(ref_plan, relpath: str, qualname: str) -> ast.stmt | None:
    """The one definition ``qualname`` of the file the reference plan patched (parsed from
    its own lines, through the plan's workspace), or None."""
    if relpath not in ref_plan.patched:
        return None
    ws = ref_plan.workspace
    if ws is not None and ws.text.get(relpath) is ref_plan.patched[relpath]:
        return ws.current_node(relpath, qualname)
    nodes = ast_index(ref_plan.patched[relpath]).get(qualname)  # pragma: no cover - plans carry their workspace
    return nodes[0] if nodes and len(nodes) == 1 else None


def _by_statements(patch: Patch, changes: list, targets: dict, source: CodeSource,
                   ref_version: str, called: dict | None = None) -> tuple[str, str] | None:
    """Step 2 of the module docstring: each edit's added statements in the target's
    definition -> ``upstreamed`` (all) or ``partially-upstreamed`` (some); else None. An
    edit whose statements are not all in the definition counts as upstream when they are
    all in it and the helpers it calls, one level (``called``: (relpath, qualname) ->
    :func:`patchq.plan.forward.called_helpers`): upstream moved the fix into a helper."""
    from patchq.plan import engine

    for ch in changes:
        found = targets.get((ch.relpath, ch.qualname))
        ch.upstream = survival.upstream_items(ch, found[1], found[0]) if found is not None and ch.added else []
        calls = (called or {}).get((ch.relpath, ch.qualname)) or []
        if found is not None and ch.added and not ch.is_upstream and calls:
            wider = ast.Module(body=[found[1], *(n for _, n in calls)], type_ignores=[])
            got = survival.upstream_items(ch, wider, found[0])
            if len(got) == len(ch.added):
                ch.upstream = got
    up = [c for c in changes if c.is_upstream]
    evidence = engine.upstream_evidence(up)
    if up and len(up) == len(changes):
        return engine.UPSTREAMED, (f"every edit's change (as made on verified vllm {ref_version}) is already in "
                                   f"vllm {source.version}: {evidence}")
    if up:
        rest = ", ".join(dict.fromkeys(c.anchor for c in changes if not c.is_upstream))
        return "partially-upstreamed", (f"partially upstreamed in vllm {source.version}: {evidence}; "
                                        f"not upstream: {rest}")
    return None


def _ours_and_helpers(ref_plan, changes) -> tuple[dict[tuple[str, str], ast.AST], list[ast.AST]]:
    """(the patched definitions of the reference plan by (relpath, qualname), the helpers
    the patch added: new top-level definitions and new members)."""

    ws = ref_plan.workspace
    ours_defs: dict[tuple[str, str], ast.AST] = {}
    helpers: list[ast.AST] = []
    for relpath in ref_plan.patched:
        if ws is not None:
            before, now = ws.pristine_index(relpath) or {}, ws.index(relpath) or {}
        else:  # pragma: no cover - plans carry their workspace
            before, now = ast_index(ref_plan.pristine.get(relpath, "")), ast_index(ref_plan.patched[relpath])
        for q in now:
            node = _patched_def(ref_plan, relpath, q) if "." not in q and q not in before else None
            if node is not None:
                helpers.append(node)
        for ch in changes:
            if ch.relpath == relpath:
                node = _patched_def(ref_plan, relpath, ch.qualname)
                if node is not None:
                    ours_defs[(relpath, ch.qualname)] = node
    for ch in changes:
        if ch.after is not None:
            keys = {i.key for i in ch.added if i.member}
            helpers += [n for n in meaning.added_nodes(ch.after, keys) if getattr(n, "name", None)]
    return ours_defs, helpers


def _by_meaning(patch: Patch, ref_plan, changes, targets: dict, source: CodeSource, ws,
                ref_version: str, called: dict | None = None) -> tuple[str, str] | None:
    """Step 3 of the module docstring, by meaning (:mod:`patchq.plan.meaning`): the
    target's definitions equal what the patch produced up to local names, helper names
    and equivalent constructs, or hold every edit's added statements so -> ``upstreamed``
    (similarity 1.00); else upstream's change to the definition is alike the patch's
    (:data:`patchq.plan.meaning.POSSIBLE` or more) -> ``possibly-upstreamed`` with both
    texts (blocking); else None."""

    ours_defs, helpers = _ours_and_helpers(ref_plan, changes)
    cands = []
    for (_, _), (t_rel, t_node) in targets.items():
        cands += forward.helper_candidates(ws, t_rel, t_node)
    found_renames = meaning.helper_renames(helpers, cands)
    patch_code = [n for ch in changes if ch.after is not None
                  for n in meaning.added_nodes(ch.after, {i.key for i in ch.added})
                  if getattr(n, "name", None) not in found_renames]
    found_renames = meaning.used_by(found_renames, patch_code)  # a helper only a framework calls is no evidence
    renames = {a: b for a, (b, _) in found_renames.items()}
    evidence = [f"helper `{a}` has the body of upstream's `{b}` ({w})" for a, (b, w) in found_renames.items()]
    tail = f"; {'; '.join(evidence)}" if evidence else ""
    same = []
    for key, ours in ours_defs.items():
        t = targets.get(key)
        if t is not None and meaning.same_definition(ours, t[1], renames):
            same.append(f"{key[1]} ({t[0]}:{t[1].lineno})")
    if same and len(same) == len({(c.relpath, c.qualname) for c in changes}):
        return "upstreamed", (f"by meaning (similarity 1.00): {', '.join(same)} is what {patch.id} produced on "
                              f"verified vllm {ref_version}, up to local names, helper names and equivalent "
                              f"constructs" + tail)
    alike = _alike(changes, targets, renames, called or {})
    if alike is None:
        return None
    hits, best = alike
    if hits and len(hits) == len(changes):
        return "upstreamed", (f"by meaning (similarity 1.00): every edit's change (as made on verified vllm "
                              f"{ref_version}) is in vllm {source.version}: {'; '.join(hits)}" + tail)
    if best[0] >= meaning.POSSIBLE:
        return "possibly-upstreamed", (
            f"possibly upstreamed in vllm {source.version}: upstream's change at {best[3]} is alike "
            f"{patch.id}'s (as made on verified vllm {ref_version}; similarity {best[0]:.2f}): upstream "
            f"`{_flat(best[2])}` vs the patch's `{_flat(best[1])}`; review it (patchq review {patch.id} "
            f"--vllm {source.version})")
    return None


def _alike(changes, targets: dict, renames: dict, helpers: dict | None = None) -> tuple[list[str], tuple] | None:
    """(edits whose added statements are in the target by meaning, as ``anchor: what
    (where)``, in its definition or a helper it calls (``helpers``: (relpath, qualname) ->
    :func:`patchq.plan.forward.called_helpers`); the best (similarity, the patch's text,
    upstream's text, where) of the others: how alike upstream's change base -> target is
    to the patch's base -> ours); None when an edit has no target or no before/after to
    compare."""

    hits, best = [], (0.0, "", "", "")
    flats: dict[int, list] = {}

    def flat(node: ast.AST) -> list:  # edits of one definition share its before and target
        if id(node) not in flats:
            flats[id(node)] = astdiff.flatten(node)
        return flats[id(node)]

    for ch in changes:
        t = targets.get((ch.relpath, ch.qualname))
        if t is None or ch.after is None or ch.before is None:
            return None
        group = [n for n in meaning.added_nodes(ch.after, {i.key for i in ch.added})
                 if getattr(n, "name", None) not in renames]
        match = meaning.group_found(group, t[1], t[0], renames, group_root=ch.after,
                                    keep=lambda a=ch.after, g=group: meaning.reads_outside(a, g)) if group else None
        if match is not None:
            hits.append(f"{ch.anchor}: {match.what} ({match.where})")
            continue
        for name, node in (helpers or {}).get((ch.relpath, ch.qualname)) or [] if group else []:
            match = meaning.group_found(group, node, t[0], renames, group_root=ch.after,
                                        keep=lambda a=ch.after, g=group: meaning.reads_outside(a, g))
            if match is not None:
                hits.append(f"{ch.anchor}: {match.what} ({match.where}, in {name}, which {ch.qualname} calls)")
                break
        if match is not None:
            continue
        base_e, ours_e, theirs_e = (flat(n) for n in (ch.before, ch.after, t[1]))
        p_h = astdiff.hunks(base_e, ours_e)
        u_h = astdiff.hunks(base_e, theirs_e)
        near = [u for u in u_h if any(u.touches(p) for p in p_h)] or u_h
        mine = astdiff.added(ours_e, p_h)
        theirs = astdiff.added(theirs_e, near)
        replaced = astdiff.replaced(base_e, [*p_h, *near])
        score = meaning.similarity(mine, theirs, renames, base=replaced)
        if score > best[0]:
            where = ", ".join(f"{t[0]}:{theirs_e[u.j1].line}" for u in near if u.j2 > u.j1)[:120]
            best = (score, meaning.canonical_text(mine), meaning.canonical_text(theirs), where)
    return hits, best


def _flat(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."
