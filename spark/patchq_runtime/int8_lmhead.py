"""int8 lm-head: per-row symmetric int8 weight + batched w8a16 Triton GEMV.

The ``int8-lmhead`` patch makes vLLM's ``LogitsProcessor._get_logits`` (vLLM
0.17-0.25; ``_apply_head`` from 0.26) call::

    from patchq_runtime.int8_lmhead import lm_head_logits
    logits = lm_head_logits(lm_head, hidden_states, embedding_bias)

in place of ``lm_head.quant_method.apply(lm_head, hidden_states, bias=embedding_bias)``.

What happens
------------
On the first call for a given lm-head weight, :func:`lm_head_logits` decides once
whether the module is *eligible*:

* ``lm_head.weight`` is a 2-D bf16 or fp16 tensor with more than
  :data:`MIN_ROWS_DEFAULT` rows (override: env ``PATCHQ_INT8_LMHEAD_MIN_ROWS``);
* ``type(lm_head.quant_method).__name__`` is ``UnquantizedEmbeddingMethod`` or
  ``UnquantizedLinearMethod`` (vLLM's plain bf16 path; checked by name so that this
  module never imports vLLM);
* the weight is on a CUDA device and Triton imports -- or env
  ``PATCHQ_INT8_LMHEAD_FORCE=1`` (then the plain-torch path below computes the same
  math, e.g. on CPU);
* env ``PATCHQ_INT8_LMHEAD_DISABLE`` is not ``1``.

If eligible, it builds a per-row symmetric int8 copy (:func:`quantize_rows`), stashes
it on the module *and* on the weight Parameter (``_patchq_int8 = (qweight, scales)``),
keeps the bf16 weight (the default; ``PATCHQ_INT8_LMHEAD_KEEP_BF16=0`` frees it with
:func:`release_bf16_weight`) and from then on computes each batch's logits with
whichever of the w8a16 kernels and the stock bf16 call is faster for that batch size
(bf16 weight kept) or with the kernels alone (freed). Anything not eligible goes to
``lm_head.quant_method.apply`` unchanged.

Sharing with a drafter
----------------------
A speculative drafter (DFlash, EAGLE, MTP) that shares the target's lm-head either
holds the same module object or a module whose ``weight`` is the same Parameter
object. Both find the int8 copy: it is looked up on the module first, then on the
Parameter. A drafter with a bf16 *copy* of the weight (a different Parameter) gets
its own int8 copy on its own first call.

Keeping or freeing the bf16 weight
----------------------------------
*Kept* (the default, :data:`KEEP_BF16_DEFAULT`): a batch of ``B`` rows goes to vLLM's
own ``lm_head.quant_method.apply`` when the launch table of the GPU's architecture
lists ``B`` in its ``"kept_bf16"`` ranges (:func:`bf16_serves`), else to the int8
kernels. The ranges are crossovers measured per architecture and fixed in
:data:`LAUNCH_CONFIGS` (no autotuning at server start); the choice is made on the host
from the shape alone, so it needs no sync and a CUDA graph captured for a batch size
replays the path chosen for that size. On the H200 (sm90, ``bench/int8_lmhead.py``,
[248320, 3072], same-run bf16 ``F.linear``) the int8 path measured 1.39-2.07x up to
64 rows, 0.77-0.97x at 65-96, 0.77-1.04x at 104-128 (heavy-tailed rows the low end)
and 0.45-0.90x from 129 to 4096, so bf16 serves from 65 rows and the kept mode
measured 0.997-1.01x there: never slower than stock by more than the dispatch (a
shape check on the host). Cost: the int8 copy (V*H + 2V bytes, 0.76 GB
for [248320, 3072]) on top of the stock weight.

*Freed* (``PATCHQ_INT8_LMHEAD_KEEP_BF16=0``): every batch takes the int8 kernels (0.69-
0.90x of bf16 from 104 rows on the H200; on sm121 the table has no kernel above 64
rows, so 65-1024 rows re-read the int8 weight once per 64 rows) and the lm-head holds
0.50 of the bf16 bytes. What that buys in vLLM (read in 0.23.0's ``gpu_worker``):
not KV cache. The pool is ``requested - (weights measured at load + profiling peak
increase + non-torch)``, and the first lm-head call, which quantizes and frees, runs
inside the profiling run (``profile_run`` -> ``_dummy_sampler_run``), after the weights
(bf16 head included) were measured; the freed 1.53 GB leaves the pool as it is, and
``memory_profiling``'s closing ``empty_cache`` hands it back to the driver (on the DGX
Spark's unified memory: to the OS). Had it reached the pool: 62080 tokens of the
Qwen3.5-122B-A10B target's KV (12 attention layers x 2 KV heads x 256 x K, V x bf16 =
24 KiB a token). The same accounting counts the kept mode's int8 copy only through
the profiling peak (the quantization transient is +1.37 GB above the start), so
where the forward's activation peak is larger the copy sits up to 0.76 GB outside
``gpu_memory_utilization``'s budget.

Why keep is the default: the seed's users (DGX Spark, 128 GB unified memory, c=1
agents and batch serving) get the same ~2x at 1-16 rows either way; batch serving
(DFlash n=12 verifies 13 rows a sequence: 8-40 sequences land at 104-520 rows) keeps
stock speed instead of 0.69-0.86x; weight reloading (RL weight sync) and sleep mode
with weight offload keep working; and freeing gives vLLM's KV pool nothing. The other choice is
the one switch ``PATCHQ_INT8_LMHEAD_KEEP_BF16=0``.

What "free" means
-----------------
vLLM keeps references to ``lm_head.weight`` (the module attribute, the weight
loader, sometimes the drafter). Deleting the attribute would break them, so the
Parameter object stays and only its storage goes: ``weight.data`` is replaced by a
one-element tensor expanded to the original ``[V, H]`` shape (stride ``(0, 0)``).
Shape, dtype and device metadata are unchanged, ``numel()`` still says ``V*H``, but
the storage is 2 bytes; in-place writes into it raise (PyTorch refuses to write
through an expanded tensor), and reads return zeros. The ``V*H*2`` bytes return to
PyTorch's caching allocator (this module calls no ``empty_cache``).
Consequences: weight reloading (``load_weights`` after start, RL weight sync), sleep
mode with weight offload and a *tied* embedding cannot work on the freed weight. A
tied lm-head (vLLM then passes the ``VocabParallelEmbedding`` itself as
``lm_head``) is therefore never freed: only a module whose class is named
``ParallelLMHead`` is. :func:`prepare` does the same work eagerly for a caller that
wants it earlier (before vLLM measures the weights, the freed bytes would count).

Kernel
------
The Triton kernels and their launch plan live in :mod:`patchq_runtime.int8_kernels`,
the Gluon w8a16 GEMM that sm90 uses above 128 rows in
:mod:`patchq_runtime.int8_wgmma`; this module keeps the API, the launch tables and the
dispatch (bench-only kernels are in ``bench/int8_kernels_dev.py``).
``out[b, n] = (sum_k x[b, k] * q[n, k]) * scale[n] (+ bias[n])``: bf16/fp16
activations, int8 weight converted in registers, fp32 accumulation on tensor cores
(``tl.dot``; every product of a bf16 value and an int8 value is exact in fp32), an
fp32 scale and bias epilogue, one rounding to the activation dtype. Each program owns
``BLOCK_N`` weight rows (so the grid is ``ceil(V / BLOCK_N)`` programs, ~1900-3900 for
the 248320-row head: every SM streams weight) and loops over K in ``BLOCK_K`` steps;
the int8 tile arrives in shared memory by 16-byte ``cp.async`` loads, ``num_stages``
deep, is converted once per step and multiplied with the whole batch (padded to the
bucket size), so the weight is read exactly once per launch. The activations (at
most 128 x H bf16) stay in L2. On sm90 this "dott" kernel serves batches up to 16
rows at the copy ceiling; above that the conversion and the MMA serialize within a
program and it falls behind.

The "imma" kernel (sm90, 17-128 rows) converts nothing: a first launch splits each
activation row into int8 digit planes, ``x ~= step * (d0 * 254^2 + d1 * 254 + d2)``
with ``step = absmax / (127 * 254^2)`` and digits in ``[-127, 127]`` (each activation
kept to within 2^-23 of the row's absmax); the int8 weight tile goes
from shared memory into the int8 tensor cores as it arrived, one exact int32
accumulator per plane, combined in fp32 in the epilogue. Two planes do 2/3 of the
MMA work of three but keep activations only to ~1.6e-5 of the absmax: they are used for a batch
only when every row satisfies the rule behind :data:`_PLANES_RULE_L1_OVER_MAX` (their
worst-case error then stays below half the fp32-accumulation bound for weights
uncorrelated with the activations); a row with a massive activation, or a short
hidden size, sends the batch to three planes. Outlier channels (a row failing that rule because
a few channels are far above its typical size, as trained models' massive activations
are) are taken out of the planes, at most ``int8_kernels.IMMA_OUTLIER_SLOTS`` per batch,
and added exactly in the epilogue, so such rows keep two planes. The choice is made on
the GPU (two gated launches, one of which returns at once), so it needs no host sync and is
captured by CUDA graphs.

Batch buckets: a batch of B rows uses the smallest bucket >= B of the launch table
(``1``, ``16``, ``32``, ``64``; ``128`` on sm90): one pass over the weight for 1..64 rows
(1..128 on sm90) -- one kernel launch, or four for an adaptive "imma" bucket (row
statistics, the split and two gated launches; their plan, scratch and compiled kernels
are cached per shape and stream, so a call costs ~0.1 ms of host time). Larger batches loop over the largest bucket (each re-reads the
weight) up to :data:`MAX_LOOP_ROWS`, then use the table's "gemm" entry
(sm90, from 129 rows: the warp-specialized w8a16 wgmma GEMM of
:mod:`patchq_runtime.int8_wgmma`, int8 weight tile converted in registers as the
wgmma A operand)
or, where the table has none, a chunked dequantize + ``F.linear`` (cuBLAS) path
(that path rounds each dequantized weight to bf16 once: a documented deviation from
the kernels' math).

Launch configurations are fixed per GPU architecture (:data:`LAUNCH_CONFIGS`, keyed
``sm<major><minor>``; no autotuning at server start). Triton still JIT-compiles each
(kernel, batch bucket) the first time it is used; :func:`prepare` compiles all of
them up front unless ``PATCHQ_INT8_LMHEAD_WARMUP=0``.

Importing this module imports neither torch nor triton (patchq imports the package
on machines without torch): both are imported inside functions.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Tuple

from . import int8_kernels as _k
from . import int8_wgmma as _wg

__all__ = [
    "MIN_ROWS_DEFAULT",
    "LAUNCH_CONFIGS",
    "lm_head_logits",
    "prepare",
    "quantize_rows",
    "int8_linear_reference",
    "int8_linear",
    "bf16_serves",
    "keep_bf16",
    "release_bf16_weight",
    "is_eligible",
]

#: Minimum number of weight rows (exclusive) for the int8 path; env
#: ``PATCHQ_INT8_LMHEAD_MIN_ROWS`` overrides it (tests use small values).
MIN_ROWS_DEFAULT = 100_000

#: Batches above the launch table's largest bucket (64 or 128 rows) and up to this
#: many rows run as consecutive largest-bucket launches (each re-reads the weight);
#: larger batches take the table's "gemm" kernel (or, without one, the chunked
#: dequantize + ``F.linear`` path). A "gemm" entry whose ``min_B`` is lower takes
#: over from there (sm90: the Gluon wgmma kernel from 129 rows). History: the loop
#: beat every race-free Triton-level gemm
#: tile up to 1024 rows (B = 1024: 3.33 ms looped vs 3.69 ms gemm); above, the two
#: are within ~10% of each other (B = 2048 / 4096, Gaussian rows: loop 6.49 / 13.28 ms,
#: gemm 7.19 / 15.03; heavy-tailed rows: loop 7.70 / 14.79, gemm 7.28 / 15.04) and the
#: gemm is kept there: one launch, no scratch, the same speed for any rows (a batch
#: whose rows need three digit planes loops at ~1.5x the two-plane time).
MAX_LOOP_ROWS = 1024
#: The adaptive ("NP": "auto") imma mode uses two digit planes for a batch when every
#: row has sum_k |x_k| >= this * max_k |x_k|, else three. Why: two planes keep each
#: activation to within h = absmax / (2 * 127 * 254) ~ 1.55e-5 * absmax, so a logit
#: moves by at most h * sum_k |q_nk| * s_n; the fp32-accumulation bound the kernels
#: are held to is 2.1 * K * 2^-24 * sum_k |x_k| |q_nk| * s_n, which for weights
#: uncorrelated with x is ~2.1 * 2^-24 * sum_k |x_k| * sum_k |q_nk| * s_n. Two planes
#: stay below half of that when sum |x| >= h / (1.05 * 2^-24 * absmax) * absmax,
#: i.e. sum |x| >= ~248 * absmax (rounded up). Gaussian-like rows at H = 3072 have
#: sum |x| ~ 680 * absmax; a row with one massive activation or a short row (small H)
#: does not, and gets three planes (~2^-23 * absmax, well inside the bound).
_PLANES_RULE_L1_OVER_MAX = 256.0
#: Largest hidden size for the "imma" kernel (int32 accumulators; see int8_kernels).
IMMA_MAX_K = _k.IMMA_MAX_K
#: Weight rows dequantized at a time on the large-batch path (3072-wide bf16: 192 MiB).
DEQUANT_CHUNK_ROWS = 32768
#: Weight rows processed at a time by :func:`quantize_rows` and the torch reference
#: path (bounds the fp32 temporaries).
QUANT_CHUNK_ROWS = 16384

#: Whether the bf16 weight is kept next to the int8 copy when env
#: ``PATCHQ_INT8_LMHEAD_KEEP_BF16`` is unset (``0`` frees it, ``1`` keeps it). Kept,
#: each batch goes to whichever of the int8 kernels and the stock bf16 call is
#: faster (:func:`bf16_serves`); freed, every batch takes the int8 kernels. Why keep is
#: the default: the module docstring, "Keeping or freeing the bf16 weight".
KEEP_BF16_DEFAULT = True

_ENV_MIN_ROWS = "PATCHQ_INT8_LMHEAD_MIN_ROWS"
_ENV_KEEP = "PATCHQ_INT8_LMHEAD_KEEP_BF16"
_ENV_DISABLE = "PATCHQ_INT8_LMHEAD_DISABLE"
_ENV_FORCE = "PATCHQ_INT8_LMHEAD_FORCE"
_ENV_WARMUP = "PATCHQ_INT8_LMHEAD_WARMUP"
_ENV_CONFIG = "PATCHQ_INT8_LMHEAD_CONFIG"

_UNQUANTIZED_METHODS = ("UnquantizedEmbeddingMethod", "UnquantizedLinearMethod")
_ATTR = "_patchq_int8"
_STATE_ATTR = "_patchq_int8_state"

# ---------------------------------------------------------------------------
# Launch configurations
# ---------------------------------------------------------------------------
# Per architecture, per batch bucket. Bucket "1" is the batch-of-one case; buckets
# "16"/"32"/"64"/"128" serve batches up to that size with BLOCK_B = bucket. Fields:
#   kernel     "dott": activations as MMA operand A, converted weight tile as operand
#                      B; the batch tile is split into BLOCK_B / SUB_B (1, 2 or 4)
#                      MMAs sharing one converted tile. SUB_B < 64 stays on mma.sync
#                      with both operands in registers; SUB_B = 64 uses wgmma on sm90
#                      (the converted tile is staged through shared memory).
#              ("dot", "gemv" and a PTX conversion are the benchmark's development
#              kernels, bench/int8_kernels_dev.py: slower on the H200.)
#              "imma": the int8 tensor cores: the activations are split into NP
#                      int8 digit planes (base 254 against each row's absmax), the
#                      int8 weight tile feeds the MMA unconverted, one exact int32
#                      accumulator per plane. NP "auto" (the shipped choice) launches
#                      a 2-plane and a 3-plane variant of which exactly one does the
#                      work, picked on the GPU per batch by _PLANES_RULE_L1_OVER_MAX
#                      (no host sync); "NP3" holds the 3-plane variant's tile fields.
#                      STACK=1 stacks the planes into one MMA operand. NC (default
#                      16; 0 or 32): outlier-channel slots per batch; OUT_DOT (default
#                      0: a loop over the batch's outlier channels; 1: one fp32 dot,
#                      measured 0.005-0.016 ms slower).
#              "gemm": w8a16 for large batches, weight tile as the wgmma A operand
#                      converted in registers; table key "gemm" holds a list of
#                      configs with "min_B" (ascending): the last one whose min_B <= B
#                      serves B. BLOCK_B batch rows per program. Only tiles whose SASS
#                      waits for each wgmma before the next K step overwrites its A
#                      registers (Triton 3.6 races there otherwise: see
#                      bench/int8_kernels_dev.py GEMM_CANDIDATES).
#              "wgmma": the Gluon GEMM of int8_wgmma (a "gemm" list entry too):
#                      BLOCK_V weight rows (two consumer warpgroups of 64) x BLOCK_B
#                      batch rows per tile, BLOCK_K, STAGES-deep TMA ring, WS 1
#                      (warp-specialized) or 2 (also persistent); num_warps is the
#                      default partition's (4). Chosen by bench/int8_wgmma_sweep.py.
#   BLOCK_N    weight rows per program; BLOCK_K columns per K step;
#   num_warps, num_stages (software pipelining depth);
#
# sm90 (H100/H200): the winners of `bench/int8_lmhead.py --sweep` on an H200 (see
#   bench/README.md): "dott" up to 16 rows (at the copy ceiling), adaptive "imma"
#   above (the conversion kernels serialize conversion and MMA there). sm121 (GB10, DGX Spark) and
#   "default": NOT measured; conservative choices that fit GB10's 101376 bytes of
#   shared memory per block and sm80-class mma.sync. Re-run the sweep on the part
#   (`--sweep --sweep-json FILE`) and copy its table here to tune them.
LAUNCH_CONFIGS = {
    "sm90": {
        "1": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4},
        "16": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4},
        "32": {"kernel": "imma", "NP": "auto", "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3,
               "STACK": 0, "NP3": {"BLOCK_N": 128, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3, "STACK": 0}},
        "64": {"kernel": "imma", "NP": "auto", "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3,
               "STACK": 1, "NP3": {"BLOCK_N": 256, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4, "STACK": 0}},
        "128": {"kernel": "imma", "NP": "auto", "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4,
                "STACK": 1, "NP3": {"BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3, "STACK": 0}},
        # the warp-specialized Gluon wgmma GEMM (int8_wgmma) above 128 rows, persistent,
        # 128-wide K steps: best of the sweep at every B from 208 to 4096 (0.61-0.87x at
        # 208-1024 and 0.84x at 4096 in one run, against 0.57-0.77x / 0.81x for one
        # program per tile with 64-wide K steps; the looped 128-row imma launches it
        # replaced measured 0.53-0.69x) (bench/int8_wgmma_sweep.py, H200)
        "gemm": [
            {"min_B": 129, "kernel": "wgmma", "BLOCK_V": 128, "BLOCK_B": 256, "BLOCK_K": 128, "STAGES": 2,
             "WS": 2, "num_warps": 4},
        ],
        # bf16 weight kept: from 65 rows the stock bf16 call is faster on both row kinds
        # (H200, bench/int8_lmhead.py, 2026-12-02: the int8 path measured 1.34-2.07x up
        # to 64 rows, 0.70-1.04x at 65-128 and 0.45-0.90x from 129 to 4096)
        "kept_bf16": [[65, None]],
    },
    "sm121": {
        "1": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3},
        "16": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3},
        "32": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3},
        "64": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3},
        # NOT measured: above the largest bucket the int8 path re-reads the weight once
        # per 64 rows (as many bytes as one bf16 read from 128 rows on), so bf16 serves
        "kept_bf16": [[65, None]],
    },
    "default": {
        "1": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3},
        "16": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3},
        "32": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3},
        "64": {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3},
        "kept_bf16": [[65, None]],  # as sm121: not measured
    },
}

#: Launch-table keys (besides the batch buckets "1".."128"): "gemm" (see above) and
#: "kept_bf16", a list of ``[min_rows, max_rows]`` ranges (``max_rows`` None: no upper
#: end) of batches that the stock bf16 call serves when the bf16 weight is kept
#: (:func:`bf16_serves`); a table without it sends every batch to the int8 kernels.
TABLE_KEYS = ("1", "16", "32", "64", "128", "gemm", "kept_bf16")



def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _min_rows() -> int:
    raw = os.environ.get(_ENV_MIN_ROWS, "").strip()
    if not raw:
        return MIN_ROWS_DEFAULT
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{_ENV_MIN_ROWS}={raw!r} is not an integer") from None


# ---------------------------------------------------------------------------
# Quantization math (plain torch; also the reference the tests and kernel match)
# ---------------------------------------------------------------------------
def quantize_rows(w, chunk_rows: int = QUANT_CHUNK_ROWS):
    """Per-row symmetric int8 quantization.

    Args:
        w: floating tensor ``[V, H]`` (any float dtype, any device).
        chunk_rows: rows processed at a time (bounds the fp32 temporaries to
            ``chunk_rows * H * 4`` bytes).

    Returns:
        ``(q, scales)``: ``q`` int8 ``[V, H]`` with values in ``[-127, 127]``,
        ``scales`` fp16 ``[V]``, on ``w``'s device. Row ``n`` dequantizes as
        ``q[n].float() * scales[n].float()``.

    Math: ``s = max(absmax(w[n]) / 127, 1e-12)`` in fp32, rounded to fp16 (the
    stored scale); ``q = clamp(round_half_even(w / s16), -127, 127)`` where ``s16``
    is the fp16 scale read back as fp32, so rows are quantized with exactly the
    scale that is stored. A row whose fp16 scale underflows to 0 (absmax below
    ~4e-6) is divided by the fp32 scale instead and dequantizes to zeros (error at
    most its absmax). An all-zero row gives ``q = 0`` and ``scale = 0``.

    Raises:
        ValueError: ``w`` is not 2-D or not floating point.
    """
    import torch

    if w.dim() != 2:
        raise ValueError(f"quantize_rows expects a 2-D weight, got shape {tuple(w.shape)}")
    if not w.is_floating_point():
        raise ValueError(f"quantize_rows expects a floating weight, got {w.dtype}")
    V, H = w.shape
    q = torch.empty((V, H), dtype=torch.int8, device=w.device)
    scales = torch.empty((V,), dtype=torch.float16, device=w.device)
    step = max(1, int(chunk_rows))
    for i in range(0, V, step):
        wc = w[i : i + step].float()
        amax = wc.abs().amax(dim=1)
        s32 = (amax / 127.0).clamp_min(1e-12)
        s16 = s32.to(torch.float16)
        div = s16.float()
        div = torch.where(div > 0, div, s32)
        qc = torch.round(wc / div[:, None]).clamp_(-127.0, 127.0)
        q[i : i + step] = qc.to(torch.int8)
        scales[i : i + step] = s16
        del wc, qc
    return q, scales


def int8_linear_reference(x, q, scales, bias=None, out_dtype=None, chunk_rows: int = QUANT_CHUNK_ROWS):
    """Plain-torch w8a16 product with the kernel's math.

    Args:
        x: activations ``[..., H]`` (bf16/fp16/fp32).
        q: int8 weight ``[V, H]``.
        scales: fp16 (or any float) per-row scales ``[V]``.
        bias: optional ``[V]`` added after scaling.
        out_dtype: result dtype; default ``x.dtype``.
        chunk_rows: weight rows converted to fp32 at a time.

    Returns:
        ``[..., V]`` tensor of ``out_dtype``:
        ``round_to_out((x.float() @ q.float().T) * scales.float() + bias.float())``
        -- fp32 accumulation, one final rounding, exactly what the Triton kernel
        computes up to fp32 summation order.

    Raises:
        ValueError: the last dim of ``x`` is not ``q.shape[1]``, or shapes of
            ``scales``/``bias`` are not ``[V]``.
    """
    import torch

    V, H = q.shape
    if x.shape[-1] != H:
        raise ValueError(f"hidden size {x.shape[-1]} != weight columns {H}")
    if tuple(scales.shape) != (V,):
        raise ValueError(f"scales shape {tuple(scales.shape)} != ({V},)")
    if bias is not None and tuple(bias.shape) != (V,):
        raise ValueError(f"bias shape {tuple(bias.shape)} != ({V},)")
    out_dtype = out_dtype or x.dtype
    lead = x.shape[:-1]
    xf = x.reshape(-1, H).float()
    out = torch.empty((xf.shape[0], V), dtype=out_dtype, device=x.device)
    step = max(1, int(chunk_rows))
    for i in range(0, V, step):
        acc = xf @ q[i : i + step].float().t()
        acc = acc * scales[i : i + step].float()
        if bias is not None:
            acc = acc + bias[i : i + step].float()
        out[:, i : i + step] = acc.to(out_dtype)
    return out.reshape(*lead, V)


# ---------------------------------------------------------------------------
# Kernels and their launch plan: patchq_runtime.int8_kernels
# ---------------------------------------------------------------------------
def _build_kernels():
    return _k.build_kernels()


_CONFIG_CACHE: dict = {}


def _arch_key(device) -> str:
    """``sm<major><minor>`` of a CUDA device; ``"cpu"`` for any other device (no table
    of its own: the "default" one)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return "cpu"
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm{major}{minor}"


