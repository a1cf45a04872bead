"""nemo-eagle3-own-lm-head: NeMo-RL's ``_patch_vllm_llama_eagle3_own_lm_head``, ported.

After ``Eagle3LlamaForCausalLM.__init__`` builds its truncated draft ``lm_head`` it sets
``self.has_own_lm_head = (draft_vocab_size != vocab_size)`` so that vLLM keeps the
draft's own head instead of sharing the target's. Text rewrite of
``vllm/model_executor/models/llama_eagle3.py`` on vLLM 0.25.1
(nemo_rl/models/generation/vllm/patches.py @ 7ea279ab).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'eagle3llamaforcausallm-init': [
        {
            'op': 'insert',
            'new': """\
self.has_own_lm_head = (
    self.config.draft_vocab_size != self.config.vocab_size
)
""",
            'after': """\
self.lm_head = ParallelLMHead(
    self.config.draft_vocab_size,
    self.config.hidden_size,
    quant_config=get_draft_quant_config(vllm_config),
    prefix=maybe_prefix(prefix, "lm_head"),
)
""",
            'before': """\
self.logits_processor = LogitsProcessor(
    self.config.draft_vocab_size, scale=logit_scale
)
""",
        },
    ],
}

PATCH = patch(
    id='nemo-eagle3-own-lm-head',
    summary='Eagle3 draft with a truncated vocabulary keeps its own lm_head',
    why="A draft whose vocabulary differs from the target's must not share the target's lm_head.",
    upstream=['https://github.com/NVIDIA-NeMo/RL/blob/7ea279abfbeb698b092856d0dab61e7cf39bc909/nemo_rl/models/generation/vllm/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
