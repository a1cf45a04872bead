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


def reviewed_patch(root: Path, pid: str, module: str, anchors: str, release: str, where: dict[str, tuple[str, str]]):
    """A one-patch series (:func:`mini_series`) whose anchors record the fingerprint of their
    definition on ``release`` (the real release tree; ``where``: anchor id -> (relpath,
    qualname)), as a stack authored against that release has: the loaded patch."""
    from patchq import series
    from patchq.plan import anchors as A
    from patchq.vllmdist import releases

    tree = Path(releases.release_tree(release))
    text = textwrap.dedent(anchors).lstrip()
    for aid, (rel, qual) in where.items():
        fp = A.fingerprint_ast(A.ast_index((tree / rel).read_text(encoding="utf-8"))[qual][0])
        text += f'\n[anchors.{aid}.fingerprints]\n"{release}" = "{fp}"\n'
    return series.load(mini_series(root, pid, module, text)).patch(pid)
