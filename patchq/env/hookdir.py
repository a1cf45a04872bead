"""The hook directories of ``patchq run``: prepared once, reused while nothing changed.

A hook directory (``<patchq cache>/runtime/hooks/<profile>-<key>/``) holds:

``sitecustomize.py``
    generated: imports ``_patchq_hook`` and calls its ``boot`` (see
    ``patchq/runtime/hook.py``, the module docstring explains the hook).
``_patchq_hook.py``
    a byte copy of ``patchq/runtime/hook.py`` (the target environment need not have
    patchq installed; a changed hook file makes the directory stale).
``manifest.marshal`` / ``manifest.json``
    the same ``patchq.hook/1`` document: profile, patch-set digest, vLLM version,
    site-packages, the plan's per-patch rows, per served module its file, package
    flag, on-disk size/mtime/sha256, the cached source path, its sha256 and its patches,
    and the sha256 of the hook's own ``__pycache__`` files. ``manifest.marshal`` is behind
    a tag, length and CRC-32 (:func:`patchq.runtime.hook.pack`).
``.patchq-hook``
    a marker (a hook never chains to another hook's ``sitecustomize``).
``code/``
    compiled code per interpreter, written by the hook itself.

``key`` = sha256 over the site-packages path, vLLM version, profile, the profile's patch
digest (:func:`patchq.runtime.cachefold.profile_digest`) and the toolchain hash (patchq's
version and its planner sources), so a changed series or planner never reuses it.

The served texts live in ``<patchq cache>/runtime/sources/<pristine sha256[:16]>-<set
key>.py``: keyed by the pristine file's sha256 and the patch set (digest, vLLM version,
toolchain). Warm start (:func:`load_warm`): check what the processes will use, then stat (or hash)
the target files and the journal: nothing is parsed. Checked: the marker, the checksummed
``manifest.marshal`` (the copy the hook serves from) equal to ``manifest.json``,
``_patchq_hook.py`` and ``sitecustomize.py`` byte-equal to what :func:`build` writes, the
``__pycache__`` hashes, and every cached source against its sha256 (the hook checks each
again before executing it); the directory and the files a process imports or reads from
it must be yours or root's and not writable by others (the cache's rule, with a one-line
note; an untrusted directory is discarded whole). Any mismatch prepares the directory again (``code/`` and
``__pycache__/`` are then discarded). Only :func:`build` imports the planner.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from patchq import __version__
from patchq.env.fsutil import atomic_write
from patchq.hashing import sha256_file
from patchq.runtime import hook as hook_mod
from patchq.runtime.cachefold import profile_digest
from patchq.vllmdist import cache


#: Planner sources whose change can change a patched text.
def cache_root() -> Path:
    """patchq's cache root (:func:`patchq.vllmdist.cache.root`, stdlib-only on Linux)."""
    return cache.root()


