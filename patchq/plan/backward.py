"""Upstream detection backwards: is the release what the patch would have produced?

When an anchor of a patch no longer resolves on a release (the statement it matched is
gone), the forward detection of :mod:`patchq.plan.engine` has nothing to compare. This
module plans the patch on its **last verified release** (the newest release at or below
the target with a recorded fingerprint in ``anchors/<patch>.toml``, read from patchq's
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
from patchq.model import AnchorSpec, Patch
from patchq.plan import survival
from patchq.plan.anchors import ast_index, fingerprint_ast, locate_definition
from patchq.vllmdist.sources import CodeSource


def last_verified(patch: Patch, version: Version) -> str | None:
    """The newest release at or below ``version`` with a recorded fingerprint of any of
    the patch's anchors, or None."""
    known = sorted({v for spec in patch.anchors.values() for v in spec.fingerprints}, key=Version)
    below = [v for v in known if Version(v) <= version]
    return below[-1] if below else None


def cached_release(version: str) -> CodeSource | None:
    """A release from patchq's cache only (never downloads); None when not cached."""
    from patchq.vllmdist import releases, sources

    try:
        tree = releases.cache_dir() / "releases" / releases.version_key(version)
        if not (tree / "vllm").is_dir() and Version(version) not in releases.cached_wheels():
            return None
        return sources.release_source(version)
    except Exception:  # a broken cache entry must not break a plan
        return None


def _target_def(source: CodeSource, ws, spec: AnchorSpec) -> tuple[str, ast.AST] | None:
    def index(relpath):
        return ws.pristine_index(relpath) if ws.current(relpath) is not None else None

    try:
        relpath, _ = locate_definition(spec, source, index)
        node = ws.pristine_node(relpath, spec.qualname)  # the ast (the index holds definition entries)
    except (AnchorError, SyntaxError, ValueError):  # a target that does not parse (a NUL byte): no verdict
        return None
    return (relpath, node) if node is not None else None


def detect(patch: Patch, source: CodeSource, ws) -> tuple[str, str] | None:
    """The backward verdict for ``patch`` on ``source`` (module docstring).

    Args:
        ws: the plan's :class:`patchq.plan.engine.Workspace` (pristine texts of ``source``).
    Returns:
        (``upstreamed`` | ``partially-upstreamed`` | ``not-upstreamed``, reason), or None
        when there is no cached verified release to compare with.
    """
    from patchq.plan import engine

    ref_version = last_verified(patch, source.version)
    ref = cached_release(ref_version) if ref_version else None
    if ref is None:
        return None
    ref_plan = engine.plan(ref, [patch], backward=False)
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
        patched = ast_index(ref_plan.patched.get(relpath, "")).get(qualname) if relpath in ref_plan.patched else None
        if patched and len(patched) == 1 and fingerprint_ast(patched[0]) == fingerprint_ast(found[1]):
            equal.append(f"{qualname} ({found[0]}:{found[1].lineno})")
    if equal and len(equal) == len(specs):
        return engine.UPSTREAMED, (f"{', '.join(equal)} equals what {patch.id} produced on verified vllm "
                                   f"{ref_version} (normalized AST)")
    for ch in changes:
        found = targets.get((ch.relpath, ch.qualname))
        ch.upstream = survival.upstream_items(ch, found[1], found[0]) if found is not None and ch.added else []
    up = [c for c in changes if c.is_upstream]
    evidence = engine.upstream_evidence(up)
    if up and len(up) == len(changes):
        return engine.UPSTREAMED, (f"every edit's change (as made on verified vllm {ref_version}) is already in "
                                   f"vllm {source.version}: {evidence}")
    if up:
        rest = ", ".join(dict.fromkeys(c.anchor for c in changes if not c.is_upstream))
        return "partially-upstreamed", (f"partially upstreamed in vllm {source.version}: {evidence}; "
                                        f"not upstream: {rest}")
    return "not-upstreamed", (f"generic upstream detection cannot prove {patch.id}'s change (as made on verified "
                              f"vllm {ref_version}) present in vllm {source.version}")
