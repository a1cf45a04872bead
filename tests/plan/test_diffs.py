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


# -- the store (patchq.authoring.diffstore): apply, verdicts, hashes ---------------------


def test_apply_diff_gives_back_the_patched_texts():
    from patchq.authoring.diffstore import apply_diff

    pristine = {"vllm/x.py": BEFORE, "vllm/sub/y.py": "p = 1\nq = 2", "vllm/z.py": "untouched\n"}
    patched = {"vllm/x.py": BEFORE.replace("a = 1\n", "a = 1\nz = 0\n").replace("h = 8\n", ""),
               "vllm/sub/y.py": "p = 1\nq = 3"}
    assert apply_diff(pristine, unified_all(pristine, patched)) == patched
    moved = dict(pristine, **{"vllm/x.py": "new first line\n" + BEFORE})  # no offset, no fuzz
    with pytest.raises(Exception, match="does not match line 1"):
        apply_diff(moved, unified_all(pristine, patched))
    with pytest.raises(Exception, match="no such file"):
        apply_diff({}, unified_all(pristine, patched))


def test_verdicts_render_parse_and_refuse_garbage():
    from patchq.authoring.diffstore import parse_verdicts, render_verdicts
    from patchq.errors import SeriesError

    text = render_verdicts("p", {"0.33.0": "upstreamed", "0.9.0": "absent", "0.23.0": "applies"})
    assert text.splitlines()[-3:] == ['"0.9.0" = "absent"', '"0.23.0" = "applies"', '"0.33.0" = "upstreamed"']
    assert parse_verdicts(text.encode()) == {"0.9.0": "absent", "0.23.0": "applies", "0.33.0": "upstreamed"}
    assert parse_verdicts(None) is None
    for bad in (b"[verdicts\n", b'[verdicts]\n"0.1.0" = 3\n', b"\xff"):
        with pytest.raises(SeriesError):
            parse_verdicts(bad)


def test_stored_diffs_compare_without_the_patch_hash():
    from patchq.authoring.diffstore import mask_hashes

    a = "+# patchq:fla-shmem:0123456789ab (applied by patchq; `patchq status` explains)\n"
    b = a.replace("0123456789ab", "ba9876543210")
    assert mask_hashes(a) == mask_hashes(b) == "+# patchq:fla-shmem:<hash> (applied by patchq; `patchq status` explains)\n"
    assert mask_hashes(a.replace("fla-shmem", "other")) != mask_hashes(b)
