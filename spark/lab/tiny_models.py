"""Tiny random-weight models with the Qwen3.5-122B-A10B + DFlash geometry, for booting vLLM.

Deterministic from a seed, generated locally (no hub), a few MB each. ``generate(out)``
writes:

``target/``
    ``Qwen3_5MoeForConditionalGeneration`` (``model_type`` ``qwen3_5_moe``, text config
    ``qwen3_5_moe_text``): 4 decoder layers, 3 Gated-DeltaNet ``linear_attention`` + 1
    ``full_attention`` (full_attention_interval 4), hidden 128, 4 attention heads, 2 KV
    heads x head_dim 256 with ``attn_output_gate``, GDN 4 key heads / 8 value heads x 128,
    conv kernel 4, ``mamba_ssm_dtype`` float32, 8 routed experts top-2 + a gated shared
    expert (intermediate 128 each), vocab 1024, untied lm-head, interleaved M-RoPE
    (section [11, 11, 10], partial rotary 0.25), a 1-block vision tower, and the native
    MTP head (``mtp_num_hidden_layers`` 1, weights ``mtp.*``). bf16 safetensors. The KV
    and GDN head geometry equals the real 122B's, which is what makes the KV page sizes
    (and the two KV-cache bugs) behave the same.
``drafter/``
    ``DFlashDraftModel`` (``model_type`` ``qwen3``): ONE full-attention layer (two layers,
    or sliding + full, put the drafter layers in different KV-cache groups on vLLM 0.23),
    hidden 128 and vocab 1024 (= target), 8 heads, 8 KV heads x 128, so its KV page per
    token (8*128*2*2 = 4096 B) is twice the target's (2*256*2*2 = 2048 B), as in the real
    pair. ``dflash_config`` holds ``block_size`` 16, ``mask_token_id`` and
    ``target_layer_ids``. No embed/lm-head tensors: vLLM shares the target's.
``target-int4-fp8/``
    The target in auto-round INT4 format (``quant_method`` ``auto-round``,
    ``packing_format`` ``auto_round:auto_gptq``, bits 4, group_size 128, sym; vLLM picks
    ``quantization=inc``) with ``block_name_to_quantize`` = the decoder layers and
    ``extra_config`` marking the bf16 layers, and the shared experts stored as block-FP8
    (``float8_e4m3fn`` weight + float32 ``weight_scale_inv``, 128x128 blocks) -- the hybrid
    checkpoint that the ``inc-hybrid-fp8`` patch serves.
``target-int4/`` (``variants`` default includes it)
    The same INT4 target with bf16 shared experts (Intel's original layout), to tell an
    INT4 problem from an FP8 one.

Every model folder gets ``config.json``, ``generation_config.json``, a byte-level BPE
tokenizer (``tokenizer.json``, ``tokenizer_config.json`` with a ChatML template,
``special_tokens_map.json``; built with the ``tokenizers`` package from a seeded
synthetic corpus), ``model.safetensors`` and its index; ``out/MODELS.json`` records the
sha256 of every file and the seed.

``check(dir)`` verifies a generated folder against the names, shapes, dtypes and config
keys that vLLM 0.23.0 loads; see :func:`expected_tensors` for where each comes from.

CLI::

    python spark/lab/tiny_models.py generate OUT [--seed 0] [--variants target,drafter,target-int4-fp8,target-int4]
    python spark/lab/tiny_models.py check DIR [DIR ...]
    python spark/lab/tiny_models.py anchors VLLM_SRC_DIR     # are the source facts the spec relies on still there?
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import struct
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

GENERATOR_VERSION = 1

# --------------------------------------------------------------------------------------
# Geometry (docs/boot.md) and tokens
# --------------------------------------------------------------------------------------

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|dflash_mask|>",
]
VOCAB = 1024
BASE_VOCAB = VOCAB - len(SPECIAL_TOKENS)  # BPE tokens 0..1015, specials 1016..1023
TOK = {t: BASE_VOCAB + i for i, t in enumerate(SPECIAL_TOKENS)}

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{%- set content = message['content'] -%}"
    "{%- else -%}{%- set content = message['content'] | map(attribute='text') | join('') -%}{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


@dataclass(frozen=True)
class TargetGeometry:
    """The tiny target's shape (docs/boot.md); the defaults are the ones vLLM boots were run with."""

    vocab_size: int = VOCAB
    hidden_size: int = 128
    num_hidden_layers: int = 4
    full_attention_interval: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 256
    linear_num_key_heads: int = 4
    linear_num_value_heads: int = 8
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_conv_kernel_dim: int = 4
    num_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 128
    shared_expert_intermediate_size: int = 128
    mtp_num_hidden_layers: int = 1
    max_position_embeddings: int = 32768
    rope_theta: float = 10_000_000.0
    partial_rotary_factor: float = 0.25
    mrope_section: tuple = (11, 11, 10)
    vision_depth: int = 1
    vision_hidden_size: int = 64
    vision_num_heads: int = 2
    vision_intermediate_size: int = 128
    vision_patch_size: int = 16
    vision_temporal_patch_size: int = 2
    vision_spatial_merge_size: int = 2
    vision_num_position_embeddings: int = 64


@dataclass(frozen=True)
class DrafterGeometry:
    """The tiny DFlash drafter's shape (docs/boot.md)."""

    vocab_size: int = VOCAB
    hidden_size: int = 128
    num_hidden_layers: int = 1
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 384
    block_size: int = 16
    target_layer_ids: tuple = (1, 2)
    rope_theta: float = 1_000_000.0


@dataclass(frozen=True)
class QuantSpec:
    """auto-round INT4 parameters."""

    bits: int = 4
    group_size: int = 128
    sym: bool = True
    fp8_block: tuple = (128, 128)


