"""Several profiles from one plan (the matrix's views).

``matrix`` checks the union of the profiles' patches once per release, then takes each
profile's rows from it when that is exactly what checking the profile alone would give
(:func:`view_is_exact`); otherwise the profile is checked on its own.
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
    excluded patch that changed a file before an included one touched it, or a compile
    failure in a shared file (which fails every patch in that file). Failed patches leave
    no trace in the plan, so only their compile failures count.
    """
    if not _is_subsequence(ids, order):
        return False
    included = set(ids)
    any_compile_failure = any(r.compile_failed for r in rows.values())
    for i, q in enumerate(order):
        if q in included:
            continue
        rq = rows[q]
        q_files = set(rq.touched) if (not rq.blocking or rq.compile_failed) else set()
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
