"""nemo-radio-layerscale: NeMo-RL's ``_patch_vllm_radio_layerscale_loader``, ported.

``RadioModel.load_weights`` stops skipping the ``ls1``/``ls2`` LayerScale entries of the
encoder blocks, and initialises those absent from the checkpoint to
``config.initializer_factor``. Text rewrite of ``vllm/model_executor/models/radio.py`` on
vLLM 0.25.1 (nemo_rl/models/generation/vllm/patches.py @ 7ea279ab).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'radiomodel-load-weights': [
        {
            'op': 'replace',
            'old': """\
# Skip layer-scale entries that vLLM doesn't use
if suffix in {"ls1", "ls2"} or suffix.startswith(("ls1.", "ls2.")):
    continue
""",
            'new': '',
            'after': """\
suffix = ".".join(parts[3:])
""",
            'before': """\
vllm_key = f"model.encoder.layers.{layer_idx}.{suffix}"
""",
        },
        {
            'op': 'insert',
            'new': """\

initializer_factor = self.config.initializer_factor
for name, param in params_dict.items():
    if name.endswith((".ls1", ".ls2")) and name not in loaded_params:
        param.data.fill_(initializer_factor)
        loaded_params.add(name)
""",
            'after': """\
for name, weight in weights_list:
    ...
""",
            'before': """\
return loaded_params
""",
        },
    ],
}

PATCH = patch(
    id='nemo-radio-layerscale',
    summary='RadioModel.load_weights loads LayerScale weights and initialises folded ones',
    why='vLLM 0.25.1 uses ls1/ls2 in the encoder layers but never loads them (dummy values).',
    upstream=['https://github.com/NVIDIA-NeMo/RL/blob/7ea279abfbeb698b092856d0dab61e7cf39bc909/nemo_rl/models/generation/vllm/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
