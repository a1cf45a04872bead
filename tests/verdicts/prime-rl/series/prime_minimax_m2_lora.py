"""prime-minimax-m2-lora: prime-rl's ``monkey_patch_minimax_m2_for_lora``, ported.

Two changes: ``MiniMaxM2MoE``'s gate gets a model-dtype weight (prime-rl rebuilds it after
``__init__``; ported as the ``GateLinear(...)`` statement without ``params_dtype=torch.float32``),
and ``MiniMaxM2ForCausalLM`` gets a class attribute ``hf_to_vllm_mapper`` (with the
``WeightsMapper`` import) that maps prime-rl's adapter keys. Diff on vLLM 0.24.0 (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'minimaxm2moe-init': [
        {
            'op': 'replace',
            'old': """\

self.gate = GateLinear(
    config.hidden_size,
    config.num_local_experts,
    bias=False,
    params_dtype=torch.float32,
    out_dtype=torch.float32,
    prefix=f"{prefix}.gate",
)
""",
            'new': """\

self.gate = GateLinear(
    config.hidden_size,
    config.num_local_experts,
    bias=False,
    out_dtype=torch.float32,
    prefix=f"{prefix}.gate",
)
""",
            'after': """\
self.experts = FusedMoE(
    num_experts=config.num_local_experts,
    top_k=config.num_experts_per_tok,
    scoring_func=config.scoring_func,
    e_score_correction_bias=self.e_score_correction_bias,
    hidden_size=config.hidden_size,
    intermediate_size=config.intermediate_size,
    renormalize=True,
    quant_config=quant_config,
    prefix=f"{prefix}.experts",
    router_logits_dtype=torch.float32,
)
""",
            'before': None,
        },
    ],
    'minimaxm2forcausallm': [
        {
            'op': 'insert',
            'new': """\
# Adapter key remapping (only read by vLLM's LoRA adapter loader)
hf_to_vllm_mapper = WeightsMapper(
    orig_to_new_substr={
        ".mlp.experts.": ".block_sparse_moe.experts.",
        ".gate_proj.": ".w1.",
        ".down_proj.": ".w2.",
        ".up_proj.": ".w3.",
    },
)
""",
            'after': """\
packed_modules_mapping = {
    "qkv_proj": [
        "q_proj",
        "k_proj",
        "v_proj",
    ],
}
""",
            'before': """\
def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
    ...
""",
        },
    ],
    'module-minimax-m2': [
        {
            'op': 'replace',
            'old': """\
from .utils import (
    AutoWeightsLoader,
    PPMissingLayer,
    is_pp_missing_parameter,
    make_empty_intermediate_tensors_factory,
    make_layers,
    maybe_prefix,
)
""",
            'new': """\
from .utils import (
    AutoWeightsLoader,
    PPMissingLayer,
    WeightsMapper,
    is_pp_missing_parameter,
    make_empty_intermediate_tensors_factory,
    make_layers,
    maybe_prefix,
)
""",
            'after': """\
from .interfaces import EagleModelMixin, SupportsEagle3, SupportsLoRA, SupportsPP
""",
            'before': """\
class MiniMaxM2MoE(nn.Module):
    ...
""",
        },
    ],
}

PATCH = patch(
    id='prime-minimax-m2-lora',
    summary='MiniMax-M2 serves LoRA: bf16 gate weight, adapter key mapper',
    why='The LoRA Triton kernel asserts bf16/fp16 inputs on every wrapped layer; prime-rl adapters use Qwen3-MoE key names.',
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
