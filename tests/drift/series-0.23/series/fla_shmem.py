"""fla-shmem: let the FLA (Gated DeltaNet) Triton kernels pick big tiles on GB10 (sm121).

``Backend.DEFAULT`` (``vllm/model_executor/layers/fla/ops/utils.py``) is the shared
memory per block that the kernels require before they pick big tiles; GB10 reports
101376 bytes, just under 102400, although the same big tiles already run on Ada parts
with 101376 bytes. ``cumsum.py`` and ``chunk_o.py`` read it at import time, so the patch
must be on disk (or in the import hook) before those modules are imported.
"""

from patchq import edits
from patchq.series import patch, variant

GB10_SHARED_MEMORY = 101376  # bytes per block, as reported by sm121 (= Backend.ADA)


def lower_default(backend, found, ctx):
    """``DEFAULT = 102400`` -> ``DEFAULT = 101376`` inside ``class Backend``."""
    (line,) = found
    return edits.replace(backend, line, edits.stmts(
        f"DEFAULT = {GB10_SHARED_MEMORY}  # patchq fla-shmem: GB10 (sm121) reports 101376"))


PATCH = patch(
    id="fla-shmem",
    summary="FLA GDN kernels use big tiles on sm121's 101376-byte shared memory",
    why="""GB10 (sm121) reports 101376 bytes of shared memory per block, just under
    Backend.DEFAULT (102400), so the Gated DeltaNet chunk kernels fall back to small
    tiles; Ada parts run the big tiles with the same 101376 bytes. Prefill speed only.""",
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.26", edits={"default-shmem": lower_default}),
    ],
)
