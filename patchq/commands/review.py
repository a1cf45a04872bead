"""``patchq review PATCH --vllm X [--accept] [--by NAME] [--note TEXT]``: bless a drifted release.

Checks the patch on the release in its own context (alone, with what it ``requires`` or
``supersedes``: :func:`patchq.compat.views.context_ids`) and shows its verdict with the three-way view of
every drifted definition (base: the nearest reviewed release; ours: base patched;
theirs: X) and the upstream lines behind each finding. With ``--accept`` (or a ``y`` at
the prompt on a terminal) the release becomes reviewed: the fingerprints that check
computed for the patch's anchors on X are recorded in ``anchors/<patch>.toml`` with a
``[reviews."X"]`` entry (who, when, ``how = "review"``, the status it had, the note;
:data:`patchq.authoring.fingerprints.REVIEWS`), and the same check runs again on the
written files: only when it no longer blocks does the acceptance stand (``after``);
otherwise the files are put back and the acceptance is refused. ``check`` then says
``applies`` on X and ``apply`` no longer refuses it. Only a patch whose transform applies
there can be accepted: a conflict, a gone definition or an uncovered release is refused
(exit 1), naming ``patchq rebase``, which can carry it.

``patchq.review/1``: ``ok``, ``patch``, ``vllm``, ``status`` (the check status before),
``blocking``, ``reason``, ``threeway`` (the check row's entries), ``accepted`` (bool),
``review`` (the entry written, or null), ``changed`` [anchor files written], ``refused``
(why an ``--accept`` was refused; only then), ``after`` ({``status``, ``blocking``} of the
same check once recorded; only when accepted; added), ``series``.
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

    from patchq.documents import CheckDoc, ReviewDoc

SCHEMA = "patchq.review/1"
#: statuses whose release a review can accept (the transform applied there)
ACCEPTABLE = ("applies", "applies-drifted", "moved", "review", "possibly-upstreamed")



def _document(doc_check: CheckDoc, row: dict, patch_id: str, series: Series, *, ok: bool) -> ReviewDoc:
    """The ``patchq.review/1`` document of ``patch_id``'s check row, nothing accepted yet."""
    return {"schema": SCHEMA, "ok": ok, "patch": patch_id, "vllm": doc_check["vllm"],
            "status": row["status"], "blocking": row["blocking"], "reason": row["reason"],
            "threeway": row.get("threeway", []), "accepted": False, "review": None, "changed": [],
            "series": series.location.as_json() if series.location else None}

def _row(target: CodeSource, series: Series, patch_id: str) -> tuple[CheckDoc, dict]:
    """(the check document, the patch's row) of ``patch_id`` in its context
    (:func:`patchq.compat.views.context_ids`)."""
    from patchq.commands import pick
    from patchq.compat.views import context_ids

    doc_check, _ = pick.check(target, series, context_ids(series, patch_id))
    return doc_check, next(p for p in doc_check["patches"] if p["id"] == patch_id)


def run(target: CodeSource, series: Series, patch_id: str, accept: bool | None = None,
        by: str | None = None, note: str = "",
        ask: Callable[[ReviewDoc], bool] | None = None) -> tuple[ReviewDoc, int]:
    """Show (and on acceptance record) the review of ``patch_id`` on ``target``.

    The patch is checked in its context (:func:`patchq.compat.views.context_ids`). Accepting records the
    fingerprints that check saw for every anchor with a review entry, in one transaction,
    then checks again from the written files: when the patch still blocks there the files
    are put back and the acceptance is refused, saying what check gives (a review accepts
    drift; it cannot make a failing transform apply).

    Args:
        accept: True records, False only shows; None asks ``ask(doc)`` (a prompt on a
            terminal), else only shows.
    Returns:
        (``patchq.review/1``, exit code: 0 when accepted or nothing blocks; 1 when the
        release still needs a review, or cannot be accepted: ``refused`` says why).
    Raises:
        UsageError: unknown patch; the target is not a release (a review names one).
    """
    if patch_id not in series.all_patch_ids():
        raise UsageError(f"unknown patch {patch_id!r}; known: {', '.join(series.all_patch_ids())}")
    doc_check, row = _row(target, series, patch_id)
    doc = _document(doc_check, row, patch_id, series, ok=True)
    applied = bool(row.get("anchors")) and all(a.get("fingerprint") for a in row["anchors"])  # the transform ran
    acceptable = row["status"] in ACCEPTABLE and row.get("variant_kind") == "edit" and not row.get("tried_variant") \
        and applied
    if row["status"] == "applies" and row.get("reviewed"):
        doc["reason"] = f"already reviewed on vllm {target.version}: {row['reason']}"
        return doc, EXIT_OK
    if accept is None and ask is not None and acceptable:
        accept = bool(ask(doc))
    if not accept:
        doc["ok"] = not row["blocking"]
        return doc, EXIT_OK if doc["ok"] else EXIT_PATCH_FAILED
    refused = _refusal(row, patch_id, target) if not acceptable else None
    if refused is None:
        refused = _accept(doc, target, series, row, by, note)
    if refused is not None:
        doc["ok"], doc["refused"] = False, refused
        return doc, EXIT_PATCH_FAILED
    return doc, EXIT_OK


