"""patchq.plan.toolchain: the planner digest that keys stored plans and run hooks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import patchq
from patchq.plan import toolchain


def test_every_source_exists_and_the_digest_covers_version_and_bytes():
    here = Path(patchq.__file__).parent
    assert all((here / name).is_file() for name in toolchain.SOURCES)
    h = hashlib.sha256(patchq.__version__.encode())
    for name in toolchain.SOURCES:
        h.update(b"\0" + name.encode() + b"\0" + (here / name).read_bytes())
    assert toolchain.digest() == h.hexdigest()


def test_the_planners_own_modules_are_sources():
    # what decides a plan's bytes: the engine and everything it hands the text to
    for name in ("plan/engine.py", "plan/anchors.py", "edits.py", "sentinels.py", "compat/gate.py"):
        assert name in toolchain.SOURCES


def test_the_digest_is_computed_once(monkeypatch):
    first = toolchain.digest()
    monkeypatch.setattr(toolchain, "SOURCES", ("edits.py",))
    assert toolchain.digest() == first  # cached for the process
    monkeypatch.setattr(toolchain, "_digest", None)
    assert toolchain.digest() != first
