"""unify-kv-page: scale the drafter's KV block AND pad the rest of the page.

``unify_kv_cache_spec_page_size`` (``vllm/v1/core/kv_cache_utils.py``) scales the block
size of layers whose page is smaller than the largest one, then asserts the pages are
equal. With a hybrid target the largest page is a *padded* mamba page, which is not a
multiple of the drafter's attention page, so the assert fails. The fix keeps the scaled
block size and pads the remainder, as vLLM already does for hidden-state specs. Padding
without scaling (a known wrong fix) mis-strides the drafter's KV and collapses
speculative acceptance (~1.5 accepted tokens instead of ~8): never regress to it.
"""

from patchq import edits
from patchq.series import patch, variant

PAD_AFTER_SCALE = """
if new_spec.page_size_bytes != max_page_size:
    # patchq unify-kv-page: keep the scaled block size, pad the rest of the page
    new_spec = replace(layer_spec, block_size=new_block_size, page_size_padded=max_page_size)
"""


def pad_after_scale(unify, found, ctx):
    """Insert the padded rebuild right after ``new_spec = replace(..., block_size=...)``."""
    (scaled,) = found
    return edits.insert_after(unify, scaled, edits.stmts(PAD_AFTER_SCALE))


PATCH = patch(
    id="unify-kv-page",
    summary="KV-cache unify keeps the scaled block size and pads the page (drafter on a hybrid target)",
    why="""With a hybrid GDN + mamba + attention target the largest KV page is a padded mamba
    page; the speculative drafter's attention page is scaled up by an integer ratio that
    cannot reach it, and unify_kv_cache_spec_page_size asserts. Keep the scaled block size
    and pad the remainder with page_size_padded (as for hidden-state specs).""",
    upstream=["https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/v1/core/kv_cache_utils.py"],
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.24", edits={"scaled-replace": pad_after_scale}),
    ],
)
