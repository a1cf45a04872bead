"""The fast path: ``status``, ``list``, and ``apply`` (a no-op without parsing anything).

``patchq apply --profile P`` runs at every server start; when the environment already
carries P it must cost about an interpreter start. This module answers with the
standard library only (os, json, hashlib): it reads the journal, hashes the series
files and the patched files, and parses nothing. Any argument it does not recognise,
or any doubt about a no-op (no journal, a pending write, a hash mismatch) leads to a real
apply, run without typer and rich; unrecognised arguments (or an empty value) return None
and the full CLI takes over. Only the profile served is resolved: a mistake in another
profile of ``profiles.toml`` does not stop this one. Errors go up to :func:`patchq.edge.guard`.
"""

from __future__ import annotations

import json
import os
import sys

from patchq.errors import EXIT_OK

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from patchq.documents import ApplyDoc

#: The options the fast path answers (their names come from :data:`patchq.options.COMMANDS`);
#: any other option defers to the full CLI.
_FAST = ("profile", "site_packages", "series", "json")


def _parse(argv: list[str], command: str) -> dict | None:
    """The options of ``command``'s ``argv``, or None for anything unrecognised or an empty value."""
    from patchq import options

    declared = [o for o in options.COMMANDS[command] if o.dest in _FAST]
    try:
        return options.parse(argv, declared)[0]
    except options.Unparsed:
        return None  # the full CLI reports it (an empty value: exit 2)


def _roots(opts: dict) -> tuple[str, str, str] | None:
    import sysconfig

    from patchq import discovery
    from patchq.errors import SeriesError

    site = opts.get("site_packages") or sysconfig.get_paths()["purelib"]
    try:
        loc = discovery.find(opts.get("series"))
    except SeriesError:
        return None  # the full path reports it
    opts["location"] = loc
    return os.path.abspath(site), loc.series_str, loc.anchors_str


def try_fast(argv: list[str]) -> int | None:
    """Answer ``argv`` on the fast path; return the exit code, or None to defer.

    Raises:
        PatchqError: from ``list`` and a real ``apply`` (reported by :func:`patchq.edge.guard`).
    """
    if not argv or argv[0] not in ("apply", "status", "list"):
        return None
    opts = _parse(argv[1:], argv[0])
    if opts is None:
        return None
    if argv[0] == "list":  # typer alone costs more than the listing
        return _list(opts)
    roots = _roots(opts)
    if roots is None:
        return None
    site, series, anchors = roots
    if (argv[0] == "apply") != ("profile" in opts):  # status takes no --profile: the full CLI says so
        return None
    try:  # any doubt: the full path decides and reports properly
        if argv[0] == "status":
            from patchq.env import status as st

            doc = st.collect(site, series, anchors)
            loc = opts.get("location")
            doc["series"] = loc.as_json() if loc else None
        else:
            noop = _noop_apply(site, series, anchors, opts["profile"])
    except Exception:
        return None
    if argv[0] == "status":
        from patchq import report

        report.emit_json(doc) if opts["json"] else report.emit_text(report.status_text(doc))
        return st.exit_code(doc)
    if noop is None:
        return _apply(opts, series)
    return _emit_noop(noop, opts["json"])


def _noop_apply(site: str, series: str, anchors: str, profile: str) -> ApplyDoc | None:
    """The ``patchq.apply/1`` document of a no-op apply of ``profile``, or None when
    apply may have something to do (parses nothing)."""
    from patchq.env import layout
    from patchq.env.status import read_journal
    from patchq.hashing import series_inputs, sha256_file
    from patchq.vllmdist.record import dist_info_name, project_of, version_of

    root = layout.state_root(site)
    if layout.has_pending(root):
        return None
    from patchq.env.status import shadowing

    if shadowing(site):  # another vllm would be imported: the full apply says so
        return None
    journal = read_journal(root)
    di = dist_info_name(site, exhaustive=False)  # vllm-*.dist-info by name costs one listdir
    cached = journal.get("series") or {}
    if not journal or di is None or journal.get("profile") != profile or not cached:
        return None
    version = version_of(di)
    if journal.get("vllm") != version or cached.get("inputs") != series_inputs(series, anchors):
        return None
    ids = cached["profiles"].get(profile)
    if ids is None or {pid: cached["hashes"][pid] for pid in ids} != journal.get("profile_hashes"):
        return None
    for pid, entry in journal.get("patches", {}).items():  # what status checks: applied ids and hashes
        if pid not in ids or entry["hash"] != cached["hashes"][pid]:
            return None
    for relpath, entry in journal.get("files", {}).items():
        if sha256_file(os.path.join(site, relpath)) != entry["patched_sha256"]:
            return None
    from patchq.documents import apply_document

    return apply_document("apply", profile, {"version": version, "site_packages": site, "dist": project_of(di)},
                          noop=True, patches=journal.get("results", []))


def _emit_noop(doc: ApplyDoc, as_json: bool) -> int:
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        from patchq.report import noop_apply_text

        sys.stdout.write(noop_apply_text(doc["vllm"]["version"], doc["profile"]) + "\n")
    return EXIT_OK


def _list(opts: dict) -> int:
    from patchq import report
    from patchq.commands import list_

    doc, code = list_.run(opts.get("series"))
    report.emit_json(doc) if opts["json"] else report.emit_text(report.list_text(doc))
    return code


def _apply(opts: dict, series_root: str) -> int:
    """A real apply, without typer and rich (they cost more than the rest of the start).

    Raises:
        PatchqError: reported by :func:`patchq.edge.guard`.
    """
    from patchq import report, series
    from patchq.commands import apply as cmd
    from patchq.vllmdist import sources

    target = sources.installed(opts.get("site_packages"))
    doc, code = cmd.apply(target, series.load(opts.get("series")), opts["profile"])
    if opts["json"]:
        report.emit_json(doc)
    else:
        report.emit_text(report.apply_text(doc), err=bool(doc["error"]))
    return code
