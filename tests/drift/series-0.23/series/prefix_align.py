"""prefix-align: the mamba hash-block back-off is only for non-align mamba.

With prefix caching on and the drafter's attention page twice the target's, unification
scales the target's mamba and attention blocks (2240 -> 4480) while the drafter group
stays at 2240. ``resolve_kv_cache_block_sizes`` then sees a mamba block that differs from
``cache_config.block_size``, backs off to the LCM as hash block size, and the coordinator
asserts that 2240 is divisible by 4480. In align mode the GCD path is right.
"""

import libcst as cst

from patchq import edits
from patchq.series import patch, variant

ALIGN_GUARD = 'getattr(cache_config, "mamba_cache_mode", "none") != "align"'


def guard_align(resolve, found, ctx):
    """``if any(...)`` -> ``if <not align> and any(...)`` on the back-off branch."""
    (backoff,) = found
    new_test = cst.BooleanOperation(
        left=edits.expr(ALIGN_GUARD), operator=cst.And(), right=backoff.test)
    return edits.replace(resolve, backoff.test, new_test)


PATCH = patch(
    id="prefix-align",
    summary="Hash block size back-off only for non-align mamba (prefix caching with a DFlash drafter)",
    why="""In mamba align mode the scaled mamba block legitimately differs from
    cache_config.block_size; the back-off to the LCM then makes the drafter group's block
    size indivisible by the hash block size and the KV coordinator asserts. Skip the
    back-off in align mode so the GCD path is taken.""",
    upstream=["https://github.com/vllm-project/vllm/blob/v0.28.0/vllm/v1/core/kv_cache_utils.py"],
    applies=">=0.20.2",
    variants=[
        variant(">=0.20.2,<0.24", edits={"mamba-backoff": guard_align}),
    ],
)
