"""Record the fingerprints of every anchor on every release where its patch was verified.

An anchor's fingerprint (:func:`patchq.plan.anchors.fingerprint`: 16 hex of the normalized
AST of the anchored definition, docstrings dropped) is recorded per vLLM version in
``anchors/<patch>.toml`` as ``[anchors.<id>.fingerprints]`` ``"<version>" = "<fp>"``.
``patchq check`` calls an anchor *verified* (status ``applies``) on a target whose
definition has a recorded fingerprint; any other fingerprint is drift to review.

A recorded release is a person's word that the patch is right there (``check`` calls
drift against it ``applies-drifted`` only when the three-way comparison proves it apart).
So a release is recorded only where someone named it: the releases already recorded (a
refresh), the release a patch was authored against (``record`` and ``import`` write it),
releases named explicitly (``patchq fingerprint --releases 0.29.0,0.30.0``, each stamped
in ``[reviews]``), and ``patchq review PATCH --vllm X --accept``. A range
(``--releases '>=0.23'``) only refreshes the recorded releases inside it. Within what
may be recorded, a version is recorded for an anchor when the patch's variant for that
version edits with that anchor and :func:`patchq.plan.engine.plan` of the whole series
on the release gives the patch ``ok`` (anchor resolved, count right, transform ran,
result compiled).
Recording edits each anchor file in place with :mod:`tomlkit` (:func:`rewrite`: only the
``fingerprints`` tables, ``format`` and ``[reviews]`` change, sorted by version; comments
and layout stay), and all changed files land in one transaction
(:mod:`patchq.authoring.repowrite`). New files are rendered with :mod:`tomli_w`
(:func:`render`: tables in file order, keys ``module``/``qualname``/``node``/``count``),
so the output is deterministic. Versions that were computed replace what was recorded
for them (a version where the anchor no longer verifies is dropped); versions that were
not computed (a release missing from the local cache) are kept.

Run ``patchq fingerprint [--patch ID] [--releases SPEC] [--check]``, or ``python -m
patchq.authoring.fingerprints --record`` (all cached release wheels, see
:func:`patchq.vllmdist.releases.cached_releases`) or ``--check`` (exit 1 when the files differ from
what would be recorded). ``--releases`` (a specifier or a comma list, as for ``patchq
matrix``) selects among the cached releases; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tomli_w
from packaging.version import Version

from patchq import hashing, tomlsafe
from patchq import series as series_mod
from patchq.model import Patch
from patchq.plan import engine
from patchq.vllmdist import releases
from patchq.vllmdist.sources import release_source

#: patch id -> anchor id -> version -> fingerprint.
Fingerprints = dict[str, dict[str, dict[str, str]]]

HEADER = (
    "# Anchors of patch {patch}: where its edits go, by structure (see patchq/model.py AnchorSpec).\n"
    "# [anchors.<id>.fingerprints] is written by `patchq fingerprint --patch {patch}`.\n\n"
)
_KEY_ORDER = ("module", "qualname", "node", "count")


def cached_versions() -> list[str]:
    """Versions whose release (wheel or fetched tree) is in the local cache, oldest first."""
    return [str(v) for v in releases.cached_releases()]


def compute(loaded: series_mod.Series, versions: Iterable[str],
            patch_ids: Iterable[str] | None = None,
            only: Mapping[str, Iterable[str]] | None = None) -> tuple[Fingerprints, dict[str, list[str]]]:
    """Fingerprints of the anchors each release verifies (see module docstring).

    Args:
        loaded: the series (every patch of its directory is planned, in profile order).
        versions: vLLM versions; each release tree is extracted from the cached wheel
            (:func:`patchq.vllmdist.sources.release_source`).
        patch_ids: record only these patches (default: all).
        only: patch id -> the versions that may be computed for it (default: all of
            ``versions``): a release is recorded for a patch only where a person said so.
    Returns:
        (fingerprints, patch id -> the versions computed for it: those of ``versions``
        inside its applies-range, as strings).
    """
    patches = [loaded.patch(pid) for pid in loaded.all_patch_ids()]
    wanted = set(patch_ids) if patch_ids is not None else {p.id for p in patches}
    out: Fingerprints = {p.id: {a: {} for a in p.anchors} for p in patches if p.id in wanted}
    done: dict[str, list[str]] = {pid: [] for pid in out}
    for version in versions:
        in_range = _in_range(patches, wanted, str(version), only)
        if not in_range:
            continue
        plan = engine.plan(release_source(str(version)), patches)
        for result in plan.results:
            if result.patch_id in in_range:  # in_range is inside wanted
                done[result.patch_id].append(str(version))
                if result.status == engine.OK:
                    for anchor in result.anchors:
                        out[result.patch_id][anchor.anchor][str(version)] = anchor.fingerprint
    return out, done


def _in_range(patches: list[Patch], wanted: set[str], version: str,
              only: Mapping[str, Iterable[str]] | None) -> set[str]:
    """The ids of the ``wanted`` patches to compute on ``version``: in their applies-range
    and, with ``only``, named there for it."""
    return {p.id for p in patches if p.id in wanted and Version(version) in p.applies
            and (only is None or version in set(only.get(p.id, ())))}


def merged(recorded: Mapping[str, str], computed: Mapping[str, str], done: Iterable[str]) -> dict[str, str]:
    """``recorded`` with the ``done`` versions replaced by ``computed``, sorted by version."""
    done = set(done)
    table = {v: fp for v, fp in recorded.items() if v not in done}
    table.update(computed)
    return {v: table[v] for v in sorted(table, key=Version)}


def _literal(value: str) -> str | None:
    """``value`` as a TOML literal string (no escapes: patterns stay readable), or None.

    A multi-line value becomes ``'''`` + newline + value + ``'''`` (TOML trims the newline
    right after the opening delimiter); literal strings cannot hold ``'''``, ``'`` on
    one line, or control characters other than newline and tab.
    """
    if any(ord(c) < 32 and c not in "\n\t" for c in value) or "\x7f" in value:
        return None
    if "\n" in value:
        return None if "'''" in value or value.endswith("'") else f"'''\n{value}'''"
    return None if "'" in value else f"'{value}'"


def _string_lines(text: str, data: Mapping) -> str:
    """Rewrite tomli_w's escaped ``node = "..."`` strings as literal strings where that reads better."""
    for table in data.values():
        value = table.get("node")
        if not isinstance(value, str) or '"' not in value:
            continue
        lit = _literal(value)
        if lit is not None:
            basic = tomli_w.dumps({"node": value}, multiline_strings=True).rstrip("\n")
            text = text.replace(basic + "\n", f"node = {lit}\n")
    return text


def render(patch_id: str, data: Mapping) -> str:
    """The text of ``anchors/<patch_id>.toml`` for parsed ``data`` (deterministic).

    Raises:
        AssertionError: the text would not parse back to ``data`` (a rendering bug).
    """
    anchors = {}
    for anchor_id, table in data.get("anchors", {}).items():
        row = {k: table[k] for k in _KEY_ORDER if k in table}
        row.update({k: v for k, v in table.items() if k not in _KEY_ORDER and k != "fingerprints"})
        if table.get("fingerprints"):
            row["fingerprints"] = dict(table["fingerprints"])
        anchors[anchor_id] = row
    top: dict = {}
    module_level = any(t.get("qualname") == hashing.MODULE_QUALNAME for t in anchors.values())
    if data.get("reviews") or module_level:  # format 2: module-level anchors, [reviews]
        top["format"] = max(2, int(data.get("format", 2)))
    elif "format" in data:
        top["format"] = data["format"]
    body = _string_lines(tomli_w.dumps({"anchors": anchors}, multiline_strings=True), anchors)
    head = tomli_w.dumps(top) + "\n" if top else ""
    reviews = ""
    if data.get("reviews"):
        table = {v: dict(data["reviews"][v]) for v in sorted(data["reviews"], key=Version)}
        reviews = "\n" + tomli_w.dumps({"reviews": table}, multiline_strings=True)
    text = HEADER.format(patch=patch_id) + head + body + reviews
    want = dict(top, anchors=anchors)
    if data.get("reviews"):
        want["reviews"] = {v: dict(data["reviews"][v]) for v in data["reviews"]}
    assert tomlsafe.loads(text, patch_id) == want, f"{patch_id}: anchors file does not round-trip"
    return text


def rewrite(patch_id: str, old_text: str, data: Mapping) -> str:
    """``old_text`` (an anchors file) with each anchor's ``fingerprints`` table, the
    top-level ``format`` and the ``[reviews]`` table set to ``data``'s, everything else
    kept as written: comments, key order, quoting and blank lines (:mod:`tomlkit`).
    Fingerprints stay sorted by version; a table whose versions must be reordered is
    rebuilt (its own comments go). Falls back to :func:`render` when the file cannot be
    edited in place (it then loses its comments, never data).

    Raises:
        AssertionError: the text would not parse back to ``data`` (a bug).
    """
    import tomlkit

    try:
        doc = tomlkit.parse(old_text)
        anchors = doc["anchors"]
        for anchor_id, table in data.get("anchors", {}).items():
            _set_fingerprints(anchors[anchor_id], dict(table.get("fingerprints") or {}))
        want_reviews = data.get("reviews") or {}
        module_level = any(t.get("qualname") == hashing.MODULE_QUALNAME for t in data.get("anchors", {}).values())
        if (want_reviews or module_level) and doc.get("format", 1) < 2:
            doc = _format_2(doc)
        if want_reviews:
            _set_reviews(doc, want_reviews)
        text = tomlkit.dumps(doc)
        if tomlsafe.loads(text, patch_id) == dict(data):
            return text
    except Exception:  # noqa: BLE001 - any tomlkit surprise: the deterministic rendering
        pass
    return render(patch_id, data)


def _set_fingerprints(node: Any, want: dict[str, str]) -> None:
    """Set an anchor's (a tomlkit table's) ``fingerprints`` to ``want``: newer versions
    appended in place, otherwise the table rebuilt; removed when ``want`` is empty."""
    import tomlkit

    have = node.get("fingerprints")
    if not want:
        if have is not None:
            del node["fingerprints"]
        return
    if have is not None and list(have.keys()) == list(want)[:len(have)] and all(have[k] == want[k] for k in have):
        for v in list(want)[len(have):]:  # newer versions append at the end: in place
            have[v] = want[v]
        return
    fresh = tomlkit.table()
    for v, fp in want.items():
        fresh[v] = fp
    node["fingerprints"] = fresh


def _format_2(doc: Any) -> Any:
    """A tomlkit document with ``format = 2`` as its first key (after the leading comments)."""
    import tomlkit

    fresh_doc = tomlkit.parse(tomlkit.dumps(doc))  # format first: a top-level key above every table
    doc = tomlkit.document()
    for item in fresh_doc.body:
        if item[0] is not None and item[0].key not in ("format",):
            break
        if item[0] is None:
            doc.add(item[1])
    fmt = tomlkit.integer(2)
    if doc.body:  # a blank line between the header comments and format, as render() writes
        fmt.trivia.indent = "\n"
    doc.add("format", fmt)
    for key, value in fresh_doc.items():
        if key != "format":
            doc.add(key, value)
    return doc


def _set_reviews(doc: Any, want_reviews: Mapping[str, Mapping[str, str]]) -> None:
    """Set the document's ``[reviews]`` entries to ``want_reviews`` (sorted by version;
    an unchanged entry kept as written)."""
    import tomlkit

    reviews = doc.get("reviews")
    if reviews is None:
        reviews = tomlkit.table(is_super_table=True)
        doc.add(tomlkit.nl())
        doc.add("reviews", reviews)
    for v in sorted(want_reviews, key=Version):
        entry = dict(want_reviews[v])
        if v not in reviews or dict(reviews[v]) != entry:
            t = tomlkit.table()
            for k, val in entry.items():
                t[k] = val
            reviews[v] = t


def record(loaded: series_mod.Series, versions: Iterable[str], *, write: bool = True,
           patch_ids: Iterable[str] | None = None, only: Mapping[str, Iterable[str]] | None = None,
           review: Mapping[str, str] | None = None) -> dict[Path, str]:
    """Compute and (when ``write``) store the fingerprints; return path -> new text for changed files.

    Only releases inside each patch's applies-range (and in ``only``, see :func:`compute`)
    are computed for it; recorded versions outside what was computed are kept.
    ``review``: {``by``, ``at``, ``how``, ...} recorded under ``[reviews."<version>"]`` for
    every version that was computed and verified for a patch (:data:`REVIEWS`).
    """
    from patchq.authoring import repowrite

    computed, done = compute(loaded, versions, patch_ids, only)
    changed: dict[Path, str] = {}
    for patch_id, anchors in computed.items():
        path = loaded.anchors_root / f"{patch_id}.toml"
        raw = repowrite.read_regular(path)
        if raw is None:
            continue
        data = tomlsafe.parse(raw, path)
        old_text = raw.decode("utf-8")
        for anchor_id, table in data.get("anchors", {}).items():
            table["fingerprints"] = merged(table.get("fingerprints", {}), anchors.get(anchor_id, {}),
                                           done.get(patch_id, []))
        if review:
            got = sorted({v for fps in anchors.values() for v in fps}, key=Version)
            for v in got:
                data.setdefault("reviews", {})[v] = dict(review)
            if got:
                data["format"] = max(2, int(data.get("format", 1)))  # [reviews] is format 2
        text = rewrite(patch_id, old_text, data)
        if text != old_text:
            changed[path] = text
    if write and changed:  # every anchors file, or none
        with repowrite.series_transaction(loaded, "patchq fingerprint") as txn:
            for path, text in changed.items():
                txn.write(path, text)
    return changed


def with_release(loaded: series_mod.Series, patch_id: str, version: str, fps: Mapping[str, str],
                 review: Mapping[str, str]) -> tuple[Path, str]:
    """The anchors file of ``patch_id`` with ``version`` recorded: each anchor of ``fps``
    (anchor id -> fingerprint, as ``check`` computed it on that release) gets it, and
    ``[reviews."<version>"]`` is ``review`` (format 2); comments and layout kept
    (:func:`rewrite`). Nothing is written.

    Returns:
        (path, new text).
    Raises:
        SeriesError: the anchors file is missing or does not parse.
    """
    from patchq import tomlsafe
    from patchq.authoring import repowrite
    from patchq.errors import SeriesError

    path = loaded.anchors_root / f"{patch_id}.toml"
    raw = repowrite.read_regular(path)
    if raw is None:
        raise SeriesError(f"{path}: no anchors file for patch {patch_id}")
    old_text = raw.decode("utf-8")
    data = tomlsafe.loads(old_text, path)
    for anchor_id, table in data.get("anchors", {}).items():
        if anchor_id in fps:
            table["fingerprints"] = merged(table.get("fingerprints", {}), {version: fps[anchor_id]}, [version])
    data.setdefault("reviews", {})[version] = dict(review)
    data["format"] = max(2, int(data.get("format", 1)))  # [reviews] is format 2
    return path, rewrite(patch_id, old_text, data)


#: The ``[reviews]`` table (anchors file ``format = 2``): ``"<version>" = {by, at, how,
#: status, note}``: who accepted that release and when (UTC, ISO 8601), how (``review``:
#: ``patchq review --accept``; ``fingerprint``: named explicitly to ``patchq fingerprint
#: --releases``), the check status before acceptance (``review`` only) and a note. A
#: release recorded in ``fingerprints`` without a review entry was recorded before format
#: 2 and counts as reviewed. Files without ``format`` load as before.
REVIEWS = ("by", "at", "how", "status", "note")


def reviewer(series_root: Path | None = None) -> str:
    """Who is recording: ``$PATCHQ_REVIEWER``, else ``git config user.name`` (of the
    series repo), else ``$USER``, else ``unknown``."""
    import os
    import subprocess

    name = os.environ.get("PATCHQ_REVIEWER", "").strip()
    if name:
        return name
    try:
        out = subprocess.run(["git", "config", "user.name"], cwd=series_root, capture_output=True, text=True,
                             timeout=5)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("USER", "").strip() or "unknown"


def review_entry(how: str, by: str | None = None, status: str | None = None, note: str = "",
                 series_root: Path | None = None) -> dict[str, str]:
    """A ``[reviews."<version>"]`` entry (:data:`REVIEWS`), stamped now (UTC)."""
    from datetime import datetime, timezone

    entry = {"by": by or reviewer(series_root), "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "how": how}
    if status:
        entry["status"] = status
    if note:
        entry["note"] = note
    return entry


def recorded_versions(patch: Patch) -> set[str]:
    """Every release recorded (reviewed) for any anchor of ``patch``."""
    return {v for spec in patch.anchors.values() for v in spec.fingerprints}


def main(argv: list[str] | None = None) -> int:
    """``python -m patchq.authoring.fingerprints (--record | --check) [--releases SPEC] [--series DIR]``.

    Returns the exit status: 0, or 1 for ``--check`` when a file would change.
    """
    ap = argparse.ArgumentParser(prog="python -m patchq.authoring.fingerprints", description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help="write anchors/<patch>.toml fingerprints")
    mode.add_argument("--check", action="store_true", help="exit 1 when recorded fingerprints are out of date")
    ap.add_argument("--releases", help="version specifier or comma list among the cached releases (default: all)")
    ap.add_argument("--series", help="series directory (default: the checkout's series/)")
    args = ap.parse_args(argv)
    versions = cached_versions()
    if args.releases:
        versions = [str(v) for v in releases.filter_releases(versions, args.releases)]
    loaded = series_mod.load(args.series)
    only = {pid: recorded_versions(loaded.patch(pid)) for pid in loaded.all_patch_ids()}  # refresh only
    changed = record(loaded, versions, write=args.record, only=only)
    for path in sorted(changed):
        print(f"{'wrote' if args.record else 'out of date:'} {path}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
