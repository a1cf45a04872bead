"""example-quiet-logger: an example patch (written by ``patchq init``); replace it.

vLLM's ``init_logger`` (``vllm/logger.py``) returns a logger for every module. This patch
inserts two statements right after ``logger = logging.getLogger(name)``: a logger named
``vllm.example.quiet`` is disabled. No vLLM module has that name, so it changes nothing;
it shows the shape of a patch: an anchor (``anchors/example-quiet-logger.toml``: module
hint, qualname, statement pattern), a transform written with :mod:`patchq.edits`, and a
variant keyed by a vLLM version range.
"""

from patchq import edits
from patchq.series import patch, variant

QUIET = """
if name == "vllm.example.quiet":  # example-quiet-logger
    logger.disabled = True
"""


def quiet_after_get_logger(init_logger, found, ctx):
    """Insert QUIET right after ``logger = logging.getLogger(name)``."""
    (get_logger,) = found
    return edits.insert_after(init_logger, get_logger, edits.stmts(QUIET))


PATCH = patch(
    id="example-quiet-logger",
    summary="example: disable the logger named vllm.example.quiet",
    why="""An example of a patch, written by patchq init. Replace it with your own.""",
    applies=">=0.15",
    variants=[
        variant(">=0.15", edits={"get-logger": quiet_after_get_logger}),
    ],
)
