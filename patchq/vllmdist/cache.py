"""The layout of patchq's cache directory, in one place (stdlib only).

The root is ``$PATCHQ_CACHE_DIR``, else (Linux) ``$XDG_CACHE_HOME/patchq`` when that
variable is an absolute path, else ``~/.cache/patchq``; on other platforms
``platformdirs.user_cache_dir("patchq")`` (imported only there, so the fast path and the
import hook's tooling stay stdlib-only on Linux). Nothing here creates a directory.

Layout under the root (who writes each entry)::

    wheels/                 release wheels, one file each        (vllmdist/releases.py)
    releases/<version>/     extracted vllm/**/*.py + dist-info   (vllmdist/releases.py)
    index/<package>.json    the release list from PyPI           (vllmdist/releases.py)
    index/defs-3.sqlite     definition index, by file content    (plan/definitions.py)
    plans/                  planned texts, content-addressed     (plan/plancache.py)
    verdicts/               check verdicts, keyed on their inputs (compat/verdictcache.py)
    stamps/                 stat stamps of no-op answers          (env/stamp.py, helpcache.py)
    upstream/vllm.git       the releases history                 (authoring/upstream.py)
    procs/                  <pid>.json of running `patchq run`   (env/hookdir.py)
    runtime/hooks/, runtime/sources/   prepared import hooks     (env/hookdir.py)
    logs/                   logs of long-running helpers
    test-envs/, venvs/      environments built by tests and lab tools
    probe/<python>-<platform>/          CPU environments of `patchq probe` (probe/env.py):
        torch/<version>/                one CPU torch, shared by every release
        dists/<name>-<version>/         one installed distribution, shared by every release
        envs/<dist>-<version>/env.json  what a release's environment holds (dists, torch, why)
        runs/<dist>-<version>/          the patched copy a probe imports (made anew each run)
        pycache/                        byte code of all of the above (-X pycache_prefix)
    CACHEDIR.TAG            the marker: this root is patchq's      (this module)

**The root is patchq's alone.** :func:`check_root`, run by every command before it reads
or writes the cache (:mod:`patchq.__main__`, :func:`patchq.cli.main`), refuses with
:class:`~patchq.errors.CacheRefused` (exit 2, one line naming the directory and what is
wrong) a root that

* is not a directory (``$PATCHQ_CACHE_DIR`` naming a regular file, a FIFO, a dangling link);
* is owned by another user than you or root, or writable by others (the rule of walked-up
  configs, :func:`patchq.trust.stat_problem`; ``PATCHQ_SAFE_DIRECTORIES`` listing the
  root opts in, as for configs);
* carries no marker of patchq's and holds an entry whose name patchq does not make
  (:data:`NAMES`): ``PATCHQ_CACHE_DIR=.`` in a repository, or ``~/.cache``.

The marker is ``CACHEDIR.TAG`` (the Cache Directory Tagging Specification,
https://bford.info/cachedir/: backup tools skip the directory), its first line the
specification's signature, its second naming patchq and :data:`MARKER_FORMAT`. It is
written when patchq creates the root, and when it adopts an existing root without one
whose entries are all names patchq makes (or none): a cache made by an earlier patchq keeps
working. ``patchq cache clean``/``prune`` remove only under a marked root, and only what
patchq makes (:mod:`patchq.commands.cache`).

**Readers and cleaners.** A command that uses a release tree takes a shared ``flock`` of
the root directory for the life of the process (:func:`hold_shared`, from
:func:`patchq.vllmdist.releases.release_tree`); ``cache clean``/``prune`` take it
exclusively (:func:`exclusive`), so they wait for running commands (at most
``$PATCHQ_LOCK_TIMEOUT`` seconds, default 300, then exit 5) and a command reaching for a
tree meanwhile waits for them: a check never reads a release tree that is being removed.
Commands that use no tree (the no-op ``apply``, ``status``) take no lock: a plan, verdict
or stamp removed under them is a cache miss.

**Entries.** Files patchq reads back from the cache are judged one by one when read
(``jsonsafe.read_bytes(..., owned=True)``, on the descriptor): one owned by another user
or writable by others is ignored with a one-line note and recomputed (a plan, a verdict, a
stamp, a hook's compiled code), or treated as a damaged release tree (fetched again;
offline, exit 3). docs/safety.md says which and why.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path reads root_text)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


def root_text() -> str:
    """:func:`root` as a string, without importing :mod:`pathlib` on Linux (the no-op fast
    path's stamps live here)."""
    env = os.environ.get("PATCHQ_CACHE_DIR")
    if env:
        return os.path.expanduser(env)
    if sys.platform.startswith("linux"):
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "patchq")
    return str(root())  # pragma: no cover - not Linux