def _refusal(row: dict, patch_id: str, target: CodeSource) -> str:
    """Why a row's release cannot be accepted, and what clears it when it blocks
    (:func:`patchq.report.remedy`)."""
    from patchq.report import remedy

    version = str(target.version)
    if row.get("tried_variant"):
        why = "no variant of the patch covers it"
    elif row.get("variant_kind") != "edit":
        why = f"its variant there says {row.get('variant_kind') or 'nothing'} ({row['status']}): nothing to review"
    elif not (row.get("anchors") and all(a.get("fingerprint") for a in row["anchors"])):
        why = f"its transform does not apply there ({row['status']})"
    else:
        why = f"it is {row['status']} there, which a review does not accept"
    fix = remedy(row, version)
    return f"cannot accept {patch_id} on vllm {version}: {why}" + (f"; {fix}" if fix else "")


def _accept(doc: ReviewDoc, target: CodeSource, series: Series, row: dict, by: str | None,
            note: str) -> str | None:
    """Record the release as reviewed (module docstring); None when recorded (``doc``
    filled in), else why not (nothing written)."""
    from patchq.authoring import fingerprints, repowrite

    patch_id, version = doc["patch"], str(target.version)
    fps = {a["anchor"]: a["fingerprint"] for a in row["anchors"]}
    entry = fingerprints.review_entry("review", by, status=row["status"], note=note, series_root=series.root)
    path, text = fingerprints.with_release(series, patch_id, version, fps, entry)

    class _StillBlocks(Exception):
        pass

    try:
        with repowrite.series_transaction(series, f"patchq review {patch_id} --vllm {version} --accept") as txn:
            txn.write(path, text)
            written = txn.apply()
            after = _row(target, Series(series.root, series.anchors_root, series.profiles, {},
                                        location=series.location), patch_id)[1]
            if after["blocking"]:
                raise _StillBlocks(f"{after['status']}: {after['reason']}")
    except _StillBlocks as exc:
        return (f"cannot accept {patch_id} on vllm {version}: with its fingerprints recorded, check still gives "
                f"{exc} (nothing written)")
    doc["accepted"], doc["review"], doc["changed"] = True, entry, sorted(written)
    doc["after"] = {"status": after["status"], "blocking": after["blocking"]}
    return None


