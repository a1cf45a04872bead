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
from patchq.series import case, patch, variant

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


def _logits(env, vocab=256, hidden=128, rows=4, seed=0):
    """The patched ``LogitsProcessor._get_logits`` on a tiny bf16 lm-head on CPU, with the
    ``PATCHQ_INT8_LMHEAD_*`` variables ``env`` set for the call. Returns (logits, the bf16
    reference ``hidden @ W.T`` computed before the call, the lm-head).

    The processor is made without its ``__init__`` (which reads the serving config) and its
    tensor-parallel gather is the identity of a world of one; ``lm_head`` is a plain module
    with vLLM's ``UnquantizedEmbeddingMethod``, what an unquantized ``ParallelLMHead`` holds.
    """
    import os

    import torch
    from vllm.model_executor.layers.logits_processor import LogitsProcessor
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    gen = torch.Generator().manual_seed(seed)
    lm_head = torch.nn.Module()
    lm_head.weight = torch.nn.Parameter((torch.randn(vocab, hidden, generator=gen) / 8).to(torch.bfloat16),
                                        requires_grad=False)
    lm_head.quant_method = UnquantizedEmbeddingMethod()
    lm_head.tp_size = 1
    proc = LogitsProcessor.__new__(LogitsProcessor)
    torch.nn.Module.__init__(proc)
    proc.__dict__.update(scale=1.0, vocab_size=vocab, org_vocab_size=vocab, soft_cap=None, logits_as_input=False,
                         use_all_gather=False, head_dtype=None)
    proc._gather_logits = lambda logits: logits
    x = (torch.randn(rows, hidden, generator=gen) / 8).to(torch.bfloat16)
    reference = torch.nn.functional.linear(x, lm_head.weight.detach().clone())
    saved = {k: os.environ.get(k) for k in env}
    try:
        os.environ.update(env)
        logits = proc._get_logits(x, lm_head, None)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return logits, reference, lm_head


@case(pristine="fails")
def dispatch_bf16():
    """On CPU the lm-head is not eligible: the patched call gives vLLM's own bf16 logits, bit for bit.

    The dispatch ran (``_patchq_int8_state`` is ``fallback``: decided once, on the first
    call) and returned exactly ``lm_head.quant_method.apply``'s result.
    """
    import torch

    logits, reference, lm_head = _logits({})
    state = getattr(lm_head, "_patchq_int8_state", None)
    assert state == "fallback", f"the int8 dispatch did not run (state {state!r})"
    assert torch.equal(logits, reference), "the fallback is not vLLM's own bf16 projection"
    return {"state": state, "shape": list(logits.shape)}


@case(pristine="fails")
def cpu_reference():
    """Forced on CPU with the bf16 weight freed: the int8 reference path's logits match bf16 (argmax equal, error < 2%).

    ``PATCHQ_INT8_LMHEAD_FORCE=1`` makes a CPU weight eligible, ``MIN_ROWS=16`` a 256-row
    head, ``KEEP_BF16=0`` frees the bf16 weight (``FREE_ANY=1``: the tiny head is no
    ``ParallelLMHead``), so every batch reads the per-row int8 copy
    (:func:`patchq_runtime.int8_lmhead.int8_linear_reference` on CPU).
    """
    import torch

    logits, reference, lm_head = _logits({"PATCHQ_INT8_LMHEAD_FORCE": "1", "PATCHQ_INT8_LMHEAD_MIN_ROWS": "16",
                                          "PATCHQ_INT8_LMHEAD_KEEP_BF16": "0", "PATCHQ_INT8_LMHEAD_WARMUP": "0",
                                          "PATCHQ_INT8_LMHEAD_FREE_ANY": "1"})
    assert getattr(lm_head, "_patchq_int8_state", None) == "int8", "the int8 path was not taken"
    assert getattr(lm_head.weight, "_patchq_int8_freed", False), "the bf16 weight was not freed"
    err = (logits.float() - reference.float()).abs().max().item()
    scale = reference.float().abs().max().item()
    assert err <= 0.02 * scale, f"max error {err:.4g} against a max logit {scale:.4g}"
    assert torch.equal(logits.float().argmax(-1), reference.float().argmax(-1)), "greedy tokens differ"
    return {"max_abs_error": round(err, 6), "max_logit": round(scale, 4)}


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
    cases=[dispatch_bf16, cpu_reference],
)
