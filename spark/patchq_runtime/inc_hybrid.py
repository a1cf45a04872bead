"""Run-time half of the inc-hybrid-fp8 patch: find and serve block-FP8 layers.

Called from the methods the patch adds to vLLM's ``INCConfig``. vLLM is imported only
inside functions, so this module imports anywhere.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Iterable, Mapping

logger = logging.getLogger("patchq_runtime.inc_hybrid")

FP8_DTYPE = "F8_E4M3"  # safetensors dtype tag of torch.float8_e4m3fn


def block_size(weight_shape: Iterable[int], scale_shape: Iterable[int]) -> list[int]:
    """The FP8 block size ``[block_n, block_k]`` from a weight and its ``weight_scale_inv``.

    The scale has ``ceil(dim / block)`` entries per dimension; the block is the smallest
    power of two that gives that count (blocks are powers of two in every known
    checkpoint, e.g. ``[128, 128]``).

    Raises:
        ValueError: shapes of different rank, or no power of two fits.
    """
    w, s = list(weight_shape), list(scale_shape)
    if len(w) != 2 or len(s) != 2:
        raise ValueError(f"expected 2-D weight and scale, got {w} and {s}")
    out = []
    for dim, n_blocks in zip(w, s):
        b = 1 << max(0, math.ceil(math.log2(max(1, math.ceil(dim / n_blocks)))))
        if math.ceil(dim / b) != n_blocks:
            raise ValueError(f"no power-of-two block maps dim {dim} to {n_blocks} scale rows")
        out.append(b)
    return out


def find_fp8_layers(metadata: Mapping[str, Mapping[str, Any]]) -> tuple[set[str], list[int] | None]:
    """Layer prefixes whose ``.weight`` is FP8 with a ``.weight_scale_inv`` sibling.

    Args:
        metadata: tensor name -> {"dtype": str, "shape": [int, ...]} (safetensors header).
    Returns:
        (prefixes, block size) — the block size of the first layer, or None when none.
    Raises:
        ValueError: layers disagree on the block size.
    """
    layers: set[str] = set()
    block: list[int] | None = None
    for name, info in metadata.items():
        if not name.endswith(".weight") or info.get("dtype") != FP8_DTYPE:
            continue
        prefix = name[: -len(".weight")]
        scale = metadata.get(prefix + ".weight_scale_inv")
        if scale is None:
            continue
        this = block_size(info["shape"], scale["shape"])
        if block is not None and this != block:
            raise ValueError(f"{prefix}: FP8 block {this} differs from {block}")
        block = this
        layers.add(prefix)
    return layers, block


def detect_fp8_layers(model_name: str, revision: str | None = None):
    """Read the checkpoint's safetensors headers; return ``(Fp8Config | None, prefixes)``.

    Uses ``vllm.transformers_utils.config.get_safetensors_params_metadata`` (present with
    this signature in vLLM 0.15-0.33). Returns ``(None, set())`` when no FP8 layer exists.
    """
    from vllm.transformers_utils.config import get_safetensors_params_metadata

    metadata = get_safetensors_params_metadata(model_name, revision=revision)
    layers, block = find_fp8_layers(metadata)
    if not layers:
        return None, set()
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config

    config = Fp8Config(is_checkpoint_fp8_serialized=True, activation_scheme="dynamic",
                       weight_block_size=block)
    logger.warning("patchq inc-hybrid-fp8: %d block-FP8 layers (block %s) in %s",
                   len(layers), block, model_name)
    return config, layers


def is_layer_fp8(prefix: str, fp8_layers: set[str], packed_modules_mapping: Mapping[str, list[str]]) -> bool:
    """Whether the layer at ``prefix`` (vLLM name) has FP8 weights.

    Exact match first; a fused module (``packed_modules_mapping``, e.g. ``gate_up_proj``
    -> ``gate_proj``, ``up_proj``) only when every shard is FP8; otherwise a substring
    match in either direction (names may differ by a ``model.`` style prefix).
    """
    if not fp8_layers or not prefix:
        return False
    if prefix in fp8_layers:
        return True
    last = prefix.rsplit(".", 1)[-1]
    shards = packed_modules_mapping.get(last)
    if shards:
        head = prefix[: -len(last)]
        return all(is_layer_fp8(head + s, fp8_layers, {}) for s in shards)
    return any(prefix in name or name in prefix for name in fp8_layers)


def fp8_linear_method(config):
    """vLLM's ``Fp8LinearMethod`` for ``config`` (imported lazily)."""
    from vllm.model_executor.layers.quantization.fp8 import Fp8LinearMethod

    return Fp8LinearMethod(config)
