"""Test a series like a codemod: expected verdicts per release and the stored diffs.

Any series repo (``patchq init`` writes one) tests its patches with this module, through
pytest (it is a pytest plugin, registered by the ``pytest11`` entry point) or with
``patchq test``. The expected output of each patch lives in the series' one store,
``series/diffs/`` (:mod:`patchq.authoring.diffstore`)::

    series/diffs/<patch-id>.expect.toml      [verdicts] "<release>" = "<check status>"
    series/diffs/<release>/<patch-id>.diff   the patch alone rendered on that pristine release

A *case* is one (patch, release): a release of its ``.expect.toml``, or one that holds a
stored diff of it (``patchq diff --release X --write`` and ``rebase --write`` store diffs
without a verdict). It passes when ``patchq check`` of the patch alone on the pristine
release gives the expected status (when one is recorded) and the diff patchq renders
there equals the stored one, sentinel hashes aside (:func:`patchq.authoring.diffstore.mask_hashes`:
the hash covers the whole series file, so a docstring edit changes it), or, where the
patch does not apply, no diff is stored. The diff pins every byte the patch changes, the
sentinel's place included, and through its context lines and ``git apply --check`` at
write time where it goes; the unchanged rest of the definition is the pristine release's,
checked against its RECORD. A patch with neither is one failing case that says how to
create it.

Series repos written by an earlier patchq keep the first layout (*layout 1*), read and
regenerated as before::

    <goldens>/<patch-id>/expect.toml                  [verdicts] "<release>" = "<check status>"
    <goldens>/<patch-id>/<release>/<qualname>.before.py an anchored definition, pristine
    <goldens>/<patch-id>/<release>/<qualname>.after.py  the same definition patched (sentinels dropped)

(``goldens`` in ``patchq.toml``, default ``goldens/`` beside ``series/``). A patch is in
layout 1 while it has ``<goldens>/<patch-id>/expect.toml`` and no ``.expect.toml`` in the
store. ``patchq test --migrate`` (:func:`migrate`) moves it to the store, only when its
layout-1 cases pass and each stored diff, applied to the pristine release, gives exactly
its ``.after.py`` definitions: nothing is lost.

Regenerate with ``patchq test --regen [--patch ID] [--releases SPEC]`` or ``pytest
--patchq-regen``: the releases are those already recorded, else (or with ``--releases``)
the patch's authoring release (:func:`authoring_releases`). Release wheels come from
patchq's cache (:mod:`patchq.vllmdist.releases`; downloaded once).

In a test module::

    import pytest
    from patchq import testing

    @pytest.mark.parametrize("case", testing.cases(__file__), ids=testing.case_id)
    def test_patch(case, patchq_regen):
        testing.assert_case(case, regen=patchq_regen)
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from patchq import discovery

if TYPE_CHECKING:
    from patchq.plan.results import Plan
    from patchq.vllmdist.sources import CodeSource

#: layout 1's expected-verdicts file, ``<goldens>/<patch-id>/expect.toml``
EXPECT = "expect.toml"
#: the two layouts a patch's expected output can be in (:attr:`Case.layout`)
STORE, LAYOUT1 = "diffs", "goldens"


@dataclass(frozen=True)
class Case:
    """One patch on one release (``release`` None: the patch has no expected output yet)."""

    location: discovery.Location
    patch_id: str
    release: str | None

    @property
    def dir(self) -> Path:
        """Layout 1's ``<goldens>/<patch-id>/``."""
        return goldens_root(self.location) / self.patch_id

    @property
    def layout(self) -> str:
        """:data:`STORE` (``series/diffs``) or :data:`LAYOUT1` (see :func:`layout_of`)."""
        return layout_of(self.location, self.patch_id)