def runtime_dir() -> Path:
    """Where running processes leave their ``<pid>.json`` records: ``$PATCHQ_RUNTIME_DIR``,
    else ``$XDG_RUNTIME_DIR/patchq``, else ``<patchq cache>/procs``."""
    env = os.environ.get("PATCHQ_RUNTIME_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg) and os.access(xdg, os.W_OK):
        return Path(xdg) / "patchq"
    return cache.procs()


def toolchain_hash() -> str:
    """12 hex of the planner's sources (:func:`patchq.plan.toolchain.digest`)."""
    from patchq.plan import toolchain

    return toolchain.digest()[:12]


def hook_source() -> Path:
    """The hook module copied into every hook directory."""
    return Path(hook_mod.__file__)


def hook_dir_for(site: Path, version: str, profile: str, digest: str) -> Path:
    """The hook directory of one environment and patch set (see module docstring)."""
    key_text = "\0".join([str(Path(site).resolve()), version, profile, digest, toolchain_hash()])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    return cache.hooks() / f"{profile}-{key}"


def _journal_sha(site: Path) -> str | None:
    from patchq.env import layout

    return sha256_file(layout.journal_path(layout.state_root(str(site))))


def module_name(relpath: str) -> tuple[str, bool]:
    """``vllm/a/b.py`` -> (``vllm.a.b``, False); ``vllm/a/__init__.py`` -> (``vllm.a``, True)."""
    parts = relpath[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def load_warm(hook_dir: Path, site: Path) -> dict | None:
    """The manifest of ``hook_dir`` when it can be used as it is, else None.

    Usable: same schema and hook file, every served file unchanged on disk (size and
    mtime, else sha256), every cached source present, the journal unchanged.
    """
    from patchq import jsonsafe

    try:
        if os.path.islink(hook_dir) or not (hook_dir / hook_mod.MARKER).is_file():
            return None
        problem = _untrusted(hook_dir)
        if problem:
            cache.note_untrusted("hook directory", hook_dir, problem)
            return None
        manifest = hook_mod.read_manifest(str(hook_dir / hook_mod.MANIFEST))  # what the hook will serve
        if jsonsafe.read_file(hook_dir / "manifest.json") != json.loads(json.dumps(manifest)):
            return None  # the two copies disagree: one was edited
        if manifest.get("key") != hook_dir.name:
            return None
        if jsonsafe.read_bytes(hook_dir / "_patchq_hook.py") != hook_source().read_bytes():
            return None
        if jsonsafe.read_bytes(hook_dir / "sitecustomize.py") != _sitecustomize(manifest).encode():
            return None
        for name, want in (manifest.get("pycache") or {}).items():  # what every process imports first
            if sha256_file(hook_dir / "__pycache__" / name) not in (want, None):
                return None
        if not (hook_dir / "__pycache__").is_dir():
            _precompile(hook_dir)
    except (OSError, ValueError, EOFError, TypeError, KeyError):
        return None
    if manifest.get("journal_sha256") != _journal_sha(site):
        return None
    try:
        for entry in manifest["modules"].values():
            try:
                st = os.stat(entry["path"])
            except OSError:
                return None
            if (st.st_size, st.st_mtime_ns) != (entry["size"], entry["mtime_ns"]):
                if sha256_file(entry["path"]) != entry["disk_sha256"]:
                    return None
            if sha256_file(entry["source"]) != entry["patched_sha256"]:
                return None
    except (KeyError, TypeError, AttributeError):
        return None
    return manifest


def _untrusted(hook_dir: Path) -> str | None:
    """Why the hook directory (or a file a process will import or read from it) may not be
    used, or None: owned by another user than you or root, or writable by others
    (:func:`patchq.trust.ownership_problem`, the rule of patchq's cache)."""
    from patchq.trust import ownership_problem

    names = [".", hook_mod.MARKER, hook_mod.MANIFEST, "manifest.json", "_patchq_hook.py", "sitecustomize.py",
             "__pycache__", "code"]
    try:
        names += [f"__pycache__/{n}" for n in os.listdir(hook_dir / "__pycache__")]
    except OSError:
        pass
    for name in names:
        problem = ownership_problem(str(hook_dir / name))
        if problem:
            return problem
    return None


def _discard(path: Path) -> None:
    """Remove whatever is at a hook directory's path that is not a directory (a symlink, a file)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _sitecustomize(manifest: dict) -> str:
    return (
        f"# Generated by `patchq run` for profile {manifest['profile']} (vllm {manifest['vllm']}, "
        f"patch set {manifest['digest']}).\n"
        "# Installs patchq's import hook, then runs the sitecustomize this one shadows.\n"
        "import _patchq_hook\n\n"
        "_patchq_hook.boot(__file__)\n"
    )


def _precompile(hook_dir: Path) -> None:
    """Write the ``.pyc`` of the hook's two modules for this interpreter: every process
    imports them, and ``PYTHONDONTWRITEBYTECODE`` (common in containers) would otherwise
    make each one compile them from source (~5 ms). Another interpreter compiles its own."""
    import py_compile

    for name in ("sitecustomize.py", "_patchq_hook.py"):
        try:
            py_compile.compile(str(hook_dir / name), doraise=True)
        except (OSError, py_compile.PyCompileError):
            pass  # a missing .pyc costs time, never correctness


def build(target, series, profile: str, summary: dict | None = None) -> dict:
    """Plan ``profile`` on ``target`` and write its hook directory; returns the manifest.

    The served texts are exactly what ``patchq apply --profile`` would leave in the files
    (:func:`patchq.env.converge.converge` with ``dry_run``): the patched text of every file
    the profile changes, and the pristine text of files another profile left patched on
    disk (so the process sees this profile only).

    Args:
        target: the installed vLLM (:func:`patchq.vllmdist.sources.installed`).
        series: the loaded series. profile: a profile name in it.
        summary: :func:`patchq.hashing.series_summary` (computed when None).
    Raises:
        PlanFailed: a patch failed (nothing is written; the plan is on the exception).
        ForeignEditError: a target file was edited by someone else.
        UsageError: unknown profile.
    """
    from patchq.env.converge import converge
    from patchq.env.state import StateDir
    from patchq.hashing import series_summary

    patches = series.patches_of(profile)
    summary = summary or series_summary(series.root, series.anchors_root)
    digest = profile_digest({pid: summary["hashes"][pid] for pid in summary["profiles"][profile]})
    site = Path(target.root)
    version = str(target.version)
    hook_dir = hook_dir_for(site, version, profile, digest)
    result = converge(target, patches, profile=profile, dry_run=True)
    plan = result.plan

    set_key = hashlib.sha256(f"{digest}\0{version}\0{toolchain_hash()}".encode()).hexdigest()[:16]
    sources = cache.hook_sources()
    texts: dict[str, tuple[str, str, list[str]]] = {}
    for r in plan.results:
        for rel in r.files:
            if r.status == "ok" and rel in plan.patched:
                prev = texts.get(rel, ("patched", plan.patched[rel], []))
                texts[rel] = ("patched", prev[1], prev[2] + [f"{r.patch_id}:{r.hash}"])
    state = StateDir(site)
    record = target.record()
    for rel in result.restored:  # verified against RECORD before it is served
        texts[rel] = ("pristine", state.read_pristine(rel, record=record.get(rel)).decode("utf-8"), [])

    modules = {}
    for rel, (kind, text, pids) in sorted(texts.items()):
        data = text.encode("utf-8")
        pristine = plan.pristine.get(rel)
        pristine_sha = hashlib.sha256(pristine.encode("utf-8") if pristine is not None else data).hexdigest()
        src = sources / f"{pristine_sha[:16]}-{set_key if kind == 'patched' else 'pristine'}.py"
        patched_sha = hashlib.sha256(data).hexdigest()
        if sha256_file(src) != patched_sha:
            src.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(src, data, mode=0o644)
        path = site / rel
        st = os.stat(path)
        name, package = module_name(rel)
        modules[name] = {
            "relpath": rel, "path": str(path), "package": package, "kind": kind,
            "size": st.st_size, "mtime_ns": st.st_mtime_ns, "disk_sha256": sha256_file(path),
            "pristine_sha256": pristine_sha, "patched_sha256": patched_sha,
            "source": str(src), "patches": pids,
        }
    manifest: dict[str, Any] = {
        "schema": hook_mod.SCHEMA,
        "key": hook_dir.name,
        "profile": profile,
        "digest": digest,
        "vllm": version,
        "site_packages": str(site),
        "patchq": __version__,
        "toolchain": toolchain_hash(),
        "patches": [{"id": r.patch_id, "hash": r.hash, "status": r.status, "reason": r.reason}
                    for r in plan.results],
        "modules": modules,
        "journal_sha256": _journal_sha(site),
        "runtime_dir": str(runtime_dir()),
    }
    import shutil

    if os.path.islink(hook_dir) or (hook_dir.exists() and not hook_dir.is_dir()):
        _discard(hook_dir)
    elif hook_dir.is_dir() and _untrusted(hook_dir):  # another user's: nothing in it is kept
        aside = hook_dir.with_name(f".{hook_dir.name}.tmp-removing-{os.getpid()}")
        os.replace(hook_dir, aside)
        shutil.rmtree(aside, ignore_errors=True)
    hook_dir.mkdir(parents=True, exist_ok=True)

    for stale in ("code", "__pycache__"):  # compiled by whoever came before: never trusted
        if os.path.islink(hook_dir / stale) or (hook_dir / stale).is_file():
            os.unlink(hook_dir / stale)
        else:
            shutil.rmtree(hook_dir / stale, ignore_errors=True)
    atomic_write(hook_dir / hook_mod.MARKER, b"patchq hook directory\n", mode=0o644)
    atomic_write(hook_dir / "_patchq_hook.py", hook_source().read_bytes(), mode=0o644)
    atomic_write(hook_dir / "sitecustomize.py", _sitecustomize(manifest).encode(), mode=0o644)
    _precompile(hook_dir)
    manifest["pycache"] = {p.name: sha256_file(p) for p in sorted((hook_dir / "__pycache__").glob("*.pyc"))}
    import marshal

    # the manifest last: a directory with a manifest is complete; marshal behind a checksum
    atomic_write(hook_dir / hook_mod.MANIFEST, hook_mod.pack(hook_mod.MANIFEST_TAG, marshal.dumps(manifest)),
                 mode=0o644)
    atomic_write(hook_dir / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode(), mode=0o644)
    manifest["hook_dir"] = str(hook_dir)
    return manifest
