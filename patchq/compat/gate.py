"""The review gate of ``apply`` and ``run``: drift that is not provably apart blocks.

``check`` classifies a drifted definition three ways (:mod:`patchq.compat.threeway`);
``apply`` and ``run`` plan through :func:`patchq.plan.plancache.plan`, which calls
:func:`review` on a fresh plan, so what ``check`` reports as ``review`` or
``possibly-upstreamed`` (blocking) is exactly what ``apply`` refuses: the patch's result
becomes ``failed`` with ``failure`` ``review`` / ``possibly-upstreamed`` and nothing is
written. A release is accepted by recording it as reviewed (``patchq review PATCH
--vllm X``), after which its fingerprint is verified and the gate has nothing to do.
"""

from __future__ import annotations

from collections.abc import Iterable

from patchq.model import Patch
from patchq.plan import results as planned


def review(plan: planned.Plan, patches: Iterable[Patch]) -> None:
    """Fail, in place, every ``ok`` result of ``plan`` whose drift the three-way
    classification does not prove apart from the patch (module docstring)."""
    from patchq.compat import threeway
    from patchq.compat.drift import recorded_fingerprints, verified_release

    by_id = {p.id: p for p in patches}
    version = plan.source.version
    ws = plan.workspace

    def text(relpath: str) -> str | None:
        if ws is not None and relpath in ws.pristine_text:
            return ws.pristine_text[relpath]
        return plan.pristine.get(relpath) or plan.source.read_text(relpath)

    for r in plan.results:
        patch = by_id.get(r.patch_id)
        if r.status != planned.OK or patch is None:
            continue
        drifted, seen = [], set()
        for a in r.anchors:
            key = (a.relpath, a.qualname)
            if key in seen or not recorded_fingerprints(patch, a.qualname, a.relpath):
                continue
            seen.add(key)
            if verified_release(patch, a.qualname, a.fingerprint, version, a.relpath) is None:
                drifted.append(key)
        if not drifted:
            continue
        known = {(rel, q): list(recorded_fingerprints(patch, q, rel)) for rel, q in drifted}
        node = (lambda rel, q: ws.pristine_node(rel, q)) if ws is not None else None
        verdict = threeway.classify(patch, drifted, plan.source, text, known, node)
        if verdict.blocking:
            r.status, r.failure, r.reason = planned.FAILED, verdict.status, verdict.reason
            r.failed_anchor = next((a.anchor for a in r.anchors if (a.relpath, a.qualname) == drifted[0]), "")
