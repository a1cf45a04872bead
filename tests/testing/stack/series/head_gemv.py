"""head-gemv: the same statement replaced in two methods, by code that imports
``stack_runtime.head`` at run time."""

from patchq import edits
from patchq.series import patch, variant

CALL = "_patchq_head_logits(lm_head, hidden_states, embedding_bias)"
IMPORT = "from stack_runtime.head import head_logits as _patchq_head_logits"


def head_assign(method, found, ctx):
    """``logits = lm_head.quant_method.apply(...)`` -> the run-time package's call (import kept local)."""
    (line,) = found
    return edits.replace(method, line, edits.stmts(f"{IMPORT}\nlogits = {CALL}"))


PATCH = patch(
    id="head-gemv",
    summary="lm-head logits through the stack's own run-time package",
    why="""A stand-in for a patch whose code needs a package that is not vLLM's.""",
    applies=">=0.17.1",
    variants=[
        variant(">=0.17.1,<0.26", edits={"get-logits-call": head_assign, "top-tokens-call": head_assign}),
    ],
)
