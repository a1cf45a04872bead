"""prime-tokenize-max-model-len: prime-rl's ``monkey_patch_tokenize_params_validation``, ported.

Three replaced ``TokenizeParams`` methods: ``_token_len_check`` and ``_text_len_check`` reject a
prompt only beyond ``max_total_tokens`` (max_model_len), not ``max_model_len - max_tokens``, and
``get_encode_kwargs`` truncates at ``max_total_tokens + 1``. Ported as a diff on vLLM 0.24.0: the
two checks' bodies, and get_encode_kwargs's two statements (prime-rl's copy predates 0.24.0's
``truncation_side`` branch, which the port keeps) (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'tokenizeparams-get-encode-kwargs': [
        {
            'op': 'replace',
            'old': """\
if max_length is not None and max_length < 0:
    max_length = self.max_input_tokens
elif max_length is None and self.max_input_tokens is not None:
    # This prevents tokenization from taking up more resources than necessary
    # while still failing `self._token_len_check` as expected by users
    max_length = self.max_input_tokens + 1
""",
            'new': """\
if max_length is not None and max_length < 0:
    max_length = self.max_total_tokens
elif max_length is None and self.max_total_tokens is not None:
    # This prevents tokenization from taking up more resources than necessary
    # while still failing `self._token_len_check` as expected by users
    max_length = self.max_total_tokens + 1
""",
            'after': """\
max_length = self.truncate_prompt_tokens
""",
            'before': """\
if self.truncation_side is not None and self.truncate_prompt_tokens is not None:
    ...
""",
        },
    ],
    'tokenizeparams-text-len-check': [
        {
            'op': 'replace',
            'old': '"""Apply length checks to prompt text if necessary."""\nmax_input_tokens = self.max_input_tokens\nif max_input_tokens is None:\n    return text\n\nif self.truncate_prompt_tokens is None and tokenizer is not None:\n    max_input_chars = max_input_tokens * tokenizer.max_chars_per_token\n\n    if len(text) > max_input_chars:\n        # To save resources, fail the request outright without even\n        # attempting tokenization\n        raise VLLMValidationError(\n            f"This model\'s maximum context length is "\n            f"{self.max_total_tokens} tokens. However, you requested "\n            f"{self.max_output_tokens} output tokens and your prompt "\n            f"contains {len(text)} characters (more than "\n            f"{max_input_chars} characters, which is the upper bound "\n            f"for {max_input_tokens} input tokens). "\n            f"Please reduce the length of the input prompt or the "\n            f"number of requested output tokens.",\n            parameter="input_text",\n            value=len(text),\n        )\n\nreturn text\n',
            'new': '"""Only validate text length against max_model_len, not max_input_tokens"""\nif self.max_total_tokens is None or tokenizer is None:\n    return text\n\nif self.truncate_prompt_tokens is None:\n    max_chars = self.max_total_tokens * tokenizer.max_chars_per_token\n    if len(text) > max_chars:\n        raise VLLMValidationError(\n            f"You passed {len(text)} input characters. "\n            f"However, the model\'s context length is only "\n            f"{self.max_total_tokens} tokens "\n            f"(at most {max_chars} characters). "\n            f"Please reduce the length of the input prompt.",\n            parameter="input_text",\n            value=len(text),\n        )\nreturn text\n',
            'after': None,
            'before': None,
        },
    ],
    'tokenizeparams-token-len-check': [
        {
            'op': 'replace',
            'old': '"""Apply length checks to prompt tokens if necessary."""\nmax_input_tokens = self.max_input_tokens\nif max_input_tokens is None:\n    return tokens\n\nif len(tokens) > max_input_tokens:\n    token_count = len(tokens)\n    # The tokenizer may have truncated the prompt to\n    # max_input_tokens + 1 (see get_encode_kwargs), so the\n    # actual prompt length could be larger.\n    qualifier = "at least " if token_count == max_input_tokens + 1 else ""\n    total = token_count + self.max_output_tokens\n    raise VLLMValidationError(\n        f"This model\'s maximum context length is "\n        f"{self.max_total_tokens} tokens. However, you requested "\n        f"{self.max_output_tokens} output tokens and your prompt "\n        f"contains {qualifier}{token_count} input tokens, "\n        f"for a total of {qualifier}{total} tokens. "\n        f"Please reduce the length of the input prompt or the "\n        f"number of requested output tokens.",\n        parameter="input_tokens",\n        value=token_count,\n    )\n\nreturn tokens\n',
            'new': '"""Only validate that prompt fits in max_model_len, not prompt+max_tokens"""\nif self.max_total_tokens is not None and len(tokens) > self.max_total_tokens:\n    raise VLLMValidationError(\n        f"The prompt is {len(tokens)} tokens, which exceeds the "\n        f"model\'s maximum context length of {self.max_total_tokens} tokens. "\n        f"Please reduce the length of the input prompt.",\n        parameter="input_tokens",\n        value=len(tokens),\n    )\nreturn tokens\n',
            'after': None,
            'before': None,
        },
    ],
}

PATCH = patch(
    id='prime-tokenize-max-model-len',
    summary='Prompts are validated against max_model_len, not max_model_len - max_tokens',
    why='Let the engine cap generation at max_model_len instead of rejecting long prompts.',
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
