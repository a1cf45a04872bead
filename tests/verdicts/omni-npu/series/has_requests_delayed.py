"""has-requests-delayed: omni-npu's ``SchedulerResetPrefixCachePatch.has_requests``, ported.

The scheduler also has requests while a KV connector holds blocks of a finished one
(``self.has_delayed_free_requests()``, added at run time by the same omni-npu patch):
``has_requests`` ORs it in, so the engine does not sleep on its input queue. Authored
against vLLM 0.26.0.
"""

import libcst as cst

from patchq import edits
from patchq.series import patch, variant


def or_delayed(has_requests, found, ctx):
    (line,) = found
    ret = line.body[0] if isinstance(line, cst.SimpleStatementLine) else line
    old = cst.Module([]).code_for_node(ret.value)
    new = edits.expr(f"({old}) or self.has_delayed_free_requests()")
    return edits.replace(has_requests, ret.value, new)


PATCH = patch(
    id="has-requests-delayed",
    summary="Scheduler.has_requests stays true while a connector holds a finished request's blocks",
    why="PD-disaggregated prefill: without it the engine sleeps and never receives the decode side's ack.",
    upstream=["https://github.com/drago1234/omni-npu/blob/main/src/omni_npu/vllm_patches/patches/common/patch_reset_prefix_cache.py"],
    applies=">=0.26",
    variants=[variant(">=0.26", edits={"has-requests-return": or_delayed})],
)
