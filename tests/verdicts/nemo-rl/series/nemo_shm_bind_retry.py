"""nemo-shm-bind-retry: NeMo-RL's ``_patch_vllm_shm_broadcast_bind_retry``, ported.

In ``MessageQueue.__init__`` the remote (TCP) socket's ``bind`` is retried up to 64 times,
advancing ``remote_subscribe_port`` past a port a peer won between probe and bind. Text
rewrite of ``vllm/distributed/device_communicators/shm_broadcast.py`` on vLLM 0.25.1
(nemo_rl/models/generation/vllm/patches.py @ 7ea279ab).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'messagequeue-init': [
        {
            'op': 'replace',
            'old': """\
socket_addr = f"tcp://{connect_ip}:{remote_subscribe_port}"
self.remote_socket.bind(socket_addr)
""",
            'new': """\
# NeMo-RL: get_open_port() above probed this port and then
# released it; ZMQ only binds it for real here. Every worker
# on a non-driver node builds its response queue at the same
# instant (init_device()'s collective releases them together)
# scanning from the same VLLM_PORT, so they all probe the same
# free port and all but one die with EADDRINUSE. Retry around
# the bind instead of trusting the probe: a port a peer already
# holds IS visible to the next probe, so advancing past the
# loser terminates. Ports stay in the reserved VLLM_PORT band
# rather than falling back to kernel-ephemeral ones, which is
# the contention that band exists to avoid (#2380, #3103).
_nrl_bind_attempts = 64
for _nrl_bind_attempt in range(_nrl_bind_attempts):
    socket_addr = f"tcp://{connect_ip}:{remote_subscribe_port}"
    try:
        self.remote_socket.bind(socket_addr)
        break
    except zmq.ZMQError:
        if _nrl_bind_attempt == _nrl_bind_attempts - 1:
            raise
        from vllm.utils.network_utils import _get_open_port

        logger.info(
            "Port %s was taken between probe and bind; retrying.",
            remote_subscribe_port,
        )
        remote_subscribe_port = (
            _get_open_port(start_port=remote_subscribe_port + 1)
            if envs.VLLM_PORT is not None
            else get_open_port()
        )
""",
            'after': """\
if is_valid_ipv6_address(connect_ip):
    ...
""",
            'before': """\
remote_subscribe_addr = f"tcp://{connect_ip}:{remote_subscribe_port}"
""",
        },
    ],
}

PATCH = patch(
    id='nemo-shm-bind-retry',
    summary='MessageQueue retries its remote socket bind on EADDRINUSE',
    why='Workers on a non-driver node all probe the same free port and all but one die (TOCTOU).',
    upstream=['https://github.com/NVIDIA-NeMo/RL/blob/7ea279abfbeb698b092856d0dab61e7cf39bc909/nemo_rl/models/generation/vllm/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
