"""inc-hybrid-fp8: serve block-FP8 shared experts inside an INT4 auto-round checkpoint.

A hybrid checkpoint keeps the INT4 (AutoRound/GPTQ) routed experts and attention, but
stores the shared experts as block-FP8 (``float8_e4m3fn`` weights with a
``.weight_scale_inv`` sibling). vLLM's ``INCConfig`` sends every not-quantized layer to
``UnquantizedLinearMethod``. The patch gives ``INCConfig`` an ``fp8_config`` found from
the checkpoint's safetensors metadata (``maybe_update_config``, signature copied from the
installed base class) and routes FP8 ``LinearBase`` layers to
``Fp8LinearMethod(self.fp8_config)`` before any fall-back to ``UnquantizedLinearMethod``.
The logic lives in :mod:`patchq_runtime.inc_hybrid`; what is inserted into vLLM only
calls it. Inert when the checkpoint has no FP8 layers.

Variants (same behaviour, two shapes of ``INCConfig``):

* ``>=0.15,<0.24``: ``vllm/model_executor/layers/quantization/inc.py``. Anchors:
  ``init-fields`` (after ``self.pack_factor = Fraction(32, weight_bits)``), ``mapper``
  (the ``extra_config`` remap), ``bits16-override`` (``get_quant_method``'s
  ``extra_config`` override for ``bits >= 16``), ``unquantized-branches`` (every
  ``if not self.check_quantized(weight_bits):`` branch of the ``apply_*_quant_layer``
  methods: awq/gptq/ipex = 3 up to 0.19.1, awq/gptq/xpu/cpu = 4 from 0.20.0) and
  ``class-hooks``. The base hook is ``maybe_update_config(self, model_name)`` up to
  0.19.1 (the override then reads the default revision) and gains ``hf_config`` and
  ``revision`` at 0.20.0; it is copied from the installed base class either way.
  ``FusedMoE`` -> ``RoutedExperts`` (0.22.1) does not touch the anchors, and the
  inserted code never imports either name.
* ``>=0.24``: ``quantization/inc.py`` became the package ``quantization/inc/``
  (``INCConfig`` in ``inc/inc.py``; ``__init__.py`` re-exports it). The per-backend
  ``apply_*_quant_layer`` methods and ``check_quantized`` are gone; layer resolution is
  ``INCConfigParser.resolve`` in ``config_parser.py`` and ``get_quant_method`` holds the
  one not-quantized branch ``if not layer_config.quantized:`` (anchor ``not-quantized``),
  which gets the FP8 return first. The ``bits >= 16`` override keeps its test while its
  body changes (0.24.0: ``RoutedExperts`` check added; 0.30.0: ``LinearBase`` /
  ``ParallelLMHead`` check, ``return None``); its ``...`` body pattern matches all of
  them and the FP8 return goes first. The anchors name ``...quantization.inc.inc`` so
  they resolve in place, not as moved. 0.27.1/0.29.0 grow the class (MXFP8, FP8-block
  ``auto_round:fp8`` checkpoints: a different, whole-checkpoint format) and 0.31.0
  renames the hook annotation ``PretrainedConfig`` -> ``PreTrainedConfig``: the copied
  signature drops annotations, so nothing changes for the patch.

Never upstream in 0.15.1-0.33.0: ``INCConfig`` never defines ``maybe_update_config`` and
``inc/`` never reads safetensors metadata.
"""

import libcst as cst

from patchq import edits
from patchq.series import case, patch, variant

FP8_RETURN = """
if self.fp8_config is not None and isinstance(layer, LinearBase) and self._is_layer_fp8(prefix):
    return self._fp8_linear_method()  # patchq inc-hybrid-fp8
"""

