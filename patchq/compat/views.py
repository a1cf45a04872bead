"""Several profiles from one plan (the matrix's views), and every patch in its own context.

A patch is judged in the context of its profile: the patches before it in the profile are
planned before it, and no other. ``matrix`` checks the union of the profiles' patches once
per release, then takes each profile's rows from it when that is exactly what checking the
profile alone would give (:func:`view_is_exact`); otherwise the profile is checked on its
own. So a cell never depends on which other profiles are in the matrix. ``check --all``
(:func:`check_all`) takes each patch's row from its profiles the same way, and checks a
patch that no profile holds alone (with what it requires or supersedes:
:func:`context_ids`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.compat.check import PatchCheck

def union_order(profiles: dict[str, list[str]]) -> list[str]:
    """Every patch id of the profiles, in first-seen order (longest profile first)."""
    out: list[str] = []
    for ids in sorted(profiles.values(), key=len, reverse=True):
        for pid in ids:
            if pid not in out:
                out.append(pid)
    return out


def _is_subsequence(ids: list[str], order: list[str]) -> bool:
    pos = [order.index(i) for i in ids]
    return pos == sorted(pos)


def view_is_exact(ids: list[str], order: list[str], rows: dict[str, PatchCheck]) -> bool:
    """True when a profile's rows taken from a plan of ``order`` equal planning just ``ids``.

    A patch's outcome depends on the others only through the files they share: an
    excluded patch whose edits the plan kept (``left_edits``: its result ``ok``, also where
    check then blocks it, e.g. ``review``) in a file before an included one touched it, or a
    compile failure in a shared file (which fails every patch in that file). A patch the
    plan failed leaves no trace, so only its compile failure counts.
    """
    if not _is_subsequence(ids, order):
        return False
    included = set(ids)
    any_compile_failure = any(r.compile_failed for r in rows.values())
    for i, q in enumerate(order):
        if q in included:
            continue
        rq = rows[q]
        q_files = set(rq.touched) if (rq.left_edits or rq.compile_failed) else set()
        if not q_files:
            continue
        for j, p in enumerate(order):
            if p not in included or not (rows[p].touched & q_files):
                continue
            if i < j or any_compile_failure:
                return False
    return True


def check_profiles(source: CodeSource, series, profiles: list[str]) -> dict[str, list[PatchCheck]]:
    """Check several profiles of ``series`` against ``source``: one plan of all their patches,
    then one view per profile (planned on its own only when the view would not be exact).

    Returns:
        profile -> rows in the profile's order.
    """
    from patchq.compat.check import check

    ids = {name: list(series.profile(name).patches) for name in profiles}
    for name in profiles:  # relations hook: a broken profile is a series error
        series.patches_of(name)
    order = union_order(ids)
    rows = {r.id: r for r in check(source, [series.patch(pid) for pid in order])}
    out: dict[str, list[PatchCheck]] = {}
    from patchq.compat import upstreamed  # relations hook: outcomes that depend on other patches
    for name, pids in ids.items():
        if view_is_exact(pids, order, rows) and not upstreamed.depends_on_others(rows[p] for p in pids) \
                and not any(rows[p].relations.get("superseded_by") for p in pids):
            out[name] = [rows[pid] for pid in pids]
        else:
            out[name] = check(source, [series.patch(pid) for pid in pids])
    return out


def context_ids(series, patch_id: str) -> list[str]:
    """The patches ``patch_id`` is checked with outside a profile: itself and what it
    ``requires`` or ``supersedes``, transitively (a patch that anchors on another's
    statement does not plan alone), in series order."""
    known = series.all_patch_ids()
    want, todo = {patch_id}, [patch_id]
    while todo:
        p = series.patch(todo.pop())
        for dep in (*p.requires, *p.supersedes):
            if dep not in want and dep in known:
                want.add(dep)
                todo.append(dep)
    return [pid for pid in known if pid in want]


def check_all(source: CodeSource, series) -> list[PatchCheck]:
    """``check --all``: every patch of ``series`` in series order, each judged in the
    context of its own profiles (:func:`check_profiles`), a patch in no profile in its own
    context (:func:`context_ids`). Patches of independent profiles are never stacked.

    A patch in several profiles whose rows differ gets the first blocking one (else the
    first), its reason prefixed with the profile, and a note per profile.

    Raises:
        SeriesError: a profile breaks its patches' relations.
    """
    from patchq.compat.check import check

    names = [n for n in series.profiles if series.profile(n).patches]
    per = check_profiles(source, series, names) if names else {}
    rows: dict[str, list[tuple[str, PatchCheck]]] = {}
    for name, got in per.items():
        for row in got:
            rows.setdefault(row.id, []).append((name, row))
    out = []
    for pid in series.all_patch_ids():
        if pid not in rows:  # in no profile: alone, with what it requires
            ctx = context_ids(series, pid)
            out.append(next(r for r in check(source, [series.patch(p) for p in ctx]) if r.id == pid))
            continue
        out.append(_one_row(rows[pid]))
    return out


def _one_row(seen: list[tuple[str, PatchCheck]]) -> PatchCheck:
    """The row of a patch judged in several profiles (:func:`check_all`)."""
    from dataclasses import replace

    name, row = next(((n, r) for n, r in seen if r.blocking), seen[0])
    if all((r.status, r.blocking, r.reason) == (row.status, row.blocking, row.reason) for _, r in seen):
        return row
    row = replace(row, reason=f"in profile {name}: {row.reason}", notes=list(row.notes))
    row.notes += [f"profile {n}: {r.status}{' (blocking)' if r.blocking else ''}" for n, r in seen]
    return row
