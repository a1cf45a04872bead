"""prime-fp32-router-logits: prime-rl's ``monkey_patch_fp32_router_logits``, ported.

A wrapper that runs ``DeepseekV2MoE.__init__`` and then, when
``additional_config['fp32_router_logits']`` is set and the gate has no ``out_dtype``, calls
``self.gate.set_out_dtype(torch.float32)``; ported as those statements (with their early
``return``) appended to ``__init__`` on vLLM 0.24.0 (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'deepseekv2moe-init': [
        {
            'op': 'insert',
            'new': """\
additional_config = get_current_vllm_config().additional_config or {}
if not additional_config.get("fp32_router_logits", False):
    return
if self.gate.out_dtype is None:
    self.gate.set_out_dtype(torch.float32)
""",
            'after': """\
if (
    self.is_rocm_aiter_moe_enabled
    and self.gate.e_score_correction_bias is not None
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
    id='prime-fp32-router-logits',
    summary='DeepSeek-family MoE gates emit fp32 router logits when asked',
    why='GLM-5.x was trained with fp32 routing; bf16 router logits change expert selection.',
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