HOOKS = '''
def maybe_update_config({params}):
    """patchq inc-hybrid-fp8: find the checkpoint's block-FP8 layers (shared experts)."""
    from patchq_runtime.inc_hybrid import detect_fp8_layers

    self.fp8_config, self.fp8_layers = detect_fp8_layers(model_name, revision={revision})

def _is_layer_fp8(self, prefix):
    from patchq_runtime.inc_hybrid import is_layer_fp8

    return is_layer_fp8(prefix, self.fp8_layers, getattr(self, "packed_modules_mapping", {{}}))

def _fp8_linear_method(self):
    from patchq_runtime.inc_hybrid import fp8_linear_method

    return fp8_linear_method(self.fp8_config)
'''

BASE_HOOK = ("QuantizationConfig.maybe_update_config", "vllm.model_executor.layers.quantization.base_config")


def add_fields(init, found, ctx):
    """``self.fp8_config = None`` and ``self.fp8_layers = set()`` after ``self.pack_factor = ...``."""
    (line,) = found
    return edits.insert_after(init, line, edits.stmts(
        "self.fp8_config = None  # patchq inc-hybrid-fp8\nself.fp8_layers: set[str] = set()"))


def remap_fp8_layers(mapper, found, ctx):
    """Map ``fp8_layers`` from HF to vLLM names with the same mapper as ``extra_config``."""
    (remap,) = found
    return edits.insert_after(mapper, remap, edits.stmts(
        "if self.fp8_layers:\n"
        "    self.fp8_layers = set(hf_to_vllm_mapper.apply_list(sorted(self.fp8_layers)))"))


def fp8_first(defn, found, ctx):
    """Each not-quantized branch first returns ``Fp8LinearMethod`` for an FP8 layer."""
    return edits.replace_each(defn, found, lambda branch: edits.prepend_to_block(branch, edits.stmts(FP8_RETURN)))


def add_hooks(config, found, ctx):
    """Append ``maybe_update_config`` (base signature), ``_is_layer_fp8``, ``_fp8_linear_method``."""
    base = ctx.lookup(*BASE_HOOK)
    if not isinstance(base, cst.FunctionDef):
        raise ValueError(f"{BASE_HOOK[0]} not found: cannot copy its signature")
    names = {p.name.value for p in (*base.params.params, *base.params.kwonly_params)}
    code = HOOKS.format(params=edits.signature_text(base.params),
                        revision="revision" if "revision" in names else "None")
    return edits.append_members(config, edits.stmts(code))


SHARED = "model.layers.0.mlp.shared_expert"
ROUTER = "model.layers.0.mlp.gate"


def _checkpoint(folder):
    """A synthetic hybrid checkpoint in ``folder``: the shared expert's three projections
    block-FP8 (``float8_e4m3fn`` weights, float32 ``weight_scale_inv`` per 128x128 block),
    the router bf16; the auto-round ``quantization_config`` keeps both at 16 bits in
    ``extra_config``, as the real INT4 checkpoint does. Returns that config."""
    import torch
    from safetensors.torch import save_file

    fp8 = torch.float8_e4m3fn
    tensors = {
        f"{SHARED}.gate_proj.weight": torch.zeros(256, 128, dtype=fp8),
        f"{SHARED}.gate_proj.weight_scale_inv": torch.ones(2, 1),
        f"{SHARED}.up_proj.weight": torch.zeros(256, 128, dtype=fp8),
        f"{SHARED}.up_proj.weight_scale_inv": torch.ones(2, 1),
        f"{SHARED}.down_proj.weight": torch.zeros(128, 256, dtype=fp8),
        f"{SHARED}.down_proj.weight_scale_inv": torch.ones(1, 2),
        f"{ROUTER}.weight": torch.zeros(8, 128, dtype=torch.bfloat16),
    }
    save_file(tensors, f"{folder}/model-00001-of-00001.safetensors")
    sixteen = {"bits": 16, "data_type": "float"}
    return {"bits": 4, "group_size": 128, "sym": True, "packing_format": "auto_round:auto_gptq",
            "extra_config": {f"{SHARED}.{p}": sixteen for p in ("gate_proj", "up_proj", "down_proj")}
            | {ROUTER: sixteen}}