def _configs_for(device) -> dict:
    """Launch table for ``device``: LAUNCH_CONFIGS[arch] (or "default"), with an
    optional JSON override from env PATCHQ_INT8_LMHEAD_CONFIG (a file holding either
    one table or {arch: table}); used by the bench sweep, not in serving."""
    key = (str(device), os.environ.get(_ENV_CONFIG, ""))
    hit = _CONFIG_CACHE.get(key)
    if hit is not None:
        return hit
    arch = _arch_key(device)
    table = dict(LAUNCH_CONFIGS.get(arch, LAUNCH_CONFIGS["default"]))
    path = os.environ.get(_ENV_CONFIG, "").strip()
    if path:
        with open(path) as fh:
            data = json.load(fh)
        if arch in data and isinstance(data[arch], dict):
            data = data[arch]
        table.update({str(k): v for k, v in data.items() if str(k) in TABLE_KEYS})
    _CONFIG_CACHE[key] = table
    return table


def _in_ranges(ranges, rows: int) -> bool:
    """Whether ``rows`` lies in one of the ``[lo, hi]`` ranges (``hi`` None: open)."""
    for lo, hi in ranges or ():
        if rows >= lo and (hi is None or rows <= hi):
            return True
    return False


def bf16_serves(device, rows: int) -> bool:
    """Whether, with the bf16 weight kept, a batch of ``rows`` rows goes to the stock
    bf16 call rather than the int8 kernels.

    Args:
        device: the activations' device (``torch.device`` or its string).
        rows: batch rows (tokens whose logits are computed).

    Returns:
        True when the launch table of the device's architecture (:data:`LAUNCH_CONFIGS`
        ``["sm<major><minor>"]``, else ``"default"``; env ``PATCHQ_INT8_LMHEAD_CONFIG``
        may override it) lists ``rows`` in its ``"kept_bf16"`` ranges. The ranges are
        the measured crossovers (where bf16 ``F.linear`` beat the int8 path on either
        row kind): fixed per architecture, decided on the host from the shape alone, so
        no host sync and the same choice inside a CUDA graph as outside.

    Raises:
        OSError, ValueError: the override file cannot be read or parsed.
    """
    return _in_ranges(_configs_for(device).get("kept_bf16"), int(rows))


