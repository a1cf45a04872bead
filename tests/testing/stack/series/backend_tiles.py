"""backend-tiles: ``Backend.DEFAULT`` lowered to 101376 (a class attribute replaced), with an
upstream check of its own."""

import ast

from patchq import edits, postcheck
from patchq.series import patch, variant

TILES = 101376


def lower_default(backend, found, ctx):
    """``DEFAULT = 102400`` -> ``DEFAULT = 101376`` inside ``class Backend``."""
    (line,) = found
    return edits.replace(backend, line, edits.stmts(f"DEFAULT = {TILES}  # patchq backend-tiles"))


def upstream_check(source):
    """A reason when the release's ``Backend.DEFAULT`` is 101376 already, else None."""
    found = postcheck.definition(source, "Backend", "vllm.model_executor.layers.fla.ops.utils")
    if found is None or found.patched_by("backend-tiles"):
        return None
    for stmt in found.node.body:
        if isinstance(stmt, ast.Assign) and ast.unparse(stmt.targets[0]) == "DEFAULT" \
                and ast.unparse(stmt.value) == str(TILES):
            return f"Backend.DEFAULT is {TILES} in {found.where}"
    return None


PATCH = patch(
    id="backend-tiles",
    summary="Backend.DEFAULT becomes 101376",
    why="""A stand-in for a one-line tuning patch: the FLA kernels read Backend.DEFAULT at
    import time.""",
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.26", edits={"default-shmem": lower_default}),
    ],
    upstream_check=upstream_check,
)
