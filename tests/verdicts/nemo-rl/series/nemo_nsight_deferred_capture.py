"""nemo-nsight-deferred-capture: NeMo-RL's ``_patch_vllm_nsight_config``, ported.

``RayDistributedExecutor._configure_ray_workers_use_nsight`` is replaced by NeMo-RL's
deferred-capture config (``capture-range=cudaProfilerApi``; the output name carries
``nemo_rl.utils.nsys.NRL_NSYS_PROFILE_STEP_RANGE``). A monkeypatch defined inside a
method (nemo_rl/models/generation/vllm/vllm_worker.py @ 7ea279ab), copied out by hand with
its closure's ``nsight_config`` inlined, then ``patchq import --replacement`` on vLLM 0.25.1.
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'raydistributedexecutor-configure-ray-workers-use-nsight': [
        {
            'op': 'replace',
            'old': """\
# If nsight profiling is enabled, we need to set the profiling
# configuration for the ray workers as runtime env.
runtime_env = ray_remote_kwargs.setdefault("runtime_env", {})
runtime_env.update(
    {
        "nsight": {
            "t": "cuda,cudnn,cublas",
            "o": "'worker_process_%p'",
            "cuda-graph-trace": "node",
        }
    }
)

return ray_remote_kwargs
""",
            'new': """\
from nemo_rl.utils.nsys import NRL_NSYS_PROFILE_STEP_RANGE

nsight_config = {
    "t": "cuda,cudnn,cublas,nvtx",
    "o": f"'vllm_tp_worker_{NRL_NSYS_PROFILE_STEP_RANGE}_%p'",
    "stop-on-exit": "true",
    "s": "none",
    "capture-range": "cudaProfilerApi",
    "capture-range-end": "repeat",
    "cuda-graph-trace": "node",
}
runtime_env = ray_remote_kwargs.setdefault("runtime_env", {})
runtime_env.update({"nsight": nsight_config})
return ray_remote_kwargs
""",
            'after': None,
            'before': None,
        },
    ],
}

PATCH = patch(
    id='nemo-nsight-deferred-capture',
    summary="Ray workers' nsight profiling captures only between cudaProfilerStart/Stop",
    why="vLLM's always-on nsight config adds large overhead and hangs Ray's compiled DAG.",
    upstream=['https://github.com/NVIDIA-NeMo/RL/blob/7ea279abfbeb698b092856d0dab61e7cf39bc909/nemo_rl/models/generation/vllm/vllm_worker.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
