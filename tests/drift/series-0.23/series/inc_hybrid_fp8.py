"""inc-hybrid-fp8: serve block-FP8 shared experts inside an INT4 auto-round checkpoint.

A hybrid checkpoint keeps the INT4 (AutoRound/GPTQ) routed experts and attention, but
stores the shared experts as block-FP8 (``float8_e4m3fn`` weights with a
``.weight_scale_inv`` sibling). vLLM's ``INCConfig``
(``vllm/model_executor/layers/quantization/inc.py``) sends every not-quantized layer to
``UnquantizedLinearMethod``. The patch gives ``INCConfig`` an ``fp8_config`` found from
the checkpoint's safetensors metadata (``maybe_update_config``, signature copied from the
installed base class) and routes FP8 layers to ``Fp8LinearMethod``. The logic lives in
:mod:`patchq_runtime.inc_hybrid`; what is inserted into vLLM only calls it. Inert when
the checkpoint has no FP8 layers.
"""

import libcst as cst

from patchq import edits
from patchq.series import patch, variant

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


PATCH = patch(
    id="inc-hybrid-fp8",
    summary="INCConfig dispatches block-FP8 shared experts of a hybrid INT4 checkpoint to Fp8LinearMethod",
    why="""A hybrid auto-round checkpoint stores the shared experts as block-FP8 to cut the
    always-on weight read; stock INCConfig treats every not-quantized layer as bf16 and
    sends it to UnquantizedLinearMethod, which cannot load FP8 weights.""",
    applies=">=0.15",
    variants=[
        variant(">=0.20.2,<0.24", edits={
            "init-fields": add_fields,
            "mapper": remap_fp8_layers,
            "bits16-override": fp8_first,
            "unquantized-branches": fp8_first,
            "class-hooks": add_hooks,
        }),
    ],
)
