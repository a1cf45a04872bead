"""vLLM general plugin (entry point group ``vllm.general_plugins``): proof per process.

vLLM calls :func:`register` in every process it starts (API server during argument
parsing, ``EngineCore``, each worker: ``vllm/plugins/__init__.py``
``load_general_plugins``). It

1. finds what patchq profile is live here, in either mode (:mod:`patchq.runtime.live`);
   under ``patchq run`` it also writes this process's record for ``patchq status
   --runtime``;
2. folds the live patch set into ``VLLM_CACHE_ROOT`` when it is not yet
   (:mod:`patchq.runtime.cachefold`; children inherit it), so a different patch set
   never reuses torch.compile artefacts; ``PATCHQ_CACHE_FOLD=0`` leaves it alone;
3. when ``PATCHQ_EXPECT_PROFILE`` is set: logs ``patchq: profile P live ...`` at INFO,
   or, when P is not live, raises :class:`ProfileNotLive` (``PATCHQ_STRICT=1``: the
   process stops with that message) or logs a warning.

Environment: ``PATCHQ_EXPECT_PROFILE`` (profile name), ``PATCHQ_STRICT`` (``1`` = stop),
``PATCHQ_CACHE_FOLD`` (``0`` = off). ``patchq serve`` and ``patchq run`` set the
first two. Standard library only; cheap (a journal read and a few file hashes).
"""

from __future__ import annotations

import logging
import os
import sys

logger = logging.getLogger("vllm.patchq")


class ProfileNotLive(RuntimeError):
    """The expected patchq profile is not live in this process."""


def _fold_cache_root(live) -> str | None:
    """Set ``VLLM_CACHE_ROOT`` for the live patch set; returns the value, or None."""
    from patchq.runtime.cachefold import fold

    if not live.profile or not live.digest or os.environ.get("PATCHQ_CACHE_FOLD") == "0":
        return None
    want, missing = fold(live.profile, live.digest)
    if missing:
        logger.info("patchq: VLLM_CACHE_ROOT=%s (torch.compile cache kept apart per patch set)", want)
        os.environ["VLLM_CACHE_ROOT"] = want
    return want


def check(expect: str | None = None, strict: bool | None = None) -> str:
    """Check the profile in this process; returns the log line of a live profile.

    Raises:
        ProfileNotLive: strict and ``expect`` is not live (the message says why).
    """
    from patchq.runtime.live import NONE, detect

    expect = os.environ.get("PATCHQ_EXPECT_PROFILE") if expect is None else expect
    strict = os.environ.get("PATCHQ_STRICT") == "1" if strict is None else strict
    live = detect()
    if live.mode == "runtime":
        from patchq.runtime.live import hook_state

        hook_state().record()
    root = _fold_cache_root(live)
    where = f"pid {os.getpid()} ({os.path.basename(sys.argv[0]) if sys.argv else '?'})"
    if live.mode == NONE:
        problem = f"no patchq profile is live (no import hook in this process; no journal at {live.source or '?'})"
    elif live.profile != expect and expect:
        problem = f"profile {live.profile} is live ({live.mode} mode, {live.source})"
    elif live.problems:
        problem = f"profile {live.profile} is not fully live: " + "; ".join(live.problems)
    else:
        problem = None
    if problem is None or not expect:
        line = (f"patchq: profile {live.profile} live in {where}, {live.mode} mode: "
                f"{', '.join(live.patches) or 'no patch'}; VLLM_CACHE_ROOT={root}") if live.mode != NONE else ""
        return line
    message = f"patchq: PATCHQ_EXPECT_PROFILE={expect} but {problem}; {where}"
    if strict:
        raise ProfileNotLive(message + " (PATCHQ_STRICT=1: stopping)")
    logger.warning(message)
    return ""


def register() -> None:
    """Entry point called by vLLM's ``load_general_plugins`` in every process."""
    if not os.environ.get("PATCHQ_EXPECT_PROFILE") and "_patchq_hook" not in sys.modules:
        # nothing expected and no hook: only fold the cache root for an applied profile
        try:
            from patchq.runtime.live import detect

            _fold_cache_root(detect())
        except Exception:  # evidence, never a reason to break an unconfigured vLLM
            logger.debug("patchq: liveness check failed", exc_info=True)
        return
    try:
        line = check()
    except ProfileNotLive as exc:
        logger.error("%s", exc)
        raise
    if line:
        logger.info("%s", line)
