"""A small series and a small vLLM-shaped tree, written into a directory (for the unit tests)."""

from __future__ import annotations

import textwrap
from pathlib import Path

PATCH_PY = textwrap.dedent('''\
    """bump-default: a bigger Backend.DEFAULT (a small stand-in for fla-shmem)."""

    from patchq import edits
    from patchq.series import patch, variant


    def bump(backend, found, ctx):
        (stmt,) = found
        return edits.replace(backend, stmt, edits.stmts("DEFAULT = 101376"))


    PATCH = patch(
        id="bump-default",
        summary="Backend.DEFAULT becomes 101376",
        why="""GB10 gets   big tiles.""",
        applies=">=0.1",
        upstream=["https://example.invalid/pr/1"],
        variants=[
            variant(">=0.1,<0.3", edits={"default": bump}, note="class attribute"),
            variant(">=0.3", upstreamed="0.3 sets 101376 itself"),
        ],
    )
''')

ANCHORS_TOML = textwrap.dedent('''\
    [anchors.default]
    module = "vllm.ops.utils"
    qualname = "Backend"
    node = "DEFAULT = ..."
    count = 1

    [anchors.default.fingerprints]
    "0.1.0" = "FINGERPRINT"
''')

PROFILES_TOML = textwrap.dedent('''\
    [profiles.base]
    description = "the one patch"
    patches = ["bump-default"]

    [profiles.none]
    description = "nothing"
    patches = []
''')

UTILS_PY = textwrap.dedent('''\
    import os


    class Backend:
        """Shared memory per block."""

        # the default
        DEFAULT = 102400

        def get(self):
            return self.DEFAULT
''')


def write_series(root: Path, fingerprint: str = "0" * 16) -> Path:
    """``root/series`` (+ ``root/anchors``); returns the series directory."""
    series = root / "series"
    (root / "anchors").mkdir(parents=True)
    series.mkdir(parents=True)
    (series / "profiles.toml").write_text(PROFILES_TOML)
    (series / "bump_default.py").write_text(PATCH_PY)
    (root / "anchors" / "bump-default.toml").write_text(ANCHORS_TOML.replace("FINGERPRINT", fingerprint))
    return series


def write_tree(root: Path, *, moved: bool = False) -> Path:
    """A vLLM-shaped source tree: ``vllm/__init__.py`` and ``vllm/ops/utils.py`` (or, with
    ``moved``, ``vllm/third_party/utils.py``)."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    rel = Path("vllm/third_party/utils.py" if moved else "vllm/ops/utils.py")
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel.parent / "__init__.py").write_text("")
    (root / rel).write_text(UTILS_PY)
    return root
