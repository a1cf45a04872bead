"""skyrl-numel-loaded-cap: SkyRL's ``patch_numel_loaded``, ported.

SkyRL rebinds ``vllm.model_executor.model_loader.reload.{meta,layerwise}.get_numel_loaded`` to its
own copy (based on vllm-project/vllm#44814) that caps the counted elements at the destination
parameter's size. ``import --replacement`` of that copy on vLLM 0.23.0 also recorded a reformatted
signature and a lazy self-import; ported by hand as the meant change, the cap before the return
(skyrl/backends/skyrl_train/inference_servers/layerwise_reload.py @ fedc0b76, which pins 0.23.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'get-numel-loaded': [
        {
            'op': 'replace',
            'old': """\
return counter.copied_numel, return_value
""",
            'new': """\

# A weight loader fills a single destination parameter, so the number of
# loaded elements is at most that parameter's size. Some loaders copy into
# the parameter more than once -- e.g. ``composed_weight_loader`` runs an
# in-place post-load transform (``param.copy_(fn(param))``) on top of the
# initial copy -- which would make CopyCounter report twice the parameter
# size. Over-counting inflates the layer's loaded-element total and can
# finalize the layer before every parameter is loaded, silently dropping
# the trailing parameter(s) (e.g. Mamba ``mixer.D``). Cap the count at the
# destination size to keep the per-layer accounting correct.
numel = counter.copied_numel
param = args.arguments.get("param", None)
if isinstance(param, torch.Tensor):
    numel = min(numel, param.numel())
return numel, return_value
""",
            'after': """\
with CopyCounter() as counter:
    ...
""",
            'before': None,
        },
    ],
}

PATCH = patch(
    id='skyrl-numel-loaded-cap',
    summary="Layerwise reload counts at most a parameter's size per weight-loader call",
    why='composed_weight_loader copies twice: the layer finalizes early and drops its trailing parameters (Mamba mixer.D).',
    upstream=['https://github.com/NovaSky-AI/SkyRL/blob/fedc0b76c/skyrl/backends/skyrl_train/inference_servers/layerwise_reload.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
