"""``check`` of a long series on every core: independent groups of patches in forked processes.

A check plans its patches in series order in one workspace (:func:`patchq.plan.engine.plan`),
so a patch sees what the patches before it wrote. Most patches of a long series share no
file with each other: planned apart, they give the same results. :func:`check` deals the
patches out to forked processes in groups that nothing joins (no module an anchor names in
common, no ``requires``/``conflicts``/``supersedes`` between them), and each process plans
and classifies its share exactly as :func:`patchq.compat.check.check` does, on a
workspace of its own. The parent then takes the rows in series order when the shares
were indeed apart, and returns None (the caller checks in one process) when they were not:

* no file was changed by two shares;
* every file one share changed and another read (a package-wide search, a module hint
  that no longer holds the definition, the backward detection) holds the same
  definitions after the change as before: all a workspace reads of a file its own
  patches do not change is the pristine text, and which definitions the current text
  holds (:func:`apart`).

Each share also hands back its plan as plain data (results, the texts it changed, the
sha256 of every file it read), which :mod:`patchq.compat.checkplan` keeps for ``apply``.
"""

from __future__ import annotations

import copy
import hashlib
import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass, field

from patchq.model import Patch, Variant
from patchq.plan import definitions, engine
from patchq.vllmdist.sources import CodeSource

#: Fewer patches than this are checked in one process (a pool costs more than it saves).
PARALLEL_FROM = 32


@dataclass
class Share:
    """What one process checked: its patches' indices (into the series), their rows and
    plan results, and its plan as plain data."""

    indices: list[int]
    rows: list = field(default_factory=list)
    results: list[engine.PatchResult] = field(default_factory=list)
    pristine: dict[str, str] = field(default_factory=dict)
    patched: dict[str, str] = field(default_factory=dict)
    imports: dict[str, list[str] | None] | None = None
    #: relpath -> sha256 of each text the workspace read (None: absent)
    reads: dict[str, str | None] = field(default_factory=dict)
    #: relpath -> sha256 of each text the source handed out by the end of the plan
    source_reads: dict[str, str | None] = field(default_factory=dict)
    searched: bool = False
    accessed: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    #: changed files whose definitions (qualname -> how many) are not the pristine file's
    requalified: set[str] = field(default_factory=set)
    unreadable: list[str] = field(default_factory=list)
    #: every file the source handed out by the end of the check (the verdict cache lists them)
    source_texts: list[str] = field(default_factory=list)


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def groups(patches: list[Patch]) -> list[list[int]]:
    """Indices of ``patches`` in groups that share no module an anchor names and no
    relation, each in series order; groups ordered by their first patch."""
    parent = list(range(len(patches)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i: int, j: int) -> None:
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)

    by_file: dict[str, int] = {}
    by_id = {p.id: i for i, p in enumerate(patches)}
    for i, p in enumerate(patches):
        for spec in p.anchors.values():
            for rel in spec.module_paths:
                if rel in by_file:
                    join(i, by_file[rel])
                else:
                    by_file[rel] = i
        for other in (*p.requires, *p.conflicts, *p.supersedes):
            if other in by_id:
                join(i, by_id[other])
    out: dict[int, list[int]] = {}
    for i in range(len(patches)):
        out.setdefault(find(i), []).append(i)
    return sorted(out.values(), key=lambda g: g[0])


def deal(groups_: list[list[int]], n: int) -> list[list[int]]:
    """``n`` shares of about as many patches each (largest groups first), series order inside."""
    shares: list[list[int]] = [[] for _ in range(n)]
    for g in sorted(groups_, key=len, reverse=True):
        min(shares, key=len).extend(g)
    return [sorted(s) for s in shares if s]


_FORKED: tuple | None = None  # what the forked checkers read (set just before the pool forks)


