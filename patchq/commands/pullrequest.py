"""The pull-request body and the commit message of ``patchq upgrade --commit``, from its
``patchq.upgrade/1`` document.

The body (Markdown, written to ``pull-request.md``) says first whether a person is needed,
then: per patch its check before and after and what was written for it; what the rebase did
(merges, conflict files, proposals); each review a person must make, with its three-way
view (``patchq review``'s text); the matrix's column for the new release with the level its
cells reached and what changed there; and the next steps. Paths are shown relative to the
repository holding the series, so the body reads the same on every machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchq.documents import UpgradeDoc


def _root(doc: UpgradeDoc) -> Path | None:
    series = doc.get("series")
    return Path(series["dir"]).resolve().parent if series else None


def _rel(path: str, root: Path | None) -> str:
    if root is None:
        return path
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return path


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def needs_person(doc: UpgradeDoc) -> list[str]:
    """The patches a person must look at: blocking after the upgrade, or a rebase that left
    a conflict or a proposal."""
    rebased = {r["id"]: r["status"] for r in doc["rebased"]}
    return [p["id"] for p in doc["patches"] if p["blocking"] or rebased.get(p["id"]) in (
        "conflict", "gone", "failed-at-base", "needs-variant", "unsupported")]


def render(doc: UpgradeDoc) -> str:
    """The pull-request body (module docstring)."""
    root = _root(doc)
    to = doc["to"]
    who = needs_person(doc)
    what = doc["profile"] and f"profile {doc['profile']}" or f"profiles {', '.join(doc['profiles'])}"
    out = [f"# vLLM {to}: `patchq upgrade` carried the series ({what})", ""]
    out.append(f"**A person is needed** for {', '.join(who)}: see below." if who else
               "**No person is needed**: every patch checks clean on the new release.")
    out += ["", f"- release: vllm {to}" + (f" (installed here: {doc['installed']})" if doc["installed"] else ""),
            f"- series: `{_rel(doc['series']['dir'], root) if doc['series'] else '-'}`"]
    if doc["branch"] or doc["commit"]:
        out.append(f"- branch: `{doc['branch'] or '(current)'}`" + (f" at `{doc['commit']}`" if doc["commit"] else ""))
    out += _patches(doc, root) + _rebased(doc, root) + _reviews(doc) + _matrix(doc)
    if doc["next"]:
        out += ["", "## Next steps", ""] + [f"- {_strip(s, root)}" for s in doc["next"]]
    return "\n".join(out) + "\n"


def _strip(text: str, root: Path | None) -> str:
    return text.replace(f"{root}/", "") if root else text


def _patches(doc: UpgradeDoc, root: Path | None) -> list[str]:
    to = doc["to"]
    out = ["", "## Patches", "", "| patch | check before → after | rebase | written for this release |",
           "|---|---|---|---|"]
    for p in doc["patches"]:
        names = {f"{p['id']}.toml", f"{p['id']}.diff", f"{p['id']}.expect.toml", f"{p['id'].replace('-', '_')}.py"}
        mine = [w for w in [*p["written"], *doc["recorded"]] if Path(w).name in names]
        files = ", ".join(f"`{_rel(w, root)}`" for w in dict.fromkeys(mine)) or "-"
        out.append(f"| {p['id']} | {p['before'] or '-'} → {p['check']} | {p['rebase'] or '-'} | {files} |")
    reviewed = {r["id"] for r in doc["reviews"]}
    for p in doc["patches"]:
        if p["blocking"]:
            why = "see Reviews needed" if p["id"] in reviewed else _cell(p["reason"])
            out.append(f"\n{p['id']} blocks on vllm {to} ({p['check']}): {why}")
    return out


def _rebased(doc: UpgradeDoc, root: Path | None) -> list[str]:
    out = ["", "## Rebased", ""]
    if not doc["rebased"]:
        return out + ["Nothing: no patch drifted, moved or broke on this release (the check above says why)."]
    out += ["| patch | outcome | merge | transform | files |", "|---|---|---|---|---|"]
    for r in doc["rebased"]:
        files = ", ".join(f"`{_rel(f, root)}`" for f in r["files"]) or "-"
        out.append(f"| {r['id']} | **{r['status']}** | {r['merge'] or '-'} | {r['transform'] or '-'} | {files} |")
    for r in doc["rebased"]:
        said = [*r["notes"], *([r["reason"]] if r["reason"] else []), *r["next"]]
        if said:
            out += ["", f"{r['id']}:"] + [f"- {_cell(_strip(s, root))}" for s in said]
    return out


def _reviews(doc: UpgradeDoc) -> list[str]:
    out = ["", "## Reviews needed", ""]
    if not doc["reviews"]:
        return out + ["None: no patch's drift needs a person's review on this release."]
    for r in doc["reviews"]:
        out += [f"### {r['id']}: {r['status']}", "", "```text", r["view"].rstrip(), "```", "",
                f"Accept it once read: `patchq review {r['id']} --vllm {doc['to']} --accept`.", ""]
    return out


def _matrix(doc: UpgradeDoc) -> list[str]:
    m = doc["matrix"]
    if m is None:
        return []
    to = doc["to"]
    out = ["", f"## Matrix: the column of vllm {to}", "",
           f"{len(m['releases'])} releases ({m['releases'][0]} .. {m['releases'][-1]}) x {len(doc['profiles'])} "
           f"profiles, evidence level(s): {', '.join(m['levels'])}; {m['blocking']} blocking cell(s) in all"
           + (f"; not checked: {', '.join(m['errors'])}" if m["errors"] else "")
           + ". The whole matrix: `matrix/matrix.md`, `matrix/matrix.html`, `matrix/matrix.json` (the job's files).",
           ""]
    profiles = list(m["column"])
    ids = list(dict.fromkeys(pid for col in m["column"].values() for pid in col))
    out += ["| patch | " + " | ".join(profiles) + " |", "|---|" + "---|" * len(profiles)]
    out += [f"| {pid} | " + " | ".join(m["column"][name].get(pid, "-") for name in profiles) + " |" for pid in ids]
    changed = [(name, pid, c) for name, per in m["changes"].items() for pid, cs in per.items() for c in cs]
    out.append("")
    out += [f"Changed at {to}: {pid} ({name}) {c['from']} → {c['to']}: {_cell(c['reason'])}"
            for name, pid, c in changed] or [f"Nothing changed at {to} against the release before it."]
    return out


def commit_message(doc: UpgradeDoc) -> str:
    """The commit's message: a subject naming the release, then one line per patch."""
    lines = [f"patchq upgrade: carry the series to vLLM {doc['to']}", ""]
    for p in doc["patches"]:
        line = f"{p['id']}: {p['before'] or '-'} -> {p['check']}"
        if p["rebase"]:
            line += f", rebase {p['rebase']}"
        lines.append(line)
    who = needs_person(doc)
    if who:
        lines += ["", f"A person is needed for {', '.join(who)} (the pull request says why)."]
    return "\n".join(lines) + "\n"
