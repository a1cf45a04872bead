"""``patchq review PATCH --vllm X [--accept] [--by NAME] [--note TEXT]``: bless a drifted release.

Checks the patch alone on the release (as ``check --patch`` does) and shows its verdict
with the three-way view of every drifted definition (base: the nearest reviewed
release; ours: base patched; theirs: X) and the upstream lines behind each finding.
With ``--accept`` (or a ``y`` at the prompt on a terminal) the release becomes reviewed:
the fingerprints of the patch's anchors on X are recorded in ``anchors/<patch>.toml``
with a ``[reviews."X"]`` entry (who, when, ``how = "review"``, the status it had, the
note; :data:`patchq.authoring.fingerprints.REVIEWS`). ``check`` then says ``applies`` on
X and ``apply`` no longer refuses it. Only a patch whose transform applies there can be
accepted (a conflict needs a new variant, not a review).

``patchq.review/1``: ``ok``, ``patch``, ``vllm``, ``status`` (the check status before),
``blocking``, ``reason``, ``threeway`` (the check row's entries), ``accepted`` (bool),
``review`` (the entry written, or null), ``changed`` [anchor files], ``refused`` (why
an ``--accept`` was refused; only then), ``series``.
Exit 0 when accepted, or when nothing needs review (status ``applies``); 1 when the
release still needs a review (not accepted) or cannot be accepted; 2 usage.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, UsageError
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from collections.abc import Callable

    from patchq.documents import ReviewDoc

SCHEMA = "patchq.review/1"
#: statuses whose release a review can accept (the transform applied there)
ACCEPTABLE = ("applies", "applies-drifted", "moved", "review", "possibly-upstreamed")


def run(target: CodeSource, series: Series, patch_id: str, accept: bool | None = None,
        by: str | None = None, note: str = "",
        ask: Callable[[ReviewDoc], bool] | None = None) -> tuple[ReviewDoc, int]:
    """Show (and on acceptance record) the review of ``patch_id`` on ``target``.

    Args:
        accept: True records, False only shows; None asks ``ask(doc)`` (a prompt on a
            terminal), else only shows.
    Raises:
        UsageError: unknown patch; the target is not a release (a review names one).
    """
    from patchq.authoring import fingerprints
    from patchq.commands import pick

    if patch_id not in series.all_patch_ids():
        raise UsageError(f"unknown patch {patch_id!r}; known: {', '.join(series.all_patch_ids())}")
    doc_check, _ = pick.check(target, series, [patch_id])
    row = next(p for p in doc_check["patches"] if p["id"] == patch_id)
    doc: ReviewDoc = {"schema": SCHEMA, "ok": True, "patch": patch_id, "vllm": doc_check["vllm"],
                      "status": row["status"],
                      "blocking": row["blocking"], "reason": row["reason"], "threeway": row.get("threeway", []),
                      "accepted": False, "review": None, "changed": [],
                      "series": series.location.as_json() if series.location else None}
    acceptable = row["status"] in ACCEPTABLE and row.get("variant_kind") == "edit"
    if row["status"] == "applies" and row.get("reviewed"):
        doc["reason"] = f"already reviewed on vllm {target.version}: {row['reason']}"
        return doc, EXIT_OK
    if accept is None and ask is not None and acceptable:
        accept = bool(ask(doc))
    if not accept:
        doc["ok"] = not row["blocking"]
        return doc, EXIT_OK if doc["ok"] else EXIT_PATCH_FAILED
    if not acceptable:
        doc["ok"] = False
        why = "no variant of the patch covers it" if row.get("tried_variant") else f"it is {row['status']} there"
        doc["refused"] = f"cannot accept {patch_id} on vllm {target.version}: {why} (a review accepts drift, " \
                         f"not a failing or uncovered patch)"
        return doc, EXIT_PATCH_FAILED
    version = str(target.version)
    entry = fingerprints.review_entry("review", by, status=row["status"], note=note, series_root=series.root)
    changed = fingerprints.record(series, [version], patch_ids=[patch_id], only={patch_id: {version}},
                                  review=entry)
    doc["accepted"], doc["review"], doc["changed"] = True, entry, sorted(str(p) for p in changed)
    return doc, EXIT_OK


def prompt(doc: ReviewDoc) -> bool:
    """Print the review and ask on the terminal; False when stdin is not a terminal."""
    if not sys.stdin.isatty():
        return False
    sys.stdout.write(render_text(doc))
    sys.stdout.write(f"accept {doc['patch']} on vllm {doc['vllm']['version']}? [y/N] ")
    sys.stdout.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def render_text(doc: ReviewDoc) -> str:
    """The verdict, each three-way view with its findings, and what was recorded."""
    lines = [f"review {doc['patch']} on vllm {doc['vllm']['version']}: {doc['status']}"
             + (" (blocking)" if doc["blocking"] else ""), f"  {doc['reason']}"]
    for e in doc["threeway"]:
        for f in e.get("findings", []):
            lines.append(f"  [{f['rule']}] {f['upstream']}: {f['message']}")
        if e.get("score") is not None:
            lines.append(f"  similarity of upstream's change to the patch's: {e['score']:.2f}")
        lines.append(e.get("view", "").rstrip("\n"))
    if doc["accepted"] and doc["review"] is not None:
        r = doc["review"]
        lines.append(f"accepted: vllm {doc['vllm']['version']} recorded as reviewed by {r['by']} at {r['at']}")
        lines += [f"  wrote {p}" for p in doc["changed"]] or ["  (fingerprints already recorded)"]
    elif doc.get("refused"):
        lines.append(doc["refused"])
    elif doc["status"] in ACCEPTABLE and doc["blocking"]:
        lines.append(f"not accepted: run `patchq review {doc['patch']} --vllm {doc['vllm']['version']} --accept` "
                     f"once the three-way view is right")
    return "\n".join(lines) + "\n"
