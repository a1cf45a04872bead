"""patchq.authoring.gitbranch: the branch ``patchq upgrade --branch`` checks out and the commit
``--commit`` makes, in a real git repository holding the small series (and a bare ``origin``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patchq.authoring import gitbranch
from patchq.errors import UsageError


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(small, tmp_path) -> Path:
    """The small series' project as a git repository whose origin is a bare one; no user.name."""
    root = small.root
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "series")
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "origin.git")], check=True)
    _git(root, "remote", "add", "origin", str(tmp_path / "origin.git"))
    _git(root, "push", "-q", "origin", "main")
    return root


def test_prepare_checks_out_the_branch_and_commit_records_the_series(small, repo, monkeypatch):
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(repo.parent))  # no user.name from the machine's ~/.gitconfig
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    branch = gitbranch.prepare(small.series.root, small.root / "anchors", "release/v0.2.0")
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "release/v0.2.0"
    assert gitbranch.commit(branch, "nothing\n", []) is None  # nothing changed: no commit
    (small.root / "anchors" / "bump-default.toml").write_text("# recorded\n")
    conflict = repo / ".patchq-rebase" / "0.2.0" / "bump-default" / "Backend.py"
    conflict.parent.mkdir(parents=True)
    conflict.write_text("<<<<<<< ours\n")
    (repo / ".gitignore").write_text(".patchq-rebase/\n")  # ignored: added all the same
    (repo / "unrelated.txt").write_text("not the upgrade's\n")
    short = gitbranch.commit(branch, "patchq upgrade: carry the series to vLLM 0.2.0\n",
                             [repo / ".patchq-rebase" / "0.2.0"])
    assert short and _git(repo, "rev-parse", "--short", "HEAD") == short
    assert set(_git(repo, "show", "--name-only", "--format=", "HEAD").splitlines()) == {
        "anchors/bump-default.toml", ".patchq-rebase/0.2.0/bump-default/Backend.py"}
    assert _git(repo, "log", "-1", "--format=%an <%ae>") == "patchq upgrade <patchq-upgrade@users.noreply.invalid>"


def test_prepare_refuses_a_dirty_series_and_an_existing_branch(small, repo):
    (small.root / "anchors" / "bump-default.toml").write_text("# edited by hand\n")
    with pytest.raises(UsageError, match="uncommitted changes under the series in .*anchors/bump-default.toml"):
        gitbranch.prepare(small.series.root, small.root / "anchors", "b")
    _git(repo, "checkout", "-q", "--", "anchors")
    _git(repo, "branch", "here")
    with pytest.raises(UsageError, match="branch here already exists in"):
        gitbranch.prepare(small.series.root, small.root / "anchors", "here")
    _git(repo, "push", "-q", "origin", "main:refs/heads/release/v0.2.0")
    with pytest.raises(UsageError, match="already exists on origin .*its pull request is open or was merged"):
        gitbranch.prepare(small.series.root, small.root / "anchors", "release/v0.2.0")
    with pytest.raises(UsageError, match="not a valid branch name"):
        gitbranch.prepare(small.series.root, small.root / "anchors", "a..b")
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"  # nothing was checked out


def test_a_series_outside_git_is_refused(small):
    with pytest.raises(UsageError, match="is in no git repository"):
        gitbranch.find_repo(small.series.root)