def keep_bf16() -> bool:
    """Whether the bf16 weight is kept next to the int8 copy (env
    ``PATCHQ_INT8_LMHEAD_KEEP_BF16``: ``1``/``true``/``yes``/``on`` keep, ``0``/
    ``false``/``no``/``off`` free; unset or empty: :data:`KEEP_BF16_DEFAULT`).

    Raises:
        ValueError: any other value (a typo must not silently pick a memory mode).
    """
    raw = os.environ.get(_ENV_KEEP, "").strip().lower()
    if not raw:
        return KEEP_BF16_DEFAULT
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{_ENV_KEEP}={raw!r}: use 1 (keep the bf16 weight) or 0 (free it)")


def _kernel_calls(cfg: dict, x2, q, scales, bias, out, alloc=None):
    """The launches for one batch (tile): see :func:`patchq_runtime.int8_kernels.kernel_calls`."""
    return _k.kernel_calls(cfg, x2, q, scales, bias, out, alloc=alloc, l1_over_max=_PLANES_RULE_L1_OVER_MAX)


def _launch(x2, q, scales, bias, out, cfg: dict) -> None:
    """Launch ``x2`` [B, K] -> ``out`` [B, V] with config ``cfg``.

    Raises:
        ValueError: a "wgmma" config for operands it cannot take (see
            :func:`patchq_runtime.int8_wgmma.supported`).
    """
    if cfg.get("kernel") == "wgmma":
        if not _launch_gemm(cfg, x2, q, scales, bias, out):
            raise ValueError("the wgmma kernel needs sm90, Gluon and a hidden size divisible by 16")
        return
    for fn, args, kw, grid in _kernel_calls(cfg, x2, q, scales, bias, out):
        _k.run_call(fn, grid, args, kw)