def _check_share(indices: list[int]) -> Share:
    """Plan and classify the patches at ``indices`` (runs in a forked process)."""
    from patchq.compat import check as checking
    from patchq.compat import upstreamed, verdictcache

    assert _FORKED is not None
    source, patches, planned, tried, read = _FORKED
    noted = len(verdictcache._unreadable)
    mine = [planned[i] for i in indices]
    plan = engine.plan(source, mine, read=read)
    ws = plan.workspace
    assert ws is not None
    share = Share(indices, results=copy.deepcopy(plan.results),  # before classification sets ``verified``
                  pristine=plan.pristine, patched=plan.patched, imports=plan.imports,
                  source_reads={rel: _sha(t) for rel, t in source._texts.items()})
    checking._prefetch_bases(plan, mine)
    res = checking._Resolver(plan)
    share.rows = [checking.classify(patches[i], r, plan, tried.get(patches[i].id), res)
                  for i, r in zip(indices, plan.results, strict=True)]
    upstreamed.annotate(share.rows, [patches[i] for i in indices], plan)
    definitions.save_all()
    share.reads = {rel: _sha(t) for rel, t in ws.pristine_text.items()}
    share.searched = ws.searched
    share.accessed = set(ws.text)
    share.changed = set(ws.changed())
    share.requalified = {rel for rel in share.changed
                         if _qualnames(ws.index(rel)) != _qualnames(ws.pristine_index(rel))}
    share.unreadable = list(verdictcache._unreadable[noted:])
    share.source_texts = sorted(rel for rel, t in source._texts.items() if t is not None)
    return share


def _qualnames(index: dict | None) -> dict[str, int]:
    return {q: len(entries) for q, entries in (index or {}).items()}


def apart(shares: list[Share]) -> bool:
    """True when no share's result can depend on another's edits (module docstring).

    What a workspace reads of a file a patch does not change is its pristine text (the
    pristine view, the backward detection, the classification) or, to locate a
    definition, which definitions the current text holds and how many times each
    (:func:`patchq.plan.anchors.find_definitions`; the files a package-wide search looks
    at are chosen by the pristine texts). So shares are apart when none changed a file
    another changed, and every file one changed that another read still holds the same
    definitions."""
    for s in shares:
        for t in shares:
            if s is not t and (s.changed & t.changed or s.requalified & t.accessed):
                return False
    return True


def check(source: CodeSource, patches: list[Patch], planned: list[Patch], tried: dict[str, Variant],
          read: Callable[[str], str | None] | None, workers: int) -> tuple[list, list[Share]] | None:
    """The rows of :func:`patchq.compat.check.check` (before the verdict cache), computed in
    ``workers`` forked processes, and the shares' plans; None when the series is short,
    forking is not available, the patches fall in fewer groups than processes, or the
    shares were not apart (module docstring): then check in one process."""
    global _FORKED
    from concurrent.futures import ProcessPoolExecutor

    from patchq.compat import verdictcache
    from patchq.plan.relations import relations_row

    if workers <= 1 or len(patches) < PARALLEL_FROM or "fork" not in multiprocessing.get_all_start_methods():
        return None
    gs = groups(planned)
    if len(gs) < workers:
        return None
    shares_idx = deal(gs, workers * 2)
    _FORKED = (source, patches, planned, tried, read)
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            shares = list(pool.map(_check_share, shares_idx))
    finally:
        _FORKED = None
    if not apart(shares):
        return None
    rows: list = [None] * len(patches)
    for s in shares:
        for i, row in zip(s.indices, s.rows, strict=True):
            rows[i] = row
        for version in s.unreadable:
            verdictcache.note_unreadable(version)
    for row, patch in zip(rows, patches, strict=True):  # relations among the whole series, as one process gives
        row.relations = relations_row(patch, patches)
    return rows, shares


def merged(shares: list[Share]) -> tuple:
    """The shares' plans as one, in the arguments :func:`patchq.compat.checkplan.keep` takes
    after the rows: (results in series order, pristine texts, patched texts, imports, reads,
    source reads, searched)."""
    results = [r for _, r in sorted(((i, r) for s in shares for i, r in zip(s.indices, s.results, strict=True)),
                                    key=lambda x: x[0])]
    imports = None if any(s.imports is None for s in shares) else \
        {rel: v for s in shares for rel, v in (s.imports or {}).items()}
    return (results, {rel: t for s in shares for rel, t in s.pristine.items()},
            {rel: t for s in shares for rel, t in s.patched.items()}, imports,
            {rel: sha for s in shares for rel, sha in s.reads.items()},
            {rel: sha for s in shares for rel, sha in s.source_reads.items()}, any(s.searched for s in shares))
