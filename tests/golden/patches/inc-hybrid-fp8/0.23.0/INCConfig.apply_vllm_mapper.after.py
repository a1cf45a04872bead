def apply_vllm_mapper(self, hf_to_vllm_mapper: "WeightsMapper"):
    if self.block_name_to_quantize is not None:
        self.block_name_to_quantize = hf_to_vllm_mapper.apply_list(
            self.block_name_to_quantize
        )
    if self.extra_config is not None:
        self.extra_config = hf_to_vllm_mapper.apply_dict(self.extra_config)
    if self.fp8_layers:
        self.fp8_layers = set(hf_to_vllm_mapper.apply_list(sorted(self.fp8_layers)))