def _buckets(table: dict):
    """Batch buckets of a launch table: 16/32/64 always, 128 when the table has it."""
    return tuple(b for b in (16, 32, 64, 128) if str(b) in table)


def _bucket_cfg(table: dict, B: int) -> dict:
    if B == 1:
        return table["1"]
    for b in _buckets(table):
        if B <= b:
            cfg = dict(table[str(b)])
            cfg.setdefault("BLOCK_B", b)
            return cfg
    raise ValueError(f"batch {B} > largest bucket of the launch table")


_BUCKET_CFGS: dict = {}


def _bucket_cfg_cached(table: dict, B: int) -> dict:
    """:func:`_bucket_cfg` as one object per (table, bucket), kept alive with its
    table: ``id()`` of it keys the cached launch plans."""
    bucket = 1 if B == 1 else next((b for b in _buckets(table) if B <= b), None)
    key = (id(table), bucket)
    hit = _BUCKET_CFGS.get(key)
    if hit is None or hit[0] is not table:
        hit = _BUCKET_CFGS[key] = (table, _bucket_cfg(table, B))
    return hit[1]


def _gemm_cfg(table: dict, B: int) -> Optional[dict]:
    """The "gemm" entry of a launch table for a batch of ``B`` rows: the last entry
    whose ``min_B`` is at most ``B`` (entries ascend in ``min_B``), or None (the
    table has none, or ``B`` is below the first: the bucket kernels serve it)."""
    chosen = None
    for entry in table.get("gemm") or ():
        if B >= int(entry["min_B"]):
            chosen = entry
    return chosen


