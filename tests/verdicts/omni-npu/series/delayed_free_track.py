"""delayed-free-track: omni-npu's ``SchedulerResetPrefixCachePatch._free_request``, ported.

When the KV connector holds a finished request's blocks for an async transfer, omni-npu
records the request id in ``delayed_free_req_ids`` (the ``else:`` of ``if not
delay_free_blocks:`` in ``Scheduler._free_request``), so that ``has_requests`` keeps the
engine polling. Authored against vLLM 0.26.0.
"""

import libcst as cst

from patchq import edits
from patchq.series import patch, variant


def track_delayed(free_request, found, ctx):
    (branch,) = found
    track = cst.Else(body=cst.IndentedBlock(body=list(edits.stmts("self.delayed_free_req_ids.add(request_id)\n"))))
    return edits.replace(free_request, branch, branch.with_changes(orelse=track))


PATCH = patch(
    id="delayed-free-track",
    summary="Scheduler._free_request records a request whose blocks the connector still holds",
    why="PD-disaggregated prefill: the engine must keep polling the connector while blocks are held.",
    upstream=["https://github.com/drago1234/omni-npu/blob/main/src/omni_npu/vllm_patches/patches/common/patch_reset_prefix_cache.py"],
    applies=">=0.26",
    variants=[variant(">=0.26", edits={"delay-branch": track_delayed})],
)
