"""nemo-namespace-tool-import: NeMo-RL's ``_patch_vllm_tool_parser_namespace_tool``, ported.

``vllm/tool_parsers/utils.py`` imports ``openai.types.responses.NamespaceTool`` (openai >=
2.25) at module level; nemo-gym pins an older openai. The import becomes a
``try``/``except ImportError`` with a never-matching stub class. Module-level text rewrite
on vLLM 0.25.1 (nemo_rl/models/generation/vllm/patches.py @ 7ea279ab).
"""

from patchq.series import patch, variant
from patchq.statements import statement_edit

OPS = {
    'module-utils': [
        {
            'op': 'replace',
            'old': """\
from openai.types.responses import (
    FunctionTool,
    NamespaceTool,
    ToolChoiceFunction,
)
from openai.types.responses.tool import Tool as ResponsesTool
""",
            'new': 'from openai.types.responses import (\n    FunctionTool,\n    ToolChoiceFunction,\n)\n\ntry:\n    from openai.types.responses import NamespaceTool\nexcept ImportError:  # openai < 2.25.0 predates namespace tools\n\n    class NamespaceTool:  # type: ignore[no-redef]\n        """Stub: openai<2.25 clients cannot construct namespace tools."""\n\nfrom openai.types.responses.tool import Tool as ResponsesTool\n',
            'after': """\
import partial_json_parser
""",
            'before': """\
from partial_json_parser.core.options import Allow
""",
        },
    ],
}

PATCH = patch(
    id='nemo-namespace-tool-import',
    summary='tool_parsers/utils.py imports NamespaceTool only when openai has it',
    why='nemo-gym pins openai<=2.7.2, which predates NamespaceTool; vLLM would fail to import.',
    upstream=['https://github.com/NVIDIA-NeMo/RL/blob/7ea279abfbeb698b092856d0dab61e7cf39bc909/nemo_rl/models/generation/vllm/patches.py'],
    applies='>=0.15',
    variants=[
        variant('>=0.15', edits={anchor: statement_edit(ops) for anchor, ops in OPS.items()}),
    ],
)
