"""bind-kv-cache-npu: vllm-ascend's ``patch_bind_kv_cache`` (worker patch), ported.

Upstream ``bind_kv_cache`` (``vllm/v1/worker/utils.py``) raises ``NotImplementedError``
for several attention layers sharing one layer index (encoder-decoder models) on any
platform but CUDA/XPU/CPU. vllm-ascend replaces the whole function with a copy that has
no such check (vllm_ascend/patch/worker/patch_bind_kv_cache.py, vllm-ascend commit
1bff043fe7); ported here as its one change: drop the ``if len(layer_names) > 1:``
block. Authored against vLLM 0.26.0.
"""

from patchq import edits
from patchq.series import patch, variant


def drop_multi_layer_check(bind, found, ctx):
    """Remove the platform check on layers that share an index."""
    (check,) = found
    return edits.replace(bind, check, [])


PATCH = patch(
    id="bind-kv-cache-npu",
    summary="bind_kv_cache: no NotImplementedError for layers sharing an index (NPU)",
    why="""The NPU runner handles several attention layers per decoder layer; upstream's platform
    allow-list raises for every platform it does not name.""",
    upstream=["https://github.com/vllm-project/vllm-ascend/blob/main/vllm_ascend/patch/worker/patch_bind_kv_cache.py"],
    applies=">=0.26",
    variants=[variant(">=0.26", edits={"multi-layer-check": drop_multi_layer_check})],
)
