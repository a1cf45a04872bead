"""prime-no-moe-lora: prime-rl's ``monkey_patch_no_moe_lora``, ported.

A wrapper that runs ``FusedMoEConfig.__post_init__`` and then sets ``self.is_lora_enabled =
False``, ported as that statement appended to ``__post_init__`` on vLLM 0.24.0 (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'fusedmoeconfig-post-init': [
        {
            'op': 'insert',
            'new': """\
# Disable LoRA for MoE layers. `is_lora_enabled` is only read later during
# kernel selection (modular_kernel / unquantized oracle), never inside
# `__post_init__`, so flipping it after the original runs is sufficient.
self.is_lora_enabled = False
""",
            'after': """\
if not self.is_act_and_mul and not (
    current_platform.is_cuda_alike() or current_platform.is_xpu()
):
    ...
""",
            'before': None,
            'at': 'end',
            'block': None,
            'branch': 0,
        },
    ],
}

PATCH = patch(
    id='prime-no-moe-lora',
    summary='FusedMoEConfig never enables LoRA for MoE layers',
    why='With MoE LoRA enabled the kernel oracle always picks TritonExperts; Blackwell wants TRTLLM FlashInfer.',
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
