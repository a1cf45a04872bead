"""int8-lmhead: compute the vocabulary projection with an int8 w8a16 GEMV.

The lm-head (248320 x 3072 in bf16, 1.5 GB) is read on every decoded token. The patched
call goes to :func:`patchq_runtime.int8_lmhead.lm_head_logits`, which builds a per-row
int8 copy on first use, keeps the bf16 weight by default (``PATCHQ_INT8_LMHEAD_KEEP_BF16=0``
frees it) and sends each batch to whichever of the int8 kernels and
``lm_head.quant_method.apply`` is faster for its row count, falling back to the latter for
anything not eligible (the measured choice: ``docs/patches.md``, "Keep or free"). The import
is kept local to the patched method (vLLM's file never imports triton or patchq).

Variants (``vllm/model_executor/layers/logits_processor.py``, class ``LogitsProcessor``;
number of ``lm_head.quant_method.apply(...)`` calls: 1 in 0.15.1-0.16.0, 2 in
0.17.0-0.25.1, 1 from 0.26.0):

* ``>=0.15,<0.17``: the one call, an assignment in ``_get_logits``.
* ``>=0.17,<0.26``: the same assignment in ``_get_logits`` and in the new
  ``get_top_tokens`` (the spec-decode proposers' path); both are replaced.
* ``>=0.26``: both (and ``get_top_k_tokens``, 0.28.0+) call the new helper
  ``_apply_head``, which holds the only call as ``return lm_head.quant_method.apply(
  lm_head, hidden_states, bias=embedding_bias)`` split over 3 lines, under
  ``if self.head_dtype is None or self.head_dtype == hidden_states.dtype:``. That
  ``return`` is replaced; the comment ``# Get the logits for the next tokens.`` in
  ``_get_logits`` survived while the statement under it changed, so the anchor is the
  statement, never the comment. 0.27.1 (``tp_size`` guard) and 0.29.0 (``skip_gather``)
  change ``_get_logits`` only.

Decision: the proposers' path (``get_top_tokens`` / ``get_top_k_tokens``) takes the int8
path too, on every release where it exists. Reasons:

1. Correctness: with ``PATCHQ_INT8_LMHEAD_KEEP_BF16=0`` the first eligible call frees the
   bf16 weight (its storage becomes a 2-byte expanded tensor that reads as zeros). The drafter shares the
   target's lm-head module (or its weight Parameter), so a stock bf16 call on the
   proposers' path after that would compute logits from an emptied weight: silently
   wrong draft tokens and collapsed acceptance, with no error.
2. Consistency: the draft and target tokens come from the same int8 logits, whose argmax
   matches bf16 (max error ~3e-4, below the quantization floor), so acceptance is not
   disturbed by a numeric mismatch between the two paths.
3. Speed: the proposers read the same 1.5 GB projection per draft step; the halved read
   helps them as much as the target.
From 0.26.0 this needs no choice: all callers go through ``_apply_head``. The fp32-head
branch of ``_apply_head`` (``head_dtype`` differs from the activations) still reads
``lm_head.weight`` directly; it is never mixed with the int8 branch in one server
(``head_dtype`` is fixed per model), so the weight is never freed when that branch runs.
"""

from patchq import edits
from patchq.series import patch, variant

CALL = "_patchq_lm_head_logits(lm_head, hidden_states, embedding_bias)"
IMPORT = "from patchq_runtime.int8_lmhead import lm_head_logits as _patchq_lm_head_logits"


def int8_assign(method, found, ctx):
    """``logits = lm_head.quant_method.apply(...)`` -> the int8 call (import kept local)."""
    (line,) = found
    return edits.replace(method, line, edits.stmts(f"{IMPORT}\nlogits = {CALL}"))


def int8_return(method, found, ctx):
    """``return lm_head.quant_method.apply(...)`` (in ``_apply_head``) -> ``return`` the int8 call."""
    (line,) = found
    return edits.replace(method, line, edits.stmts(f"{IMPORT}\nreturn {CALL}"))


PATCH = patch(
    id="int8-lmhead",
    summary="lm-head logits through a per-row int8 w8a16 GEMV (half the weight read per token)",
    why="""The 248320 x 3072 bf16 vocabulary projection is read on every decoded token;
    a per-row symmetric int8 copy halves that read for small batches (about 2x at 1-16
    rows on the H200) and keeps greedy outputs; larger batches stay on the kept bf16
    weight, where the int8 kernels are slower.""",
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.17", edits={"get-logits-call": int8_assign},
                note="one call, in _get_logits"),
        variant(">=0.17,<0.26", edits={"get-logits-call": int8_assign, "top-tokens-call": int8_assign},
                note="_get_logits and the proposers' get_top_tokens each hold the call"),
        variant(">=0.26", edits={"apply-head-return": int8_return},
                note="the call moved into _apply_head (a 3-line return) used by every caller"),
    ],
)