@dataclass
class Outcome:
    """What :func:`run_case` found: ``problems`` (empty: pass) and files ``written`` (regen)."""

    case: Case
    status: str | None = None
    problems: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    #: regen: expected verdicts that are blocking (apply would fail there), said, not failed
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the case passed (or was regenerated)."""
        return not self.problems


def goldens_root(loc: discovery.Location) -> Path:
    """Layout 1's goldens directory of a series location."""
    return loc.goldens or loc.series.parent / "goldens"


def store_root(loc: discovery.Location) -> Path:
    """The series' store of expected output, ``series/diffs/``."""
    from patchq.authoring import diffstore

    return diffstore.store_root(loc.series)


def layout_of(loc: discovery.Location, patch_id: str) -> str:
    """:data:`LAYOUT1` when the patch's expected verdicts are in ``<goldens>/<patch>/expect.toml``
    and not in the store, else :data:`STORE` (where a patch without any is recorded)."""
    from patchq.authoring import diffstore

    if not diffstore.expect_path(loc.series, patch_id).is_file() and (goldens_root(loc) / patch_id / EXPECT).is_file():
        return LAYOUT1
    return STORE


def locate(start: str | Path | None = None, series: str | Path | None = None) -> discovery.Location:
    """The series a test module belongs to: ``series`` if given, else the config above
    ``start`` (a test file or directory), else the usual discovery."""
    if series:
        return discovery.find(series)
    if start is not None:
        here = Path(start)
        found = discovery.find_config(here.parent if here.is_file() else here)
        if found:
            return discovery.from_config(*found)
    return discovery.find()


def read_expect(patch_dir: Path) -> dict[str, str] | None:
    """Layout 1's ``expect.toml`` verdicts (release -> status), or None when there is none."""
    from patchq import tomlsafe
    from patchq.authoring import diffstore

    path = patch_dir / EXPECT
    if not path.is_file():
        return None
    return diffstore.parse_verdicts(tomlsafe.read_bytes(path), path)


def expected_verdicts(loc: discovery.Location, patch_id: str) -> dict[str, str]:
    """The patch's recorded verdicts (release -> check status) in its layout ({} when none).

    Raises:
        SeriesError: the store's expect file is malformed.
    """
    if layout_of(loc, patch_id) == LAYOUT1:
        return read_expect(goldens_root(loc) / patch_id) or {}
    from patchq.authoring import diffstore

    return diffstore.read_verdicts(loc.series, patch_id) or {}


def _write_expect(patch_dir: Path, patch_id: str, verdicts: dict[str, str], txn) -> Path:
    from packaging.version import Version

    lines = [f"# Expected `patchq check` status of patch {patch_id} alone on each pristine vLLM release.",
             f"# Regenerate: patchq test --regen --patch {patch_id}   (or: pytest --patchq-regen)",
             "", "[verdicts]"]
    lines += [f'"{v}" = "{verdicts[v]}"' for v in sorted(verdicts, key=Version)]
    path = patch_dir / EXPECT
    txn.write(path, "\n".join(lines) + "\n")
    return path


def case_releases(loc: discovery.Location, patch_id: str) -> list[str]:
    """The releases of a patch's cases, in version order: its recorded verdicts, and (in
    the store) the releases holding a stored diff of it."""
    from packaging.version import InvalidVersion, Version

    found = set(expected_verdicts(loc, patch_id))
    if layout_of(loc, patch_id) == STORE:
        from patchq.authoring import diffstore

        for rel in diffstore.stored_releases(loc.series, patch_id):
            try:
                Version(rel)
            except InvalidVersion:
                continue
            found.add(rel)
    return sorted(found, key=Version)


def cases(start: str | Path | None = None, series: str | Path | None = None,
          patches: list[str] | None = None, location: discovery.Location | None = None) -> list[Case]:
    """Every case of the series (see module docstring), patches in series order.

    The series is ``location``, else :func:`locate` (``start``: the test file)."""
    loc = location or locate(start, series)
    known = load_series(loc).all_patch_ids()
    out = []
    for pid in patches or known:
        releases = case_releases(loc, pid)
        out += [Case(loc, pid, v) for v in releases] if releases else [Case(loc, pid, None)]
    if not patches:  # the store's files of a patch the series no longer has: one failing case each
        out += [Case(loc, pid, None) for pid in sorted(set(store_patch_ids(loc)) - set(known))]
    return out


