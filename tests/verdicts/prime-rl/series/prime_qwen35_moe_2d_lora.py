"""prime-qwen35-moe-2d-lora: prime-rl's ``_patch_qwen35_moe_lora_format``, ported.

A class-attribute flip: ``Qwen3_5MoeForConditionalGeneration.is_3d_moe_weight = False`` so the
LoRA loader expects prime-rl's 2D per-expert adapter layout. Diff on vLLM 0.24.0 (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'qwen3-5moeforconditionalgeneration': [
        {
            'op': 'replace',
            'old': """\
# For MoE LoRA weights loading
is_3d_moe_weight: bool = True
""",
            'new': """\
# For MoE LoRA weights loading
is_3d_moe_weight: bool = False
""",
            'after': None,
            'before': """\
def __init__(self, *, vllm_config: VllmConfig, prefix: str = "model"):
    ...
""",
        },
    ],
}

PATCH = patch(
    id='prime-qwen35-moe-2d-lora',
    summary='Qwen3.5-MoE loads 2D per-expert LoRA adapters (is_3d_moe_weight = False)',
    why="prime-rl's trainer saves 2D per-expert adapters; vLLM defaults Qwen3.5-MoE to the 3D stacked layout.",
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
