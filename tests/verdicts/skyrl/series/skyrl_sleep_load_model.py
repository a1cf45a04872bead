"""skyrl-sleep-load-model: SkyRL's ``_patch_vllm_sleep_mode``, ported.

vLLM 0.16.0's ``Worker.load_model`` chains its context managers with ``and`` (``with A and B:``
enters only B), so the CuMemAllocator pool never tracks the weights and sleep cannot free them.
SkyRL replaces the method with ``with (A, B):``; ported through ``import --replacement`` of that
function (copied out of its factory) on vLLM 0.16.0
(skyrl/backends/skyrl_train/inference_servers/vllm_worker.py @ e5834398, which pins 0.16.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'worker-load-model': [
        {
            'op': 'replace',
            'old': """\
with self._maybe_get_memory_pool_context(
    tag="weights"
) and set_current_vllm_config(self.vllm_config):
    self.model_runner.load_model(eep_scale_up=eep_scale_up)
""",
            'new': """\
# Use comma (,) instead of `and` to properly enter BOTH context managers
with (
    self._maybe_get_memory_pool_context(tag="weights"),
    set_current_vllm_config(self.vllm_config),
):
    self.model_runner.load_model(eep_scale_up=eep_scale_up)
""",
            'after': """\
eep_scale_up = os.environ.get("VLLM_ELASTIC_EP_SCALE_UP_LAUNCH") == "1"
""",
            'before': None,
        },
    ],
}

PATCH = patch(
    id='skyrl-sleep-load-model',
    summary='Worker.load_model enters the weights memory pool (with A, B instead of A and B)',
    why='Colocated training: ~14 GiB of weights stay on the GPU after sleep.',
    upstream=['https://github.com/NovaSky-AI/SkyRL/blob/e58343981/skyrl/backends/skyrl_train/inference_servers/vllm_worker.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
