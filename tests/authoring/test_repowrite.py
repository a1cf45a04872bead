"""patchq.authoring.repowrite: atomic, verified writes into a series repo and its rollback-journal
transaction (docs/safety.md), on small files in tmp_path."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchq.authoring import repowrite
from patchq.errors import RepoWriteError, StateError


def _no_temp_files(d: Path) -> bool:
    return not [p for p in d.iterdir() if p.name.endswith(repowrite.TMP_SUFFIX)]


def test_a_rewrite_that_cannot_grow_keeps_the_old_bytes(tmp_path):
    path = tmp_path / "profiles.toml"
    old = b"# my comments\n" + b"x" * 5000
    path.write_bytes(old)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, hard))  # past a block: EFBIG (Python ignores SIGXFSZ)
    try:
        with pytest.raises(RepoWriteError, match=r"cannot write .*profiles.toml.*EFBIG.*nothing was changed"):
            repowrite.write_file(path, old + b"y" * 10000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert path.read_bytes() == old and _no_temp_files(tmp_path)


def test_write_file_refuses_what_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "dir.py").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "link.toml")
    for name in ("fifo.toml", "dir.py", "link.toml"):
        with pytest.raises(RepoWriteError, match="not a regular file|symlink"):
            repowrite.write_file(tmp_path / name, "x")
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(RepoWriteError, match="not a regular file"):
        repowrite.read_regular(tmp_path / "fifo.toml")  # and never blocks


def test_a_transaction_lands_whole_or_rolls_back(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.toml").write_text("# a\nold = 1\n")
    with pytest.raises(RuntimeError, match="verify failed"):
        with repowrite.Transaction(repo, "test") as txn:
            txn.write(repo / "a.toml", "new = 2\n")
            txn.write(repo / "new.py", "x = 1\n")
            txn.apply()
            assert (repo / "a.toml").read_text() == "new = 2\n"  # on disk, to verify
            raise RuntimeError("verify failed")
    assert (repo / "a.toml").read_text() == "# a\nold = 1\n" and not (repo / "new.py").exists()
    assert not repowrite.pending(repo)
    with repowrite.Transaction(repo, "test") as txn:
        txn.write(repo / "a.toml", "new = 2\n")
        txn.write(repo / "sub" / "new.py", "x = 1\n")
    assert (repo / "a.toml").read_text() == "new = 2\n" and txn.written == [str(repo / "a.toml"),
                                                                         str(repo / "sub" / "new.py")]
    assert sorted(os.listdir(repo)) == ["a.toml", "sub"]
    with pytest.raises(RepoWriteError, match="outside the series repo"):
        repowrite.Transaction(repo, "test").write(tmp_path / "x", "x")


def _killed_transaction(repo: Path, files: dict[str, str], after: int) -> int:
    """A child that stages ``files``, lands them and is killed after the ``after``-th write."""
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from patchq.authoring import repowrite
        repo = Path({str(repo)!r})
        with repowrite.Transaction(repo, "killed") as txn:
            for name, text in {files!r}.items():
                txn.write(repo / name, text)
            txn.apply()
            os._exit(9)
    """)
    env = {**os.environ, "PATCHQ_FAULT_AFTER_REPO_WRITES": str(after)}
    return subprocess.run([sys.executable, "-c", code], env=env).returncode


@pytest.mark.parametrize("after", [1, 2, 3, 9])
def test_a_killed_change_is_rolled_back_by_the_next_run(tmp_path, after):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "one.py").write_text("old one\n")
    (repo / "two.toml").write_text("# comment\nold = 2\n")
    rc = _killed_transaction(repo, {"one.py": "new one\n", "two.toml": "new = 2\n", "three.py": "new\n"}, after)
    assert rc in (9, 99) and repowrite.pending(repo)
    assert repowrite.recover(repo)  # what discovery does when it sees .patchq-txn/
    assert (repo / "one.py").read_text() == "old one\n" and (repo / "two.toml").read_text() == "# comment\nold = 2\n"
    assert not (repo / "three.py").exists() and not repowrite.pending(repo)
    assert sorted(os.listdir(repo)) == ["one.py", "two.toml"]


def test_recovery_leaves_a_file_edited_since_and_refuses_escaping_paths(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "one.py").write_text("old\n")
    assert _killed_transaction(repo, {"one.py": "new\n"}, 1) == 99
    (repo / "one.py").write_text("the user's edit after the crash\n")
    with pytest.raises(StateError, match="changed since"):
        repowrite.recover(repo)
    assert (repo / "one.py").read_text() == "the user's edit after the crash\n"
    journal = repo / repowrite.JOURNAL_DIR / repowrite.JOURNAL_FILE
    doc = json.loads(journal.read_text())
    doc["entries"][0]["path"] = str(tmp_path / "outside.txt")
    journal.write_text(json.dumps(doc))
    with pytest.raises(StateError, match="outside the series repo"):
        repowrite.recover(repo)
    journal.write_text("[" * 10000)
    with pytest.raises(StateError, match="damaged"):
        repowrite.recover(repo)


def test_the_next_write_or_transaction_removes_temp_files_a_killed_writer_left(tmp_path):
    """kill -9 of `rebase --write` left anchors/.X.toml.<rand>.patchq-tmp (1 of 10): the next
    transaction (or write into that directory) removes it; a live writer's stays."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    repo = tmp_path / "repo"
    (repo / "anchors").mkdir(parents=True)
    left = repo / "anchors" / f".x.toml.{gone}.abcd_123.patchq-tmp"
    live = repo / "anchors" / f".y.toml.{os.getpid()}.abcd_124.patchq-tmp"
    for p in (left, live):
        p.write_text("[anchors.partial")
    with repowrite.Transaction(repo, "test", [repo, repo / "anchors"]) as txn:
        txn.write(repo / "NOTES.md", "x\n")
    assert not left.exists() and live.exists()
    left.write_text("[anchors.partial")
    repowrite.write_file(repo / "anchors" / "x.toml", "[anchors]\n")
    assert not left.exists() and live.exists()
