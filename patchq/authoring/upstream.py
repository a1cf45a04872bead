"""Upstream history: vLLM releases as a git repository, and the history of one definition.

Two kinds of history are understood:

* **releases** (built by :func:`sync`): ``<cache>/upstream/vllm.git``, a bare
  repository whose branch ``releases`` holds one commit per vLLM release, in release
  order, each tagged ``v<version>`` (the tag style of vLLM's own repository). A
  commit's tree is exactly the release wheel's ``vllm/**/*.py``
  (:func:`patchq.vllmdist.releases.release_tree`); its date is the wheel's build date (the
  ``METADATA`` entry of the wheel zip), so the same releases always give the same
  commit ids. Trees are written with git plumbing, never through a work tree:
  ``hash-object -w --stdin-paths`` for the blobs the repository lacks,
  ``update-index --index-info`` into a throw-away index, ``write-tree``, ``commit-tree``
  (``bench/upstream_sync.py`` measures this against ``git add -A`` in a work tree).
* **clone** (``--repo PATH``): an existing vLLM clone; its ``vX.Y.Z`` tags name the
  releases and the commits between two tags are the real upstream commits.

:class:`GitSource` is a :class:`patchq.vllmdist.sources.CodeSource` over a tag, so anchors resolve
in a release read from git exactly as in an extracted wheel.
:func:`definition_history` follows one definition (by qualified name, across files)
through the releases and fingerprints it in each (:mod:`patchq.plan.definitions`: the
same value as the engine's, from each release's cached definition index).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import re
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import git
from filelock import FileLock
from packaging.version import InvalidVersion, Version

from patchq.errors import TargetNotFound, UsageError
from patchq.model import AnchorSpec
from patchq.plan import definitions
from patchq.plan.anchors import find_definitions
from patchq.plan.definitions import Definition
from patchq.vllmdist import cache, releases
from patchq.vllmdist.sources import PACKAGE, CodeSource

BRANCH = "releases"
TAG_PREFIX = "v"
_IDENT = {"GIT_AUTHOR_NAME": "patchq", "GIT_AUTHOR_EMAIL": "patchq@localhost",
          "GIT_COMMITTER_NAME": "patchq", "GIT_COMMITTER_EMAIL": "patchq@localhost"}
_FALLBACK_DATE = "2000-01-01T00:00:00+00:00"


def default_path() -> Path:
    """``<patchq cache>/upstream/vllm.git`` (``$PATCHQ_CACHE_DIR`` moves the cache)."""
    return cache.upstream_repo()


def tag_of(version: Version | str) -> str:
    """The tag of a release: ``v0.23.0``."""
    return TAG_PREFIX + releases.version_key(version)


def version_of_tag(tag: str) -> Version | None:
    """The final release a ``vX.Y.Z`` tag names, or None (pre-releases and others)."""
    if not tag.startswith(TAG_PREFIX):
        return None
    try:
        v = Version(tag[len(TAG_PREFIX):])
    except InvalidVersion:
        return None
    return None if (v.is_prerelease or v.is_devrelease or v.local) else v


# --------------------------------------------------------------------------- repositories


@dataclass
class Upstream:
    """A git history of vLLM releases.

    Attributes:
        path: the repository (a bare ``vllm.git`` or a clone's work tree).
        kind: ``releases`` (built by :func:`sync`) or ``clone``.
        repo: the :class:`git.Repo`.
    """

    path: Path
    kind: str
    repo: git.Repo

    def versions(self) -> list[Version]:
        """The releases tagged ``vX.Y.Z`` (final releases only), ascending."""
        out = {v for t in self.repo.tags if (v := version_of_tag(t.name)) is not None}
        return sorted(out)

    def tag(self, version: Version | str) -> str:
        """The tag naming ``version``. Raises TargetNotFound when it is not tagged."""
        want = Version(str(version))
        for t in self.repo.tags:
            if version_of_tag(t.name) == want:
                return t.name
        raise TargetNotFound(f"{self.path} has no tag for vllm {version} "
                             f"(run `patchq upstream sync --releases {version}`)")

    def source(self, version: Version | str) -> GitSource:
        """The release's files read from git (a CodeSource)."""
        return GitSource(self, Version(str(version)), self.tag(version))

    def commits_touching(self, old: Version, new: Version, relpath: str,
                         lines: tuple[int, int] | None = None) -> tuple[str, list[dict]]:
        """Commits after tag ``old`` up to tag ``new`` that touched a definition (best effort).

        First ``git log -L start,end:relpath old..new`` (the definition's line range in
        ``new``), which follows the lines through history; when git refuses (renamed
        file, range out of date), ``git log old..new -- relpath``.

        Returns:
            (method: ``line-range`` or ``path``, [{``commit``, ``date``, ``subject``}]).
        """
        rng = f"{self.tag(old)}..{self.tag(new)}"
        fmt = "--format=%H%x09%ad%x09%s"
        out = None
        method = "path"
        if lines is not None:
            try:
                out = self.repo.git.log(rng, fmt, "--date=short", "--no-patch",
                                        f"-L{lines[0]},{lines[1]}:{relpath}")
                method = "line-range"
            except git.GitCommandError:
                out = None
        if out is None:
            try:
                out = self.repo.git.log(rng, fmt, "--date=short", "--", relpath)
            except git.GitCommandError:
                out = ""
        rows = []
        for line in out.splitlines():
            parts = line.split("\t", 2)
            if len(parts) == 3 and re.fullmatch(r"[0-9a-f]{40}", parts[0]):
                rows.append({"commit": parts[0], "date": parts[1], "subject": parts[2]})
        return method, rows


def open_upstream(repo: str | Path | None = None) -> Upstream:
    """The clone at ``repo``, else the releases repository in the cache.

    Raises:
        TargetNotFound: ``repo`` is not a git repository, or the cache has no releases
            repository yet (run ``patchq upstream sync`` first).
    """
    if repo is not None:
        try:
            r = git.Repo(Path(repo).expanduser(), search_parent_directories=False)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise TargetNotFound(f"{repo} is not a git repository") from None
        top = r.git_dir if r.bare else r.working_tree_dir
        assert top is not None  # GitPython: None only for a bare repository
        return Upstream(Path(top), "clone", r)
    path = default_path()
    if not (path / "HEAD").is_file():
        raise TargetNotFound(f"no upstream history at {path}: run `patchq upstream sync --releases SPEC` "
                             f"or pass --repo PATH")
    return Upstream(path, "releases", git.Repo(path))


class GitSource(CodeSource):
    """A :class:`CodeSource` whose files are the blobs of one tag (read-only).

    ``root`` is the repository path (there is no work tree to read); ``py_files`` and
    blob ids come from one ``git ls-tree -r`` per source; blobs are read through
    gitpython's persistent ``cat-file --batch`` process.
    """

    def __init__(self, upstream: Upstream, version: Version, tag: str) -> None:
        super().__init__(root=upstream.path, version=version, kind=f"git:{tag}")
        self.upstream = upstream
        self.tag = tag
        self._blobs: dict[str, str] | None = None

    def blobs(self) -> dict[str, str]:
        """relpath -> blob id (hex) of every file under ``vllm/``."""
        if self._blobs is None:
            out = self.upstream.repo.git.ls_tree("-r", "--full-tree", self.tag, "--", PACKAGE)
            blobs = {}
            for line in out.splitlines():
                meta, _, path = line.partition("\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == "blob":
                    blobs[path] = parts[2]
            self._blobs = blobs
        return self._blobs

    def read_bytes(self, relpath: str) -> bytes | None:  # noqa: D102 - see CodeSource
        sha = self.blobs().get(relpath)
        if sha is None:
            return None
        return self.upstream.repo.odb.stream(bytes.fromhex(sha)).read()

    def py_files(self) -> list[str]:  # noqa: D102 - see CodeSource
        return sorted(p for p in self.blobs() if p.endswith(".py"))

    def record(self) -> dict[str, str]:  # noqa: D102 - a git tree has no RECORD
        return {}


# --------------------------------------------------------------------------- sync


@dataclass
class SyncResult:
    """What :func:`sync` did.

    Attributes:
        path: the repository. releases: every tagged release, ascending.
        added: releases committed now. skipped: releases already tagged (reused).
        rewritten: releases whose commit was re-created because an older release was
            inserted before them (their trees are reused; only the parents change).
        seconds: {version: seconds spent building that release's tree}.
    """

    path: Path
    releases: list[str]
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def _wheel_date(version: Version) -> str:
    """The wheel's build date (its METADATA zip entry, read as UTC), ISO 8601: from the
    cached wheel or the fetched tree (:func:`patchq.vllmdist.releases.build_date`)."""
    date = releases.build_date(version)
    if date is None:
        return _FALLBACK_DATE
    year, month, day, hour, minute, second = date  # a zip entry's date_time
    return datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc).isoformat()


def release_py_files(tree: Path) -> list[str]:
    """``vllm/**/*.py`` relpaths of an extracted release tree, sorted (POSIX)."""
    base = tree / PACKAGE
    return sorted(p.relative_to(tree).as_posix() for p in base.rglob("*.py")
                  if "__pycache__" not in p.parts)


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (sha1 of ``blob <size>\\0`` + data), as hex."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def build_tree(repo: git.Repo, tree_root: Path, files: Sequence[str]) -> str:
    """Write ``files`` (relpaths under ``tree_root``) as blobs and a tree; return the tree id.

    Plumbing only: blob ids are computed here (sha1), ``cat-file --batch-check`` says which
    the repository lacks, ``hash-object -w --stdin-paths`` writes just those (one process;
    consecutive releases share most files), then ``update-index --add --index-info`` into
    a temporary index file and ``write-tree``.
    """
    shas = [blob_id((tree_root / f).read_bytes()) for f in files]
    with tempfile.TemporaryDirectory(prefix="patchq-sync-") as tmp:
        query = Path(tmp) / "query"
        query.write_text("".join(f"{sha}\n" for sha in sorted(set(shas))), encoding="utf-8")
        with open(query, "rb") as fh:
            answer = repo.git.cat_file("--batch-check", istream=fh)
        missing = {ln.split()[0] for ln in answer.splitlines() if ln.endswith(" missing")}
        todo = [(f, sha) for f, sha in zip(files, shas, strict=False) if sha in missing]
        if todo:
            paths = Path(tmp) / "paths"
            paths.write_text("".join(str(tree_root / f) + "\n" for f, _ in todo), encoding="utf-8")
            with open(paths, "rb") as fh:
                written = repo.git.hash_object("-w", "--stdin-paths", istream=fh).split()
            if written != [sha for _, sha in todo]:
                raise RuntimeError("git hash-object disagrees with the computed blob ids")
        info = Path(tmp) / "index-info"
        info.write_text("".join(f"100644 {sha}\t{f}\n" for sha, f in zip(shas, files, strict=False)), encoding="utf-8")
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        with open(info, "rb") as fh:
            repo.git.update_index("--add", "--index-info", istream=fh, env=env)
        return repo.git.write_tree(env=env)


def _commit(repo: git.Repo, tree: str, parent: str | None, version: Version) -> str:
    date = _wheel_date(version)
    env = {**_IDENT, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    msg = (f"vllm {version}\n\nvllm/**/*.py of the vllm {version} wheel on PyPI "
           f"(patchq upstream sync).")
    args = [tree] + (["-p", parent] if parent else []) + ["-m", msg]
    return repo.git.commit_tree(*args, env=env)


def sync(versions: Iterable[Version | str], path: Path | None = None) -> SyncResult:
    """Add releases to the releases repository (created when missing), in release order.

    Releases already tagged are skipped (their trees are reused); a release older than
    the newest tagged one is inserted in order, and the commits after it are re-created
    on top of it with the same trees (tags move; the branch stays linear). Runs under a
    file lock, so concurrent syncs serialize.

    Args:
        versions: the releases to have (the wheels are fetched once when not cached).
        path: the repository (default :func:`default_path`).
    Raises:
        patchq.vllmdist.releases.ReleaseError: a release cannot be had.
    """
    path = Path(path or default_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        repo = git.Repo(path) if (path / "HEAD").is_file() else git.Repo.init(path, bare=True)
        tagged = {ver: t for t in repo.tags if (ver := version_of_tag(t.name))}
        wanted = sorted(set(tagged) | {Version(str(v)) for v in versions})
        result = SyncResult(path=path, releases=[str(v) for v in wanted])
        parent: str | None = None
        for v in wanted:
            tag = tagged.get(v)
            if tag is not None:
                commit = tag.commit
                old_parent = commit.parents[0].hexsha if commit.parents else None
                if old_parent == parent:
                    result.skipped.append(str(v))
                    parent = commit.hexsha
                    continue
                new = _commit(repo, commit.tree.hexsha, parent, v)
                result.rewritten.append(str(v))
            else:
                started = time.perf_counter()
                tree_root = releases.release_tree(v)
                tree = build_tree(repo, tree_root, release_py_files(tree_root))
                new = _commit(repo, tree, parent, v)
                result.seconds[str(v)] = round(time.perf_counter() - started, 3)
                result.added.append(str(v))
            repo.git.tag("-f", tag_of(v), new)
            parent = new
        if parent is not None:
            repo.git.update_ref(f"refs/heads/{BRANCH}", parent)
            repo.git.symbolic_ref("HEAD", f"refs/heads/{BRANCH}")
    return result


# --------------------------------------------------------------------------- definitions


#: One definition in one release: a :class:`patchq.plan.definitions.Definition` with
#: ``version`` (the release) and ``blob`` (the file's git blob id) set.
DefinitionAt = Definition


@dataclass
class History:
    """A definition followed through releases (:func:`definition_history`).

    Attributes:
        qualname, module: what was followed (the anchor's).
        states: version -> DefinitionAt, or a string saying why it is not there
            (``absent`` or ``ambiguous: ...``), for every release looked at, ascending.
    """

    qualname: str
    module: str
    states: dict[Version, DefinitionAt | str]


def definition_history(up: Upstream, spec: AnchorSpec, versions: Sequence[Version]) -> History:
    """Follow ``spec.qualname`` through ``versions`` (ascending) of ``up``.

    In each release the definition is looked up in the file it was found in last time,
    then the anchor's module hint, then the whole package (code moves between files).
    When a file's blob is the same as in the previous release, the previous answer is
    reused without reading it.
    """
    states: dict[Version, DefinitionAt | str] = {}
    last: DefinitionAt | None = None
    for v in versions:
        src = up.source(v)
        blobs = src.blobs()
        if last is not None and blobs.get(last.relpath) == last.blob:
            last = dataclasses.replace(last, version=v)
            states[v] = last
            continue
        hints = ([last.relpath] if last else []) + [p for p in spec.module_paths if not last or p != last.relpath]
        index = definitions.for_source(src)
        found, _ = find_definitions(src, spec.qualname, hints, index.file, index.candidates)
        if not found:
            states[v] = "absent"
            last = None
            continue
        if len(found) > 1:
            states[v] = "ambiguous: " + ", ".join(f"{p}:{n.lineno}" for p, n in found)
            last = None
            continue
        relpath, entry = found[0]
        last = definitions.definition_from(src.read_text(relpath) or "", relpath, entry, newline=False,
                                           version=v, blob=blobs.get(relpath, ""))
        states[v] = last
    return History(spec.qualname, spec.module, states)


def definition_diff(old: DefinitionAt, new: DefinitionAt, context: int = 3) -> str:
    """Unified diff of two versions of a definition, with the files' real line numbers."""
    a = old.text.splitlines(keepends=True)
    b = new.text.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, f"a/{old.relpath} (vllm {old.version})",
                                     f"b/{new.relpath} (vllm {new.version})", n=context):
        m = re.match(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", line)
        if m:
            line = (f"@@ -{int(m.group(1)) + old.start - 1}{m.group(2) or ''} "
                    f"+{int(m.group(3)) + new.start - 1}{m.group(4) or ''} @@{line[m.end():]}")
        out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out)


@dataclass
class LogEntry:
    """A release where a followed definition changed.

    ``change`` is ``appears``, ``code`` (fingerprint changed), ``moved`` (file changed,
    code did not), ``code+moved``, ``gone`` or ``ambiguous``; ``diff`` is the definition's
    diff (empty when only moved or gone); ``commits`` the upstream commits (clones).
    """

    version: str
    previous: str | None
    change: str
    relpath: str | None
    previous_relpath: str | None
    fingerprint: str | None
    diff: str = ""
    commits: list[dict] = field(default_factory=list)
    commits_method: str = ""


def log_entries(up: Upstream, history: History, with_commits: bool | None = None) -> list[LogEntry]:
    """The releases where ``history``'s definition changed (by fingerprint), with diffs.

    ``with_commits`` (default: True for a clone) adds the commits between the two tags
    that touched the definition (:meth:`Upstream.commits_touching`).
    """
    if with_commits is None:
        with_commits = up.kind == "clone"
    out: list[LogEntry] = []
    prev_v: Version | None = None
    prev: DefinitionAt | str | None = None
    for v, state in history.states.items():
        if isinstance(state, DefinitionAt):
            entry = _entry_found(up, v, state, prev_v, prev, with_commits)
        else:
            entry = _entry_missing(v, state, prev_v, prev)
        if entry is not None:
            out.append(entry)
        prev_v, prev = v, state
    return out


def _entry_found(up: Upstream, v: Version, state: DefinitionAt, prev_v: Version | None,
                 prev: DefinitionAt | str | None, with_commits: bool) -> LogEntry | None:
    """The log entry of release ``v``, where the definition is found once: it appears, its
    code changed or it moved since ``prev`` (release ``prev_v``); None when unchanged."""
    if not isinstance(prev, DefinitionAt):
        return LogEntry(str(v), str(prev_v) if prev_v else None, "appears", state.relpath, None, state.fingerprint)
    code = state.fingerprint != prev.fingerprint
    moved = state.relpath != prev.relpath
    if not (code or moved):
        return None
    change = "code+moved" if code and moved else "code" if code else "moved"
    entry = LogEntry(str(v), str(prev_v), change, state.relpath, prev.relpath,
                     state.fingerprint, definition_diff(prev, state) if code else "")
    if with_commits and prev_v is not None:
        entry.commits_method, entry.commits = up.commits_touching(prev_v, v, state.relpath, (state.start, state.end))
    return entry


def _entry_missing(v: Version, state: str, prev_v: Version | None, prev: DefinitionAt | str | None) -> LogEntry | None:
    """The log entry of release ``v``, where the definition is ``absent`` (gone) or
    ambiguous; None when it was not found at ``prev`` either."""
    if not (isinstance(prev, DefinitionAt) or prev is None):
        return None
    kind = "gone" if state == "absent" else "ambiguous"
    if prev is None and kind != "ambiguous":
        return None
    return LogEntry(str(v), str(prev_v) if prev_v else None, kind, None,
                    prev.relpath if isinstance(prev, DefinitionAt) else None, None,
                    "" if kind == "gone" else state)


def select_versions(up: Upstream, spec: str | None) -> list[Version]:
    """The tagged releases a ``--releases`` spec selects (all when None). Raises UsageError."""
    available = up.versions()
    if not available:
        raise UsageError(f"{up.path} has no vX.Y.Z tags")
    try:
        return releases.filter_releases(available, spec)
    except releases.ReleaseError as exc:
        raise UsageError(str(exc)) from None
