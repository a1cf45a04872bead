"""prime-kv-xfer-tolerate-freed: prime-rl's ``monkey_patch_kv_xfer_finished_tolerate_freed``, ported.

A replaced ``Scheduler._update_from_kv_xfer_finished`` whose only change is that both loops
skip a request id no longer in ``self.requests`` (``continue``) instead of asserting. Ported as
those two guards, a diff on vLLM 0.24.0 (``import --replacement`` recorded the dropped docstring,
comment and annotation as changes too) (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0; upstream issue vllm#46240).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'scheduler-update-from-kv-xfer-finished': [
        {
            'op': 'replace',
            'old': """\
assert req_id in self.requests
""",
            'new': """\
# Stale notification for a request freed earlier this step (e.g. an
# aborted request whose send completion freed it). Nothing to do.
if req_id not in self.requests:
    continue
""",
            'after': """\
logger.debug("Finished recving KV transfer for request %s", req_id)
""",
            'before': """\
req = self.requests[req_id]
""",
        },
        {
            'op': 'replace',
            'old': """\
assert req_id in self.requests
""",
            'new': """\
# See above: the recving branch may have already freed an aborted
# request whose send also completed this step.
if req_id not in self.requests:
    continue
""",
            'after': """\
logger.debug("Finished sending KV transfer for request %s", req_id)
""",
            'before': """\
self._free_blocks(self.requests[req_id])
""",
        },
    ],
}

PATCH = patch(
    id='prime-kv-xfer-tolerate-freed',
    summary='KV-transfer finish notifications for already-freed requests are skipped',
    why='An aborted request whose recv and send finish in one step is freed twice: the assert kills the EngineCore.',
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
