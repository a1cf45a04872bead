"""cp-multi-group: vllm-ascend's ``patch_kv_cache_utils`` (platform patch), ported.

vllm-ascend wraps ``resolve_kv_cache_block_sizes`` (``vllm/v1/core/kv_cache_utils.py``;
vllm_ascend/patch/platform/patch_kv_cache_utils.py): with several KV cache groups and
decode context parallelism (``dcp != 1``) the scheduler block size is
``lcm(group block sizes) * dcp`` and the hash block size their GCD (prefix caching on);
everything else goes to upstream's function. Ported as that early-return path inserted
after upstream's single-group return. Authored against vLLM 0.26.0.
"""

from patchq import edits
from patchq.series import patch, variant

ASCEND_CP = '''\
if dcp != 1:
    # vllm-ascend: context parallelism with several KV cache groups
    group_block_sizes = [g.kv_cache_spec.block_size for g in groups]
    scheduler_block_size = math.lcm(*group_block_sizes) * dcp
    if not cache_config.enable_prefix_caching:
        return scheduler_block_size, scheduler_block_size
    return scheduler_block_size, math.gcd(*group_block_sizes)
'''


def cp_early_return(resolve, found, ctx):
    (single,) = found
    return edits.insert_after(resolve, single, edits.stmts(ASCEND_CP))


PATCH = patch(
    id="cp-multi-group",
    summary="resolve_kv_cache_block_sizes: several KV cache groups with DCP on NPU",
    why="""Ascend implements context parallelism for MLA and SWA-MLA layers separately, so hybrid
    KV cache groups with dcp > 1 are supported there: block sizes are aligned by lcm * dcp.""",
    upstream=["https://github.com/vllm-project/vllm-ascend/blob/main/vllm_ascend/patch/platform/patch_kv_cache_utils.py"],
    applies=">=0.26",
    variants=[variant(">=0.26", edits={"single-group-return": cp_early_return})],
)
