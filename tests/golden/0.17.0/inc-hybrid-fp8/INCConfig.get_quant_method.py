# patchq:inc-hybrid-fp8:<hash> (applied by patchq; `patchq status` explains)
def get_quant_method(self, layer: torch.nn.Module, prefix: str):
    if prefix and self.extra_config:
        for layer_name in self.extra_config:
            if (
                layer_name == prefix or layer_name == f"model.{prefix}"
            ) and self.extra_config[layer_name].get("bits", 16) >= 16:
                if self.fp8_config is not None and isinstance(layer, LinearBase) and self._is_layer_fp8(prefix):
                    return self._fp8_linear_method()  # patchq inc-hybrid-fp8
                return UnquantizedLinearMethod()
    if (
        current_platform.is_cpu()
        or current_platform.is_xpu()
        or self.backend == "ipex"
    ):
        return self.apply_ipex_quant_layer(layer, prefix)
    if "gptq" in self.packing_format or "gptq" in self.backend:
        return self.apply_gptq_quant_layer(layer, prefix)
    if "awq" in self.packing_format or "awq" in self.backend:
        return self.apply_awq_quant_layer(layer, prefix)
