"""fp8-experts: five edits of one class, methods appended with a signature copied from the
base class (``ctx.lookup``), and code that imports ``stack_runtime.fp8`` at run time."""

import libcst as cst

from patchq import edits
from patchq.series import patch, variant

FP8_RETURN = """
if self.fp8_config is not None and isinstance(layer, LinearBase) and self._is_layer_fp8(prefix):
    return self._fp8_linear_method()  # patchq fp8-experts
"""

HOOKS = '''
def maybe_update_config({params}):
    """patchq fp8-experts: find the checkpoint's FP8 layers."""
    from stack_runtime.fp8 import detect_fp8_layers

    self.fp8_config, self.fp8_layers = detect_fp8_layers(model_name, revision={revision})

def _is_layer_fp8(self, prefix):
    from stack_runtime.fp8 import is_layer_fp8

    return is_layer_fp8(prefix, self.fp8_layers, getattr(self, "packed_modules_mapping", {{}}))

def _fp8_linear_method(self):
    from stack_runtime.fp8 import fp8_linear_method

    return fp8_linear_method(self.fp8_config)
'''

BASE_HOOK = ("QuantizationConfig.maybe_update_config", "vllm.model_executor.layers.quantization.base_config")


def add_fields(init, found, ctx):
    """``self.fp8_config = None`` and ``self.fp8_layers = set()`` after ``self.pack_factor = ...``."""
    (line,) = found
    return edits.insert_after(init, line, edits.stmts(
        "self.fp8_config = None  # patchq fp8-experts\nself.fp8_layers: set[str] = set()"))


def remap_fp8_layers(mapper, found, ctx):
    """Map ``fp8_layers`` from HF to vLLM names with the same mapper as ``extra_config``."""
    (remap,) = found
    return edits.insert_after(mapper, remap, edits.stmts(
        "if self.fp8_layers:\n"
        "    self.fp8_layers = set(hf_to_vllm_mapper.apply_list(sorted(self.fp8_layers)))"))


def fp8_first(defn, found, ctx):
    """Each not-quantized branch first returns the FP8 method for an FP8 layer."""
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
    id="fp8-experts",
    summary="INCConfig sends FP8 layers to an FP8 linear method",
    why="""A stand-in for a patch of many edits in one class, whose inserted code imports a
    package of the series' own at run time.""",
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