class CheckError(Exception):
    """A generated folder does not match what vLLM 0.23.0 loads; ``.problems`` lists why."""

    def __init__(self, path: str, problems: list[str]):
        super().__init__(f"{path}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))
        self.problems = problems


# --------------------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------------------


def layer_types(g: TargetGeometry) -> list[str]:
    """``linear_attention`` except every ``full_attention_interval``-th layer (Qwen3_5MoeTextConfig)."""
    return [
        "full_attention" if (i + 1) % g.full_attention_interval == 0 else "linear_attention"
        for i in range(g.num_hidden_layers)
    ]


def target_config(g: TargetGeometry = TargetGeometry()) -> dict:
    """config.json of the bf16 target (shape of Qwen3.5-MoE's own config.json).

    Keys and sub-config model types are those of ``vllm/transformers_utils/configs/qwen3_5_moe.py``
    (``Qwen3_5MoeConfig`` with ``text_config``/``vision_config``); ``attn_output_gate`` is read
    by ``Qwen3NextAttention``; ``mamba_ssm_dtype`` by ``model_executor/models/config.py``;
    ``mtp_num_hidden_layers`` by ``Qwen3_5MultiTokenPredictor``; the M-RoPE keys by ``get_rope``.
    """
    text = {
        "model_type": "qwen3_5_moe_text",
        "vocab_size": g.vocab_size,
        "hidden_size": g.hidden_size,
        "num_hidden_layers": g.num_hidden_layers,
        "layer_types": layer_types(g),
        "full_attention_interval": g.full_attention_interval,
        "num_attention_heads": g.num_attention_heads,
        "num_key_value_heads": g.num_key_value_heads,
        "head_dim": g.head_dim,
        "attn_output_gate": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "initializer_range": 0.02,
        "linear_conv_kernel_dim": g.linear_conv_kernel_dim,
        "linear_key_head_dim": g.linear_key_head_dim,
        "linear_value_head_dim": g.linear_value_head_dim,
        "linear_num_key_heads": g.linear_num_key_heads,
        "linear_num_value_heads": g.linear_num_value_heads,
        "mamba_ssm_dtype": "float32",
        "num_experts": g.num_experts,
        "num_experts_per_tok": g.num_experts_per_tok,
        "moe_intermediate_size": g.moe_intermediate_size,
        "shared_expert_intermediate_size": g.shared_expert_intermediate_size,
        "norm_topk_prob": True,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
        "mtp_num_hidden_layers": g.mtp_num_hidden_layers,
        "mtp_use_dedicated_embeddings": False,
        "max_position_embeddings": g.max_position_embeddings,
        "partial_rotary_factor": g.partial_rotary_factor,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": g.rope_theta,
            "partial_rotary_factor": g.partial_rotary_factor,
            "mrope_section": list(g.mrope_section),
            "mrope_interleaved": True,
        },
        "tie_word_embeddings": False,
        "use_cache": True,
        "dtype": "bfloat16",
        "bos_token_id": None,
        "eos_token_id": TOK["<|im_end|>"],
        "pad_token_id": TOK["<|endoftext|>"],
    }
    vision = {
        "model_type": "qwen3_5_moe",
        "depth": g.vision_depth,
        "hidden_size": g.vision_hidden_size,
        "hidden_act": "gelu_pytorch_tanh",
        "intermediate_size": g.vision_intermediate_size,
        "num_heads": g.vision_num_heads,
        "in_channels": 3,
        "patch_size": g.vision_patch_size,
        "spatial_merge_size": g.vision_spatial_merge_size,
        "temporal_patch_size": g.vision_temporal_patch_size,
        "out_hidden_size": g.hidden_size,
        "num_position_embeddings": g.vision_num_position_embeddings,
        "deepstack_visual_indexes": [],
        "initializer_range": 0.02,
    }
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": TOK["<|image_pad|>"],
        "video_token_id": TOK["<|video_pad|>"],
        "vision_start_token_id": TOK["<|vision_start|>"],
        "vision_end_token_id": TOK["<|vision_end|>"],
        "tie_word_embeddings": False,
        "dtype": "bfloat16",
        "torch_dtype": "bfloat16",
        "transformers_version": "5.17.0",
    }


def int4_quantization_config(g: TargetGeometry = TargetGeometry(), q: QuantSpec = QuantSpec()) -> dict:
    """``quantization_config`` of the auto-round INT4 target (read by ``INCConfig.from_config``).

    ``quant_method: auto-round`` makes ``INCConfig.override_quantization_method`` pick ``inc``;
    ``block_name_to_quantize`` limits quantization to the decoder layers (so lm_head, visual
    and ``mtp.*`` stay bf16, matched as HF names before ``apply_vllm_mapper``); ``extra_config``
    gives ``bits: 16`` to every bf16 Linear inside those blocks (GDN ``in_proj_a/b``: 8 output
    rows, below Marlin's 64-row minimum; the router and shared-expert gate; the shared
    experts, which the hybrid variant stores as FP8 -- INCConfig still sees them as
    unquantized, which is exactly the branch ``inc-hybrid-fp8`` extends).
    """
    extra = {}
    for i, lt in enumerate(layer_types(g)):
        p = f"model.language_model.layers.{i}."
        if lt == "linear_attention":
            for n in ("in_proj_a", "in_proj_b"):
                extra[p + "linear_attn." + n] = {"bits": 16, "data_type": "float"}
        for n in ("mlp.gate", "mlp.shared_expert_gate", "mlp.shared_expert.gate_proj",
                  "mlp.shared_expert.up_proj", "mlp.shared_expert.down_proj"):
            extra[p + n] = {"bits": 16, "data_type": "float"}
    return {
        "quant_method": "auto-round",
        "packing_format": "auto_round:auto_gptq",
        "bits": q.bits,
        "group_size": q.group_size,
        "sym": q.sym,
        "data_type": "int",
        "block_name_to_quantize": "model.language_model.layers",
        "extra_config": extra,
        "autoround_version": "tiny-models-v%d" % GENERATOR_VERSION,
    }


def drafter_config(d: DrafterGeometry = DrafterGeometry(), g: TargetGeometry = TargetGeometry()) -> dict:
    """config.json of the DFlash drafter (z-lab DFlash layout).

    ``architectures: ["DFlashDraftModel"]`` is registered in ``model_executor/models/registry.py``
    -> ``qwen3_dflash.DFlashQwen3ForCausalLM``; ``model_type: qwen3`` makes transformers build a
    ``Qwen3Config``; ``dflash_config.mask_token_id`` is read by ``llm_base_proposer``
    (``_init_parallel_drafting_params``) and ``dflash_config.target_layer_ids`` by
    ``gpu_model_runner`` (+1 each -> aux hidden-state layers) and by ``DFlashQwen3Model``
    (``fc`` input = target hidden x len(target_layer_ids)).
    """
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "vocab_size": d.vocab_size,
        "hidden_size": d.hidden_size,
        "num_hidden_layers": d.num_hidden_layers,
        "layer_types": ["full_attention"] * d.num_hidden_layers,
        "num_attention_heads": d.num_attention_heads,
        "num_key_value_heads": d.num_key_value_heads,
        "head_dim": d.head_dim,
        "intermediate_size": d.intermediate_size,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "max_position_embeddings": g.max_position_embeddings,
        "rope_theta": d.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": d.rope_theta},
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": d.num_hidden_layers,
        "tie_word_embeddings": False,
        "initializer_range": 0.02,
        "use_cache": True,
        "block_size": d.block_size,
        "num_target_layers": g.num_hidden_layers,
        "target_hidden_size": g.hidden_size,
        "dflash_config": {
            "block_size": d.block_size,
            "mask_token_id": TOK["<|dflash_mask|>"],
            "target_layer_ids": list(d.target_layer_ids),
        },
        "bos_token_id": None,
        "eos_token_id": TOK["<|im_end|>"],
        "dtype": "bfloat16",
        "torch_dtype": "bfloat16",
        "transformers_version": "5.17.0",
    }


# --------------------------------------------------------------------------------------
# The expected tensors (the spec both the generator and the checker use)
# --------------------------------------------------------------------------------------

BF16, F32, F16, I32, F8 = "BF16", "F32", "F16", "I32", "F8_E4M3"


def _geom_from_config(cfg: dict) -> TargetGeometry:
    t, v = cfg["text_config"], cfg["vision_config"]
    rp = t.get("rope_parameters") or {}
    return TargetGeometry(
        vocab_size=t["vocab_size"], hidden_size=t["hidden_size"], num_hidden_layers=t["num_hidden_layers"],
        full_attention_interval=t.get("full_attention_interval", 4),
        num_attention_heads=t["num_attention_heads"], num_key_value_heads=t["num_key_value_heads"],
        head_dim=t["head_dim"], linear_num_key_heads=t["linear_num_key_heads"],
        linear_num_value_heads=t["linear_num_value_heads"], linear_key_head_dim=t["linear_key_head_dim"],
        linear_value_head_dim=t["linear_value_head_dim"], linear_conv_kernel_dim=t["linear_conv_kernel_dim"],
        num_experts=t["num_experts"], num_experts_per_tok=t["num_experts_per_tok"],
        moe_intermediate_size=t["moe_intermediate_size"],
        shared_expert_intermediate_size=t["shared_expert_intermediate_size"],
        mtp_num_hidden_layers=t.get("mtp_num_hidden_layers", 0),
        max_position_embeddings=t["max_position_embeddings"], rope_theta=rp.get("rope_theta", 1e7),
        partial_rotary_factor=rp.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25)),
        mrope_section=tuple(rp.get("mrope_section", ())),
        vision_depth=v["depth"], vision_hidden_size=v["hidden_size"], vision_num_heads=v["num_heads"],
        vision_intermediate_size=v["intermediate_size"], vision_patch_size=v["patch_size"],
        vision_temporal_patch_size=v["temporal_patch_size"], vision_spatial_merge_size=v["spatial_merge_size"],
        vision_num_position_embeddings=v["num_position_embeddings"],
    )


