"""A one-patch series written from a patch module and its anchors (the rebase and upgrade
tests on real releases), and the patch they share: Backend.DEFAULT lowered on 0.15-0.25."""

from __future__ import annotations

import textwrap
from pathlib import Path

SHMEM_PATCH = '''
from patchq import edits
from patchq.series import patch, variant


def lower(backend, found, ctx):
    (line,) = found
    return edits.replace(backend, line, edits.stmts("DEFAULT = 101376  # sm121"))


PATCH = patch(
    id="shmem-only",
    summary="Backend.DEFAULT lowered",
    why="test",
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.26", edits={"default": lower}),
    ],
)
'''

SHMEM_ANCHORS = '''
[anchors.default]
module = "vllm.model_executor.layers.fla.ops.utils"
qualname = "Backend"
node = "DEFAULT = 102400"
count = 1
'''


def mini_series(root: Path, pid: str, module: str, anchors: str) -> Path:
    """``root/series`` with profile ``one`` of patch ``pid`` (``module``) and ``root/anchors/<pid>.toml``."""
    (root / "series").mkdir(parents=True)
    (root / "anchors").mkdir()
    (root / "series" / "profiles.toml").write_text(f'[profiles.one]\npatches = ["{pid}"]\n')
    (root / "series" / (pid.replace("-", "_") + ".py")).write_text(textwrap.dedent(module).lstrip())
    (root / "anchors" / f"{pid}.toml").write_text(textwrap.dedent(anchors).lstrip())
    return root / "series"
