"""prime-fp32-lm-head: prime-rl's ``monkey_patch_fp32_lm_head``, ported.

Two wrappers of ``LogitsProcessor``: ``__init__`` reads ``additional_config['fp32_lm_head']`` into
``self._fp32_lm_head_enabled``; ``_get_logits`` takes a native bf16xbf16->fp32 ``torch.mm`` path
first when it is set (an inserted block ending in ``return``). Ported as a diff on vLLM 0.24.0,
with the module imports the statements need (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'logitsprocessor-init': [
        {
            'op': 'insert',
            'new': """\
vllm_config = get_current_vllm_config()
additional_config = vllm_config.additional_config or {}
self._fp32_lm_head_enabled = additional_config.get("fp32_lm_head", False)
if self._fp32_lm_head_enabled:
    logger.warning("fp32 lm_head ENABLED for this LogitsProcessor instance.")
""",
            'after': """\
self.use_all_gather = current_platform.use_all_gather()
""",
            'before': None,
            'at': 'end',
            'block': None,
            'branch': 0,
        },
    ],
    'logitsprocessor-get-logits': [
        {
            'op': 'insert',
            'new': """\
if getattr(self, "_fp32_lm_head_enabled", False):
    # Native bf16xbf16 -> fp32 GEMM. torch.mm requires 2D inputs; vLLM v1's
    # generative path passes 2D [num_tokens, hidden_size] hidden_states, but
    # flatten defensively in case some future caller passes 3D.
    flat = hidden_states.reshape(-1, hidden_states.shape[-1])
    logits = torch.mm(flat, lm_head.weight.t(), out_dtype=torch.float32)
    if embedding_bias is not None:
        logits = logits + embedding_bias.to(torch.float32)
    if hidden_states.dim() > 2:
        logits = logits.reshape(*hidden_states.shape[:-1], -1)

    logits = self._gather_logits(logits)
    if logits is not None:
        logits = logits[..., : self.org_vocab_size]
    return logits
""",
            'after': None,
            'before': """\
logits = lm_head.quant_method.apply(lm_head, hidden_states, bias=embedding_bias)
""",
            'at': 'start',
            'block': None,
            'branch': 0,
        },
    ],
    'module-logits-processor': [
        {
            'op': 'replace',
            'old': """\

from vllm.distributed import (
    get_tensor_model_parallel_world_size,
    tensor_model_parallel_all_gather,
    tensor_model_parallel_gather,
)
""",
            'new': """\

from vllm.config import get_current_vllm_config
from vllm.distributed import (
    get_tensor_model_parallel_world_size,
    tensor_model_parallel_all_gather,
    tensor_model_parallel_gather,
)
""",
            'after': """\
import torch
""",
            'before': """\
from vllm.model_executor.custom_op import PluggableLayer
""",
        },
        {
            'op': 'insert',
            'new': """\
from vllm.logger import init_logger
""",
            'after': """\
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
""",
            'before': """\
from vllm.platforms import current_platform
""",
        },
        {
            'op': 'insert',
            'new': """\

logger = init_logger(__name__)
""",
            'after': """\
from vllm.platforms import current_platform
""",
            'before': """\
@PluggableLayer.register("logits_processor")
class LogitsProcessor(PluggableLayer):
    ...
""",
        },
    ],
}

PATCH = patch(
    id='prime-fp32-lm-head',
    summary='LogitsProcessor computes lm_head logits in fp32 when asked',
    why="bf16 epilogue truncation of the lm_head GEMM leaks precision into the sampler's softmax.",
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