def _launch_gemm(cfg: dict, x2, q, scales, bias, out) -> bool:
    """Run a "gemm" table entry; False when its kernel cannot take these operands.

    ``"wgmma"`` entries (:mod:`patchq_runtime.int8_wgmma`) need sm90, a hidden size
    that is a multiple of 16 and Gluon (Triton >= 3.5); otherwise the caller falls
    back to the looped buckets or the dequantize path. ``"gemm"`` entries always run.
    """
    if cfg.get("kernel") == "wgmma":
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        if not (_wg.available() and _wg.supported(x2, q)):
            return False
        _wg.launch(x2, q, scales, bias, out, cfg)
        return True
    _k.launch_planned(id(cfg), cfg, x2, q, scales, bias, out, _PLANES_RULE_L1_OVER_MAX)
    return True


def int8_linear(x, q, scales, bias=None):
    """w8a16 product ``x @ (q * scales[:, None]).T + bias`` on the GPU.

    Args:
        x: activations ``[..., H]``, bf16 or fp16, CUDA. Rows need a unit stride in
            the last dim (copied otherwise).
        q: int8 ``[V, H]`` contiguous, same device.
        scales: fp16 ``[V]``, same device.
        bias: optional ``[V]`` (any float dtype), same device.

    Returns:
        ``[..., V]`` in ``x.dtype``. Batches up to the launch table's largest
        bucket (64 rows; 128 on sm90): one pass over the weight (one launch, or
        four for an adaptive "imma" bucket). Up to
        :data:`MAX_LOOP_ROWS` rows: consecutive largest-bucket launches. More: the
        table's "gemm" kernel, else chunked dequantize + cuBLAS GEMM. A "gemm"
        entry with a smaller ``min_B`` takes over from that size (sm90: the Gluon
        wgmma GEMM from 129 rows; operands it cannot take, such as a hidden size
        that is not a multiple of 16, go the looped / dequantize way). Falls back to
        :func:`int8_linear_reference` when ``x`` is not on CUDA or not bf16/fp16,
        or Triton is missing.

    Raises:
        ValueError: shape mismatch between ``x``, ``q``, ``scales``, ``bias``.
    """
    import torch

    V, H = q.shape
    if x.shape[-1] != H:
        raise ValueError(f"hidden size {x.shape[-1]} != weight columns {H}")
    if not (x.is_cuda and q.is_cuda and x.dtype in (torch.bfloat16, torch.float16) and _triton_available()):
        return int8_linear_reference(x, q, scales, bias)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, H)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    B = x2.shape[0]
    out = torch.empty((B, V), dtype=x.dtype, device=x.device)
    if B == 0:
        return out.reshape(*lead, V)
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    table = _configs_for(x.device)
    gcfg = _gemm_cfg(table, B)
    if gcfg is not None and _launch_gemm(gcfg, x2, q, scales, bias, out):
        return out.reshape(*lead, V)
    if B > MAX_LOOP_ROWS:
        # Compute-bound sizes: dequantize a chunk of rows to the activation dtype
        # (each weight rounded once, relative error <= 2^-9 on top of the int8 step)
        # and let cuBLAS do the GEMM into a contiguous buffer.
        step = DEQUANT_CHUNK_ROWS
        tmp = torch.empty((B, min(step, V)), dtype=x.dtype, device=x.device)
        for i in range(0, V, step):
            n = min(step, V - i)
            wd = q[i : i + n].to(x.dtype)
            wd.mul_(scales[i : i + n, None].to(x.dtype))
            t = tmp[:, :n]
            torch.mm(x2, wd.t(), out=t)
            if bias is not None:
                t.add_(bias[i : i + n].to(x.dtype))
            out[:, i : i + n].copy_(t)
            del wd
        return out.reshape(*lead, V)
    step = _buckets(table)[-1]
    for i in range(0, B, step):
        xb = x2[i : i + step]
        cfg = _bucket_cfg_cached(table, xb.shape[0])
        _k.launch_planned(id(cfg), cfg, xb, q, scales, bias, out[i : i + step], _PLANES_RULE_L1_OVER_MAX)
    return out.reshape(*lead, V)


