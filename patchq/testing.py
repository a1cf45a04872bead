"""Test a series like a codemod: expected verdicts per release and golden definitions.

Any series repo (``patchq init`` writes one) tests its patches with this module, through
pytest (it is a pytest plugin, registered by the ``pytest11`` entry point) or with
``patchq test``. Per patch, the goldens directory (``goldens`` in ``patchq.toml``,
default ``goldens/`` beside ``series/``) holds::

    <goldens>/<patch-id>/expect.toml                  [verdicts] "<release>" = "<check status>"
    <goldens>/<patch-id>/<release>/<qualname>.before.py an anchored definition, pristine
    <goldens>/<patch-id>/<release>/<qualname>.after.py  the same definition patched (sentinels dropped)

A *case* is one (patch, release) of ``expect.toml``. It passes when ``patchq check`` of the
patch alone on the pristine release gives the expected status, and, where the patch
applies, every anchored definition before and after equals its golden file (and no
golden file is left over). A patch without ``expect.toml`` is one failing case that says
how to create it.

Regenerate with ``patchq test --regen [--patch ID] [--releases SPEC]`` or ``pytest
--patchq-regen``: the releases are those already in ``expect.toml``, else (or with
``--releases``) the newest cached release of each variant's range. Release wheels come
from patchq's cache (:mod:`patchq.vllmdist.releases`; downloaded once).

In a test module::

    import pytest
    from patchq import testing

    @pytest.mark.parametrize("case", testing.cases(__file__), ids=testing.case_id)
    def test_patch(case, patchq_regen):
        testing.assert_case(case, regen=patchq_regen)
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from patchq import discovery

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXPECT = "expect.toml"


@dataclass(frozen=True)
class Case:
    """One patch on one release (``release`` None: the patch has no goldens yet)."""

    location: discovery.Location
    patch_id: str
    release: str | None

    @property
    def dir(self) -> Path:
        """``<goldens>/<patch-id>/``."""
        return goldens_root(self.location) / self.patch_id


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
    """The goldens directory of a series location."""
    return loc.goldens or loc.series.parent / "goldens"


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
    """``expect.toml``'s verdicts (release -> status), or None when there is none."""
    path = patch_dir / EXPECT
    if not path.is_file():
        return None
    return dict(tomllib.loads(path.read_text(encoding="utf-8")).get("verdicts", {}))


def _write_expect(patch_dir: Path, patch_id: str, verdicts: dict[str, str], txn) -> Path:
    from packaging.version import Version

    lines = [f"# Expected `patchq check` status of patch {patch_id} alone on each pristine vLLM release.",
             f"# Regenerate: patchq test --regen --patch {patch_id}   (or: pytest --patchq-regen)",
             "", "[verdicts]"]
    lines += [f'"{v}" = "{verdicts[v]}"' for v in sorted(verdicts, key=Version)]
    path = patch_dir / EXPECT
    txn.write(path, "\n".join(lines) + "\n")
    return path


def cases(start: str | Path | None = None, series: str | Path | None = None,
          patches: list[str] | None = None, location: discovery.Location | None = None) -> list[Case]:
    """Every case of the series (see module docstring), patches in series order.

    The series is ``location``, else :func:`locate` (``start``: the test file)."""
    loc = location or locate(start, series)
    loaded = load_series(loc)
    out = []
    for pid in patches or loaded.all_patch_ids():
        verdicts = read_expect(goldens_root(loc) / pid)
        if not verdicts:
            out.append(Case(loc, pid, None))
        else:
            from packaging.version import Version

            out += [Case(loc, pid, v) for v in sorted(verdicts, key=Version)]
    return out


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
    later releases are added by ``fingerprint`` and ``rebase``); else
    :func:`default_releases`."""
    from packaging.version import InvalidVersion, Version

    out = set()
    for spec in patch.anchors.values():
        for v in spec.fingerprints:
            try:
                if Version(v) in patch.applies:
                    out.add(v)
            except InvalidVersion:
                continue
    return sorted(out, key=Version)[:1] or default_releases(patch)


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
    """The check status of ``patch`` alone on pristine ``release`` and its golden texts
    (``<qualname>.before.py`` / ``.after.py`` -> text, one pair per anchored definition
    however many anchors it holds; empty unless the patch applies)."""
    status, _, texts = _observe(patch, release)
    return status, texts


def _observe(patch, release: str) -> tuple[str, bool, dict[str, str]]:
    """:func:`observe` plus the check row's ``blocking`` (apply would fail there)."""
    from patchq.compat import check as checking
    from patchq.plan import engine
    from patchq.vllmdist.sources import release_source

    source = release_source(release)
    row = checking.check(source, [patch])[0]
    status = row.status
    texts: dict[str, str] = {}
    plan = engine.plan(source, [patch])
    result = plan.results[0]
    if result.status == engine.OK:
        for a in result.anchors:
            before_text = plan.pristine.get(a.relpath) or source.read_text(a.relpath) or ""
            after_text = plan.patched.get(a.relpath, before_text)
            before, after = definition(before_text, a.qualname), definition(after_text, a.qualname)
            if before is not None:
                texts[f"{a.qualname}.before.py"] = before
            if after is not None:
                texts[f"{a.qualname}.after.py"] = after
    return status, row.blocking, texts


