"""The tiny world of the CLI scenarios (tests/e2e/): a throwaway series (one patch, ``tiny``)
and a throwaway site-packages holding a three-line ``vllm/tiny.py`` with a
``vllm-0.23.0.dist-info`` whose RECORD has its real hash. No vLLM release."""

from __future__ import annotations

import base64
import hashlib
import textwrap
from pathlib import Path

TINY = "def answer():\n    x = 41\n    return x\n"

PATCH = '''
from patchq import edits
from patchq.series import patch, variant


def plus_one(definition, matched, ctx):
    return edits.replace(definition, matched[0], edits.stmts("x = 42"))


PATCH = patch(id="tiny", summary="the answer is 42", why="a test", applies=">=0.1",
              variants=[variant(">=0.1,<1", edits={"x": plus_one}, note="n"),
                        variant(">=1", upstreamed="upstream answers 42 since 1.0")])
'''

ANCHORS = '[anchors.x]\nmodule = "vllm.tiny"\nqualname = "answer"\nnode = "x = 41"\n'

PROFILES = textwrap.dedent("""
    [profiles.good]
    description = "the one that works"
    patches = ["tiny"]
""")

TYPO = textwrap.dedent("""
    [profiles.typo]
    description = "names a patch that does not exist"
    patches = ["tiny", "tinny"]
""")


def write(tmp_path: Path) -> dict:
    """A tiny project (series/, anchors/) and a fake site-packages in ``tmp_path``; returns the
    paths and the environment for :func:`support.run_cli` (the ``tiny`` fixture of tests/e2e/)."""
    series, anchors, site = tmp_path / "series", tmp_path / "anchors", tmp_path / "site"
    series.mkdir()
    anchors.mkdir()
    (series / "profiles.toml").write_text(PROFILES)
    (series / "tiny.py").write_text(PATCH)
    (anchors / "tiny.toml").write_text(ANCHORS)
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "tiny.py").write_text(TINY)
    di = site / "vllm-0.23.0.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.23.0\n")
    rows = []
    for rel in ("vllm/__init__.py", "vllm/tiny.py"):
        data = (site / rel).read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(data)}")
    (di / "RECORD").write_text("\n".join(rows + ["vllm-0.23.0.dist-info/RECORD,,"]) + "\n")
    env = {"PATCHQ_SERIES": str(series), "PATCHQ_ANCHORS": str(anchors),
           "PATCHQ_CACHE_DIR": str(tmp_path / "cache"), "PATCHQ_RUNTIME_DIR": str(tmp_path / "procs")}
    return {"series": series, "anchors": anchors, "site": site, "env": env, "cache": tmp_path / "cache"}


def one_line(text: str) -> str:
    """The only line of ``text`` (fails when there are more)."""
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]
