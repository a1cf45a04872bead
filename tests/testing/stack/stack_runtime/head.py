"""What ``head-gemv``'s patched code calls: the stock lm-head call."""


def head_logits(lm_head, hidden_states, embedding_bias):
    return lm_head.quant_method.apply(lm_head, hidden_states, bias=embedding_bias)
