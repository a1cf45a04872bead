"""The fast path: ``status``, and ``apply`` (a no-op without parsing anything).

``patchq apply --profile P`` runs at every server start; when the environment already
carries P it must cost about an interpreter start. This module answers with the
standard library only (os, json, hashlib): it reads the journal, hashes the series
files and the patched files, and parses nothing. Any argument it does not recognise,
or any doubt about a no-op (no journal, a pending write, a hash mismatch) leads to a real
apply, run without typer and rich; unrecognised arguments return None and the full
CLI takes over.
"""

from __future__ import annotations

import json
import os
import sys

_VALUE_OPTS = {"--profile": "profile", "-p": "profile", "--site-packages": "site_packages", "--series": "series"}
_FLAG_OPTS = {"--json": "json"}


def _parse(argv: list[str]) -> dict | None:
    opts: dict = {"json": False}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if "=" in arg and arg.split("=", 1)[0] in _VALUE_OPTS:
            key, value = arg.split("=", 1)
            opts[_VALUE_OPTS[key]] = value
        elif arg in _VALUE_OPTS and i + 1 < len(argv):
            opts[_VALUE_OPTS[arg]] = argv[i + 1]
            i += 1
        elif arg in _FLAG_OPTS:
            opts[_FLAG_OPTS[arg]] = True
        else:
            return None
        i += 1
    return opts


def _roots(opts: dict) -> tuple[str, str, str] | None:
    import sysconfig

    site = opts.get("site_packages") or sysconfig.get_paths()["purelib"]
    project = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    series = opts.get("series") or os.environ.get("PATCHQ_SERIES") or os.path.join(project, "series")
    anchors = os.environ.get("PATCHQ_ANCHORS") or os.path.join(os.path.dirname(os.path.abspath(series)), "anchors")
    if not os.path.isfile(os.path.join(series, "profiles.toml")):
        return None
    return os.path.abspath(site), os.path.abspath(series), anchors


def try_fast(argv: list[str]) -> int | None:
    """Answer ``argv`` on the fast path; return the exit code, or None to defer."""
    if not argv or argv[0] not in ("apply", "status"):
        return None
    opts = _parse(argv[1:])
    if opts is None:
        return None
    roots = _roots(opts)
    if roots is None:
        return None
    site, series, anchors = roots
    try:
        if argv[0] == "status":
            return _status(site, series, anchors, opts["json"])
        if "profile" not in opts:
            return None
        code = _noop_apply(site, series, anchors, opts["profile"], opts["json"])
    except Exception:  # any doubt: the full path decides and reports properly
        return None
    if code is None:
        code = _apply(opts, series)
    return code


def _status(site: str, series: str, anchors: str, as_json: bool) -> int:
    from patchq.env import status as st

    report = st.collect(site, series, anchors)
    sys.stdout.write((json.dumps(report, indent=2) if as_json else st.render_text(report)) + "\n")
    return st.exit_code(report)


def _noop_apply(site: str, series: str, anchors: str, profile: str, as_json: bool) -> int | None:
    from patchq.hashing import series_inputs, sha256_file
    from patchq.dist.record import dist_info_name, version_of
    from patchq.env import layout
    from patchq.env.status import read_journal

    root = layout.state_root(site)
    if layout.has_pending(root):
        return None
    journal = read_journal(root)
    di = dist_info_name(site)
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
    if as_json:
        doc = {
            "schema": "patchq.apply/1", "command": "apply", "ok": True, "error": None, "noop": True,
            "profile": profile, "vllm": {"version": version, "site_packages": site},
            "patches": journal.get("results", []), "written": [], "restored": [], "added": [], "removed": [],
            "foreign_kept": {}, "recovered": [],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(f"apply: nothing to do (vllm {version} already carries profile {profile})\n")
    return 0


def _apply(opts: dict, series_root: str) -> int:
    """A real apply, without typer and rich (they cost more than the rest of the start)."""
    from patchq import report, series
    from patchq.dist import sources
    from patchq.commands import apply as cmd
    from patchq.errors import PatchqError

    try:
        target = sources.installed(opts.get("site_packages"))
        doc, code = cmd.apply(target, series.load(opts.get("series") or series_root), opts["profile"])
    except PatchqError as exc:
        if opts["json"]:
            report.emit_json({"ok": False, "error": str(exc), "exit_code": exc.exit_code})
        else:
            sys.stderr.write(f"patchq: error: {exc}\n")
        return exc.exit_code
    if opts["json"]:
        report.emit_json(doc)
    else:
        (sys.stderr if doc["error"] else sys.stdout).write(report.apply_text(doc) + "\n")
    return code
