"""Keep vLLM's torch.compile caches apart per patch set (``docs/compile-cache.md``).

Every vLLM release 0.15.1-0.33.0 puts its compile artefacts under
``envs.VLLM_CACHE_ROOT`` (``torch_compile_cache/<10-hex key>`` from
``vllm/compilation/backends.py``, ``torch_compile_cache/torch_aot_compile/<sha256>``
from ``vllm/compilation/decorators.py``), and ``VLLM_CACHE_ROOT`` itself is in the
ignored set of ``envs.compile_factors()``. The key's code factor reads the traced files
FROM DISK, which under ``patchq run`` are the pristine files, and the AOT key has no
code factor at all. So patchq folds the patch set into the root instead:
``<root>/patchq/<profile>-<digest>``, where ``<root>`` is what vLLM would use
(``$VLLM_CACHE_ROOT``, else ``$XDG_CACHE_HOME/vllm``, else ``~/.cache/vllm``, as in
``vllm/envs.py``) and ``<digest>`` is :func:`profile_digest` of the profile's patches.
An unpatched run keeps the plain root, so it never shares artefacts with a patched one.

Standard library only: used by ``patchq run``, the vLLM plugin and ``serve.sh``'s
``patchq run --print-env``.
"""

from __future__ import annotations

import hashlib
import os
import re

#: ``<root>/patchq/<profile>-<12 hex>``: the folded part of a root.
FOLD_RE = re.compile(r"[/\\]patchq[/\\]([a-z0-9][a-z0-9_.-]*)-([0-9a-f]{12})$")


def profile_digest(hashes: dict[str, str]) -> str:
    """12 hex of sha256 over a profile's ``{patch id: patch hash}`` (order-free).

    The same value from the series (``patchq run``), from the hook's manifest and from
    the journal's ``profile_hashes`` (``patchq apply``)."""
    text = "\n".join(sorted(f"{pid}:{h}" for pid, h in hashes.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def vllm_cache_root(environ=None) -> str:
    """The root vLLM would use with ``environ`` (default ``os.environ``): the same
    expression as ``VLLM_CACHE_ROOT`` in ``vllm/envs.py`` (0.15.1-0.33.0)."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.expanduser(env.get("VLLM_CACHE_ROOT") or os.path.join(xdg, "vllm"))


def folded_root(root: str, profile: str, digest: str) -> str:
    """``root`` with the patch set folded in (an existing fold is replaced, not nested)."""
    m = FOLD_RE.search(root)
    base = root[: m.start()] if m else root.rstrip("/\\")
    return os.path.join(base, "patchq", f"{profile}-{digest}")


def fold(profile: str, digest: str, environ=None) -> tuple[str, bool]:
    """The ``VLLM_CACHE_ROOT`` for this patch set, and whether ``environ`` lacks it."""
    now = vllm_cache_root(environ)
    want = folded_root(now, profile, digest)
    env = os.environ if environ is None else environ
    return want, env.get("VLLM_CACHE_ROOT") != want


def parse_fold(root: str) -> tuple[str, str] | None:
    """(profile, digest) folded into ``root``, or None."""
    m = FOLD_RE.search(root)
    return (m.group(1), m.group(2)) if m else None
