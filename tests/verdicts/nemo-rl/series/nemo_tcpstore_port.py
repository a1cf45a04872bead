"""nemo-tcpstore-port: NeMo-RL's ``_patch_vllm_ray_executor_v2_tcpstore_port``, ported.

``RayExecutorV2._select_tcpstore_port`` gains a first block: with ``VLLM_PORT`` set it
searches ``VLLM_PORT + 32`` (32 attempts), out of the broadcast MessageQueue's scan
range, before the ``local_dp_rank is None`` test. Text rewrite of
``vllm/v1/executor/ray_executor_v2.py`` on vLLM 0.25.1
(nemo_rl/models/generation/vllm/patches.py @ 7ea279ab).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'rayexecutorv2-select-tcpstore-port': [
        {
            'op': 'insert',
            'new': """\
if envs.VLLM_PORT is not None:
    # NeMo-RL: this port and the broadcast MessageQueue's remote
    # socket are both allocated from VLLM_PORT, but the queue
    # binds and holds its port before this one is bound in the
    # rank-0 worker, so a shared search collides. Search a window
    # past the queue's, still inside the engine's reserved
    # 100-port band.
    #
    # This has to run *before* the local_dp_rank test below:
    # ParallelConfig leaves a non-DP engine with
    # data_parallel_rank_local=0 (not None) and
    # data_parallel_master_port=0, so that branch searches from
    # port 100, fails on the privileged range, and falls back to
    # get_open_port() -- straight back to VLLM_PORT.
    try:
        return _get_open_port(
            start_port=envs.VLLM_PORT + 32, max_attempts=32
        )
    except RuntimeError:
        pass
""",
            'after': '"""Pick the torch.distributed TCPStore port for this engine.\n\n        Co-located DP engines choosing this port with a shared random search\n        collide intermittently. Seeding by node-local DP rank gives each a\n        disjoint window. Non-DP engines and full windows fall back to a\n        random port.\n        """\n',
            'before': """\
if local_dp_rank is None:
    ...
""",
        },
    ],
}

PATCH = patch(
    id='nemo-tcpstore-port',
    summary="RayExecutorV2 picks the TCPStore port past the MessageQueue's port window",
    why='Node-spanning engines die with EADDRINUSE: the queue binds the port the TCPStore probe released.',
    upstream=['https://github.com/NVIDIA-NeMo/RL/blob/7ea279abfbeb698b092856d0dab61e7cf39bc909/nemo_rl/models/generation/vllm/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
