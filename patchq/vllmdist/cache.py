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
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path reads root_text)
if TYPE_CHECKING:
    from pathlib import Path


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