def _triton_available() -> bool:
    global _TRITON_OK
    if _TRITON_OK is None:
        try:
            import triton  # noqa: F401
            import triton.language  # noqa: F401

            _TRITON_OK = True
        except Exception:
            _TRITON_OK = False
    return _TRITON_OK


_TRITON_OK: Optional[bool] = None


# ---------------------------------------------------------------------------
# Module-level plumbing
# ---------------------------------------------------------------------------
def is_eligible(lm_head) -> Tuple[bool, str]:
    """Whether ``lm_head`` gets the int8 path, and why not.

    Args:
        lm_head: the vLLM lm-head module (``ParallelLMHead`` or, when tied, the
            ``VocabParallelEmbedding``), or anything with ``weight`` and
            ``quant_method`` attributes.

    Returns:
        ``(eligible, reason)``; ``reason`` is ``"ok"`` or a short explanation.

    Raises:
        ValueError: env ``PATCHQ_INT8_LMHEAD_MIN_ROWS`` is not an integer.
    """
    import torch

    if _env_flag(_ENV_DISABLE):
        return False, f"{_ENV_DISABLE}=1"
    w = getattr(lm_head, "weight", None)
    if w is None or not isinstance(w, torch.Tensor):
        return False, "no weight tensor"
    if getattr(w, _ATTR, None) is not None:
        return True, "ok (int8 copy already on the weight Parameter)"
    if w.dtype not in (torch.bfloat16, torch.float16):
        return False, f"weight dtype {w.dtype}"
    if w.dim() != 2:
        return False, f"weight is {w.dim()}-D"
    min_rows = _min_rows()
    if w.shape[0] <= min_rows:
        return False, f"{w.shape[0]} rows <= {min_rows}"
    qm = getattr(lm_head, "quant_method", None)
    qm_name = type(qm).__name__ if qm is not None else "None"
    if qm_name not in _UNQUANTIZED_METHODS:
        return False, f"quant_method {qm_name}"
    if not _env_flag(_ENV_FORCE):
        if not w.is_cuda:
            return False, "weight not on CUDA"
        if not _triton_available():
            return False, "triton not importable"
    return True, "ok"


