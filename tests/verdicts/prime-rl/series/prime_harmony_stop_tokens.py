"""prime-harmony-stop-tokens: prime-rl's ``monkey_patch_harmony_stop_token_propagation``, ported.

A wrapper of ``ChatCompletionRequest.to_sampling_params`` that post-processes the original's
result: the server-default ``stop_token_ids`` (harmony's ``<|call|>``/``<|return|>``) are merged
into the request's SamplingParams (vllm issue 22519). Ported by hand as a diff on vLLM 0.24.0
(the returned SamplingParams bound to ``params``, merged, returned): ``import --replacement`` of
the wrapper wrote a call to the saved original instead (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'chatcompletionrequest-to-sampling-params': [
        {
            'op': 'replace',
            'old': """\
return SamplingParams.from_optional(
    n=self.n,
    presence_penalty=self.presence_penalty,
    frequency_penalty=self.frequency_penalty,
    repetition_penalty=repetition_penalty,
    temperature=temperature,
    top_p=top_p,
    top_k=top_k,
    min_p=min_p,
    seed=self.seed,
    stop=self.stop,
    stop_token_ids=self.stop_token_ids,
    logprobs=self.top_logprobs if self.logprobs else None,
    prompt_logprobs=prompt_logprobs,
    ignore_eos=self.ignore_eos,
    max_tokens=max_tokens,
    min_tokens=self.min_tokens,
    skip_special_tokens=self.skip_special_tokens,
    spaces_between_special_tokens=self.spaces_between_special_tokens,
    include_stop_str_in_output=self.include_stop_str_in_output,
    output_kind=RequestOutputKind.DELTA
    if self.stream
    else RequestOutputKind.FINAL_ONLY,
    structured_outputs=self.structured_outputs,
    logit_bias=self.logit_bias,
    bad_words=self.bad_words,
    thinking_token_budget=self.thinking_token_budget,
    allowed_token_ids=self.allowed_token_ids,
    extra_args=extra_args or None,
    skip_clone=True,  # Created fresh per request, safe to skip clone
    repetition_detection=self.repetition_detection,
)
""",
            'new': """\
params = SamplingParams.from_optional(
    n=self.n,
    presence_penalty=self.presence_penalty,
    frequency_penalty=self.frequency_penalty,
    repetition_penalty=repetition_penalty,
    temperature=temperature,
    top_p=top_p,
    top_k=top_k,
    min_p=min_p,
    seed=self.seed,
    stop=self.stop,
    stop_token_ids=self.stop_token_ids,
    logprobs=self.top_logprobs if self.logprobs else None,
    prompt_logprobs=prompt_logprobs,
    ignore_eos=self.ignore_eos,
    max_tokens=max_tokens,
    min_tokens=self.min_tokens,
    skip_special_tokens=self.skip_special_tokens,
    spaces_between_special_tokens=self.spaces_between_special_tokens,
    include_stop_str_in_output=self.include_stop_str_in_output,
    output_kind=RequestOutputKind.DELTA
    if self.stream
    else RequestOutputKind.FINAL_ONLY,
    structured_outputs=self.structured_outputs,
    logit_bias=self.logit_bias,
    bad_words=self.bad_words,
    thinking_token_budget=self.thinking_token_budget,
    allowed_token_ids=self.allowed_token_ids,
    extra_args=extra_args or None,
    skip_clone=True,  # Created fresh per request, safe to skip clone
    repetition_detection=self.repetition_detection,
)
# Merge harmony stop tokens from default_sampling_params
default_stop_ids = default_sampling_params.get("stop_token_ids", [])
if default_stop_ids:
    existing = set(params.stop_token_ids or [])
    merged = list(existing | set(default_stop_ids))
    params.stop_token_ids = merged
return params
""",
            'after': """\
if self.kv_transfer_params:
    ...
""",
            'before': None,
        },
    ],
}

PATCH = patch(
    id='prime-harmony-stop-tokens',
    summary='Chat requests keep the server-default (harmony) stop token ids',
    why="to_sampling_params ignores default_sampling_params['stop_token_ids']: gpt-oss never stops at <|call|>.",
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
