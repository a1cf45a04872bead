"""The fast path: ``status``, ``list``, and ``apply`` (a no-op without parsing anything).

``patchq apply --profile P`` runs at every server start; when the environment already
carries P it must cost about an interpreter start. This module answers with the
standard library only: it reads the journal, hashes the series files and the patched
files, and parses nothing; once that has shown a no-op, a stat stamp
(:mod:`patchq.env.stamp`) answers the next ones without hashing (``status`` and ``list``
likewise). Any argument it does not recognise,
or any doubt about a no-op (no journal, a pending write, a hash mismatch) leads to a real
apply, run without typer and rich; unrecognised arguments (or an empty value) return None
and the full CLI takes over. Only the profile served is resolved: a mistake in another
profile of ``profiles.toml`` does not stop this one. Errors go up to :func:`patchq.edge.guard`.
"""

from __future__ import annotations

import os
import sys

from patchq.errors import EXIT_OK

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from patchq.documents import ApplyDoc, ListDoc

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
    from patchq import discovery
    from patchq.errors import SeriesError

    site = opts.get("site_packages")
    if not site:
        import sysconfig

        site = sysconfig.get_paths()["purelib"]
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
            noop = _noop_apply(site, series, anchors, opts["profile"], opts["json"])
    except Exception:
        return None
    if argv[0] == "status":
        from patchq import report

        report.emit_json(doc) if opts["json"] else report.emit_text(report.status_text(doc))
        return st.exit_code(doc)
    if noop is None:
        return _apply(opts, series)
    return _emit_noop(noop, opts["json"])


def _noop_apply(site: str, series: str, anchors: str, profile: str, as_json: bool = False) -> ApplyDoc | None:
    """The ``patchq.apply/1`` document of a no-op apply of ``profile``, or None when
    apply may have something to do (parses nothing).

    Nothing to do when the journal says ``profile`` is applied on this vLLM from series
    files byte-identical to those it recorded, and every file it patched still has the
    bytes it wrote. That is verified by hashing every series, anchors and patched file;
    once verified, a stat stamp (:mod:`patchq.env.stamp`) remembers it, and a later run
    whose inputs all stat as stamped skips the hashing (as safe as hashing: see there).
    """
    from patchq.env import layout, stamp
    from patchq.env.shadow import shadowing
    from patchq.vllmdist.record import dist_info_name

    root = layout.state_root(site)
    if layout.has_pending(root) or layout.symlink_problem(root):
        return None
    if shadowing(site):  # another vllm would be imported: the full apply says so
        return None
    di = dist_info_name(site, exhaustive=False)  # vllm-*.dist-info by name costs one listdir
    if di is None:
        return None
    key = {"command": "noop-apply", "profile": profile, "site": site, "state": root, "series": series,
           "anchors": anchors, "dist_info": di, "patchq": _version()}
    if stamp.load(key) is not None:
        return _noop_doc(site, root, profile, di, _journal_results(root) if as_json else None)
    taken = stamp.now()
    journal = _verified_noop(site, root, series, anchors, profile, di)
    if journal is None:
        return None
    inputs = [layout.journal_path(root), os.path.join(site, di, "RECORD")]
    inputs += [os.path.join(series, n[len("series/"):]) if n.startswith("series/") else
               os.path.join(anchors, n[len("anchors/"):]) for n in journal["series"]["inputs"]]
    inputs += [os.path.join(site, rel) for rel in journal.get("files", {})]
    stamp.save(key, inputs, [(series, (".py", ".toml")), (anchors, (".toml",))], "noop", taken)
    return _noop_doc(site, root, profile, di, journal.get("results", []))


def _journal_results(root: str) -> list:
    from patchq.env.status import read_journal

    return read_journal(root).get("results", [])


def _version() -> str:
    from patchq import __version__

    return __version__


def _verified_noop(site: str, root: str, series: str, anchors: str, profile: str, di: str) -> dict | None:
    """The journal when hashing proves a no-op of ``profile`` (:func:`_noop_apply`), else None."""
    from patchq.env.status import read_journal
    from patchq.hashing import series_inputs, sha256_file
    from patchq.vllmdist.record import version_of

    journal = read_journal(root)
    cached = journal.get("series") or {}
    if not journal or journal.get("profile") != profile or not cached:
        return None
    if journal.get("vllm") != version_of(di) or cached.get("inputs") != series_inputs(series, anchors):
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
    return journal


def _noop_doc(site: str, root: str, profile: str, di: str, results: list | None) -> ApplyDoc:
    """The ``patchq.apply/1`` document of a no-op (``results``: the journal's, for JSON)."""
    from patchq.documents import apply_document
    from patchq.vllmdist.record import project_of, version_of

    return apply_document("apply", profile, {"version": version_of(di), "site_packages": site, "dist": project_of(di)},
                          noop=True, patches=results)


def _emit_noop(doc: ApplyDoc, as_json: bool) -> int:
    if as_json:
        import json

        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        from patchq.report import noop_apply_text

        sys.stdout.write(noop_apply_text(doc["vllm"]["version"], doc["profile"]) + "\n")
    return EXIT_OK


def _list(opts: dict) -> int:
    from patchq import report

    doc = _listed(opts.get("series"))
    report.emit_json(doc) if opts["json"] else report.emit_text(report.list_text(doc))
    return EXIT_OK


def _listed(series_dir: str | None) -> ListDoc:
    """The ``patchq.list/1`` document (:func:`patchq.commands.list_.run`), from a stat stamp
    (:mod:`patchq.env.stamp`) while every file of the series and anchors directories stats
    as when it was last listed; a listing that had to import a series module (its
    declaration is not plain literals, or relations are declared) is never stamped.

    Raises:
        PatchqError: from :func:`patchq.commands.list_.run`.
    """
    import marshal
    import sys

    from patchq import discovery
    from patchq.env import stamp

    loc = discovery.find(series_dir)
    key = {"command": "list", "series": loc.series_str, "anchors": loc.anchors_str, "patchq": _version(),
           "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}  # marshal's format is per Python
    hit = stamp.load(key)
    if hit is not None:
        try:
            doc = marshal.loads(bytes.fromhex(hit))  # the stamp's CRC-32 was checked
        except (ValueError, EOFError, TypeError):
            doc = None
        if isinstance(doc, dict) and doc.get("schema") == "patchq.list/1":
            doc["series"] = loc.as_json()
            return doc  # type: ignore[return-value]  # what list_.run returned when stamped
    from patchq.commands import list_

    taken = stamp.now()
    loaded = {m for m in sys.modules if m.startswith("patchq_series_")}
    doc, _code = list_.run(series_dir)
    if {m for m in sys.modules if m.startswith("patchq_series_")} == loaded:  # no series code ran
        files = [os.path.join(d, n) for d, suffixes in ((loc.series_str, (".py", ".toml")),
                                                         (loc.anchors_str, (".toml",)))
                 if os.path.isdir(d) for n in sorted(os.listdir(d)) if n.endswith(suffixes)]
        stamp.save(key, files, [(loc.series_str, (".py", ".toml")), (loc.anchors_str, (".toml",))],
                   marshal.dumps(dict(doc)).hex(), taken)
    return doc


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