def release_bf16_weight(lm_head) -> int:
    """Drop the storage of ``lm_head.weight`` and keep its metadata.

    ``weight.data`` becomes a one-element tensor expanded to the original shape
    (stride 0): shape/dtype/device unchanged, reads give zeros, in-place writes raise.
    Tied embeddings (the module's class is not ``ParallelLMHead``) are left alone.

    Args:
        lm_head: module with a ``weight`` Parameter that already has an int8 copy.

    Returns:
        Bytes released to PyTorch's caching allocator (0 if nothing was freed).

    Raises:
        RuntimeError: the weight has no int8 copy yet (freeing it would lose the
            only copy).
    """
    import torch

    w = lm_head.weight
    if getattr(w, _ATTR, None) is None:
        raise RuntimeError("release_bf16_weight: quantize first (no int8 copy on the weight)")
    if getattr(w, "_patchq_int8_freed", False):
        return 0
    if type(lm_head).__name__ != "ParallelLMHead" and not _env_flag("PATCHQ_INT8_LMHEAD_FREE_ANY"):
        return 0
    nbytes = w.numel() * w.element_size() if w.stride() != (0,) * w.dim() else 0
    shape = tuple(w.shape)
    stub = torch.zeros((), dtype=w.dtype, device=w.device).expand(shape)
    w.data = stub
    w._patchq_int8_freed = True
    w._patchq_int8_orig_shape = shape
    return nbytes


def prepare(lm_head) -> bool:
    """Decide eligibility and, if eligible, build the int8 copy now.

    Idempotent; :func:`lm_head_logits` calls it on its first call. Keeps the bf16
    weight unless :func:`keep_bf16` says free; on CUDA also compiles the
    kernels for every batch bucket (with the weight kept: those some batch size
    still reaches) unless ``PATCHQ_INT8_LMHEAD_WARMUP=0``.

    Args:
        lm_head: the lm-head module.

    Returns:
        True when the int8 path is active for this module.

    Raises:
        ValueError: bad ``PATCHQ_INT8_LMHEAD_MIN_ROWS`` or ``PATCHQ_INT8_LMHEAD_KEEP_BF16``.
    """
    state = getattr(lm_head, _STATE_ATTR, None)
    if state is not None:
        return state == "int8"
    ok, _reason = is_eligible(lm_head)
    if not ok:
        _set_attr(lm_head, _STATE_ATTR, "fallback")
        return False
    w = lm_head.weight
    packed = getattr(w, _ATTR, None)
    if packed is None:
        import torch

        with torch.no_grad():
            packed = quantize_rows(w.detach())
        w._patchq_int8 = packed
    _set_attr(lm_head, _ATTR, packed)
    _set_attr(lm_head, _STATE_ATTR, "int8")
    kept = keep_bf16()
    if not kept:
        release_bf16_weight(lm_head)
    if packed[0].is_cuda and os.environ.get(_ENV_WARMUP, "1").strip() != "0" and _triton_available():
        _warmup(packed, w.dtype, kept=kept and not getattr(w, "_patchq_int8_freed", False))
    return True


