"""``patchq status --runtime``: the patches live in running processes (``patchq run``).

Each process the import hook served a target module to (or that the vLLM plugin
checked) leaves ``<runtime dir>/<pid>.json`` (``patchq.runtime/1``, written by
``patchq/runtime/hook.py``; the runtime dir is :func:`patchq.env.hookdir.runtime_dir`).
A record is live when its pid exists with the same start time (``/proc/<pid>/stat``),
so a reused pid is not mistaken for it; records of exited processes (a fork child
leaves its record: it ends with ``os._exit``) are removed (``pruned`` in the report).

Per live process the report gives the profile, its patches (``id:hash``), vLLM version,
and the modules actually served. A process whose patch hashes differ from the current
series is ``stale`` (the series changed since it started); exit code 7 then, as for
``status``. Standard library only.
"""

from __future__ import annotations

import os

from patchq.errors import EXIT_DRIFT, EXIT_OK
from patchq.runtime.hook import start_ticks

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (standard library only)
if TYPE_CHECKING:
    from patchq.documents import RuntimeStatusDoc

SCHEMA = "patchq.runtime-status/1"


#: Largest pid Linux hands out (``/proc/sys/kernel/pid_max`` cannot exceed 2**22).
_PID_MAX = 1 << 22
#: A runtime record is small; a bigger file is not one.
_MAX_RECORD = 1 << 20


def _alive(pid: int, ticks: int | None) -> bool:
    """True when ``pid`` (a positive pid: 0 and -1 would address a process group or every
    process) runs, with the same start time when both are known."""
    if not 0 < pid < _PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        pass
    now = start_ticks(pid)
    return ticks is None or now is None or now == ticks


def _str_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def _int(value: object, optional: bool = False) -> bool:
    """An int that is not a bool (or None, when ``optional``)."""
    return (optional and value is None) or (isinstance(value, int) and not isinstance(value, bool))


def _patches_ok(patches: object) -> bool:
    """A record's ``patches``: a list of {id, hash, status?} with string fields."""
    return isinstance(patches, list) and all(
        isinstance(p, dict) and isinstance(p.get("id"), str) and isinstance(p.get("hash"), str)
        and _str_or_none(p.get("status")) for p in patches)


def _record_ok(rec: object) -> bool:
    """``rec`` has the field types of a ``patchq.runtime/1`` record."""
    if not isinstance(rec, dict):
        return False
    served = rec.get("served", {})
    argv = rec.get("argv", [])
    return (_int(rec.get("pid")) and rec.get("schema", "patchq.runtime/1") == "patchq.runtime/1"
            and _int(rec.get("start_ticks"), True) and _int(rec.get("ppid"), True)
            and isinstance(argv, list) and all(isinstance(a, str) for a in argv)
            and all(_str_or_none(rec.get(k)) for k in ("profile", "digest", "vllm", "site_packages"))
            and isinstance(served, (dict, list)) and all(isinstance(n, str) for n in served)
            and _patches_ok(rec.get("patches", [])))


def _read_record(path: str) -> dict:
    """One ``<pid>.json`` record, checked (``patchq.runtime/1`` field types), read without
    blocking or following a symlink and with bounded size and depth
    (:mod:`patchq.jsonsafe`).

    Raises:
        StateError: unreadable, not JSON, or wrong field types (exit 6, names the file).
    """
    from patchq import jsonsafe
    from patchq.errors import StateError

    try:
        rec = jsonsafe.read_file(path, max_bytes=_MAX_RECORD, max_depth=16)
    except (OSError, ValueError) as exc:
        raise StateError(f"runtime record {path} is damaged ({exc}); remove it") from None
    ok = _record_ok(rec)
    if not ok:
        raise StateError(f"runtime record {path} is damaged (not a patchq.runtime/1 record); remove it")
    return rec


def _prune(path: str, rec: dict) -> None:
    """Remove the record of an exited process: a ``patchq.runtime/1`` regular file only."""
    if rec.get("schema") == "patchq.runtime/1" and not os.path.islink(path):
        try:
            os.unlink(path)
        except OSError:
            pass


