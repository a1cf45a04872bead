"""page-scale: an insertion after an anchored statement of a function."""

from patchq import edits
from patchq.series import patch, variant

PAD_AFTER_SCALE = """
if new_spec.page_size_bytes != max_page_size:
    # patchq page-scale: keep the scaled block size, pad the rest of the page
    new_spec = replace(layer_spec, block_size=new_block_size, page_size_padded=max_page_size)
"""


def pad_after_scale(unify, found, ctx):
    """Insert the padded rebuild right after ``new_spec = replace(..., block_size=...)``."""
    (scaled,) = found
    return edits.insert_after(unify, scaled, edits.stmts(PAD_AFTER_SCALE))


PATCH = patch(
    id="page-scale",
    summary="KV-cache unify keeps the scaled block size and pads the page",
    why="""A stand-in for an insertion patch in a long function that upstream re-indents
    and moves between releases.""",
    upstream=["https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/v1/core/kv_cache_utils.py"],
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.24", edits={"scaled-replace": pad_after_scale}),
    ],
)