def _decoder_layer(p: str, g: TargetGeometry, lt: str, out: dict) -> None:
    """HF tensors of one Qwen3.5-MoE decoder layer (bf16, per-expert MoE layout)."""
    H = g.hidden_size
    out[p + "input_layernorm.weight"] = ((H,), BF16)
    out[p + "post_attention_layernorm.weight"] = ((H,), BF16)
    if lt == "linear_attention":
        kd = g.linear_num_key_heads * g.linear_key_head_dim
        vd = g.linear_num_value_heads * g.linear_value_head_dim
        nv = g.linear_num_value_heads
        out[p + "linear_attn.in_proj_qkv.weight"] = ((2 * kd + vd, H), BF16)
        out[p + "linear_attn.in_proj_z.weight"] = ((vd, H), BF16)
        out[p + "linear_attn.in_proj_b.weight"] = ((nv, H), BF16)
        out[p + "linear_attn.in_proj_a.weight"] = ((nv, H), BF16)
        out[p + "linear_attn.conv1d.weight"] = ((2 * kd + vd, 1, g.linear_conv_kernel_dim), BF16)
        out[p + "linear_attn.dt_bias"] = ((nv,), BF16)
        out[p + "linear_attn.A_log"] = ((nv,), F32)
        out[p + "linear_attn.norm.weight"] = ((g.linear_value_head_dim,), BF16)
        out[p + "linear_attn.out_proj.weight"] = ((H, vd), BF16)
    else:
        nh, hd, nkv = g.num_attention_heads, g.head_dim, g.num_key_value_heads
        out[p + "self_attn.q_proj.weight"] = ((nh * hd * 2, H), BF16)  # q and output gate, per head
        out[p + "self_attn.k_proj.weight"] = ((nkv * hd, H), BF16)
        out[p + "self_attn.v_proj.weight"] = ((nkv * hd, H), BF16)
        out[p + "self_attn.o_proj.weight"] = ((H, nh * hd), BF16)
        out[p + "self_attn.q_norm.weight"] = ((hd,), BF16)
        out[p + "self_attn.k_norm.weight"] = ((hd,), BF16)
    E, I, Is = g.num_experts, g.moe_intermediate_size, g.shared_expert_intermediate_size
    out[p + "mlp.gate.weight"] = ((E, H), BF16)
    out[p + "mlp.shared_expert_gate.weight"] = ((1, H), BF16)
    out[p + "mlp.shared_expert.gate_proj.weight"] = ((Is, H), BF16)
    out[p + "mlp.shared_expert.up_proj.weight"] = ((Is, H), BF16)
    out[p + "mlp.shared_expert.down_proj.weight"] = ((H, Is), BF16)
    for e in range(E):
        out[p + f"mlp.experts.{e}.gate_proj.weight"] = ((I, H), BF16)
        out[p + f"mlp.experts.{e}.up_proj.weight"] = ((I, H), BF16)
        out[p + f"mlp.experts.{e}.down_proj.weight"] = ((H, I), BF16)


def expected_target_bf16(g: TargetGeometry) -> dict[str, tuple[tuple, str]]:
    """``{hf_name: (shape, safetensors dtype)}`` of the bf16 target, derived from vLLM 0.23.0.

    Derivation (vllm/ paths):

    * Prefixes: ``Qwen3VLForConditionalGeneration.hf_to_vllm_mapper`` (models/qwen3_vl.py)
      maps ``model.language_model.`` -> ``language_model.model.``, ``model.visual.`` ->
      ``visual.``, ``lm_head.`` -> ``language_model.lm_head.``; ``mtp.`` is skipped by the
      target (``skip_prefixes=["mtp."]`` in models/qwen3_5.py) and loaded by
      ``Qwen3_5MoeMTP.load_weights`` (models/qwen3_5_mtp.py: ``mtp.`` -> ``model.``, plus
      ``embed_tokens`` and ``lm_head``).
    * GDN layer (``QwenGatedDeltaNetAttention``, layers/mamba/gdn/qwen_gdn_linear_attn.py,
      ``gqa_interleaved_layout=False`` for Qwen3.5): ``Qwen3_5Model.load_weights`` stacks
      ``in_proj_qkv`` (shards 0,1,2: q,k [nk*dk] and v [nv*dv]) + ``in_proj_z`` (shard 3) into
      ``in_proj_qkvz``, and ``in_proj_b`` + ``in_proj_a`` ([nv] each) into ``in_proj_ba``;
      ``conv1d`` is a ColumnParallelLinear(kernel -> 2*nk*dk + nv*dv) whose weight is
      unsqueezed to [C, 1, kernel]; ``dt_bias`` and ``A_log`` are [nv] (A_log float32);
      ``norm`` is RMSNormGated(dv); ``out_proj`` is RowParallelLinear(nv*dv -> H).
    * Attention (``Qwen3NextAttention``, models/qwen3_next.py): qkv_proj has
      ``num_heads * (1 + attn_output_gate)`` query heads, so HF ``q_proj`` is
      [nh*hd*2, H]; k/v [nkv*hd, H]; o_proj [H, nh*hd]; q_norm/k_norm [hd].
    * MoE (``Qwen3NextSparseMoeBlock``): ``gate`` ReplicatedLinear(H -> E),
      ``shared_expert_gate`` (H -> 1), ``shared_expert`` Qwen2MoeMLP(gate/up/down, Is);
      routed experts by ``fused_moe_make_expert_params_mapping(gate_proj, down_proj,
      up_proj)`` i.e. ``experts.{e}.{gate,up,down}_proj.`` (the fused 3-D
      ``experts.gate_up_proj`` form also loads; this generator writes per-expert).
    * Vision (``Qwen3_VisionTransformer``, models/qwen3_vl.py): patch_embed Conv3d with
      bias, pos_embed Embedding(npos, vh), blocks (LayerNorm norm1/norm2 with bias,
      fused ``attn.qkv`` + ``attn.proj`` with bias, ``mlp.linear_fc1/2`` with bias), merger
      (LayerNorm(vh), linear_fc1 4vh->4vh, linear_fc2 4vh->out_hidden). Not loaded with
      ``--language-model-only`` (StageMissingLayer), present for fidelity.
    * MTP (``Qwen3_5MultiTokenPredictor``): ``fc`` (2H -> H, no bias),
      ``pre_fc_norm_hidden``, ``pre_fc_norm_embedding``, ``norm``, and
      ``mtp_num_hidden_layers`` full-attention MoE decoder layers ``mtp.layers.{i}``.
    * Strictness: for an unquantized model ``DefaultModelLoader.track_weights_loading``
      raises unless every registered parameter was loaded, so nothing may be missing.
    """
    out: dict = {}
    L = "model.language_model."
    H, V = g.hidden_size, g.vocab_size
    out[L + "embed_tokens.weight"] = ((V, H), BF16)
    out[L + "norm.weight"] = ((H,), BF16)
    out["lm_head.weight"] = ((V, H), BF16)
    for i, lt in enumerate(layer_types(g)):
        _decoder_layer(f"{L}layers.{i}.", g, lt, out)
    vh, vi = g.vision_hidden_size, g.vision_intermediate_size
    VP = "model.visual."
    out[VP + "patch_embed.proj.weight"] = (
        (vh, 3, g.vision_temporal_patch_size, g.vision_patch_size, g.vision_patch_size), BF16)
    out[VP + "patch_embed.proj.bias"] = ((vh,), BF16)
    out[VP + "pos_embed.weight"] = ((g.vision_num_position_embeddings, vh), BF16)
    for b in range(g.vision_depth):
        bp = f"{VP}blocks.{b}."
        for n in ("norm1", "norm2"):
            out[bp + n + ".weight"] = ((vh,), BF16)
            out[bp + n + ".bias"] = ((vh,), BF16)
        out[bp + "attn.qkv.weight"] = ((3 * vh, vh), BF16)
        out[bp + "attn.qkv.bias"] = ((3 * vh,), BF16)
        out[bp + "attn.proj.weight"] = ((vh, vh), BF16)
        out[bp + "attn.proj.bias"] = ((vh,), BF16)
        out[bp + "mlp.linear_fc1.weight"] = ((vi, vh), BF16)
        out[bp + "mlp.linear_fc1.bias"] = ((vi,), BF16)
        out[bp + "mlp.linear_fc2.weight"] = ((vh, vi), BF16)
        out[bp + "mlp.linear_fc2.bias"] = ((vh,), BF16)
    m = vh * g.vision_spatial_merge_size**2
    out[VP + "merger.norm.weight"] = ((vh,), BF16)
    out[VP + "merger.norm.bias"] = ((vh,), BF16)
    out[VP + "merger.linear_fc1.weight"] = ((m, m), BF16)
    out[VP + "merger.linear_fc1.bias"] = ((m,), BF16)
    out[VP + "merger.linear_fc2.weight"] = ((H, m), BF16)
    out[VP + "merger.linear_fc2.bias"] = ((H,), BF16)
    if g.mtp_num_hidden_layers:
        out["mtp.fc.weight"] = ((H, 2 * H), BF16)
        for n in ("pre_fc_norm_hidden", "pre_fc_norm_embedding", "norm"):
            out[f"mtp.{n}.weight"] = ((H,), BF16)
        for i in range(g.mtp_num_hidden_layers):
            _decoder_layer(f"mtp.layers.{i}.", g, "full_attention", out)
    return out


