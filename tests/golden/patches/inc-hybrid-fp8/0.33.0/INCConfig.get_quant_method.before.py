def get_quant_method(self, layer: torch.nn.Module, prefix: str):
    from .schemes.factory import resolve_scheme

    if prefix and self.extra_config:
        for layer_name in self.extra_config:
            if (
                layer_name == prefix or layer_name == f"model.{prefix}"
            ) and self.extra_config[layer_name].get("bits", 16) >= 16:
                if isinstance(layer, (LinearBase, ParallelLMHead)):
                    return UnquantizedLinearMethod()
                if isinstance(layer, RoutedExperts):
                    return UnquantizedFusedMoEMethod(layer.moe_config)
                return None

    layer_config = self.config_parser.resolve(layer, prefix)
    if not layer_config.quantized:
        if isinstance(layer, (LinearBase, ParallelLMHead)):
            return UnquantizedLinearMethod()
        if isinstance(layer, RoutedExperts):
            return UnquantizedFusedMoEMethod(layer.moe_config)
        return None

    logger.debug(
        "[%s] Type: %s, Bits: %s, Group Size: %s, Sym: %s",
        prefix,
        layer.__class__.__name__,
        layer_config.bits,
        layer_config.group_size,
        layer_config.sym,
    )

    scheme = resolve_scheme(layer_config)
    if isinstance(layer, (LinearBase, ParallelLMHead)):
        return scheme.get_linear_method(self, layer, prefix, layer_config)
    if isinstance(layer, RoutedExperts):
        return scheme.get_moe_method(self, layer, prefix, layer_config)
    return None
