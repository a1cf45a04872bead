"""prime-lora-key-prefix: prime-rl's ``_patch_lora_key_prefix``, ported.

prime-rl replaces ``LoRAModel.from_local_checkpoint`` with a copy of vLLM 0.24.0's in which the
``.experts`` branch of the nested ``check_unexpected_modules`` accepts the bare suffix or the
qualified ``experts.N.x`` name. Ported as that branch, a diff on vLLM 0.24.0
(``import --replacement`` recorded four reformatted statements as changes too) (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'loramodel-from-local-checkpoint': [
        {
            'op': 'replace',
            'old': """\
# Case for expert lora weights
if ".experts" in module_name:
    expert_idx = module_name.find(".experts")
    expert_suffix = module_name[expert_idx + 1 :]
    if expert_suffix not in expected_lora_modules:
        unexpected_modules.append(module_name)

elif module_name.rsplit(".", 1)[-1] not in expected_lora_modules:
    unexpected_modules.append(module_name)
""",
            'new': """\
# Case for expert lora weights.
## START PATCHED CODE (upstream only accepts the qualified form)
if ".experts" in module_name:
    expert_suffix = module_name.split(".")[-1]
    experts_qualified = "experts" + module_name.split(".experts", 1)[-1]
    if expert_suffix not in expected_lora_modules and experts_qualified not in expected_lora_modules:
        unexpected_modules.append(module_name)
## END PATCHED CODE

elif module_name.rsplit(".", 1)[-1] not in expected_lora_modules:
    unexpected_modules.append(module_name)
""",
            'after': """\
module_name, _ = parse_fine_tuned_lora_name(lora_module, weights_mapper)
""",
            'before': None,
        },
    ],
}

PATCH = patch(
    id='prime-lora-key-prefix',
    summary='LoRA adapters may name expert modules by bare suffix or qualified name',
    why='Qwen3.5-MoE 2D adapters only match the bare suffix; upstream fix vllm#38522 was closed unmerged.',
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