@case(pristine="fails")
def fp8_shared_expert():
    """INCConfig sends the checkpoint's block-FP8 shared expert to Fp8LinearMethod, a bf16 16-bit layer elsewhere.

    ``maybe_update_config`` (the patch's hook, the base class's signature) reads the
    synthetic checkpoint's safetensors headers; ``get_quant_method`` of a linear layer at
    the shared expert's ``down_proj`` (exact name) and fused ``gate_up_proj`` (its shards,
    through ``packed_modules_mapping``) must give ``Fp8LinearMethod`` with the checkpoint's
    128x128 blocks, the router ``UnquantizedLinearMethod``. ``Fp8LinearMethod`` and the
    kernels it picks read the serving config (``get_current_vllm_config()``): a
    ``VllmConfig`` on the CPU device, whose ``model_config`` (no model: a namespace)
    says bf16, is current for the call.
    """
    import tempfile
    from types import SimpleNamespace

    import torch
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.linear import LinearBase
    from vllm.model_executor.layers.quantization.inc import INCConfig

    with tempfile.TemporaryDirectory(prefix="patchq-inc-case-") as folder:
        config = INCConfig.from_config(_checkpoint(folder))
        config.packed_modules_mapping = {"gate_up_proj": ["gate_proj", "up_proj"]}
        config.maybe_update_config(folder)
    assert config.fp8_layers == {f"{SHARED}.{p}" for p in ("gate_proj", "up_proj", "down_proj")}, config.fp8_layers
    layer = LinearBase.__new__(LinearBase)
    torch.nn.Module.__init__(layer)
    # Fp8LinearMethod and the kernels it picks read the serving config: one on CPU, bf16
    vllm_config = VllmConfig(device_config=DeviceConfig(device="cpu"))
    object.__setattr__(vllm_config, "model_config", SimpleNamespace(dtype=torch.bfloat16))
    with set_current_vllm_config(vllm_config):
        chosen = {prefix: config.get_quant_method(layer, prefix)
                  for prefix in (f"{SHARED}.down_proj", f"{SHARED}.gate_up_proj", ROUTER)}
    names = {p: type(m).__name__ for p, m in chosen.items()}
    assert names[f"{SHARED}.down_proj"] == names[f"{SHARED}.gate_up_proj"] == "Fp8LinearMethod", names
    assert names[ROUTER] == "UnquantizedLinearMethod", names
    block = list(chosen[f"{SHARED}.down_proj"].quant_config.weight_block_size)
    assert block == [128, 128], block
    return {"methods": names, "weight_block_size": block}


PATCH = patch(
    id="inc-hybrid-fp8",
    summary="INCConfig dispatches block-FP8 shared experts of a hybrid INT4 checkpoint to Fp8LinearMethod",
    why="""A hybrid auto-round checkpoint stores the shared experts as block-FP8 to cut the
    always-on weight read; stock INCConfig treats every not-quantized layer as bf16 and
    sends it to UnquantizedLinearMethod, which cannot load FP8 weights.""",
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.24", edits={
            "init-fields": add_fields,
            "mapper": remap_fp8_layers,
            "bits16-override": fp8_first,
            "unquantized-branches": fp8_first,
            "class-hooks": add_hooks,
        }, note="quantization/inc.py with per-backend apply_*_quant_layer methods"),
        variant(">=0.24", edits={
            "init-fields-pkg": add_fields,
            "mapper-pkg": remap_fp8_layers,
            "bits16-override-pkg": fp8_first,
            "not-quantized": fp8_first,
            "class-hooks-pkg": add_hooks,
        }, note="quantization/inc/ package: one not-quantized branch after config_parser.resolve"),
    ],
    cases=[fp8_shared_expert],
)
