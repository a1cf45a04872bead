"""delayed-free-discard: omni-npu's ``SchedulerResetPrefixCachePatch._free_blocks``, ported.

omni-npu (src/omni_npu/vllm_patches/patches/common/patch_reset_prefix_cache.py) tracks
requests whose blocks a KV connector still holds (``delayed_free_req_ids``) so the
engine keeps polling the connector; ``_free_blocks`` drops the request id once its blocks
are freed. Ported as that one inserted statement after upstream's
``self._free_request_blocks(request)`` (omni-npu's copy still calls
``self.kv_cache_manager.free``, the pre-0.24 form).
Authored against vLLM 0.26.0.
"""

from patchq import edits
from patchq.series import patch, variant


def discard_after_free(free_blocks, found, ctx):
    (freed,) = found
    discard = edits.stmts("self.delayed_free_req_ids.discard(request.request_id)\n")
    return edits.insert_after(free_blocks, freed, discard)


PATCH = patch(
    id="delayed-free-discard",
    summary="Scheduler._free_blocks forgets a request's delayed free once its blocks are freed",
    why="PD-disaggregated prefill: the engine must keep polling the connector while blocks are held.",
    upstream=["https://github.com/drago1234/omni-npu/blob/main/src/omni_npu/vllm_patches/patches/common/patch_reset_prefix_cache.py"],
    applies=">=0.26",
    variants=[variant(">=0.26", edits={"free-call": discard_after_free})],
)
