"""int8-lmhead: compute the vocabulary projection with an int8 w8a16 GEMV.

The lm-head (248320 x 3072 in bf16, 1.5 GB) is read on every decoded token. The patched
call goes to :func:`patchq_runtime.int8_lmhead.lm_head_logits`, which builds a per-row
int8 copy on first use, frees the bf16 weight (unless ``PATCHQ_INT8_LMHEAD_KEEP_BF16=1``)
and falls back to ``lm_head.quant_method.apply`` for anything not eligible.

``get_top_tokens`` (0.17.1+, used by the spec-decode proposers) takes the int8 path too:
the drafter shares the lm_head module, and once the bf16 weight is freed the stock call
there would read an emptied weight. From 0.26.0 both go through ``_apply_head``.
"""

from patchq import edits
from patchq.series import patch, variant

CALL = "_patchq_lm_head_logits(lm_head, hidden_states, embedding_bias)"
IMPORT = "from patchq_runtime.int8_lmhead import lm_head_logits as _patchq_lm_head_logits"


def int8_assign(method, found, ctx):
    """``logits = lm_head.quant_method.apply(...)`` -> the int8 call (import kept local)."""
    (line,) = found
    return edits.replace(method, line, edits.stmts(f"{IMPORT}\nlogits = {CALL}"))


PATCH = patch(
    id="int8-lmhead",
    summary="lm-head logits through a per-row int8 w8a16 GEMV (half the weight read per token)",
    why="""The 248320 x 3072 bf16 vocabulary projection is read on every decoded token;
    a per-row symmetric int8 copy halves that read, keeps greedy outputs, and frees 1.5 GB
    of bf16 weight for the KV cache pool.""",
    applies=">=0.17.1",
    variants=[
        variant(">=0.17.1,<0.26", edits={"get-logits-call": int8_assign, "top-tokens-call": int8_assign}),
    ],
)