def origin() -> str:
    """How :func:`root` was chosen, for messages: ``$PATCHQ_CACHE_DIR``, ``$XDG_CACHE_HOME``
    or the default."""
    if os.environ.get("PATCHQ_CACHE_DIR"):
        return "$PATCHQ_CACHE_DIR"
    xdg = os.environ.get("XDG_CACHE_HOME")
    if sys.platform.startswith("linux") and xdg and os.path.isabs(xdg):
        return "$XDG_CACHE_HOME/patchq"
    return "the default cache directory"


def root() -> Path:
    """patchq's cache root (module docstring); ``~/.cache/patchq`` on Linux by default."""
    from pathlib import Path

    env = os.environ.get("PATCHQ_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if sys.platform.startswith("linux"):
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
        return base / "patchq"
    import platformdirs  # pragma: no cover - not Linux

    return Path(platformdirs.user_cache_dir("patchq"))


def write_entry(path: Path, data: bytes) -> None:
    """Write a cache entry whole or not at all: a temporary file beside ``path``, then
    :func:`os.replace` (readers see the old entry, the new one, or none). Entries carry their
    own checksums (their readers verify them), so no fsync: a lost entry is recomputed.

    Raises:
        OSError: the directory cannot be made or written (the temporary file is removed).
    """
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


#: Largest cached plan or verdict entry read (bytes); a realistic 200-patch verdict is ~0.3 MB.
MAX_ENTRY_BYTES = 64 << 20
_noted: set[str] = set()


def note_untrusted(what: str, path: object, problem: str) -> None:
    """One line on stderr (once per path and process): a cache entry another user could
    have written is ignored, and what it held is computed again."""
    key = str(path)
    if key not in _noted:
        _noted.add(key)
        sys.stderr.write(f"patchq: note: ignoring the cached {what} {key}: {problem}; it is computed again\n")


def pack_entry(schema: str, doc: object) -> bytes:
    """A plan or verdict entry's bytes: the line ``<schema> <sha256 of the body>``, then the
    body, ``doc`` as compact JSON (built-in types only: loading it runs no code).

    Raises:
        TypeError, ValueError: ``doc`` is not JSON data (or holds NaN or infinity).
    """
    import hashlib
    import json

    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    return f"{schema} {hashlib.sha256(body).hexdigest()}\n".encode() + body


def unpack_body(data: bytes) -> Any:
    """The JSON document of :func:`pack_entry`'s bytes, unchecked (what a reader gets back).

    Raises:
        ValueError: not such bytes.
    """
    import json

    return json.loads(data.partition(b"\n")[2])


def read_entry(path: Path, schema: str, what: str) -> Any:
    """The JSON document of the entry ``path`` written by :func:`pack_entry` with ``schema``,
    or None: missing, not a regular file, too large, another schema, a body that does not
    match its sha256 (damaged), or not JSON. An entry owned by another user (not root) or
    writable by others is None too, with a note (:func:`note_untrusted`): ``what`` names it."""
    import hashlib
    import json

    from patchq import jsonsafe

    try:
        data = jsonsafe.read_bytes(path, MAX_ENTRY_BYTES, owned=True)
    except jsonsafe.Untrusted as exc:
        note_untrusted(what, path, str(exc))
        return None
    except (OSError, ValueError):
        return None
    head, sep, body = data.partition(b"\n")
    if not sep or head != f"{schema} {hashlib.sha256(body).hexdigest()}".encode():
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def wheels() -> Path:
    """``<root>/wheels``: release wheels as downloaded."""
    return root() / "wheels"


def releases() -> Path:
    """``<root>/releases``: one extracted tree per release."""
    return root() / "releases"


def index() -> Path:
    """``<root>/index``: release lists from the package index."""
    return root() / "index"


def definition_index() -> Path:
    """``<root>/index/defs-3.sqlite``: the persisted definition index (:mod:`patchq.plan.definitions`)."""
    return index() / "defs-3.sqlite"  # format 3 (no fingerprints in rows); an older patchq keeps defs-2.sqlite


def plans() -> Path:
    """``<root>/plans``: planned texts keyed by content (:mod:`patchq.plan.plancache`)."""
    return root() / "plans"


def upstream_repo() -> Path:
    """``<root>/upstream/vllm.git``: the releases history (:mod:`patchq.authoring.upstream`)."""
    return root() / "upstream" / "vllm.git"


def procs() -> Path:
    """``<root>/procs``: process records of ``patchq run`` when no runtime dir is set."""
    return root() / "procs"


def hooks() -> Path:
    """``<root>/runtime/hooks``: prepared import-hook directories."""
    return root() / "runtime" / "hooks"


def hook_sources() -> Path:
    """``<root>/runtime/sources``: texts served by the import hooks."""
    return root() / "runtime" / "sources"


def logs() -> Path:
    """``<root>/logs``."""
    return root() / "logs"


def probe() -> Path:
    """``<root>/probe``: the CPU environments ``patchq probe`` builds (:mod:`patchq.probe.env`)."""
    return root() / "probe"


def test_envs() -> Path:
    """``<root>/test-envs``: environments the tests build once."""
    return root() / "test-envs"


# ----------------------------------------------------------------------------- the root

#: The marker file of a root that is patchq's (module docstring).
MARKER = "CACHEDIR.TAG"
#: The format the marker names; bump it when what a root may hold changes incompatibly.
MARKER_FORMAT = "patchq.cache-root/1"
_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
MARKER_TEXT = (f"{_SIGNATURE}\n"
               f"# This file is a cache directory tag created by patchq ({MARKER_FORMAT}).\n"
               "# patchq's cache: `patchq cache clean` removes only what patchq made here.\n"
               "# For information about cache directory tags see https://bford.info/cachedir/\n")
#: The names patchq makes directly under the root (the layout above), the marker aside.
NAMES = frozenset({"wheels", "releases", "index", "plans", "verdicts", "stamps", "upstream", "procs", "runtime",
                   "logs", "test-envs", "venvs", "probe"})
_MARKER_TMP = "." + MARKER + "."  # the marker's temporary file while it is written

_checked: str | None = None  # the root text check_root() accepted in this process
_shared_fd: int | None = None  # the descriptor holding the shared lock of that root


def is_marked(path: str) -> bool:
    """True when ``path`` holds patchq's marker (a regular file, not a link, whose first
    line is the tag signature and whose second names patchq's :data:`MARKER_FORMAT` family)."""
    try:
        fd = os.open(os.path.join(path, MARKER), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)
    lines = head.split(b"\n")
    return (lines[0] == _SIGNATURE.encode() and len(lines) > 1
            and b"created by patchq (patchq.cache-root/" in lines[1])


def foreign(path: str) -> list[str]:
    """The entries of the root ``path`` whose names patchq does not make, sorted (a marker
    that is not patchq's counts as foreign)."""
    out = []
    for name in os.listdir(path):
        if name in NAMES or name.startswith(_MARKER_TMP):
            continue
        if name == MARKER and is_marked(path):
            continue
        out.append(name)
    return sorted(out)


def write_marker(path: str) -> None:
    """Write patchq's marker into the root ``path`` (atomically, mode 0644).

    Raises:
        OSError: it cannot be written.
    """
    tmp = os.path.join(path, f"{_MARKER_TMP}{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(MARKER_TEXT)
        os.replace(tmp, os.path.join(path, MARKER))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _names(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def check_root() -> str:
    """Make sure the cache root can be used, and return it (a string); see the module
    docstring for the rules. A missing root is created with its marker (nothing happens
    when it cannot be: the command reports the first write that fails); an unmarked root
    holding only names patchq makes is adopted (its marker written when it can be).
    Checked once per process and root (a few system calls: the no-op ``apply`` runs it).

    Raises:
        CacheRefused: the root cannot be used (exit 2).
    """
    global _checked
    path = root_text()
    if _checked == path:
        return path
    import stat

    from patchq.errors import CacheRefused

    where = f"the cache directory {os.path.abspath(path)} ({origin()})"
    fix = "set PATCHQ_CACHE_DIR to a directory of patchq's own (patchq creates it)"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise CacheRefused(f"{where} is a symlink to nothing; {fix}") from None
        try:
            os.makedirs(path, mode=0o755)
            write_marker(path)
        except FileExistsError:
            pass  # made meanwhile by another patchq: judged below
        except OSError:
            return path  # cannot be made here: the first write into it says why
        st = os.stat(path)
    except NotADirectoryError:
        raise CacheRefused(f"{where} lies below a file, not a directory; {fix}") from None
    except OSError as exc:
        raise CacheRefused(f"{where} cannot be examined ({exc.strerror}); {fix}") from None
    if not stat.S_ISDIR(st.st_mode):
        kind = "a regular file" if stat.S_ISREG(st.st_mode) else "not a directory"
        raise CacheRefused(f"{where} is {kind}; {fix}")
    from patchq import trust

    problem = trust.ownership_problem(path)
    if problem and not trust.opted_in(os.path.realpath(path)):
        raise CacheRefused(f"refusing {where}: {problem}; another user could plant cached plans, verdicts or "
                           f"release trees there. Use a directory of your own, or set "
                           f"{trust.SAFE_ENV}={os.path.realpath(path)} if you trust it")
    if not is_marked(path):
        try:
            others = foreign(path)
        except OSError as exc:
            raise CacheRefused(f"{where} cannot be listed ({exc.strerror}); {fix}") from None
        if others:
            raise CacheRefused(f"refusing {where}: it holds {_names(others)}, which patchq does not make, and no "
                               f"{MARKER} of patchq's, so it is not patchq's cache; {fix}")
        try:
            write_marker(path)  # adopted: a cache of an earlier patchq, or an empty directory
        except OSError:
            pass  # a read-only cache stays usable for reading
    _checked = path
    return path


def _lock_timeout() -> float:
    try:
        return float(os.environ.get("PATCHQ_LOCK_TIMEOUT") or 300.0)
    except ValueError:
        return 300.0


def _flock(fd: int, mode: int, timeout: float, waiting: str) -> bool:
    """``flock(fd, mode)``, polling until ``timeout``; a note on stderr once it has to wait.
    False when the time ran out; True when taken (or the filesystem has no flock)."""
    import fcntl
    import time

    deadline = time.monotonic() + timeout
    noted = False
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:
            return True  # no flock here (some network filesystems): nothing to wait for
        if time.monotonic() > deadline:
            return False
        if not noted:
            sys.stderr.write(f"patchq: note: {waiting}\n")
            noted = True
        time.sleep(0.05)


_shared_root: str | None = None  # the root whose shared lock _shared_fd holds


def hold_shared() -> None:
    """Take the shared lock of the cache root for the life of the process, once (module
    docstring): :func:`patchq.vllmdist.releases.release_tree` does, before a release tree is
    used, so ``cache clean``/``prune`` wait for the command and it waits for them.

    Raises:
        ReadOnlyError: ``cache clean``/``prune`` held the root for ``$PATCHQ_LOCK_TIMEOUT``
            seconds (exit 5).
    """
    global _shared_fd, _shared_root
    path = root_text()
    if _shared_fd is not None and _shared_root == path:
        return
    release_shared()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    import fcntl

    timeout = _lock_timeout()
    waiting = f"waiting for `patchq cache clean` or `patchq cache prune` to finish with {path}"
    if not _flock(fd, fcntl.LOCK_SH, timeout, waiting):
        os.close(fd)
        from patchq.errors import ReadOnlyError

        raise ReadOnlyError(f"`patchq cache clean` or `patchq cache prune` held the cache {path} for {timeout:g} s "
                            f"($PATCHQ_LOCK_TIMEOUT); nothing was done")
    _shared_fd, _shared_root = fd, path


def release_shared() -> None:
    """Let go of this process's shared lock of the root (``cache clean``/``prune`` do, before
    taking it exclusively)."""
    global _shared_fd, _shared_root
    if _shared_fd is not None:
        try:
            os.close(_shared_fd)
        except OSError:
            pass
        _shared_fd = _shared_root = None


class exclusive:  # noqa: N801 - used as a function: ``with cache.exclusive(path):``
    """The root ``path`` locked exclusively (``cache clean``/``prune``): waits for every
    other patchq command using it, at most ``$PATCHQ_LOCK_TIMEOUT`` seconds.

    Raises (on enter):
        ReadOnlyError: other commands held the cache for the whole timeout (exit 5).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> exclusive:
        import fcntl

        from patchq.errors import ReadOnlyError

        release_shared()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise ReadOnlyError(f"cannot open the cache {self.path} ({exc.strerror}); nothing was removed") from None
        timeout = _lock_timeout()
        if not _flock(fd, fcntl.LOCK_EX, timeout, f"waiting for other patchq commands using {self.path}"):
            os.close(fd)
            raise ReadOnlyError(f"other patchq commands held the cache {self.path} for {timeout:g} s "
                                f"($PATCHQ_LOCK_TIMEOUT); nothing was removed")
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
