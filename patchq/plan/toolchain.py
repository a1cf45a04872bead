"""The planner's own sources: what, besides the series, decides the bytes a plan writes.

A stored plan (:mod:`patchq.plan.plancache`) and a prepared ``patchq run`` hook
directory (:mod:`patchq.env.hookdir`) are valid only for the planner that made them,
so both are keyed by :func:`digest`. Standard library only: ``patchq run`` asks for it
on its no-parse path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from patchq import __version__

#: Planner sources (relative to the patchq package) whose change can change a plan.
SOURCES = ("plan/engine.py", "plan/anchors.py", "plan/definitions.py", "plan/stmtpatch.py",
           "plan/results.py", "plan/relations.py", "plan/survival.py", "plan/validate.py",
           "plan/backward.py", "plan/forward.py", "plan/meaning.py", "plan/astdiff.py", "plan/dataflow.py",
           "plan/relocate.py", "plan/legacyops.py", "plan/stmtviews.py", "plan/moduleview.py", "edits.py",
           "sentinels.py", "model.py", "compat/gate.py", "compat/threeway.py", "compat/drift.py", "compat/checkplan.py",
           "compat/fanout.py")

_digest: str | None = None


def digest() -> str:
    """sha256 hex over patchq's version and the bytes of :data:`SOURCES` (a missing file
    counts as ``-``); computed once per process."""
    global _digest
    if _digest is None:
        here = Path(__file__).resolve().parents[1]
        h = hashlib.sha256(__version__.encode())
        for name in SOURCES:
            try:
                h.update(b"\0" + name.encode() + b"\0" + (here / name).read_bytes())
            except OSError:
                h.update(b"\0" + name.encode() + b"\0-")
        _digest = h.hexdigest()
    return _digest
