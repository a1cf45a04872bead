"""The review gate of ``apply`` and ``run``: drift that is not provably apart blocks.

``check`` classifies a drifted definition three ways (:mod:`patchq.compat.threeway`);
``apply`` and ``run`` plan through :func:`patchq.plan.plancache.plan`, which calls
:func:`review` on a fresh plan, so what ``check`` reports as ``review`` or
``possibly-upstreamed`` (blocking) is exactly what ``apply`` refuses: the patch's result
becomes ``failed`` with ``failure`` ``review`` / ``possibly-upstreamed`` and nothing is
written. The same holds for what the patched code meets outside the anchored module
(:func:`outside`: new callers of a function the patch makes a no-op, a module of the
stack's own whose ``vllm`` imports break), on every ``ok`` result, drifted or not. A release
is accepted by recording it as reviewed (``patchq review PATCH --vllm X``), after which its
fingerprint is verified and the gate has nothing to do.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

from packaging.version import Version

from patchq.model import MODULE_QUALNAME, Patch
from patchq.plan import results as planned
from patchq.vllmdist.sources import CodeSource


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
        if drifted:
            known = {(rel, q): list(recorded_fingerprints(patch, q, rel)) for rel, q in drifted}
            node = (lambda rel, q: ws.pristine_node(rel, q)) if ws is not None else None
            verdict = threeway.classify(patch, drifted, plan.source, text, known, node)
            if verdict.blocking:
                r.status, r.failure, r.reason = planned.FAILED, verdict.status, verdict.reason
                r.failed_anchor = next((a.anchor for a in r.anchors if (a.relpath, a.qualname) == drifted[0]), "")
                continue
        found = outside(patch, r.anchors, plan.source, ws)
        if found:
            r.status, r.failure, r.reason = planned.FAILED, threeway.REVIEW, outside_reason(patch.id, version, found)
            r.failed_anchor = r.anchors[0].anchor if r.anchors else ""


def outside_reason(patch_id: str, version, found: Sequence[str]) -> str:
    """The ``review`` reason of :func:`outside`'s findings."""
    return ("the patched code meets upstream code it was not reviewed with: " + "; ".join(found)
            + f"; review it (patchq review {patch_id} --vllm {version})")


def outside(patch: Patch, anchors: Sequence[planned.AnchorResult], source: CodeSource, ws,
            looked: dict | None = None) -> list[str]:
    """What the patch's applied code meets outside the anchored module on ``source``, against
    its reviewed release, one line each: a module-level function it short-circuits that the
    target calls from new modules (:mod:`patchq.compat.callers`), and ``vllm`` imports of a
    module of the stack's own that its added code imports, resolved on the reviewed release
    and not on the target (:mod:`patchq.compat.foreign`). ``anchors``: the patch's planned
    anchors; ``ws``: the plan's workspace (pristine and patched texts). [] when none, or the
    reviewed release cannot be read. ``looked`` (when given) gets the stamps of the stack's
    modules looked at (:func:`patchq.compat.foreign.stamp`)."""
    from patchq.compat import callers, foreign
    from patchq.compat.drift import base_release, nearest_verified, recorded_fingerprints, verified_release

    version = source.version
    out: list[str] = []
    if ws is None:
        return out
    seen: set[str] = set()
    for a in anchors:
        module_level = a.qualname == MODULE_QUALNAME
        before = _module(ws.pristine_text.get(a.relpath)) if module_level else ws.pristine_node(a.relpath, a.qualname)
        after = _module(ws.text.get(a.relpath)) if module_level else ws.current_node(a.relpath, a.qualname)
        jump = None if "." in a.qualname or module_level else callers.short_circuit(before, after)
        imported = [m for m in foreign.added_modules(before, after) if m not in seen]
        seen.update(imported)
        if jump is None and not imported:
            continue
        base_v = verified_release(patch, a.qualname, a.fingerprint, version, a.relpath) or \
            nearest_verified(recorded_fingerprints(patch, a.qualname, a.relpath), version)
        base = base_release(base_v) if base_v is not None and Version(base_v) != version else None
        if base is None:
            continue
        found = callers.new_callers(base, source, a.qualname) if jump is not None else []
        if jump is not None and found:
            more = f" and {len(found) - 3} more" if len(found) > 3 else ""
            where = f"{a.relpath}:{a.line}" if a.line else a.relpath
            which = "a module" if len(found) == 1 else "modules"
            out.append(f"{a.qualname}: the patch's `{ast.unparse(jump)}` ({where}) makes it skip the rest of its "
                       f"body on every call, and vllm {version} calls it from {', '.join(found[:3])}{more}, "
                       f"{which} that did not call it in reviewed vllm {base_v}: code that relies on what the "
                       f"patch skips")
        mine: dict = {}
        broken = foreign.broken_imports(base, source, imported, looked=mine)
        if looked is not None:
            looked.update(mine)
        if broken:
            more = f"; +{len(broken) - 2} more" if len(broken) > 2 else ""
            names = [m for m in imported if mine.get(m)]
            out.append(f"{a.qualname}: the patch's added code imports {', '.join(names[:2])} of the stack's own, "
                       f"whose vLLM imports break on vllm {version}: {'; '.join(broken[:2])}{more}")
    return out


def _module(text: str | None) -> ast.Module | None:
    from patchq.plan.astdiff import module_tree  # parsed once per text (the three-way's too)

    return module_tree(text) if text is not None else None
