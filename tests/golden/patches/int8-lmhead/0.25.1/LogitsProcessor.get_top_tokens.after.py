def get_top_tokens(
    self,
    lm_head: VocabParallelEmbedding,
    hidden_states: torch.Tensor,
    embedding_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Vocab-parallel argmax without all-gathering full logits.

    Each TP rank computes local argmax, then only the (value, index) pairs
    are gathered and reduced. Communication: O(batch * 2 * tp_size) vs
    O(batch * vocab_size).
    """
    if self.scale <= 0.0 and self.scale != 1.0:
        raise ValueError(
            "The local argmax reduction optimization is not supported for "
            "non-positive logit scaling factors."
        )
    tp_size = get_tensor_model_parallel_world_size()

    from patchq_runtime.int8_lmhead import lm_head_logits as _patchq_lm_head_logits
    logits = _patchq_lm_head_logits(lm_head, hidden_states, embedding_bias)
    if self.soft_cap is not None:
        logits = torch.tanh(logits / self.soft_cap) * self.soft_cap
    if self.scale != 1.0:
        logits = logits * self.scale

    # Mask out padding entries beyond org_vocab_size on this shard.
    num_pad = lm_head.shard_indices.num_org_vocab_padding
    if num_pad > 0:
        logits[..., -num_pad:] = -float("inf")

    local_max_vals, local_max_indices = logits.max(dim=-1)

    # Convert shard-local indices to global vocab indices.
    vocab_start = lm_head.shard_indices.org_vocab_start_index
    global_indices = local_max_indices + vocab_start

    if tp_size == 1:
        return global_indices

    # All-gather (value, index) pairs, then reduce to global argmax.
    # Use float32 to avoid bf16 precision loss on large vocab indices.
    local_pair = torch.stack(
        [local_max_vals.float(), global_indices.float()], dim=-1
    )
    # [batch, 2] -> [batch, 2 * tp_size]
    gathered = tensor_model_parallel_all_gather(local_pair, dim=-1)
    # [batch, tp_size, 2] where [:, :, 0]=values, [:, :, 1]=indices
    gathered = gathered.view(hidden_states.shape[0], tp_size, 2)
    max_rank_idx = gathered[:, :, 0].argmax(dim=-1, keepdim=True)
    top_tokens = gathered[:, :, 1].gather(dim=-1, index=max_rank_idx)
    return top_tokens.squeeze(-1).to(torch.int64)
