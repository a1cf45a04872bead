"""The git side of ``patchq upgrade --branch NAME --commit``: a branch in the repository that
holds the series, and one commit of what the upgrade wrote there.

:func:`prepare` runs before anything is written: it finds the git work tree holding the
series directory, refuses uncommitted changes under the series and anchors directories (the
commit would mix them with the upgrade's), refuses a branch that already exists here or on
``origin`` (a pull request for that release is open, or was merged), and checks the branch
out. :func:`commit` stages the series and anchors directories and the upgrade's conflict
files (``.patchq-rebase/X/``, added even where a ``.gitignore`` hides them: a reviewer needs
them) and commits them, with patchq's name when the repository has no ``user.name``. Nothing
is pushed: the workflow that runs the upgrade pushes with its own credentials.

Through gitpython (``git`` on ``PATH``). A refusal is a :class:`~patchq.errors.UsageError`
(exit 2), a git command that fails is a :class:`~patchq.errors.RepoWriteError` (exit 5: the
repository refused the write), each naming the command and git's last line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import git

from patchq.errors import RepoWriteError, UsageError

#: Who commits when the repository names nobody (``user.name`` / ``user.email`` unset).
IDENTITY = ("patchq upgrade", "patchq-upgrade@users.noreply.invalid")


@dataclass
class Branch:
    """A prepared branch: the repository (its work tree ``root``), the branch name, and the
    directories of the series whose changes go into the commit."""

    repo: git.Repo
    root: Path
    name: str | None
    paths: tuple[Path, ...]


def _fail(what: str, exc: git.GitCommandError) -> RepoWriteError:
    tail = [ln for ln in str(exc.stderr or exc.stdout or "").strip().splitlines() if ln.strip()]
    return RepoWriteError(f"git {what} failed in the series repository: "
                          f"{tail[-1].strip() if tail else exc.status}; nothing more was committed")


def find_repo(series_dir: Path) -> git.Repo:
    """The git work tree holding ``series_dir``.

    Raises:
        UsageError: ``series_dir`` is in no git work tree (``git init`` it, or clone it).
    """
    try:
        repo = git.Repo(series_dir, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(f"{series_dir} is in no git repository: --branch and --commit need one "
                         f"(`git init` the series repo, or clone it)") from None
    if repo.bare or repo.working_tree_dir is None:
        raise UsageError(f"{series_dir} is in a bare git repository: --branch and --commit need a work tree")
    return repo


def prepare(series_dir: Path, anchors_dir: Path, name: str | None) -> Branch:
    """Refuse what would make the commit wrong, then check out a new branch ``name`` (None:
    stay on the current branch). Writes nothing else.

    Raises:
        UsageError: no git work tree; uncommitted changes under the series or anchors
            directory; the branch exists here or on ``origin``; an invalid branch name.
        RepoWriteError: ``git checkout -b`` failed.
    """
    repo = find_repo(series_dir)
    root = Path(str(repo.working_tree_dir)).resolve()
    paths = tuple(dict.fromkeys(p.resolve() for p in (series_dir, anchors_dir)))
    dirty = repo.git.status("--porcelain", "--", *map(str, paths)).splitlines()
    if dirty:
        raise UsageError(f"uncommitted changes under the series in {root} ({dirty[0].strip()}"
                         f"{f' and {len(dirty) - 1} more' if len(dirty) > 1 else ''}): commit or stash them first, "
                         f"so the upgrade's commit holds the upgrade only")
    if name is not None:
        try:
            repo.git.check_ref_format("--branch", name)
        except git.GitCommandError:
            raise UsageError(f"--branch {name!r} is not a valid branch name") from None
        if name in [h.name for h in repo.heads]:
            raise UsageError(f"branch {name} already exists in {root}: the upgrade to this release was prepared "
                             f"before (delete the branch, or give another --branch)")
        if "origin" in [r.name for r in repo.remotes] and _on_origin(repo, name):
            raise UsageError(f"branch {name} already exists on origin ({repo.remotes.origin.url}): its pull "
                             f"request is open or was merged")
        try:
            repo.git.checkout("-q", "-b", name)
        except git.GitCommandError as exc:
            raise _fail(f"checkout -b {name}", exc) from None
    return Branch(repo, root, name, paths)


def _on_origin(repo: git.Repo, name: str) -> bool:
    """Whether ``origin`` has a branch ``name`` (asked with ``git ls-remote``; an origin that
    cannot be reached counts as not having it: the push says so later)."""
    try:
        return bool(str(repo.git.ls_remote("--heads", "origin", f"refs/heads/{name}")).strip())
    except git.GitCommandError:
        return False


def commit(branch: Branch, message: str, extra: list[Path]) -> str | None:
    """Stage the series and anchors directories and ``extra`` paths (forced: conflict files
    a ``.gitignore`` hides), commit them; the short hash, or None when nothing changed.

    Raises:
        RepoWriteError: a git command failed (a hook, a lock, a full disk...).
    """
    repo = branch.repo
    paths = [str(p) for p in branch.paths]
    extras = [str(p) for p in extra if p.exists()]
    try:
        repo.git.add("-A", "--", *paths)
        if extras:
            repo.git.add("-A", "-f", "--", *extras)
        if not repo.git.status("--porcelain", "--", *paths, *extras).strip():
            return None
        with repo.git.custom_environment(**_identity(repo)):
            repo.git.commit("-q", "-m", message, "--", *paths, *extras)
        return str(repo.git.rev_parse("--short", "HEAD"))
    except git.GitCommandError as exc:
        raise _fail("commit", exc) from None


def _identity(repo: git.Repo) -> dict[str, str]:
    """Author and committer variables for a repository that names nobody, else {}."""
    reader = repo.config_reader()
    if reader.has_option("user", "name") and reader.has_option("user", "email"):
        return {}
    if os.environ.get("GIT_AUTHOR_NAME") and os.environ.get("GIT_AUTHOR_EMAIL"):
        return {}
    name, email = IDENTITY
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email}
