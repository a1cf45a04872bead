"""Which patchq profile is live in THIS process, in either delivery mode (stdlib only).

``runtime`` (``patchq run``): the import hook is installed (``_patchq_hook.STATE``);
every target module already imported must have been executed by its loader (a module
imported around the hook would be running pristine code).

``disk`` (``patchq apply``): the journal (:func:`journal_path`, from
``patchq.env.layout``, the owner of the state layout) names a profile; every file
it patched still has the journal's patched sha256 and carries each of its patches'
sentinels (``# patchq:<id>:<hash>``), and an already-imported target module was loaded
from that very file.

When both are present the hook wins: it serves every file the profile touches.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field

from patchq.jsonsafe import read_bytes  # bounded, non-blocking, never through a link
from patchq.runtime.cachefold import profile_digest

RUNTIME = "runtime"
DISK = "disk"
NONE = "none"


@dataclass
class Liveness:
    """What is live: ``mode`` (runtime | disk | none), the profile and its patch-set
    digest, the live patches as ``"id:hash"``, where from (``source``: hook directory or
    journal path), and ``problems`` (non-empty: the profile is NOT fully live)."""

    mode: str
    profile: str | None = None
    digest: str | None = None
    patches: list[str] = field(default_factory=list)
    source: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """A profile is live and nothing contradicts it."""
        return self.mode != NONE and not self.problems


def hook_state():
    """The installed import hook (``_patchq_hook.STATE``), or None."""
    return getattr(sys.modules.get("_patchq_hook"), "STATE", None)


def _served_by_hook(module) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(getattr(spec, "loader", None), "patchq_hook", False))


def check_runtime(state, modules=None) -> Liveness:
    """Liveness from an installed hook (``state``: a ``_patchq_hook.Hook``)."""
    modules = sys.modules if modules is None else modules
    m = state.manifest
    live = Liveness(RUNTIME, m["profile"], m["digest"],
                    [f"{p['id']}:{p['hash']}" for p in m["patches"] if p["status"] == "ok"],
                    state.hook_dir)
    for name in sorted(m["modules"]):
        mod = modules.get(name)
        if mod is not None and not _served_by_hook(mod):
            live.problems.append(f"{name} was imported without the hook (pristine code in memory)")
    return live


def module_name(relpath: str) -> str:
    """``vllm/a/b.py`` -> ``vllm.a.b``; ``vllm/a/__init__.py`` -> ``vllm.a``."""
    parts = relpath[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def journal_path(site: str) -> str:
    """The journal of ``site``, where :func:`patchq.env.layout.state_root` puts it.

    ``patchq.env.layout`` is standard library only and imports nothing of patchq beyond
    the package's ``__init__`` (a version string), so it is cheap and safe in a vLLM
    process."""
    from patchq.env import layout

    return layout.journal_path(layout.state_root(site))


def _journal_problem(journal) -> str | None:
    from patchq.env.layout import journal_problem

    return journal_problem(journal)


def check_disk(site: str, modules=None) -> Liveness:
    """Liveness from the journal and files of ``site`` (site-packages holding vllm)."""
    modules = sys.modules if modules is None else modules
    path = journal_path(site)
    try:
        journal = json.loads(read_bytes(path, 32 << 20).decode("utf-8"))
    except FileNotFoundError:
        return Liveness(NONE, source=path)
    except (OSError, ValueError) as exc:
        return Liveness(DISK, source=path, problems=[f"journal unreadable: {exc}"])
    problem = _journal_problem(journal)
    if problem:
        return Liveness(DISK, source=path, problems=[f"journal damaged: {problem}"])
    if not journal.get("profile"):
        return Liveness(NONE, source=path)
    patches = journal.get("patches", {})
    live = Liveness(DISK, journal["profile"], profile_digest(journal.get("profile_hashes", {})),
                    [f"{pid}:{e['hash']}" for pid, e in patches.items()], path)
    for rel, entry in sorted(journal.get("files", {}).items()):
        full = os.path.join(site, rel)
        try:
            data = read_bytes(full, 1 << 30)
        except FileNotFoundError:
            live.problems.append(f"{rel} is missing")
            continue
        except (OSError, ValueError) as exc:  # a FIFO, a symlink, a directory in its place
            live.problems.append(f"{rel} is unreadable: {exc}")
            continue
        if hashlib.sha256(data).hexdigest() != entry["patched_sha256"]:
            live.problems.append(f"{rel} changed since apply")
        text = data.decode("utf-8", "replace")
        for pid in entry.get("patches", []):
            h = patches.get(pid, {}).get("hash", "?")
            if f"# patchq:{pid}:{h}" not in text:
                live.problems.append(f"{rel} lacks the sentinel of {pid}:{h}")
        mod = modules.get(module_name(rel))
        loaded = getattr(mod, "__file__", None)
        if loaded and os.path.realpath(loaded) != os.path.realpath(full):
            live.problems.append(f"{module_name(rel)} was loaded from {loaded}, not {full}")
    return live


def vllm_site(modules=None) -> str | None:
    """site-packages of the vllm in this process (imported, else findable), or None."""
    modules = sys.modules if modules is None else modules
    vllm = modules.get("vllm")
    origin = getattr(vllm, "__file__", None)
    if origin is None:
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec("vllm")
        origin = getattr(spec, "origin", None)
    return os.path.dirname(os.path.dirname(os.path.abspath(origin))) if origin else None


def detect(modules=None, site: str | None = None) -> Liveness:
    """What is live in this process (hook first, then the journal of ``site``)."""
    state = hook_state()
    if state is not None:
        return check_runtime(state, modules)
    site = site or vllm_site(modules)
    if site is None:
        return Liveness(NONE, problems=[])
    return check_disk(site, modules)
