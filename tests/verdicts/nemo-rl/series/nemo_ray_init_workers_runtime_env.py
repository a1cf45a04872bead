"""nemo-ray-init-workers-runtime-env: NeMo-RL's ``_patch_vllm_init_workers_ray``, ported.

NeMo-RL rewrites ``vllm/v1/executor/ray_executor.py`` in site-packages so that
``RayDistributedExecutor._init_executor`` passes ``runtime_env={"py_executable": ...}`` to
``self._init_workers_ray(placement_group)``: the Ray workers start under NeMo-RL's
interpreter. Imported through ``patchq import`` from the diff that NeMo-RL's own
rewrite makes on vLLM 0.25.1 (nemo_rl/models/generation/vllm/patches.py @ 7ea279ab; the
interpreter path is the example value ``/opt/nemo_rl_venv/bin/python``).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'raydistributedexecutor-init-executor': [
        {
            'op': 'replace',
            'old': """\

# Create the parallel GPU workers.
self._init_workers_ray(placement_group)
""",
            'new': """\

# Create the parallel GPU workers.
self._init_workers_ray(placement_group, runtime_env={"py_executable": "/opt/nemo_rl_venv/bin/python"})
""",
            'after': """\
if ray_usage != "1":
    ...
""",
            'before': """\
self.has_connector = self.vllm_config.kv_transfer_config is not None
""",
        },
    ],
}

PATCH = patch(
    id='nemo-ray-init-workers-runtime-env',
    summary="RayDistributedExecutor starts its Ray workers with NeMo-RL's py_executable",
    why="Ray workers must run under the NeMo-RL virtualenv's interpreter (runtime_env py_executable).",
    upstream=['https://github.com/NVIDIA-NeMo/RL/blob/7ea279abfbeb698b092856d0dab61e7cf39bc909/nemo_rl/models/generation/vllm/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