def declare(target: CodeSource, series: Series, patch_id: str, kind: str, why: str) -> tuple[ReviewDoc, int]:
    """``review --upstreamed WHY`` / ``--absent WHY``: a person's word that from ``target``'s
    release on upstream does what the patch does (``upstreamed``), or the code it changes
    is gone (``absent``). The edit variant that covers the release (or, where none does,
    the nearest one check tried) is ended before it and a verdict variant saying ``why``
    starts there (:func:`patchq.authoring.seriesedit.add_verdict_variant`), in one
    transaction; the same check then runs on the written series and the change stands only
    when it no longer blocks.

    Returns:
        (``patchq.review/1`` with ``declared`` {``kind``, ``why``, ``range``}, exit code 0;
        1 with ``refused`` when the release is not after every release the variant is
        recorded as verified on, or the check still blocks: nothing written).
    Raises:
        UsageError: unknown patch, an empty WHY, or a target that is not a release.
    """
    from packaging.version import Version

    from patchq.authoring import repowrite, seriesedit
    from patchq.compat.variants import nearest_edit_variant
    from patchq.series import module_file
    from patchq.testing import verified_on

    if patch_id not in series.all_patch_ids():
        raise UsageError(f"unknown patch {patch_id!r}; known: {', '.join(series.all_patch_ids())}")
    if not why.strip():
        raise UsageError(f"--{kind} needs WHY: what the release does instead")
    if target.kind != "release":
        raise UsageError(f"--{kind} names a release (--vllm X): a variant starts at a version")
    doc_check, row = _row(target, series, patch_id)
    doc = _document(doc_check, row, patch_id, series, ok=False)
    patch, version = series.patch(patch_id), Version(str(target.version))
    variant = patch.variant_for(version)
    if variant is None or variant.kind != "edit":
        variant = nearest_edit_variant(patch, version)
    verified = [v for v in verified_on(patch) if variant is not None and variant.applies.contains(v, prereleases=True)]
    if variant is None or variant.kind != "edit" or any(Version(v) >= version for v in verified):
        doc["refused"] = (f"cannot declare {patch_id} {kind} from vllm {version}: "
                          + ("no edit variant to end" if variant is None or variant.kind != "edit" else
                             f"its variant {variant.applies} is recorded as verified on "
                             f"{', '.join(v for v in verified if Version(v) >= version)}, at or after it")
                          + " (nothing written)")
        return doc, EXIT_PATCH_FAILED
    path = module_file(series.root, patch_id)

    class _StillBlocks(Exception):
        pass

    try:
        with repowrite.series_transaction(series, f"patchq review {patch_id} --vllm {version} --{kind}") as txn:
            _, capped = seriesedit.add_verdict_variant(path, variant.applies, version, kind, why.strip(), txn=txn)
            written = txn.apply()
            sys.modules.pop("patchq_series_" + path.stem, None)
            after = _row(target, Series(series.root, series.anchors_root, series.profiles, {},
                                        location=series.location), patch_id)[1]
            if after["blocking"]:
                raise _StillBlocks(f"{after['status']}: {after['reason']}")
    except _StillBlocks as exc:
        sys.modules.pop("patchq_series_" + path.stem, None)
        doc["refused"] = (f"cannot declare {patch_id} {kind} from vllm {version}: check would still give {exc} "
                          f"(nothing written)")
        return doc, EXIT_PATCH_FAILED
    doc["ok"], doc["changed"] = True, sorted(written)
    doc["declared"] = {"kind": kind, "why": why.strip(), "range": f">={version}", "capped": capped}
    doc["after"] = {"status": after["status"], "blocking": after["blocking"]}
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
    declared, after = doc.get("declared"), doc.get("after")
    if isinstance(declared, dict):
        lines.append(f"declared {declared['kind']} from vllm {doc['vllm']['version']} on: variant "
                     f"\"{declared['range']}\" ({declared['why']}); the edit variant now ends at "
                     f"\"{declared['capped']}\""
                     + (f"; check now gives {after['status']}" if isinstance(after, dict) else ""))
        lines += [f"  wrote {p}" for p in doc["changed"]]
    elif doc["accepted"] and doc["review"] is not None:
        r = doc["review"]
        lines.append(f"accepted: vllm {doc['vllm']['version']} recorded as reviewed by {r['by']} at {r['at']}"
                     + (f"; check now gives {after['status']}" if isinstance(after, dict) else ""))
        lines += [f"  wrote {p}" for p in doc["changed"]]
    elif doc.get("refused"):
        lines.append(doc["refused"])
    elif doc["status"] in ACCEPTABLE and doc["blocking"]:
        lines.append(f"not accepted: run `patchq review {doc['patch']} --vllm {doc['vllm']['version']} --accept` "
                     f"once {'the three-way view' if doc.get('threeway') else 'what it names above'} is right")
    return "\n".join(lines) + "\n"