def store_patch_ids(loc: discovery.Location) -> list[str]:
    """The patch ids the store holds output of (``<id>.expect.toml``, ``<release>/<id>.diff``)."""
    from patchq.authoring import diffstore

    root = store_root(loc)
    if not root.is_dir():
        return []
    found = {p.name[:-len(diffstore.EXPECT_SUFFIX)] for p in root.glob(f"*{diffstore.EXPECT_SUFFIX}")}
    found |= {p.stem for p in root.glob("*/*.diff")}
    return sorted(found)


def case_id(case: Case) -> str:
    """A readable pytest id: ``<patch>@<release>``."""
    return f"{case.patch_id}@{case.release or 'no-goldens'}"


def load_series(loc: discovery.Location):
    """The :class:`patchq.series.Series` at ``loc`` (its own anchors directory)."""
    from patchq import series as series_mod

    return series_mod.Series(root=loc.series, anchors_root=loc.anchors, _patches={}, location=loc,
                             profiles=series_mod.load_profiles(loc.series / "profiles.toml"))


def default_releases(patch) -> list[str]:
    """The newest cached release inside each edit variant's range (oldest first)."""
    from patchq.vllmdist import releases

    cached = sorted(releases.cached_releases())
    out: list[str] = []
    for v in patch.variants:
        inside = [c for c in cached if c in patch.applies and v.applies.contains(c, prereleases=True)]
        if inside and str(inside[-1]) not in out:
            out.append(str(inside[-1]))
    from packaging.version import Version

    return sorted(out, key=Version)


#: check statuses that are never a failure of apply. Kept for series repos that import it;
#: the regen warning reads the check row's own ``blocking`` (``moved`` is blocking only
#: when apply cannot follow the move, e.g. a renamed qualname)
NON_BLOCKING = frozenset({"applies", "applies-drifted", "upstreamed", "superseded", "absent", "not-applicable"})


def authoring_releases(patch) -> list[str]:
    """The release a patch was made on: the oldest its anchors have fingerprints for inside
    its applies-range (``record``/``import`` write the release they were made against;
    later releases are added by ``fingerprint`` and ``rebase``: :func:`authored_on`); else
    :func:`default_releases`."""
    return authored_on(patch) or default_releases(patch)


def authored_on(patch) -> list[str]:
    """The release the patch was made on when its anchors say so: the oldest they have
    fingerprints for inside its applies-range (``record``/``import`` write it); [] when none
    is recorded (:func:`authoring_releases` then guesses, and a guess refuses nothing)."""
    from packaging.version import InvalidVersion, Version

    out = set()
    for spec in patch.anchors.values():
        for v in spec.fingerprints:
            try:
                if Version(v) in patch.applies:
                    out.add(v)
            except InvalidVersion:
                continue
    return sorted(out, key=Version)[:1]


def verified_on(patch) -> list[str]:
    """The releases the anchors file records as verified for every anchor of the variant
    that covers them: a person's word that the patch is right there
    (:mod:`patchq.authoring.fingerprints`)."""
    from packaging.version import InvalidVersion, Version

    out = []
    for v in sorted({v for spec in patch.anchors.values() for v in spec.fingerprints}):
        try:
            variant = patch.variant_for(Version(v))
        except InvalidVersion:
            continue
        if variant is not None and variant.kind == "edit" and variant.edits and \
                all(v in patch.anchors[a].fingerprints for a in variant.edits if a in patch.anchors):
            out.append(v)
    return out