def _set_attr(mod, name, value):
    # object.__setattr__ keeps torch.nn.Module from registering tensors as
    # parameters/buffers (which would move them in .to() and show up in state_dict).
    object.__setattr__(mod, name, value)


def _all_bf16(table: dict, lo: int, hi: int | None) -> bool:
    """Whether every batch size from ``lo`` to ``hi`` (None: no end) is in the
    table's "kept_bf16" ranges (then a kept weight never runs the int8 kernel there)."""
    b = lo
    for r_lo, r_hi in sorted(table.get("kept_bf16") or (), key=lambda r: r[0]):
        if r_lo > b:
            return False
        if r_hi is None:
            return True
        b = max(b, r_hi + 1)
        if hi is not None and b > hi:
            return True
    return False


def _warmup(packed, dtype, kept: bool = False) -> None:
    """Compile the int8 kernels for every batch bucket and "gemm" entry; with the
    bf16 weight kept, only those that some batch size still reaches."""
    import torch

    q, scales = packed
    H = q.shape[1]
    table = _configs_for(q.device)
    buckets = _buckets(table)
    gemm = list(table.get("gemm") or ())
    # bucket "1" serves 1 row, each next bucket the sizes above the one before it
    served = list(zip([1, *buckets], [1, *(p + 1 for p in (1, *buckets[:-1]))], strict=True))
    with torch.no_grad():
        for b, lo in served:
            if _gemm_cfg(table, b) is not None or (kept and _all_bf16(table, lo, b)):
                continue
            x = torch.zeros((b, H), dtype=dtype, device=q.device)
            int8_linear(x, q, scales, None)
        # the gemm entries compile once for any batch (B is not specialized): a 16-row
        # launch compiles each without a min_B-row output (up to ~0.5 GB at 1025 rows)
        x = torch.zeros((16, H), dtype=dtype, device=q.device)
        out = torch.empty((16, q.shape[0]), dtype=dtype, device=q.device)
        for j, entry in enumerate(gemm):
            hi = int(gemm[j + 1]["min_B"]) - 1 if j + 1 < len(gemm) else None
            if kept and _all_bf16(table, int(entry["min_B"]), hi):
                continue
            _launch_gemm(entry, x, q, scales, None, out)


def lm_head_logits(lm_head, hidden_states, bias=None):
    """Logits for ``hidden_states`` through ``lm_head`` (the patched vLLM call).

    Args:
        lm_head: vLLM lm-head module (``weight`` ``[V, H]``, ``quant_method``).
        hidden_states: ``[..., H]`` activations (bf16/fp16 in serving).
        bias: optional embedding bias ``[V]``.

    Returns:
        ``[..., V]`` logits in ``hidden_states.dtype``: from the int8 w8a16 kernels
        when the module is eligible (decided once, on the first call) and either its
        bf16 weight was freed or the batch's rows (``hidden_states.numel() // H``)
        are outside the table's ``"kept_bf16"`` ranges (:func:`bf16_serves`); else
        exactly ``lm_head.quant_method.apply(lm_head, hidden_states, bias=bias)``.

    Raises:
        ValueError: bad ``PATCHQ_INT8_LMHEAD_MIN_ROWS`` or
            ``PATCHQ_INT8_LMHEAD_KEEP_BF16``, or ``hidden_states`` last dim differs
            from the weight's columns on the int8 path.
    """
    packed = getattr(lm_head, _ATTR, None)
    if packed is None:
        state = getattr(lm_head, _STATE_ATTR, None)
        if state is None:
            w = getattr(lm_head, "weight", None)
            shared = getattr(w, _ATTR, None) if w is not None else None
            if shared is not None and not _env_flag(_ENV_DISABLE):
                # A drafter sharing the target's weight Parameter: reuse its copy.
                _set_attr(lm_head, _ATTR, shared)
                _set_attr(lm_head, _STATE_ATTR, "int8")
                packed = shared
            elif prepare(lm_head):
                packed = getattr(lm_head, _ATTR)
    if packed is None:
        return lm_head.quant_method.apply(lm_head, hidden_states, bias=bias)
    H = hidden_states.shape[-1]
    rows = hidden_states.numel() // H if H else 0
    if not getattr(lm_head.weight, "_patchq_int8_freed", False) and bf16_serves(hidden_states.device, rows):
        # bf16 weight kept and faster at this batch size: vLLM's own call, unchanged
        return lm_head.quant_method.apply(lm_head, hidden_states, bias=bias)
    q, scales = packed
    return int8_linear(hidden_states, q, scales, bias)


def _describe(lm_head) -> dict:  # pragma: no cover - debugging aid
    """State of the int8 path on ``lm_head`` (for logs)."""
    w = getattr(lm_head, "weight", None)
    packed = getattr(lm_head, _ATTR, None)
    info: dict[str, Any] = {"state": getattr(lm_head, _STATE_ATTR, None)}
    if packed is not None:
        info["int8_bytes"] = packed[0].numel() + packed[1].numel() * 2
    if w is not None:
        info["bf16_freed"] = bool(getattr(w, "_patchq_int8_freed", False))
    return info
