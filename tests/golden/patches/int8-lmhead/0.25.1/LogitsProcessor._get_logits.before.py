def _get_logits(
    self,
    hidden_states: torch.Tensor,
    lm_head: VocabParallelEmbedding,
    embedding_bias: torch.Tensor | None,
) -> torch.Tensor | None:
    # Get the logits for the next tokens.
    logits = lm_head.quant_method.apply(lm_head, hidden_states, bias=embedding_bias)

    # Gather logits for TP
    logits = self._gather_logits(logits)

    # Remove paddings in vocab (if any).
    if logits is not None:
        logits = logits[..., : self.org_vocab_size]
    return logits
