"""``apply`` reuses what ``check`` planned (issue 41): a thin layer over :mod:`patchq.plan.plancache`.

A ``check`` plans every patch of the series on the target and so computes the patched text
of every file. When nothing in the check blocks, :func:`keep` stores that plan in the plan
cache under the very key ``apply``, ``upgrade`` and ``run`` look up
(:func:`patchq.plan.plancache.plan_key`: patchq's planner sources, the vLLM version, the
patches with their hashes and recorded fingerprints, ``strict`` off), with the sha256 of
every file the plan read. A later ``apply`` of the same patches on a vLLM whose files read
to the same bytes (an install of that release: its pristine files are the RECORD's) takes
the patched texts from there after verifying each against its sha256, and plans nothing;
any file that reads otherwise, a changed series or patchq, or a damaged entry is a miss
and ``apply`` plans as before (:func:`patchq.plan.plancache.load`).

What is stored is the plan ``apply`` would make, and only when it is:

* the check planned the patches themselves (no patch had its nearest variant tried in
  place of a missing one);
* every patch planned (a failed plan is never stored) and no row blocks: ``apply``'s
  review gate (:mod:`patchq.compat.gate`) fails exactly the results whose three-way
  verdict ``check`` reports as blocking, so a check with no blocking row is a plan the
  gate passes unchanged;
* no definition was searched for in the whole package (the plan would depend on files it
  did not read);
* the results are taken before the classification touched them (it sets each anchor's
  ``verified`` to the nearest recorded release, the plan to the first one).

The matrix does not store plans (it checks many releases nobody applies at once).
"""

from __future__ import annotations

import copy
import hashlib

from patchq.model import Patch
from patchq.plan import engine
from patchq.vllmdist.sources import CodeSource


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def snapshot(plan: engine.Plan) -> tuple[list[engine.PatchResult], dict[str, str | None], dict[str, str | None]]:
    """(a copy of the plan's results, the sha256 of every file its workspace read, of every
    file the source handed out): taken right after planning, before classification."""
    ws = plan.workspace
    reads = {rel: _sha(t) for rel, t in ws.pristine_text.items()} if ws is not None else {}
    return (copy.deepcopy(plan.results), reads,
            {rel: _sha(t) for rel, t in getattr(plan.source, "_texts", {}).items()})


def keep(source: CodeSource, patches: list[Patch], tried: dict, rows: list, results: list[engine.PatchResult],
         pristine: dict[str, str], patched: dict[str, str], imports: dict | None, reads: dict[str, str | None],
         source_reads: dict[str, str | None], searched: bool) -> bool:
    """Store the check's plan for ``apply`` when it is the plan apply would make (module
    docstring). Returns True when stored."""
    from patchq.plan import plancache

    if tried or searched or any(r.blocking for r in rows):
        return False
    plan = engine.Plan(source, results, dict(sorted(pristine.items())), dict(sorted(patched.items())),
                       workspace=None, imports=imports)
    if not plan.ok:
        return False
    plancache.store(plan, plancache.plan_key(source, patches), source_reads, reads)
    return True