def run_case(case: Case, regen: bool = False, releases: list[str] | None = None) -> Outcome:
    """Verify one case, or (``regen``) rewrite its goldens. A case without goldens is
    regenerated for ``releases`` (default :func:`default_releases`)."""
    loaded = load_series(case.location)
    patch = loaded.patch(case.patch_id)
    out = Outcome(case)
    if case.release is None:
        if not regen:
            out.problems.append(f"{case.patch_id}: no goldens in {case.dir} "
                                f"(run `patchq test --regen --patch {case.patch_id}`)")
            return out
        from packaging.version import Version

        wanted = sorted(set(releases or []) | set(authoring_releases(patch)), key=Version)
        if not wanted:
            out.problems.append(f"{case.patch_id}: no release to record (no fingerprints, no cached release "
                                f"inside its range); pass --releases")
            return out
        for rel in wanted:
            done = run_case(Case(case.location, case.patch_id, rel), True)
            out.written += done.written
            out.warnings += done.warnings
        _settle_goldens(case, out)
        return out
    status, blocking, texts = _observe(patch, case.release)
    out.status = status
    rdir = case.dir / case.release
    if regen and blocking:
        out.warnings.append(f"{case.patch_id} on vllm {case.release}: the recorded expected verdict is `{status}`, "
                            f"which is blocking (apply fails there); `patchq check --patch {case.patch_id} --vllm "
                            f"{case.release}` says why")
    if regen:  # the case's goldens land together (repowrite: atomic, verified, whole or not at all)
        from patchq.authoring import repowrite

        loc = case.location
        roots = [repowrite.repo_of(loc.series), goldens_root(loc)]
        with repowrite.Transaction(repowrite.repo_of(loc.series), f"patchq test --regen --patch {case.patch_id}",
                                   roots) as txn:
            verdicts = read_expect(case.dir) or {}
            if verdicts.get(case.release) != status:
                verdicts[case.release] = status
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
        return out
    want = (read_expect(case.dir) or {}).get(case.release)
    if want != status:
        out.problems.append(f"{case.patch_id} on vllm {case.release}: check says {status}, expected {want}")
    have = {p.name: p for p in rdir.glob("*.py")} if rdir.is_dir() else {}
    for name, text in texts.items():
        if name not in have:
            out.problems.append(f"{case.patch_id} on vllm {case.release}: golden {rdir / name} missing")
        elif have[name].read_text(encoding="utf-8") != text:
            import difflib

            diff = "".join(difflib.unified_diff(have[name].read_text(encoding="utf-8").splitlines(True),
                                                text.splitlines(True), f"golden/{name}", f"now/{name}", n=2))
            out.problems.append(f"{case.patch_id} on vllm {case.release}: {name} differs from its golden:\n{diff}")
    for name in sorted(set(have) - set(texts)):
        out.problems.append(f"{case.patch_id} on vllm {case.release}: golden {name} is no longer produced")
    return out


def _settle_goldens(case: Case, out: Outcome) -> None:
    """After a regen of ``case``'s patch: every release of its ``expect.toml`` must pass
    as recorded; one that does not (its goldens were left by an older regen) is recorded
    again, then checked again. What still fails is a problem of ``out``."""
    for rel in sorted(read_expect(case.dir) or {}):
        one = Case(case.location, case.patch_id, rel)
        if run_case(one).problems:
            again = run_case(one, True)
            out.written += again.written
            out.warnings += [w for w in again.warnings if w not in out.warnings]
            out.problems += [f"after regen: {p}" for p in run_case(one).problems]


def assert_case(case: Case, regen: bool = False) -> None:
    """pytest helper: fail with every problem of the case (or regenerate it)."""
    outcome = run_case(case, regen=regen)
    if outcome.problems:
        import pytest

        pytest.fail("\n".join(outcome.problems + ["(regenerate: patchq test --regen, or pytest --patchq-regen)"]),
                    pytrace=False)


# --------------------------------------------------------------------------- pytest plugin


def pytest_addoption(parser) -> None:
    """``--patchq-regen``: rewrite goldens instead of comparing."""
    group = parser.getgroup("patchq")
    group.addoption("--patchq-regen", action="store_true", default=False,
                    help="patchq.testing: rewrite expected verdicts and golden definitions")


def _regen_fixture(request) -> bool:
    return bool(request.config.getoption("--patchq-regen", default=False))


try:  # the plugin is loaded by every pytest run of the environment: stay cheap and optional
    import pytest as _pytest

    patchq_regen = _pytest.fixture(name="patchq_regen")(_regen_fixture)
except ImportError:  # pragma: no cover
    pass
