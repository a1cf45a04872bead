"""patchq.plan.diffs: unified diffs that git apply and patch -p1 accept."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from patchq.plan.diffs import NO_EOL, unified, unified_all

BEFORE = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 7\nh = 8\n"


def test_equal_texts_give_no_diff():
    assert unified("vllm/x.py", BEFORE, BEFORE) == ""


def test_headers_and_hunk():
    diff = unified("vllm/x.py", BEFORE, BEFORE.replace("d = 4\n", "d = 40\n"))
    assert diff == (
        "diff --git a/vllm/x.py b/vllm/x.py\n--- a/vllm/x.py\n+++ b/vllm/x.py\n"
        "@@ -1,7 +1,7 @@\n a = 1\n b = 2\n c = 3\n-d = 4\n+d = 40\n e = 5\n f = 6\n g = 7\n"
    )
    assert unified("vllm/x.py", BEFORE, BEFORE.replace("d = 4\n", "d = 40\n"), context=0).count("\n ") == 0


def test_missing_final_newline_is_marked():
    diff = unified("vllm/y.py", "x = 1\ny = 2", "x = 1\ny = 3")
    assert diff.endswith("-y = 2\n" + NO_EOL + "+y = 3\n" + NO_EOL)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_apply_and_patch_accept_the_diff(tmp_path):
    pristine = {"vllm/x.py": BEFORE, "vllm/sub/y.py": "p = 1\nq = 2"}
    patched = {"vllm/x.py": BEFORE.replace("a = 1\n", "a = 1\nz = 0\n"), "vllm/sub/y.py": "p = 1\nq = 3"}
    diff = unified_all(pristine, patched)
    assert diff.index("a/vllm/sub/y.py") < diff.index("a/vllm/x.py")  # sorted by path
    for tool in ("git", "patch"):
        if shutil.which(tool) is None:
            continue
        root = tmp_path / tool
        for rel, text in pristine.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        (tmp_path / "d.patch").write_text(diff)
        cmd = ["git", "apply", "-p1", str(tmp_path / "d.patch")] if tool == "git" else \
              ["patch", "-p1", "-s", "-i", str(tmp_path / "d.patch")]
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
        assert {rel: (root / rel).read_text() for rel in patched} == patched
