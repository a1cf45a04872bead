"""skyrl-hybrid-kv-wake: SkyRL's ``patch_hybrid_fp8_kv_wake``, ported.

SkyRL backports vllm-project/vllm#41602 to vLLM 0.26.0 by rewriting the source of
``GPUModelRunner.init_fp8_kv_scales`` (``inspect.getsource`` + ``str.replace`` + ``exec``): the
loop that zeroes the KV cache after wake-up also zeroes hybrid models' per-layer lists of tensors.
Ported as the diff that rewrite makes on vLLM 0.26.0
(skyrl/backends/skyrl_train/patches/vllm/patch_hybrid_fp8_kv_wake.py @ 6ecd004d).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'gpumodelrunner-init-fp8-kv-scales': [
        {
            'op': 'replace',
            'old': """\
for cache_tensor in kv_caches:
    if cache_tensor is not None:
        cache_tensor.zero_()
""",
            'new': """\
for cache_entry in kv_caches:
    if cache_entry is None:
        continue
    # Hybrid models (Mamba, DeltaNet) store per-layer state as a
    # list of tensors rather than a single tensor.
    if isinstance(cache_entry, list):
        for tensor in cache_entry:
            tensor.zero_()
    else:
        cache_entry.zero_()
""",
            'after': """\
kv_caches = getattr(self, "kv_caches", [])
""",
            'before': """\
k_attr_names = ("_k_scale", "k_scale")
""",
        },
    ],
}

PATCH = patch(
    id='skyrl-hybrid-kv-wake',
    summary="FP8 KV-cache wake-up zeroes hybrid models' list-of-tensor cache entries",
    why="Hybrid models (Qwen3.6/3.8) store recurrent state as lists: wake_up(tags=['kv_cache']) raises AttributeError.",
    upstream=['https://github.com/NovaSky-AI/SkyRL/blob/6ecd004df/skyrl/backends/skyrl_train/patches/vllm/patch_hybrid_fp8_kv_wake.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
