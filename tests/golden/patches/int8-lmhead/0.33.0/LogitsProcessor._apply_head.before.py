def _apply_head(
    self,
    lm_head: VocabParallelEmbedding,
    hidden_states: torch.Tensor,
    embedding_bias: torch.Tensor | None,
) -> torch.Tensor:
    """Project hidden states through the lm_head, honoring head_dtype."""
    if self.head_dtype is None or self.head_dtype == hidden_states.dtype:
        return lm_head.quant_method.apply(
            lm_head, hidden_states, bias=embedding_bias
        )

    # A quant config that excludes lm_head hands out UnquantizedLinearMethod
    # rather than UnquantizedEmbeddingMethod, so accept both: either way the
    # weight is plain and `lm_head.weight` can be cast directly.
    if not isinstance(
        lm_head.quant_method, (UnquantizedEmbeddingMethod, UnquantizedLinearMethod)
    ):
        raise ValueError(
            "A head_dtype different from the model dtype is only "
            "supported for an unquantized lm_head."
        )
    if (
        self.head_dtype == torch.float32
        and (current_platform.is_cuda() or current_platform.is_rocm())
        and hidden_states.is_cuda
    ):
        # Accumulate the projection directly into fp32. This avoids
        # materializing an fp32 copy of the lm_head weight on every step,
        # unlike casting both operands. `torch.mm(out_dtype=...)` only
        # supports fp32 output for fp16/bf16 inputs, and is only
        # implemented for CUDA and ROCm (the latter via the non-Lt GEMM
        # path); other platforms fall back to the cast path below.
        flat = hidden_states.reshape(-1, hidden_states.shape[-1])
        logits = torch.mm(flat, lm_head.weight.t(), out_dtype=self.head_dtype)
        if embedding_bias is not None:
            logits = logits + embedding_bias.to(self.head_dtype)
        return logits.reshape(*hidden_states.shape[:-1], -1)
    return F.linear(
        hidden_states.to(self.head_dtype),
        lm_head.weight.to(self.head_dtype),
        embedding_bias.to(self.head_dtype) if embedding_bias is not None else None,
    )
