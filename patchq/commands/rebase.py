"""``patchq rebase --to VERSION [--from VERSION] [--patch ID] [--write]``.

Runs :func:`patchq.authoring.merge.rebase_patch` for each patch and, with ``--write``, records
what a clean rebase proves (:func:`record`):

* the transform carries forward (its result at the target equals the clean merge):
  the variant's range is widened to the target when no variant covers it
  (:func:`patchq.authoring.seriesedit.widen_variant`), the anchors' fingerprints at both releases
  go into ``anchors/<patch>.toml`` (:mod:`patchq.authoring.fingerprints`' format; the target's
  only when ``check`` does not block the written patch there, or after ``--continue``: a clean
  merge is not a review), and the patch's
  diff at the target into ``series/diffs/<target>/<patch>.diff`` (:mod:`patchq.authoring.diffstore`);
* the merge is clean but the transform differs or fails: the merged definitions (the
  proposed new variant's golden text) and the merged diff go to the work directory;
  with ``--continue`` (conflicts resolved by hand, or a clean merge taken as it is) the new
  variant itself is written (:func:`write_variant`).

Conflicts are always written to the work directory, with or without ``--write``.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from patchq import report
from patchq.authoring import diffstore, merge, rangediff, seriesedit
from patchq.commands import version_arg
from patchq.compat import check
from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED, UsageError
from patchq.model import Patch
from patchq.series import Series, module_file
from patchq.vllmdist import releases
from patchq.vllmdist.sources import release_source

if TYPE_CHECKING:
    from patchq.authoring.repowrite import Transaction
    from patchq.documents import RebaseDoc
    from patchq.vllmdist.sources import CodeSource

SCHEMA = "patchq.rebase/1"
FAILING = ("conflict", "gone", "failed-at-base", "needs-variant", "unsupported")


def default_from(patch: Patch, target: Version) -> Version | None:
    """The release to rebase ``patch`` from when ``--from`` is not given.

    The newest release before ``target`` on which every anchor of its variant has a
    recorded fingerprint (the last verified release), else the newest cached release
    before ``target`` where the patch has an edit variant; None when there is none.
    """
    recorded = sorted({Version(v) for a in patch.anchors.values() for v in a.fingerprints}, reverse=True)
    for v in recorded:
        variant = patch.variant_for(v)
        if v < target and variant is not None and variant.kind == "edit" and \
                all(str(v) in patch.anchors[a].fingerprints for a in variant.edits):
            return v
    for v in sorted(releases.cached_releases(), reverse=True):
        variant = patch.variant_for(v)
        if v < target and variant is not None and variant.kind == "edit":
            return v
    return None


def _write_anchor_fingerprints(series: Series, patch_id: str, fps: dict[str, dict[str, str]],
                               txn: Transaction) -> str | None:
    """Merge ``fps`` (anchor -> {version: fp}) into ``anchors/<patch>.toml`` (comments kept:
    :func:`patchq.authoring.fingerprints.rewrite`), staged in ``txn``; the path when changed."""
    from patchq import tomlsafe
    from patchq.authoring import fingerprints

    path = series.anchors_root / f"{patch_id}.toml"
    raw = txn.staged(path) or b""
    data = tomlsafe.parse(raw, path)
    old = raw.decode("utf-8")
    for anchor_id, table in data.get("anchors", {}).items():
        if anchor_id in fps:
            table["fingerprints"] = fingerprints.merged(table.get("fingerprints", {}), fps[anchor_id], fps[anchor_id])
    new = fingerprints.rewrite(patch_id, old, data)
    if new == old:
        return None
    txn.write(path, new)
    return str(path)


def record(res: merge.PatchRebase, series: Series, workdir: Path, resume: bool = False) -> None:
    """Write what a clean rebase proves (module docstring); appends to ``res.written``.

    With ``resume`` (``--continue``), a merge that needs a new variant gets it written
    (:func:`write_variant`); without, it is proposed in the work directory. What goes into
    the series (the widened variant, the fingerprints, the diff) lands in one transaction
    (:mod:`patchq.authoring.repowrite`): a rebase killed between two of those writes leaves
    none of them, so re-running it redoes the patch.
    """
    from patchq.authoring import repowrite

    if res.merge != merge.CLEAN or res.status not in ("clean", "needs-variant"):
        return
    tv, fv = Version(res.to_version), res.from_version
    if resume and res.status == "needs-variant" and res.new_diff_source == "merge" and res.new_diff:
        why = write_variant(res, series)
        if why is None:
            return
        res.next_steps.append(f"no variant written: {why}; the merged definitions are in the work directory")
    if res.transform != "carries-forward":
        d = merge.unit_dir(workdir, res.to_version, res.patch_id)
        for u in res.units:
            path = d / merge.unit_file(u.qualname, u.base_path)
            repowrite.write_file(path, u.merged or "")
            u.files.append(str(path))
            res.written.append(str(path))
        if res.new_diff:
            path = d / f"{res.patch_id}.diff"
            repowrite.write_file(path, res.new_diff)
            res.written.append(str(path))
        return
    with repowrite.series_transaction(series, f"patchq rebase --to {res.to_version} --write") as txn:
        _record_carried(res, series, txn, tv, fv, resume)


def _record_carried(res: merge.PatchRebase, series: Series, txn: Transaction, tv: Version, fv: str,
                    resume: bool = False) -> None:
    patch = series.patch(res.patch_id)
    current = patch.variant_for(tv)
    if current is None:
        if tv not in patch.applies:
            res.next_steps.append(f"vllm {tv} is outside {patch.id}'s applies-range {patch.applies}: widen it by hand")
            covers = False
        else:
            carried = res.variant_obj
            assert carried is not None  # record() passes only a rebase that was planned (merge set it)
            old, new = seriesedit.widen_variant(module_file(series.root, patch.id), carried.applies, tv, txn=txn)
            res.written.append(str(module_file(series.root, patch.id)))
            res.next_steps = [s for s in res.next_steps if not s.startswith("widen the variant")]
            res.next_steps.append(f"widened variant \"{old}\" to \"{new}\" in "
                                  f"{module_file(series.root, patch.id).name}: "
                                  f"review it; it also covers the releases between {fv} and {tv} "
                                  f"(`patchq check`/`matrix` verifies them)")
            covers = True
    else:
        covers = current is res.variant_obj
        if not covers:
            res.next_steps.append(f"the series has its own variant at vllm {tv} ({res.target_variant}): "
                                  f"fingerprints at {tv} not recorded for the {res.variant} variant")
    fps = {a: {v: fp for v, fp in table.items() if v == fv} for a, table in res.fingerprints.items()}
    written = _write_anchor_fingerprints(series, patch.id, fps, txn)
    if written:
        res.written.append(written)
    if covers:
        _record_target(res, series, txn, patch.id, tv, resume)


def _record_target(res: merge.PatchRebase, series: Series, txn: Transaction, patch_id: str, tv: Version,
                   resume: bool) -> None:
    """The target's side of a carried patch: its fingerprints (unless check blocks the
    written patch there and no person took the merge) and its stored diff."""
    txn.apply()  # the diff is rendered from the widened series on disk
    fresh = Series(series.root, series.anchors_root, series.profiles, {})  # re-read: the hash changed
    source = release_source(res.to_version)
    # a clean merge is not a review: the target's fingerprints are recorded only when check,
    # with none recorded there, does not block the patch (review, possibly-upstreamed, ...),
    # or when a person took the merge (--continue: resolved by hand or taken as it is)
    (row,) = check.check(source, [fresh.patch(patch_id)]) if not resume else (None,)
    if row is not None and row.blocking:
        res.next_steps.insert(0, f"check gives {row.status} on vllm {tv}, so its fingerprints are not recorded: "
                                 f"`patchq review {patch_id} --vllm {tv}` shows what upstream changed under "
                                 f"it; `--accept` records that you reviewed it")
    else:
        tv_fps = {a: {v: fp for v, fp in table.items() if v == str(tv)} for a, table in res.fingerprints.items()}
        written = _write_anchor_fingerprints(series, patch_id, tv_fps, txn)
        if written and written not in res.written:
            res.written.append(written)  # lands with the transaction (fingerprints leave the hash alone)
    rendered = diffstore.write(diffstore.render(source, [fresh.patch(patch_id)]), source,
                               diffstore.diffs_dir(series.root, res.to_version), txn)
    if rendered[0].action in ("wrote", "unchanged"):
        res.written.append(rendered[0].path)


def write_variant(res: merge.PatchRebase, series: Series) -> str | None:
    """Write the new variant a clean (or hand-resolved) merge calls for: the merged
    definitions at the target become statement operations (the importer, on the target
    release), stored in ``series/<patch>.py`` as a variant from the target on (the
    current one capped before it), with new anchors (``<qualname>-<target>``, no node
    pattern, fingerprints at the target) in ``anchors/<patch>.toml``. The written patch
    is planned at the target; unless it gives exactly the merge, both files are put
    back. Returns None when written, else why not.
    """
    from patchq.authoring import fingerprints, importer
    from patchq.errors import PatchqError
    from patchq.plan import engine

    tv = Version(res.to_version)
    try:
        plan = importer.build(res.new_diff, res.patch_id, res.to_version, source_name=f"rebase to {tv}")
    except PatchqError as exc:
        return f"the merge does not import as statement operations ({exc})"
    mod, anchors_path = module_file(series.root, res.patch_id), series.anchors_root / f"{res.patch_id}.toml"
    from patchq import tomlsafe

    data = tomlsafe.read_file(anchors_path)
    data.pop("format", None)
    ops = importer.variant_anchors(plan, data)
    from patchq.authoring import repowrite
    from patchq.errors import RepoWriteError

    how = "resolved merge" if any(u.resolution == "resolved" for u in res.units) else "merge"
    try:
        # module and anchors land together; a variant that does not give the merge rolls both back
        with repowrite.series_transaction(series, f"patchq rebase --to {tv} --continue --write") as txn:
            _, _, new_range = seriesedit.add_edit_variant(mod, res.variant_obj.applies, tv,  # type: ignore[union-attr]
                                                       ops, f"written by `patchq rebase --write` from the {how}",
                                                       txn=txn)
            txn.write(anchors_path, fingerprints.render(res.patch_id, data))
            txn.apply()
            sys.modules.pop("patchq_series_" + res.patch_id.replace("-", "_"), None)
            fresh = Series(series.root, series.anchors_root, series.profiles, {})
            result = engine.plan(release_source(res.to_version), [fresh.patch(res.patch_id)])
            r = result.results[0]
            if r.status != engine.OK:
                raise ValueError(r.reason)
            for rel, want in plan.patched.items():
                if merge.strip_sentinels(result.patched.get(rel, "")) != want:
                    raise ValueError(f"{rel}: the new variant does not give the merge")
    except RepoWriteError:
        raise  # the environment (a full disk, a read-only repo): exit 5, not "no variant written"
    except (PatchqError, ValueError) as exc:
        sys.modules.pop("patchq_series_" + res.patch_id.replace("-", "_"), None)
        return str(exc)
    res.written += [str(mod), str(anchors_path)]
    res.status = "clean"
    res.next_steps = [s for s in res.next_steps if "add a variant" not in s]
    res.next_steps.append(f"wrote variant \"{new_range}\" in {mod.name} (statement operations from the merge; "
                          f"{importer.summary_line(plan)}); review it. Releases after {res.from_version} and before "
                          f"{tv} keep the capped variant, verified on neither side: `patchq check --patch "
                          f"{res.patch_id} --vllm X` (or `patchq matrix`) shows where it still applies")
    return None


def _broken_on_verified(patch: Patch, to_source: CodeSource) -> merge.PatchRebase | None:
    """A patch whose variant is recorded as verified on the target but that ``check`` blocks
    there (an anchor or the patch edited since it was verified): status ``unsupported``, as a
    rebase cannot help (upstream is the code that was verified), with check's reason; None
    when check passes it."""
    (row,) = check.check(to_source, [patch])
    if not row.blocking:
        return None
    tv = to_source.version
    why = row.reason.split(f"; {report.VERIFIED_HERE}")[0]  # said below, once
    res = merge.PatchRebase(patch.id, "", str(tv), status=merge.UNSUPPORTED,
                            reason=(f"recorded as verified on vllm {tv}, but check gives {row.status}: {why}; "
                                    f"fix anchors/{patch.id}.toml or the patch (a rebase cannot help)"))
    res.next_steps.append(f"fix anchors/{patch.id}.toml or the patch, then `patchq check --patch {patch.id} "
                          f"--vllm {tv}`")
    return res


def run(series: Series, to: str, from_: str | None = None, patch_ids: list[str] | None = None,
        write: bool = False, workdir: str | Path | None = None, resume: bool = False) -> tuple[RebaseDoc, int]:
    """Rebase the series' patches to ``to``. Returns (``patchq.rebase/1`` document, exit code).

    ``resume`` (``--continue``) takes conflicts resolved by hand in the work directory.

    Raises:
        UsageError: an unknown patch id, or no release to rebase from.
        TargetNotFound: a release cannot be had.
    """
    target = version_arg(to, "--to")
    if from_ is not None:
        version_arg(from_, "--from")
    workdir = Path(workdir) if workdir else series.root.parent / ".patchq-rebase"
    ids = patch_ids or series.all_patch_ids()
    to_source = release_source(to)
    sources: dict[str, object] = {}
    results: list[merge.PatchRebase] = []
    for pid in ids:
        patch = series.patch(pid)
        carried = patch.variant_for(target)
        if not from_ and carried is not None and (carried.kind != "edit" or all(
                str(target) in patch.anchors[a].fingerprints for a in carried.edits)):
            # the series already carries the patch to the target: nothing to merge, once check
            # confirms that the verified variant still applies there
            broken = _broken_on_verified(patch, to_source) if carried.kind == "edit" else None
            if broken is not None:
                results.append(broken)
                continue
            what = (f"variant {carried.applies} is verified on {target}" if carried.kind == "edit"
                    else f"variant {carried.applies} says {carried.kind}")
            results.append(merge.PatchRebase(pid, "", str(target), status="skipped",
                                             reason=f"already carried: {what} (give --from to rebase anyway)"))
            continue
        fv = Version(from_) if from_ else default_from(patch, target)
        if fv is None:
            res = merge.PatchRebase(pid, "", str(target), status="skipped",
                                    reason=f"no release before {target} where {pid} has an edit variant")
            results.append(res)
            continue
        key = str(fv)
        if key not in sources:
            sources[key] = release_source(key)
        res = merge.rebase_patch(patch, sources[key], to_source, workdir, resume=resume)  # type: ignore[arg-type]
        if write:
            record(res, series, workdir, resume)
        results.append(res)
    doc = document(results, to, from_, write, workdir)
    return doc, (EXIT_PATCH_FAILED if any(r.status in FAILING for r in results) else EXIT_OK)


def _unit_row(u: merge.UnitRebase) -> dict:
    row = asdict(u)
    row.pop("target_span", None)
    return row


def document(results: list[merge.PatchRebase], to: str, from_: str | None, write: bool,
             workdir: Path) -> RebaseDoc:
    """The ``patchq.rebase/1`` document."""
    patches = []
    for r in results:
        patches.append({
            "id": r.patch_id, "from": r.from_version, "to": r.to_version, "variant": r.variant,
            "status": r.status, "merge": r.merge, "transform": r.transform, "reason": r.reason,
            "target_variant": r.target_variant,
            "units": [_unit_row(u) for u in r.units],
            "range_diff": {"counts": rangediff.counts(r.range_diff), "rows": rangediff.render(r.range_diff)},
            "new_diff_source": r.new_diff_source, "old_diff": r.old_diff, "new_diff": r.new_diff,
            "fingerprints": r.fingerprints, "written": r.written, "next_steps": r.next_steps,
        })
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {"schema": SCHEMA, "to": to, "from": from_, "write": write, "workdir": str(workdir),
            "counts": counts, "ok": not any(r.status in FAILING for r in results), "patches": patches}



def check_ids(series: Series, ids: list[str] | None) -> list[str] | None:
    """Validate ``--patch`` ids. Raises UsageError for an unknown one."""
    if not ids:
        return None
    known = series.all_patch_ids()
    bad = [i for i in ids if i not in known]
    if bad:
        raise UsageError(f"unknown patch(es) {', '.join(bad)}; known: {', '.join(known)}")
    return ids
