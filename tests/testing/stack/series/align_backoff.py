"""align-backoff: an ``if`` test replaced by a libcst expression (same file as page-scale),
with an upstream check of its own, an ``absent`` variant before the function exists and an
``upstreamed`` one from the release that made the change itself."""

import ast

import libcst as cst

from patchq import edits, postcheck
from patchq.series import patch, variant

ALIGN_GUARD = 'getattr(cache_config, "mamba_cache_mode", "none") != "align"'


def guard_align(resolve, found, ctx):
    """``if any(...)`` -> ``if <not align> and any(...)`` on the back-off branch."""
    (backoff,) = found
    new_test = cst.BooleanOperation(
        left=edits.expr(ALIGN_GUARD), operator=cst.And(), right=backoff.test)
    return edits.replace(resolve, backoff.test, new_test)


def upstream_check(source):
    """A reason when the release's back-off compares the spec's ``mamba_cache_mode`` itself
    (0.28.0), else None."""
    found = postcheck.definition(source, "resolve_kv_cache_block_sizes", "vllm.v1.core.kv_cache_utils")
    if found is None or found.patched_by("align-backoff"):
        return None
    for node in ast.walk(found.node):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) \
                and node.left.attr == "mamba_cache_mode":
            return f"resolve_kv_cache_block_sizes ({found.where}) compares mamba_cache_mode itself"
    return None


PATCH = patch(
    id="align-backoff",
    summary="The hash block size back-off only for non-align mamba",
    why="""A stand-in for a patch that upstream later makes itself (0.28.0).""",
    upstream=["https://github.com/vllm-project/vllm/blob/v0.28.0/vllm/v1/core/kv_cache_utils.py"],
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.20", absent="resolve_kv_cache_block_sizes does not exist before vLLM 0.20.0"),
        variant(">=0.20,<0.24", edits={"mamba-backoff": guard_align}),
        variant(">=0.28", upstreamed="vLLM 0.28.0 backs off only for non-align mamba itself"),
    ],
    upstream_check=upstream_check,
)