def _refused(case: Case, seen: _Seen) -> str:
    """Why a regen does not store a blocking verdict on the release the patch was made on
    (or one recorded as verified): the patch does not apply where it was written, so that
    is no expected output but a broken patch; what clears it."""
    from patchq.report import remedy

    row = seen.row
    fix = remedy(row, str(case.release)) if row is not None else None
    return (f"{case.patch_id} on vllm {case.release}: check says {seen.status}, which is blocking, on a release "
            f"the patch was made on or recorded as verified on: not recorded as its expected verdict (nothing "
            f"written); "
            f"`patchq check --patch {case.patch_id} --vllm {case.release}` says why"
            + (f"; {fix}" if fix else ""))


def definition(text: str, qualname: str) -> str | None:
    """The dedented source of ``qualname`` in ``text`` (sentinel lines dropped), or None."""
    from patchq.authoring.merge import strip_sentinels
    from patchq.plan.anchors import ast_index, definition_span, split_lines

    nodes = ast_index(text).get(qualname)
    if not nodes:
        return None
    start, end = definition_span(nodes[0])
    return strip_sentinels(textwrap.dedent("".join(split_lines(text)[start - 1:end])))


def observe(patch, release: str) -> tuple[str, dict[str, str]]:
    """The check status of ``patch`` alone on pristine ``release`` and its layout-1 golden
    texts (``<qualname>.before.py`` / ``.after.py`` -> text, one pair per anchored
    definition however many anchors it holds; empty unless the patch applies)."""
    seen = _observe(patch, release)
    return seen.status, _definition_texts(seen)


@dataclass
class _Seen:
    """One patch alone on one pristine release: the check row's status and ``blocking``,
    the plan, and the diff it renders (None unless the plan applies)."""

    status: str
    blocking: bool
    source: CodeSource
    plan: Plan
    diff: str | None
    #: the check row (``patchq.check/1``), for the remedy a refusal names
    row: dict | None = None


def _observe(patch, release: str) -> _Seen:
    from patchq.compat import check as checking
    from patchq.plan import diffs, engine
    from patchq.vllmdist.sources import release_source

    source = release_source(release)
    row = checking.check(source, [patch])[0]
    plan = engine.plan(source, [patch])
    ok = plan.results[0].status == engine.OK
    return _Seen(row.status, row.blocking, source, plan,
                 diffs.unified_all(plan.pristine, plan.patched) if ok else None, row.to_dict())


def _definition_texts(seen: _Seen) -> dict[str, str]:
    """Layout 1's golden texts of an observation (see :func:`observe`)."""
    texts: dict[str, str] = {}
    if seen.diff is None:
        return texts
    plan, source = seen.plan, seen.source
    for a in plan.results[0].anchors:
        before_text = plan.pristine.get(a.relpath) or source.read_text(a.relpath) or ""
        after_text = plan.patched.get(a.relpath, before_text)
        before, after = definition(before_text, a.qualname), definition(after_text, a.qualname)
        if before is not None:
            texts[f"{a.qualname}.before.py"] = before
        if after is not None:
            texts[f"{a.qualname}.after.py"] = after
    return texts


def run_case(case: Case, regen: bool = False, releases: list[str] | None = None) -> Outcome:
    """Verify one case, or (``regen``) rewrite its expected output. A case without any is
    regenerated for ``releases`` and the patch's authoring release (:func:`authoring_releases`)."""
    out = Outcome(case)
    loaded = load_series(case.location)
    if case.patch_id not in loaded.all_patch_ids():
        return _stray(case, out)
    if case.release is None:
        return _record_new(case, out, releases) if regen else _no_goldens(case, out)
    patch = loaded.patch(case.patch_id)
    seen = _observe(patch, case.release)
    out.status = seen.status
    if regen:
        if seen.blocking and case.release in authored_on(patch) + verified_on(patch):
            out.problems.append(_refused(case, seen))
            return out
        if seen.blocking:
            out.warnings.append(f"{case.patch_id} on vllm {case.release}: the recorded expected verdict is "
                                f"`{seen.status}`, which is blocking (apply fails there); `patchq check --patch "
                                f"{case.patch_id} --vllm {case.release}` says why")
        _write_case(case, seen, out)
    elif case.layout == LAYOUT1:
        _verify_layout1(case, seen, out)
    else:
        _verify_store(case, seen, out)
    return out