def _profile_change(rec: dict, profiles: dict[str, list[str]] | None) -> str:
    """How the series' profile of the process (its record's ``profile``) differs from the
    patches the process was prepared with, or ``""``."""
    name = rec.get("profile")
    if profiles is None or not name:
        return ""
    if name not in profiles:
        return f"profile {name} is no longer in the series"
    had, now = [p["id"] for p in rec.get("patches", [])], list(profiles[name])
    if had == now:
        return ""
    added, gone = [p for p in now if p not in had], [p for p in had if p not in now]
    parts = ([f"gained {', '.join(added)}"] if added else []) + ([f"lost {', '.join(gone)}"] if gone else [])
    return f"profile {name} {' and '.join(parts) or 'reordered its patches'} since start"


def _process_row(rec: dict, series_hashes: dict[str, str] | None,
                 profiles: dict[str, list[str]] | None = None) -> dict:
    """The report's row of a live process's record (``stale`` against ``series_hashes``,
    and against ``profiles``: the series' profile of that name lists other patches now)."""
    live = [p for p in rec.get("patches", []) if p.get("status") == "ok"]
    stale = []
    if series_hashes is not None:
        stale = [p["id"] for p in rec.get("patches", [])
                 if p["id"] in series_hashes and series_hashes[p["id"]] != p["hash"]]
    reasons = [f"series changed since start: {', '.join(stale)}"] if stale else []
    change = _profile_change(rec, profiles)
    if change:
        reasons.append(change)
    return {
        "pid": rec["pid"], "ppid": rec.get("ppid"), "argv": rec.get("argv", []),
        "profile": rec.get("profile"), "digest": rec.get("digest"), "vllm": rec.get("vllm"),
        "site_packages": rec.get("site_packages"), "mode": "runtime",
        "patches": [f"{p['id']}:{p['hash']}" for p in live],
        "served": sorted(rec.get("served", {})),
        "status": "stale" if reasons else "live",
        "reason": "; ".join(reasons),
    }


def collect(runtime_dir: str | os.PathLike[str], series_hashes: dict[str, str] | None = None,
            prune: bool = True, profiles: dict[str, list[str]] | None = None) -> RuntimeStatusDoc:
    """The report (a JSON-ready dict, schema ``patchq.runtime-status/1``).

    A record of a process that exited is removed only when it is a ``patchq.runtime/1``
    record, a regular file, in a runtime directory that is not a symlink (a symlinked
    directory is read, never pruned: the files there may be another program's).

    Args:
        runtime_dir: the directory of ``<pid>.json`` records.
        series_hashes: patch id -> current hash (marks stale processes), or None.
        prune: remove the records of exited processes.
        profiles: profile -> its patch ids in the series now (a process whose profile
            gained, lost or reordered patches since it started is stale), or None.
    Raises:
        StateError: a record is damaged (the message names it).
    """
    runtime_dir = str(runtime_dir)
    processes: list[dict] = []
    pruned: list[int] = []
    if os.path.islink(runtime_dir.rstrip(os.sep) or runtime_dir):
        prune = False
    try:
        names = sorted(n for n in os.listdir(runtime_dir) if n.endswith(".json") and n[:-5].isdigit())
    except (FileNotFoundError, NotADirectoryError):
        names = []
    for name in names:
        path = os.path.join(runtime_dir, name)
        rec = _read_record(path)
        if not _alive(rec["pid"], rec.get("start_ticks")):
            pruned.append(rec["pid"])
            if prune:
                _prune(path, rec)
            continue
        processes.append(_process_row(rec, series_hashes, profiles))
    processes.sort(key=lambda p: p["pid"])
    return {"schema": SCHEMA, "runtime_dir": runtime_dir, "processes": processes, "pruned": pruned}


def exit_code(report: RuntimeStatusDoc) -> int:
    """7 when a live process runs a stale patch set, else 0."""
    return EXIT_DRIFT if any(p["status"] == "stale" for p in report["processes"]) else EXIT_OK

