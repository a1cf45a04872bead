"""prime-dp-coordinator-timeout: prime-rl's ``monkey_patch_dp_coordinator_startup_timeout``, ported.

prime-rl replaces ``DPCoordinator._wait_for_zmq_addrs`` to raise the hard-coded 120 s startup
timeout to ``PRIME_DP_COORDINATOR_STARTUP_TIMEOUT`` (default 300). Ported as that statement and
the ``import os`` it needs, a diff on vLLM 0.24.0 (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'dpcoordinator-wait-for-zmq-addrs': [
        {
            'op': 'replace',
            'old': """\
timeout = 120
""",
            'new': """\
timeout = float(os.environ.get("PRIME_DP_COORDINATOR_STARTUP_TIMEOUT", "300"))
""",
            'after': None,
            'before': """\
ready = multiprocessing.connection.wait(
    [zmq_addr_pipe, self.proc.sentinel], timeout=timeout
)
""",
        },
    ],
    'module-coordinator': [
        {
            'op': 'insert',
            'new': """\
import os
""",
            'after': """\
import multiprocessing.connection
""",
            'before': """\
import time
""",
        },
    ],
}

PATCH = patch(
    id='prime-dp-coordinator-timeout',
    summary="The DP coordinator's startup timeout comes from PRIME_DP_COORDINATOR_STARTUP_TIMEOUT",
    why="The coordinator's spawn-time re-import exceeds 120 s while every engine rank loads weights.",
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