def _stray(case: Case, out: Outcome) -> Outcome:
    from patchq.authoring import diffstore

    files = [str(diffstore.expect_path(case.location.series, case.patch_id))] * \
        diffstore.expect_path(case.location.series, case.patch_id).is_file()
    files += sorted(str(diffstore.diff_path(case.location.series, v, case.patch_id))
                    for v in diffstore.stored_releases(case.location.series, case.patch_id))
    out.problems.append(f"{case.patch_id} is not a patch of this series, but the store holds its output: "
                        f"{', '.join(files)} (remove them, or restore the patch)")
    return out


def _no_goldens(case: Case, out: Outcome) -> Outcome:
    from patchq.authoring import diffstore

    path = diffstore.expect_path(case.location.series, case.patch_id)
    out.problems.append(f"{case.patch_id}: no expected output in {path} "
                        f"(run `patchq test --regen --patch {case.patch_id}`)")
    return out


def _record_new(case: Case, out: Outcome, releases: list[str] | None) -> Outcome:
    """Regenerate a patch for ``releases`` and its authoring release, then settle it."""
    from packaging.version import Version

    patch = load_series(case.location).patch(case.patch_id)
    wanted = sorted(set(releases or []) | set(authoring_releases(patch)), key=Version)
    if not wanted:
        out.problems.append(f"{case.patch_id}: no release to record (no fingerprints, no cached release "
                            f"inside its range); pass --releases")
        return out
    for rel in wanted:
        done = run_case(Case(case.location, case.patch_id, rel), True)
        out.written += done.written
        out.warnings += done.warnings
        out.problems += done.problems
    _settle_goldens(case, out)
    return out


def _transaction(case: Case):
    from patchq.authoring import repowrite

    loc = case.location
    roots = [repowrite.repo_of(loc.series), loc.series, goldens_root(loc)]
    return repowrite.Transaction(repowrite.repo_of(loc.series), f"patchq test --regen --patch {case.patch_id}", roots)


def _write_case(case: Case, seen: _Seen, out: Outcome) -> None:
    """Record one case in its layout; its files land together (repowrite: atomic, verified)."""
    with _transaction(case) as txn:
        if case.layout == LAYOUT1:
            _stage_layout1(case, seen, out, txn)
        else:
            _stage_store(case, seen, out, txn)


def _stage_store(case: Case, seen: _Seen, out: Outcome, txn) -> None:
    """Stage the case's verdict and diff in the store (the diff validated: unidiff and
    ``git apply --check`` on the pristine release)."""
    from patchq.authoring import diffstore

    series = case.location.series
    assert case.release is not None
    epath = diffstore.expect_path(series, case.patch_id)
    verdicts = diffstore.parse_verdicts(txn.staged(epath), epath) or {}
    if verdicts.get(case.release) != seen.status:
        verdicts[case.release] = seen.status
        txn.write(epath, diffstore.render_verdicts(case.patch_id, verdicts))
        out.written.append(str(epath))
    dpath = diffstore.diff_path(series, case.release, case.patch_id)
    have = txn.staged(dpath)
    if seen.diff is None:
        if have is not None:
            txn.remove(dpath)
            out.written.append(str(dpath))
    elif have != seen.diff.encode("utf-8"):
        diffstore.validate(seen.diff, seen.source.root)
        txn.write(dpath, seen.diff)
        out.written.append(str(dpath))


