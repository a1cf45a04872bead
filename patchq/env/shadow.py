"""Which ``vllm`` this interpreter would import (standard library only: the no-op fast path asks)."""

from __future__ import annotations

import os


def shadowing(site: str) -> str | None:
    """Where this interpreter would import ``vllm`` from instead of ``site``, or None.

    Only asked when ``site`` is on this interpreter's ``sys.path`` (the environment it
    runs): then an earlier ``vllm`` (``PYTHONPATH``, a ``.pth``, the working directory)
    means the patched files would not be the ones imported. Found with
    :func:`importlib.machinery.PathFinder.find_spec` over ``sys.path``: nothing is imported.
    """
    import sys

    real = os.path.realpath(site)
    entries = [p for p in sys.path if p]
    if not any(os.path.realpath(p) == real for p in entries):
        return None
    from importlib.machinery import PathFinder

    try:
        spec = PathFinder.find_spec("vllm", [os.path.realpath(p) for p in entries])
    except (ImportError, ValueError, OSError):
        return None
    origin = getattr(spec, "origin", None) or next(iter(getattr(spec, "submodule_search_locations", None) or []), None)
    if not origin:
        return None
    found = os.path.realpath(origin)
    if found == os.path.join(real, "vllm") or found.startswith(os.path.join(real, "vllm") + os.sep):
        return None
    return os.path.dirname(found) if os.path.basename(found) == "__init__.py" else found
