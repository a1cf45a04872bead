"""prime-qwen3-coder-newline-trim: prime-rl's ``monkey_patch_qwen3_coder_param_newline_trim``, ported.

prime-rl replaces ``vllm.parser.qwen3._qwen3_arg_converter`` with a copy whose two
``value.strip()`` become ``_trim_one_newline(value)`` (one leading and one trailing newline, as
vLLM 0.23's Qwen3CoderToolParser did). Ported as a diff on vLLM 0.24.0: the helper at module
level and the two statements (src/prime_rl/inference/patches.py @ 7a7dd802, which pins vLLM 0.24.0).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'qwen3-arg-converter': [
        {
            'op': 'replace',
            'old': """\
params[name] = value.strip()
""",
            'new': """\
params[name] = _trim_one_newline(value)
""",
            'after': """\
value = match.group(2)
""",
            'before': None,
        },
        {
            'op': 'replace',
            'old': """\
params[name] = value.strip()
""",
            'new': """\
params[name] = _trim_one_newline(value)
""",
            'after': None,
            'before': None,
        },
    ],
    'module-qwen3': [
        {
            'op': 'insert',
            'new': '\n\ndef _trim_one_newline(value: str) -> str:\n    if value.startswith("\\n"):\n        value = value[1:]\n    if value.endswith("\\n"):\n        value = value[:-1]\n    return value\n',
            'after': '_PARTIAL_PARAM_RE = re.compile(r"<\\s*parameter\\s*=\\s*([^>]+)>(.*)$", re.DOTALL)\n',
            'before': """\
def _qwen3_arg_converter(raw_args: str, partial: bool) -> str:
    ...
""",
        },
    ],
}

PATCH = patch(
    id='prime-qwen3-coder-newline-trim',
    summary='qwen3_coder tool parameters lose one surrounding newline, not all whitespace',
    why='A full strip corrupts whitespace-significant string parameters (str_replace old_str/new_str, file content).',
    upstream=['https://github.com/PrimeIntellect-ai/prime-rl/blob/7a7dd8029128321e780487fdd2333ef62c62af2e/src/prime_rl/inference/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