def _is_int4_linear(name: str, qcfg: dict) -> bool:
    """Is HF Linear ``name`` (no ``.weight``) INT4 under ``qcfg`` (INCConfig.get_layer_config rules)?"""
    blocks = qcfg.get("block_name_to_quantize")
    if isinstance(blocks, str):
        blocks = blocks.split(",")
    if blocks and not any(name.startswith(b) for b in blocks):
        return False
    cfg = (qcfg.get("extra_config") or {}).get(name)
    if cfg is not None:
        return cfg.get("bits", qcfg["bits"]) < 16
    return True


def expected_target_int4(g: TargetGeometry, qcfg: dict, fp8_shared: bool) -> dict[str, tuple[tuple, str]]:
    """``{hf_name: (shape, dtype)}`` of the auto-round INT4 target (optionally FP8 shared experts).

    Every 2-D ``*.weight`` of a Linear inside ``block_name_to_quantize`` that ``extra_config``
    does not mark ``bits >= 16`` becomes the GPTQ quartet that
    ``AutoGPTQLinearMethod.create_weights`` / ``AutoGPTQMoEMethod.create_weights``
    (layers/quantization/auto_gptq.py) register, for in K / out N / group G, pack 32/bits:
    ``qweight`` int32 [K/8, N] (packed along K), ``qzeros`` int32 [K/G, N/8] (packed along N),
    ``scales`` fp16 [K/G, N], ``g_idx`` int32 [K]. Routed experts map per expert
    (``experts.{e}.gate_proj.qweight`` -> ``experts.w13_qweight``...). Norms, conv1d, dt_bias,
    A_log, router, embeddings, lm_head, visual and mtp stay as in the bf16 target. With
    ``fp8_shared``, each ``mlp.shared_expert.{gate,up,down}_proj.weight`` is ``F8_E4M3``
    with a sibling float32 ``weight_scale_inv`` [ceil(N/bn), ceil(K/bk)]
    (``create_fp8_scale_parameter`` for ``BlockQuantScaleParameter`` in
    layers/quantization/utils/fp8_utils.py; the name is ``Fp8LinearMethod``'s).
    """
    base = expected_target_bf16(g)
    G = qcfg["group_size"]
    pack = 32 // qcfg["bits"]
    bn, bk = (128, 128)
    out: dict = {}
    for name, (shape, dt) in base.items():
        lin = name[: -len(".weight")] if name.endswith(".weight") else None
        if lin and len(shape) == 2 and name.startswith("model.language_model.layers.") and _is_int4_linear(lin, qcfg):
            N, K = shape
            out[lin + ".qweight"] = ((K // pack, N), I32)
            out[lin + ".qzeros"] = ((K // G, N // pack), I32)
            out[lin + ".scales"] = ((K // G, N), F16)
            out[lin + ".g_idx"] = ((K,), I32)
        elif fp8_shared and lin and ".mlp.shared_expert." in name and name.startswith("model.language_model.layers."):
            N, K = shape
            out[name] = (shape, F8)
            out[lin + ".weight_scale_inv"] = (((N + bn - 1) // bn, (K + bk - 1) // bk), F32)
        else:
            out[name] = (shape, dt)
    return out


def expected_drafter(d_cfg: dict) -> dict[str, tuple[tuple, str]]:
    """``{name: (shape, dtype)}`` of the DFlash drafter, derived from models/qwen3_dflash.py.

    ``DFlashQwen3ForCausalLM.load_weights`` prefixes every name without ``lm_head`` with
    ``model.`` and ``DFlashQwen3Model.load_weights`` stacks ``q/k/v_proj`` into ``qkv_proj``
    and ``gate/up_proj`` into ``gate_up_proj``: so names are ``layers.{i}.self_attn.{q,k,v,o}_proj
    .weight``, ``q_norm``/``k_norm`` [head_dim], ``mlp.{gate,up,down}_proj.weight``, the two
    layer norms, ``fc.weight`` [H, target_hidden * len(target_layer_ids)] (ReplicatedLinear, no
    bias), ``hidden_norm.weight`` and ``norm.weight``. ``embed_tokens``/``lm_head`` are left out
    on purpose (skip_substrs + ``_maybe_share_*`` in v1/spec_decode/llm_base_proposer.py share
    the target's). ``attention_bias`` false -> no biases.
    """
    H = d_cfg["hidden_size"]
    nh, nkv = d_cfg["num_attention_heads"], d_cfg["num_key_value_heads"]
    hd = d_cfg.get("head_dim") or H // nh
    I = d_cfg["intermediate_size"]
    th = d_cfg.get("target_hidden_size", H)
    nfeat = len(d_cfg["dflash_config"]["target_layer_ids"])
    out: dict = {}
    for i in range(d_cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        out[p + "input_layernorm.weight"] = ((H,), BF16)
        out[p + "post_attention_layernorm.weight"] = ((H,), BF16)
        out[p + "self_attn.q_proj.weight"] = ((nh * hd, H), BF16)
        out[p + "self_attn.k_proj.weight"] = ((nkv * hd, H), BF16)
        out[p + "self_attn.v_proj.weight"] = ((nkv * hd, H), BF16)
        out[p + "self_attn.o_proj.weight"] = ((H, nh * hd), BF16)
        out[p + "self_attn.q_norm.weight"] = ((hd,), BF16)
        out[p + "self_attn.k_norm.weight"] = ((hd,), BF16)
        out[p + "mlp.gate_proj.weight"] = ((I, H), BF16)
        out[p + "mlp.up_proj.weight"] = ((I, H), BF16)
        out[p + "mlp.down_proj.weight"] = ((H, I), BF16)
    out["fc.weight"] = ((H, th * nfeat), BF16)
    out["hidden_norm.weight"] = ((H,), BF16)
    out["norm.weight"] = ((H,), BF16)
    return out


def expected_tensors(model_dir: str | os.PathLike) -> dict[str, tuple[tuple, str]]:
    """The tensors vLLM 0.23.0 expects for the model in ``model_dir``, from its config.json.

    Dispatches on ``architectures`` / ``quantization_config``; see
    :func:`expected_target_bf16`, :func:`expected_target_int4`, :func:`expected_drafter`
    for the derivation of each name and shape.

    Raises:
        CheckError: unknown architecture.
    """
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    arch = (cfg.get("architectures") or [None])[0]
    if arch == "DFlashDraftModel":
        return expected_drafter(cfg)
    if arch == "Qwen3_5MoeForConditionalGeneration":
        g = _geom_from_config(cfg)
        q = cfg.get("quantization_config")
        if q is None:
            return expected_target_bf16(g)
        fp8 = bool((cfg.get("tiny_models") or {}).get("fp8_shared_experts"))
        return expected_target_int4(g, q, fp8)
    raise CheckError(str(model_dir), [f"unknown architecture {arch!r}"])


# --------------------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------------------


def _rng(seed: int, name: str):
    import numpy as np

    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _init_value(seed: int, name: str, shape: tuple):
    """float32 numpy init for one bf16-target tensor, by the role its name says it has."""
    import numpy as np

    r = _rng(seed, name)
    leaf = name.rsplit(".", 2)
    if name.endswith("A_log"):
        return np.log(r.uniform(1.0, 16.0, size=shape)).astype(np.float32)
    if name.endswith("dt_bias"):
        dt = np.exp(r.uniform(math.log(1e-3), math.log(1e-1), size=shape))
        return (dt + np.log(-np.expm1(-dt))).astype(np.float32)  # inverse softplus
    if name.endswith(("norm.weight", "layernorm.weight", "norm1.weight", "norm2.weight")):
        # Qwen3.5 decoder norms are GemmaRMSNorm (1 + w): w = 0. GDN's RMSNormGated, the
        # drafter's RMSNorm and the vision LayerNorms use w directly: 1.
        gemma = name.startswith(("model.language_model.", "mtp.")) and ".linear_attn.norm." not in name
        return np.zeros(shape, np.float32) if gemma else np.ones(shape, np.float32)
    if name.endswith(".bias"):
        return np.zeros(shape, np.float32)
    if "embed" in leaf[-2] or name.endswith("pos_embed.weight"):
        return r.normal(0.0, 0.02, size=shape).astype(np.float32)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    return r.normal(0.0, 1.0 / math.sqrt(max(fan_in, 1)), size=shape).astype(np.float32)


def gptq_pack(w, group_size: int, bits: int = 4):
    """Quantize a float32 [N, K] weight to auto_gptq symmetric INT-``bits`` tensors.

    Returns ``(qweight int32 [K/pack, N], qzeros int32 [K/G, N/pack], scales float16 [K/G, N],
    g_idx int32 [K])`` as numpy arrays, pack = 32/bits. Symmetric: q = clamp(round(w/s),
    -2^(b-1), 2^(b-1)-1) + 2^(b-1), s = max|w|/(2^(b-1)-1) per (group, column); zeros hold
    2^(b-1) - 1 (auto_gptq's historical off-by-one, ignored by the symmetric Marlin kernels).

    Raises:
        ValueError: K not divisible by group_size or pack, or N not divisible by pack.
    """
    import numpy as np

    N, K = w.shape
    pack = 32 // bits
    if K % group_size or K % pack or N % pack:
        raise ValueError(f"cannot pack [{N}, {K}] with group {group_size}, pack {pack}")
    half = 1 << (bits - 1)
    wg = w.reshape(N, K // group_size, group_size)
    scale = np.abs(wg).max(axis=2) / (half - 1)  # [N, K/G]
    scale = np.where(scale == 0, 1e-8, scale).astype(np.float16)
    q = np.clip(np.rint(wg / scale[:, :, None].astype(np.float32)), -half, half - 1).astype(np.int64) + half
    q = q.reshape(N, K).T  # [K, N] in 0..2^b-1
    qw = np.zeros((K // pack, N), np.uint32)
    for j in range(pack):
        qw |= (q[j::pack].astype(np.uint32) << np.uint32(bits * j))
    zeros = np.full((K // group_size, N), half - 1, np.uint32)
    qz = np.zeros((K // group_size, N // pack), np.uint32)
    for j in range(pack):
        qz |= zeros[:, j::pack] << np.uint32(bits * j)
    g_idx = (np.arange(K) // group_size).astype(np.int32)
    return qw.view(np.int32), qz.view(np.int32), np.ascontiguousarray(scale.T), g_idx


def fp8_block_quant(w, block: tuple = (128, 128)):
    """Block-quantize a float32 [N, K] weight to float8_e4m3fn with float32 ``weight_scale_inv``.

    ``weight_scale_inv[i, j] = max|w[block]| / 448`` (the e4m3 max), so dequant is
    ``fp8 * scale_inv`` as vLLM's block-FP8 kernels compute it. Returns torch tensors
    ``(weight float8_e4m3fn [N, K], scale_inv float32 [ceil(N/bn), ceil(K/bk)])``.
    """
    import numpy as np
    import torch

    N, K = w.shape
    bn, bk = block
    sn, sk = (N + bn - 1) // bn, (K + bk - 1) // bk
    s = np.zeros((sn, sk), np.float32)
    q = np.zeros_like(w)
    for i in range(sn):
        for j in range(sk):
            blk = w[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk]
            m = float(np.abs(blk).max()) / 448.0 or 1e-12
            s[i, j] = m
            q[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk] = blk / m
    return torch.from_numpy(q).to(torch.float8_e4m3fn), torch.from_numpy(s)


def _bf16_tensors(spec: dict, seed: int) -> dict:
    import torch

    tdt = {BF16: torch.bfloat16, F32: torch.float32, F16: torch.float16}
    out = {}
    for name, (shape, dt) in spec.items():
        out[name] = torch.from_numpy(_init_value(seed, name, shape)).to(tdt[dt]).contiguous()
    return out


def _int4_tensors(g: TargetGeometry, qcfg: dict, fp8_shared: bool, seed: int) -> dict:
    """INT4 tensors quantized from the same float init as the bf16 target (same seed, same names)."""
    import torch

    bf16_spec = expected_target_bf16(g)
    want = expected_target_int4(g, qcfg, fp8_shared)
    tdt = {BF16: torch.bfloat16, F32: torch.float32, F16: torch.float16}
    out = {}
    for name, (shape, dt) in bf16_spec.items():
        lin = name[: -len(".weight")] if name.endswith(".weight") else None
        if lin and lin + ".qweight" in want:
            qw, qz, sc, gi = gptq_pack(_init_value(seed, name, shape), qcfg["group_size"], qcfg["bits"])
            out[lin + ".qweight"] = torch.from_numpy(qw).contiguous()
            out[lin + ".qzeros"] = torch.from_numpy(qz).contiguous()
            out[lin + ".scales"] = torch.from_numpy(sc).contiguous()
            out[lin + ".g_idx"] = torch.from_numpy(gi).contiguous()
        elif lin and lin + ".weight_scale_inv" in want:
            wq, s = fp8_block_quant(_init_value(seed, name, shape))
            out[name] = wq.contiguous()
            out[lin + ".weight_scale_inv"] = s.contiguous()
        else:
            out[name] = torch.from_numpy(_init_value(seed, name, shape)).to(tdt[dt]).contiguous()
    assert set(out) == set(want), sorted(set(out) ^ set(want))[:5]
    return out


# --------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "si", "po", "da", "fe", "gu", "hi", "jo", "be", "zu",
              "th", "er", "an", "on", "in", "st", "re", "ed", "ng", "qu", "ch", "sh", "ow", "ay", "ex"]
_WORDS = ("the of and to in is that for it as with was on be at by this from or have an they which "
          "one you were her all she there would their we him been has when who will more no if out so "
          "said what up its about into than them can only other new some could time these two may then "
          "do first any my now such like our over man me even most made after also did many before must "
          "through back years where much your way well down should because each just those people Paris "
          "France capital model token cache block page speculative draft accept serve patch anchor").split()


def _corpus(seed: int, n_lines: int = 3000) -> list[str]:
    import numpy as np

    r = np.random.default_rng([seed, 7])
    lines = []
    for i in range(n_lines):
        kind = i % 4
        if kind == 0:
            words = [_WORDS[j] for j in r.integers(0, len(_WORDS), size=int(r.integers(5, 16)))]
            lines.append(" ".join(words).capitalize() + ".")
        elif kind == 1:
            words = ["".join(_SYLLABLES[j] for j in r.integers(0, len(_SYLLABLES), size=int(r.integers(1, 4))))
                     for _ in range(int(r.integers(4, 12)))]
            lines.append(" ".join(words))
        elif kind == 2:
            a, b = (int(x) for x in r.integers(0, 10000, size=2))
            lines.append(f'{{"id": {a}, "value": {b}, "name": "{_WORDS[a % len(_WORDS)]}"}}')
        else:
            fn = _WORDS[int(r.integers(0, len(_WORDS)))]
            lines.append(f"def {fn}_{i}(x, y=None):\n    return x + {int(r.integers(0, 99))}  # {fn}")
    return lines


def build_tokenizer(seed: int = 0):
    """A byte-level BPE ``tokenizers.Tokenizer`` with exactly ``VOCAB`` tokens.

    ``BASE_VOCAB`` (1016) learned tokens (256 bytes + merges) from a seeded synthetic
    corpus, then the ``SPECIAL_TOKENS`` at ids 1016..1023 (``TOK``). Deterministic.

    Raises:
        RuntimeError: the trainer produced a vocabulary of another size.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BASE_VOCAB,
        min_frequency=1,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    if tok.get_vocab_size() != BASE_VOCAB:
        raise RuntimeError(f"BPE trained {tok.get_vocab_size()} tokens, wanted {BASE_VOCAB}")
    tok.add_special_tokens(SPECIAL_TOKENS)
    if tok.get_vocab_size() != VOCAB or tok.token_to_id("<|im_end|>") != TOK["<|im_end|>"]:
        raise RuntimeError("special token ids are not where the configs expect them")
    return tok


def _write_tokenizer(tok, d: Path) -> None:
    tok.save(str(d / "tokenizer.json"))
    added = {
        str(TOK[t]): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True}
        for t in SPECIAL_TOKENS
    }
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>")],
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 32768,
        "chat_template": CHAT_TEMPLATE,
    }, indent=1) + "\n")
    (d / "special_tokens_map.json").write_text(json.dumps({
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>")],
    }, indent=1) + "\n")


# --------------------------------------------------------------------------------------
# Writing and checking folders
# --------------------------------------------------------------------------------------


def _save(d: Path, cfg: dict, tensors: dict, tok) -> None:
    from safetensors.torch import save_file

    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    (d / "generation_config.json").write_text(json.dumps({
        "eos_token_id": [TOK["<|im_end|>"], TOK["<|endoftext|>"]],
        "pad_token_id": TOK["<|endoftext|>"],
        "transformers_version": "5.17.0",
    }, indent=1) + "\n")
    ordered = {k: tensors[k] for k in sorted(tensors)}
    save_file(ordered, str(d / "model.safetensors"), metadata={"format": "pt"})
    total = sum(t.numel() * t.element_size() for t in ordered.values())
    (d / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": total},
        "weight_map": {k: "model.safetensors" for k in ordered},
    }, indent=1) + "\n")
    _write_tokenizer(tok, d)


ALL_VARIANTS = ("target", "drafter", "target-int4-fp8", "target-int4")


def generate(out: str | os.PathLike, seed: int = 0, variants: tuple = ALL_VARIANTS) -> dict:
    """Write the tiny models under ``out`` and return the ``MODELS.json`` record.

    Args:
        out: output folder (created); each variant goes to ``out/<variant>/``.
        seed: every tensor is drawn from ``numpy.random.default_rng([seed, crc32(name)])``,
            so the same seed gives byte-identical files (numpy's PCG64 stream and IEEE
            rounding; checked by sha256 in ``MODELS.json``).
        variants: any of ``ALL_VARIANTS``.

    Returns:
        ``{"generator": version, "seed": seed, "models": {variant: {"files": {name: sha256},
        "bytes": n}}}``, also written to ``out/MODELS.json``.

    Raises:
        ValueError: an unknown variant.
        ImportError: torch, safetensors, numpy or tokenizers is missing.
    """
    bad = set(variants) - set(ALL_VARIANTS)
    if bad:
        raise ValueError(f"unknown variants {sorted(bad)}; known: {ALL_VARIANTS}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    g, d, q = TargetGeometry(), DrafterGeometry(), QuantSpec()
    tok = build_tokenizer(seed)
    for v in variants:
        vd = out / v
        if v == "target":
            _save(vd, target_config(g), _bf16_tensors(expected_target_bf16(g), seed), tok)
        elif v == "drafter":
            cfg = drafter_config(d, g)
            _save(vd, cfg, _bf16_tensors(expected_drafter(cfg), seed + 1), tok)
        else:
            fp8 = v == "target-int4-fp8"
            cfg = target_config(g)
            qcfg = int4_quantization_config(g, q)
            cfg["quantization_config"] = qcfg
            cfg["tiny_models"] = {"fp8_shared_experts": fp8, "fp8_block": list(q.fp8_block)}
            _save(vd, cfg, _int4_tensors(g, qcfg, fp8, seed), tok)
    record = {"generator": GENERATOR_VERSION, "seed": seed, "models": {}}
    for v in variants:
        files = {}
        for f in sorted((out / v).iterdir()):
            files[f.name] = hashlib.sha256(f.read_bytes()).hexdigest()
        record["models"][v] = {"files": files, "bytes": sum((out / v / f).stat().st_size for f in files)}
    (out / "MODELS.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def read_safetensors_header(path: str | os.PathLike) -> dict[str, dict]:
    """The JSON header of a safetensors file: ``{name: {"dtype", "shape", "data_offsets"}}``.

    Stdlib only (8-byte little-endian header length, then JSON), as vLLM's
    ``_read_safetensors_metadata_in_dir`` reads it; ``__metadata__`` is dropped.
    """
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


# Config keys vLLM 0.23.0 reads for these models (key path -> where), checked for presence.
TARGET_KEYS = {
    "architectures": "model registry: Qwen3_5MoeForConditionalGeneration",
    "model_type": "transformers_utils/config.py _CONFIG_REGISTRY qwen3_5_moe",
    "text_config.model_type": "models/qwen3_5.py: qwen3_5_moe_text selects Qwen3NextSparseMoeBlock",
    "text_config.layer_types": "Qwen3_5Model.get_layer",
    "text_config.attn_output_gate": "Qwen3NextAttention",
    "text_config.head_dim": "Qwen3NextAttention",
    "text_config.num_key_value_heads": "Qwen3NextAttention",
    "text_config.linear_num_key_heads": "QwenGatedDeltaNetAttention / gated_delta_net_state_shape",
    "text_config.linear_num_value_heads": "idem",
    "text_config.linear_key_head_dim": "idem",
    "text_config.linear_value_head_dim": "idem",
    "text_config.linear_conv_kernel_dim": "idem",
    "text_config.mamba_ssm_dtype": "models/config.py mamba_ssm_cache_dtype",
    "text_config.num_experts": "Qwen3NextSparseMoeBlock",
    "text_config.num_experts_per_tok": "idem",
    "text_config.moe_intermediate_size": "idem",
    "text_config.shared_expert_intermediate_size": "idem",
    "text_config.mtp_num_hidden_layers": "Qwen3_5MultiTokenPredictor",
    "text_config.rope_parameters.mrope_section": "get_rope -> MRotaryEmbedding",
    "text_config.rope_parameters.mrope_interleaved": "idem",
    "text_config.tie_word_embeddings": "Qwen3_5ForCausalLMBase lm_head",
    "vision_config.out_hidden_size": "Qwen3_VisionTransformer merger",
    "vision_config.num_position_embeddings": "Qwen3_VisionTransformer pos_embed",
}
INT4_KEYS = {
    "quantization_config.quant_method": "INCConfig.override_quantization_method: auto-round -> inc",
    "quantization_config.packing_format": "INCConfig.SUPPORTED_FORMATS",
    "quantization_config.bits": "INCConfig.from_config",
    "quantization_config.group_size": "idem",
    "quantization_config.sym": "idem",
    "quantization_config.extra_config": "INCConfig.get_layer_config / get_quant_method",
}
DRAFTER_KEYS = {
    "architectures": "registry: DFlashDraftModel -> qwen3_dflash",
    "model_type": "transformers Qwen3Config",
    "dflash_config.mask_token_id": "llm_base_proposer._init_parallel_drafting_params",
    "dflash_config.target_layer_ids": "gpu_model_runner aux layers; DFlashQwen3Model fc",
    "head_dim": "DFlashQwen3Attention",
    "num_key_value_heads": "idem",
    "intermediate_size": "Qwen3MLP",
}


def _get(cfg: dict, path: str):
    cur = cfg
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise KeyError(path)
        cur = cur[part]
    return cur


def check(model_dir: str | os.PathLike) -> dict:
    """Verify a generated model folder against what vLLM 0.23.0 loads.

    Checks: the files vLLM and transformers open exist; the config keys in
    ``TARGET_KEYS``/``INT4_KEYS``/``DRAFTER_KEYS`` are present and consistent (layer
    types, the drafter's 2x KV page, sizes that Marlin needs, token ids inside the
    vocabulary, the tokenizer's size and special ids); and the safetensors header holds
    exactly the tensors of :func:`expected_tensors` (no missing, no extra name) with the
    expected shape and dtype.

    Returns:
        ``{"dir", "kind", "tensors", "bytes", "kv_page_bytes_per_token"}`` on success.

    Raises:
        CheckError: with every problem found.
    """
    d = Path(model_dir)
    problems: list[str] = []
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        if not (d / f).is_file():
            problems.append(f"missing file {f}")
    if problems:
        raise CheckError(str(d), problems)
    cfg = json.loads((d / "config.json").read_text())
    arch = (cfg.get("architectures") or [None])[0]
    keys = dict(DRAFTER_KEYS) if arch == "DFlashDraftModel" else dict(TARGET_KEYS)
    if "quantization_config" in cfg:
        keys.update(INT4_KEYS)
    for k, why in keys.items():
        try:
            _get(cfg, k)
        except KeyError:
            problems.append(f"config key {k} missing ({why})")
    kind = "drafter" if arch == "DFlashDraftModel" else "target"
    page = None
    vocab = None
    try:
        if kind == "target":
            t = cfg["text_config"]
            vocab = t["vocab_size"]
            lt = t["layer_types"]
            if len(lt) != t["num_hidden_layers"] or set(lt) - {"linear_attention", "full_attention"}:
                problems.append(f"layer_types {lt} do not fit num_hidden_layers {t['num_hidden_layers']}")
            if "full_attention" not in lt or "linear_attention" not in lt:
                problems.append("target must be hybrid (both linear_attention and full_attention layers)")
            page = 2 * t["num_key_value_heads"] * t["head_dim"] * 2
            rp = t["rope_parameters"]
            rot = int(t["head_dim"] * rp.get("partial_rotary_factor", t.get("partial_rotary_factor", 1.0)))
            if sum(rp["mrope_section"]) * 2 != rot:
                problems.append(f"mrope_section {rp['mrope_section']} does not cover rotary dim {rot}")
            if cfg["vision_config"]["out_hidden_size"] != t["hidden_size"]:
                problems.append("vision out_hidden_size != text hidden_size")
            npos = cfg["vision_config"]["num_position_embeddings"]
            if int(math.isqrt(npos)) ** 2 != npos:
                problems.append(f"vision num_position_embeddings {npos} is not a square")
            for k in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
                if not 0 <= cfg.get(k, -1) < vocab:
                    problems.append(f"{k} {cfg.get(k)} outside the vocabulary")
            q = cfg.get("quantization_config")
            if q:
                if q.get("quant_method") != "auto-round" or q.get("packing_format") != "auto_round:auto_gptq":
                    problems.append("quantization_config is not auto-round / auto_round:auto_gptq")
                G = q["group_size"]
                H, I = t["hidden_size"], t["moe_intermediate_size"]
                # check_moe_marlin_supports_layer: hidden % 128 == 0, intermediate % max(64, G) == 0
                if H % 128 or I % max(64, G):
                    problems.append(f"Marlin MoE needs hidden%128==0 and intermediate%max(64,{G})==0")
        else:
            vocab = cfg["vocab_size"]
            page = 2 * cfg["num_key_value_heads"] * (cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]) * 2
            lts = cfg.get("layer_types") or ["full_attention"] * cfg["num_hidden_layers"]
            if cfg["num_hidden_layers"] != 1 or lts != ["full_attention"] or cfg.get("use_sliding_window"):
                problems.append("drafter must have exactly one full_attention layer and no sliding window "
                                "(else vLLM 0.23 splits its layers over KV-cache groups)")
            dc = cfg["dflash_config"]
            if not 0 <= dc["mask_token_id"] < vocab:
                problems.append(f"mask_token_id {dc['mask_token_id']} outside the vocabulary")
            tgt = d.parent / "target" / "config.json"
            if tgt.is_file():
                tc = json.loads(tgt.read_text())["text_config"]
                tpage = 2 * tc["num_key_value_heads"] * tc["head_dim"] * 2
                if page != 2 * tpage:
                    problems.append(f"drafter KV page/token {page} B is not twice the target's {tpage} B")
                if cfg["hidden_size"] != tc["hidden_size"] or vocab != tc["vocab_size"]:
                    problems.append("drafter hidden/vocab differ from the target's")
                if any(not 0 <= i < tc["num_hidden_layers"] for i in dc["target_layer_ids"]):
                    problems.append(f"target_layer_ids {dc['target_layer_ids']} outside the target's layers")
    except KeyError as e:
        problems.append(f"config key {e} missing")
    try:
        tj = json.loads((d / "tokenizer.json").read_text())
        ids = {a["content"]: a["id"] for a in tj.get("added_tokens", [])}
        size = len(tj["model"]["vocab"]) + len([a for a in tj.get("added_tokens", []) if a["content"] not in tj["model"]["vocab"]])
        if vocab is not None and size > vocab:
            problems.append(f"tokenizer has {size} tokens, more than the model's vocab {vocab}")
        for t, i in TOK.items():
            if ids.get(t) != i:
                problems.append(f"tokenizer: {t} has id {ids.get(t)}, configs expect {i}")
        tc = json.loads((d / "tokenizer_config.json").read_text())
        if "chat_template" not in tc and not (d / "chat_template.jinja").is_file():
            problems.append("no chat template (the /v1/chat/completions request needs one)")
    except (KeyError, json.JSONDecodeError) as e:
        problems.append(f"tokenizer files unreadable: {e}")
    try:
        want = expected_tensors(d)
    except (KeyError, CheckError) as e:
        problems.append(f"cannot derive expected tensors: {e}")
        raise CheckError(str(d), problems)
    have = read_safetensors_header(d / "model.safetensors")
    for name in sorted(set(want) - set(have)):
        problems.append(f"missing tensor {name} {want[name]}")
    for name in sorted(set(have) - set(want)):
        problems.append(f"unexpected tensor {name} {have[name]['dtype']} {have[name]['shape']}")
    for name in sorted(set(want) & set(have)):
        shape, dt = want[name]
        if tuple(have[name]["shape"]) != tuple(shape) or have[name]["dtype"] != dt:
            problems.append(f"tensor {name}: {have[name]['dtype']} {have[name]['shape']}, expected {dt} {list(shape)}")
    idx = d / "model.safetensors.index.json"
    if idx.is_file():
        wm = json.loads(idx.read_text())["weight_map"]
        if set(wm) != set(have):
            problems.append("model.safetensors.index.json weight_map does not list exactly the file's tensors")
    if problems:
        raise CheckError(str(d), problems)
    return {
        "dir": str(d),
        "kind": kind + ("-int4" if "quantization_config" in cfg else ""),
        "tensors": len(have),
        "bytes": sum((d / f).stat().st_size for f in os.listdir(d)),
        "kv_page_bytes_per_token": page,
    }


# Source facts the spec above relies on: (file under vllm/, exact substring). If vLLM
# changes one of them, the generator may no longer match what that release loads.
SOURCE_ANCHORS = [
    ("model_executor/models/qwen3_vl.py", '"model.language_model.": "language_model.model."'),
    ("model_executor/models/qwen3_vl.py", '"model.visual.": "visual."'),
    ("model_executor/models/qwen3_vl.py", '"lm_head.": "language_model.lm_head."'),
    ("model_executor/models/qwen3_5.py", '("in_proj_qkvz", "in_proj_qkv", (0, 1, 2))'),
    ("model_executor/models/qwen3_5.py", '("in_proj_qkvz", "in_proj_z", 3)'),
    ("model_executor/models/qwen3_5.py", '("in_proj_ba", "in_proj_b", 0)'),
    ("model_executor/models/qwen3_5.py", '("in_proj_ba", "in_proj_a", 1)'),
    ("model_executor/models/qwen3_5.py", 'skip_prefixes=["mtp."]'),
    ("model_executor/models/qwen3_5.py", 'config.model_type == "qwen3_5_moe_text"'),
    ("model_executor/models/qwen3_5_mtp.py", 'name.replace("mtp.", "model.")'),
    ("model_executor/models/qwen3_5_mtp.py", "self.pre_fc_norm_hidden"),
    ("model_executor/models/qwen3_5_mtp.py", "self.pre_fc_norm_embedding"),
    ("model_executor/models/qwen3_next.py", "self.total_num_heads * (1 + self.attn_output_gate)"),
    ("model_executor/models/qwen3_next.py", 'ckpt_gate_proj_name="gate_proj"'),
    ("model_executor/models/qwen3_next.py", "self.shared_expert_gate = ReplicatedLinear("),
    ("model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py", "self.conv1d.weight.data = self.conv1d.weight.data.unsqueeze(1)"),
    ("model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py", "self.A_log = nn.Parameter("),
    ("model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py", "self.dt_bias = nn.Parameter("),
    ("model_executor/models/qwen3_dflash.py", 'name = "model." + name'),
    ("model_executor/models/qwen3_dflash.py", "self.hidden_norm = RMSNorm("),
    ("model_executor/models/qwen3_dflash.py", '"target_layer_ids" in drafter_config'),
    ("model_executor/models/registry.py", '"DFlashDraftModel": ("qwen3_dflash", "DFlashQwen3ForCausalLM")'),
    ("v1/spec_decode/llm_base_proposer.py", '"mask_token_id" in dflash_config'),
    ("model_executor/layers/quantization/inc.py", 'hf_quant_cfg.get("quant_method", None) == "auto-round"'),
    ("model_executor/layers/quantization/inc.py", '"block_name_to_quantize", "to_quant_block_names"'),
    ("model_executor/layers/quantization/auto_gptq.py", 'layer.register_parameter("qweight", qweight)'),
    ("model_executor/layers/quantization/auto_gptq.py", 'layer.register_parameter("w13_qweight", w13_qweight)'),
    ("model_executor/layers/quantization/fp8.py", 'layer.register_parameter("weight_scale_inv", scale)'),
    ("model_executor/model_loader/default_loader.py", "Following weights were not initialized from"),
]


def check_source_anchors(vllm_src: str | os.PathLike) -> list[str]:
    """Return the ``SOURCE_ANCHORS`` missing from a vLLM source tree (empty list: all present).

    Args:
        vllm_src: the ``vllm/`` package folder of a release (e.g. ``/tmp/v/0.23.0/vllm``).
    """
    root = Path(vllm_src)
    missing = []
    for rel, needle in SOURCE_ANCHORS:
        p = root / rel
        if not p.is_file() or needle not in p.read_text(errors="replace"):
            missing.append(f"{rel}: {needle}")
    return missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tiny_models", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("out")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--variants", default=",".join(ALL_VARIANTS))
    c = sub.add_parser("check")
    c.add_argument("dirs", nargs="+")
    a_ = sub.add_parser("anchors")
    a_.add_argument("vllm_src")
    a = ap.parse_args(argv)
    if a.cmd == "generate":
        rec = generate(a.out, a.seed, tuple(v for v in a.variants.split(",") if v))
        print(json.dumps({v: m["bytes"] for v, m in rec["models"].items()}))
        rc = 0
        for v in rec["models"]:
            try:
                check(Path(a.out) / v)
            except CheckError as e:
                print(e, file=sys.stderr)
                rc = 1
        return rc
    if a.cmd == "check":
        rc = 0
        for dd in a.dirs:
            try:
                print(json.dumps(check(dd)))
            except CheckError as e:
                print(e, file=sys.stderr)
                rc = 1
        return rc
    missing = check_source_anchors(a.vllm_src)
    print(json.dumps({"missing": missing}))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