def _stage_layout1(case: Case, seen: _Seen, out: Outcome, txn) -> None:
    """Stage the case's ``expect.toml`` entry and definition files in layout 1."""
    assert case.release is not None
    texts = _definition_texts(seen)
    rdir = case.dir / case.release
    verdicts = read_expect(case.dir) or {}
    if verdicts.get(case.release) != seen.status:
        verdicts[case.release] = seen.status
        out.written.append(str(_write_expect(case.dir, case.patch_id, verdicts, txn)))
    for stale in sorted(rdir.glob("*.py")) if rdir.is_dir() else []:
        if stale.name not in texts:
            txn.remove(stale)
            out.written.append(str(stale))
    for name, text in texts.items():
        path = rdir / name
        if txn.staged(path) != text.encode("utf-8"):
            txn.write(path, text)
            out.written.append(str(path))


def _verify_store(case: Case, seen: _Seen, out: Outcome) -> None:
    """Compare a case with the store: the expected verdict (when recorded) and the diff."""
    from patchq.authoring import diffstore

    where = f"{case.patch_id} on vllm {case.release}"
    assert case.release is not None
    want = (diffstore.read_verdicts(case.location.series, case.patch_id) or {}).get(case.release)
    if want is not None and want != seen.status:
        out.problems.append(f"{where}: check says {seen.status}, expected {want}")
    dpath = diffstore.diff_path(case.location.series, case.release, case.patch_id)
    have = dpath.read_text(encoding="utf-8") if dpath.is_file() else None
    if have is None and seen.diff is not None:
        out.problems.append(f"{where}: stored diff {dpath} missing")
    elif have is not None and seen.diff is None:
        out.problems.append(f"{where}: stored diff {dpath} is no longer produced (check says {seen.status})")
    elif have is not None and seen.diff is not None and diffstore.mask_hashes(have) != diffstore.mask_hashes(seen.diff):
        out.problems.append(f"{where}: the diff differs from the stored {dpath}:\n"
                            + _text_diff(have, seen.diff, f"stored/{dpath.name}", f"now/{dpath.name}"))


def _verify_layout1(case: Case, seen: _Seen, out: Outcome) -> None:
    """Compare a case with layout 1: the expected verdict and every definition file."""
    assert case.release is not None
    texts = _definition_texts(seen)
    rdir = case.dir / case.release
    where = f"{case.patch_id} on vllm {case.release}"
    want = (read_expect(case.dir) or {}).get(case.release)
    if want != seen.status:
        out.problems.append(f"{where}: check says {seen.status}, expected {want}")
    have = {p.name: p for p in rdir.glob("*.py")} if rdir.is_dir() else {}
    for name, text in texts.items():
        if name not in have:
            out.problems.append(f"{where}: golden {rdir / name} missing")
        elif have[name].read_text(encoding="utf-8") != text:
            diff = _text_diff(have[name].read_text(encoding="utf-8"), text, f"golden/{name}", f"now/{name}")
            out.problems.append(f"{where}: {name} differs from its golden:\n{diff}")
    for name in sorted(set(have) - set(texts)):
        out.problems.append(f"{where}: golden {name} is no longer produced")


def _text_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    import difflib

    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), old_name, new_name, n=2))


def _settle_goldens(case: Case, out: Outcome) -> None:
    """After a regen of ``case``'s patch: every recorded release must pass as recorded; one
    that does not (its output was left by an older regen) is recorded again, then checked
    again. What still fails is a problem of ``out``."""
    for rel in case_releases(case.location, case.patch_id):
        one = Case(case.location, case.patch_id, rel)
        if run_case(one).problems:
            again = run_case(one, True)
            out.written += again.written
            out.warnings += [w for w in again.warnings if w not in out.warnings]
            out.problems += [p for p in again.problems if p not in out.problems]
            out.problems += [f"after regen: {p}" for p in run_case(one).problems]


def assert_case(case: Case, regen: bool = False) -> None:
    """pytest helper: fail with every problem of the case (or regenerate it)."""
    outcome = run_case(case, regen=regen)
    if outcome.problems:
        import pytest

        pytest.fail("\n".join(outcome.problems + ["(regenerate: patchq test --regen, or pytest --patchq-regen)"]),
                    pytrace=False)


