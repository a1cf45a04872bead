"""Declared relations between patches: ``requires``, ``conflicts``, ``supersedes``.

A patch declares them in ``patch(...)`` (:func:`patchq.series.patch`); a profile is an
ordered list of patch ids (``series/profiles.toml``). :func:`validate_profile` checks a
profile against its patches' declarations before anything is planned. The rules, in the
order they are checked (the first broken one is the error):

1. **cycle**: following ``requires`` and ``supersedes`` (both mean "comes before me")
   from any patch of the profile must never lead back to it;
2. **missing requirement**: every id in ``requires`` is in the profile;
3. **order**: every id in ``requires``, and every id in ``supersedes`` that the profile
   holds, comes before the declaring patch (a superseded patch may be left out: then
   there is nothing to rewrite);
4. **conflict**: no two patches of the profile where one lists the other in
   ``conflicts`` (declared on either side).

A patch listed twice in a profile is refused when ``profiles.toml`` is read
(:func:`patchq.series.load_profiles`). Each error is a :class:`SeriesError` (exit 2)
whose one line names the profile and both patches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from patchq.errors import SeriesError
from patchq.model import Patch


def _before_edges(p: Patch) -> tuple[str, ...]:
    """Ids that must come before ``p`` (``requires`` then ``supersedes``)."""
    return tuple(dict.fromkeys((*p.requires, *p.supersedes)))


def find_cycle(patches: Mapping[str, Patch]) -> list[str] | None:
    """A cycle of "comes before" edges among ``patches`` (id -> Patch), as
    ``[a, b, ..., a]``, or None. Edges to ids outside ``patches`` are ignored."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(pid: str) -> list[str] | None:
        state[pid] = 1
        stack.append(pid)
        for dep in _before_edges(patches[pid]):
            if dep not in patches:
                continue
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[pid] = 2
        return None

    for pid in patches:
        if pid not in state:
            found = visit(pid)
            if found:
                return found
    return None


def validate_profile(profile: str, patches: Sequence[Patch]) -> None:
    """Check one profile's ordered patches against their declared relations.

    Args:
        profile: the profile name (for the message).
        patches: its patches, in profile order.
    Raises:
        SeriesError: a patch listed twice, a requires/supersedes cycle, a missing
            requirement, a requirement or superseded patch after its dependant, or two
            conflicting patches (module docstring gives the order of the rules).
    """
    ids = [p.id for p in patches]
    for pid in ids:
        if ids.count(pid) > 1:
            raise SeriesError(f"profile {profile} lists patch {pid} twice (a profile holds each patch once)")
    by_id = {p.id: p for p in patches}
    cycle = find_cycle(by_id)
    if cycle:
        raise SeriesError(f"profile {profile}: patches {cycle[0]} and {cycle[1]} form a requires/supersedes "
                          f"cycle: {' -> '.join(cycle)}")
    pos = {pid: i for i, pid in enumerate(ids)}
    for p in patches:
        for dep in p.requires:
            if dep not in pos:
                raise SeriesError(f"profile {profile}: patch {p.id} requires {dep}, which the profile "
                                  f"does not include (add {dep} before {p.id})")
        for key, deps in (("requires", p.requires), ("supersedes", p.supersedes)):
            for dep in deps:
                if dep in pos and pos[dep] > pos[p.id]:
                    raise SeriesError(f"profile {profile}: patch {p.id} {key} {dep}, which comes after it "
                                      f"(put {dep} before {p.id})")
    for p in patches:
        for other in p.conflicts:
            if other in pos:
                raise SeriesError(f"profile {profile}: patches {p.id} and {other} conflict "
                                  f"(declared by {p.id}); a profile may hold only one of them")


def superseders(patches: Iterable[Patch]) -> dict[str, list[str]]:
    """superseded id -> ids of the patches (of ``patches``) that declare ``supersedes`` it."""
    out: dict[str, list[str]] = {}
    for p in patches:
        for dep in p.supersedes:
            out.setdefault(dep, []).append(p.id)
    return out


def relations_row(patch: Patch, among: Iterable[Patch] = ()) -> dict[str, list[str]]:
    """The JSON ``relations`` of one patch: its declarations plus ``superseded_by``
    (the patches of ``among`` that supersede it)."""
    row = patch.relations()
    row["superseded_by"] = superseders(among).get(patch.id, [])
    return row