# --------------------------------------------------------------------------- migration


def migrate(loc: discovery.Location, patch_id: str) -> Outcome:
    """Move one patch's expected output from layout 1 to the store (``patchq test --migrate``).

    Nothing is lost: the patch's layout-1 cases must pass first, and for each release the
    stored diff, applied to the pristine release's files, must give exactly its
    ``.after.py`` definitions (and the pristine ones its ``.before.py``). Then its verdicts
    and diffs are written to the store and its layout-1 files removed, in one transaction.
    A patch not in layout 1 is left alone (``written`` empty). Problems name what blocks.
    """
    case = Case(loc, patch_id, None)
    out = Outcome(case)
    if layout_of(loc, patch_id) != LAYOUT1:
        return out
    seen: dict[str, _Seen] = {}
    for rel in case_releases(loc, patch_id):
        one = Case(loc, patch_id, rel)
        check = Outcome(one)
        seen[rel] = _observe(load_series(loc).patch(patch_id), rel)
        _verify_layout1(one, seen[rel], check)
        check.problems += _diff_gives_goldens(one, seen[rel])
        out.problems += check.problems
    if out.problems:
        out.problems.append(f"{patch_id}: not migrated (its layout-1 goldens must pass first: fix the patch, or "
                            f"`patchq test --regen --patch {patch_id}`)")
        return out
    with _transaction(case) as txn:
        for rel, s in seen.items():
            _stage_store(Case(loc, patch_id, rel), s, out, txn)
        for path in sorted(p for p in case.dir.rglob("*") if p.is_file()):
            txn.remove(path)
            out.written.append(str(path))
    _remove_empty_dirs(case.dir)
    _remove_empty_dirs(goldens_root(loc), below=False)  # the last patch moved: the layout-1 root goes too
    return out


def _diff_gives_goldens(case: Case, seen: _Seen) -> list[str]:
    """Problems when the diff to be stored, applied to the pristine files, does not give
    the layout-1 definition files of ``case`` byte for byte."""
    from patchq.authoring import diffstore

    if seen.diff is None:
        return []
    plan = seen.plan
    patched = diffstore.apply_diff(dict(plan.pristine), seen.diff)
    problems = []
    for a in plan.results[0].anchors:
        for kind, text in (("before", plan.pristine[a.relpath]), ("after", patched[a.relpath])):
            path = case.dir / str(case.release) / f"{a.qualname}.{kind}.py"
            if path.is_file() and definition(text, a.qualname) != path.read_text(encoding="utf-8"):
                problems.append(f"{case.patch_id} on vllm {case.release}: the diff does not reproduce {path}")
    return problems


def _remove_empty_dirs(root: Path, below: bool = True) -> None:
    """Remove ``root`` when it is empty, after (``below``) the empty directories under it
    (best effort: a directory holding anything stays)."""
    import os

    if not root.is_dir() or root.is_symlink():
        return
    inner = sorted((w[0] for w in os.walk(root)), key=len, reverse=True) if below else [str(root)]
    for dirpath in inner:
        try:
            os.rmdir(dirpath)
        except OSError:
            pass


# --------------------------------------------------------------------------- pytest plugin


def pytest_addoption(parser) -> None:
    """``--patchq-regen``: rewrite expected output instead of comparing."""
    group = parser.getgroup("patchq")
    group.addoption("--patchq-regen", action="store_true", default=False,
                    help="patchq.testing: rewrite expected verdicts and stored diffs")


def _regen_fixture(request) -> bool:
    return bool(request.config.getoption("--patchq-regen", default=False))


try:  # the plugin is loaded by every pytest run of the environment: stay cheap and optional
    import pytest as _pytest

    patchq_regen = _pytest.fixture(name="patchq_regen")(_regen_fixture)
except ImportError:  # pragma: no cover
    pass
