"""Shared fixtures: real vLLM installs, hard-linked per-test copies, and the CLI.

A real vLLM release (from PyPI, via :func:`patchq.vllmdist.releases.release_tree`, which
fetches only the wheel's ``.py`` files and dist-info, once) is laid out once as an
installed site-packages in
``<patchq cache>/test-envs/vllm-<version>/py-<RECORD sha256[:16]>/site-packages`` and
reused by every later test run. Each test gets a COPY of it made of hard links: that is exactly
what uv does (it hard-links installed files from its cache), so a test also proves that
patchq never writes through a link. After every test the cached pristine install is
checked: same inode, size, mtime and mode for every file, and the files the series
targets still equal their RECORD hashes.

Fixtures:
    ``vllm_site(version)``   session factory: path of the cached pristine site-packages.
    ``pristine_site``        the cached pristine site-packages of vLLM 0.23.0 (read only!).
    ``make_site(version)``   per-test factory: a fresh hard-linked copy, with a ``.pth`` that
                             makes the stack's ``stack_runtime`` importable there (``runtime=False``: without).
    ``site``                 a fresh hard-linked copy of vLLM 0.23.0's site-packages.
    ``cli``                  :func:`support.run_cli` (``cli("status", "--json", ...)``).
    ``series_copy``          a temp copy of the stack fixture's series + anchors (for ``--series``).

The series of these tests is a fixture: the stack (``tests/testing/stack.py``) unless a test
names another. ``$PATCHQ_SERIES`` points at it for every test (in this process and in the CLI
runs of :func:`support.run_cli`), so no test reads a series installed in this environment
(the Spark stack's, ``spark/``, is tested by its own tests); a test of discovery unsets it.
    ``immutable``            ``immutable(dir, ...)``: ``chattr +i`` directories, undone after.
    ``small``                the small series and an installed vLLM 0.1.0 (``testing.small_world``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from support import link_copy, record_hashes, run_cli, sha256_path, snapshot
from testing import stack

DEFAULT_VERSION = "0.23.0"
#: series repos kept as test data carry their own tests (what `patchq init` wrote): not ours to collect
collect_ignore_glob = ["drift/*/tests/*"]
#: the ``.pth`` each test site gets so that the stack's ``stack_runtime`` is importable there
RUNTIME_PTH = "stack_runtime_checkout.pth"


def _targets() -> list[str]:
    """relpaths of every module the stack's anchors name (the files its patches may write)."""
    from patchq.hashing import anchor_modules

    out: list[str] = []
    for toml in sorted(stack.ANCHORS.glob("*.toml")):
        out += [m for m in anchor_modules(toml) if m not in out]
    return out


def _intact(site: Path) -> list[str]:
    """Target files of ``site`` whose bytes differ from RECORD (empty: intact)."""
    record = record_hashes(site)
    return [rel for rel in _targets()
            if (site / rel).exists() and sha256_path(site / rel) != record.get(rel)]


def build_site(version: str) -> Path:
    """The cached pristine site-packages of vLLM ``version`` (built once per release).

    Laid out from the release tree (:func:`patchq.vllmdist.releases.release_tree`: the wheel's
    ``vllm/**/*.py`` and its untouched ``*.dist-info/`` with the wheel's RECORD), which is
    what patchq reads of an install: it never imports vLLM, so compiled extensions and
    data files are not needed. Keyed by the sha256 of RECORD.

    Raises:
        patchq.vllmdist.releases.ReleaseError: the release cannot be had.
    """
    from filelock import FileLock

    from patchq.vllmdist import releases

    tree = releases.release_tree(version)
    (dist,) = tree.glob("vllm-*.dist-info")
    sha = sha256_path(dist / "RECORD")
    base = releases.cache_dir() / "test-envs" / f"vllm-{version}"
    env = base / f"py-{sha[:16]}"
    site = env / "site-packages"
    done = env / "installed.json"
    base.mkdir(parents=True, exist_ok=True)
    with FileLock(str(base / f".py-{sha[:16]}.lock")):
        if done.is_file() and not _intact(site):
            return site
        if env.exists():  # half-built or damaged: rebuild (copies hold their own links)
            shutil.rmtree(env)
        tmp = Path(tempfile.mkdtemp(dir=base, prefix=".build-"))
        for part in ("vllm", dist.name):
            shutil.copytree(tree / part, tmp / "site-packages" / part)
        (tmp / "installed.json").write_text(json.dumps(
            {"version": version, "tree": str(tree), "record_sha256": sha}, indent=1))
        os.replace(tmp, env)
    return site


@pytest.fixture(scope="session")
def vllm_site():
    """Factory: ``vllm_site("0.23.0")`` -> the cached pristine site-packages (never write it).

    Skips when the wheel cannot be had (offline with no cache)."""
    from patchq.vllmdist import releases

    built: dict[str, tuple[Path, dict]] = {}

    def get(version: str = DEFAULT_VERSION) -> Path:
        if version not in built:
            try:
                site = build_site(version)
            except releases.ReleaseError as exc:
                pytest.skip(f"no vllm {version} wheel: {exc}")
            built[version] = (site, snapshot(site))
        return built[version][0]

    get.snapshots = built  # type: ignore[attr-defined]
    yield get
    for version, (site, before) in built.items():
        assert snapshot(site) == before, f"the cached pristine vllm {version} install was modified"


@pytest.fixture(scope="session")
def pristine_site(vllm_site) -> Path:
    """The cached pristine vLLM 0.23.0 site-packages. Read it; never write it."""
    return vllm_site(DEFAULT_VERSION)


# -- the two layers ---------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
#: Fixtures that hand a test a real vLLM release (each pulls one from PyPI on a cold cache).
WHEEL_FIXTURES = frozenset({"vllm_site", "pristine_site", "make_site", "site"})
#: Where a release fixture alone puts a test in the wheel layer: the end-to-end scenarios.
#: Everywhere else (the module tests, tests/<package>/test_<module>.py) a test's layer is
#: written in its file: ``pytestmark = pytest.mark.wheel`` for a module whose tests all read
#: releases, ``@pytest.mark.wheel`` for one test; a release fixture without the mark is a
#: collection error, so a module test never changes layer by accident.
E2E = TESTS / "e2e"


#: Every release the wheel layer reads (spark/tests/test_variants.py covers all final releases
#: in this range). On a cold cache they are prefetched in the background (see ``_prefetch``).
RELEASES = ("0.15.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1",
            "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0",
            "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0",
            "0.31.0", "0.32.0", "0.33.0", "0.34.0")


def _prefetch(versions) -> None:
    """Fetch the release trees the session will read, three at a time, in a daemon thread:
    a partial fetch waits mostly on the network, so it overlaps the first tests. A test
    asking for a release being fetched waits on its file lock; errors are left to the tests
    that read the release (they report them)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from patchq.vllmdist import releases

    missing = [v for v in versions if releases.tree_info(v) is None]
    if not missing or os.environ.get("PATCHQ_OFFLINE", "") not in ("", "0"):
        return

    def one(version):
        try:
            releases.release_tree(version)
        except Exception:  # noqa: BLE001 - the test that needs it reports it
            pass

    def run():
        with ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(one, missing))

    threading.Thread(target=run, name="patchq-prefetch", daemon=True).start()


def pytest_collection_modifyitems(config, items):
    """The two layers: a test is in the wheel layer when it carries the ``wheel`` mark (see
    ``WHEEL_FIXTURES`` and ``E2E``); in ``tests/e2e/`` a release fixture marks it."""
    for item in items:
        uses = sorted(WHEEL_FIXTURES & set(item.fixturenames))
        if not uses or item.get_closest_marker("wheel") is not None:
            continue
        if Path(str(item.fspath)).resolve().is_relative_to(E2E):
            item.add_marker(pytest.mark.wheel)
        else:
            raise pytest.UsageError(f"{item.nodeid} uses {uses} (a real vLLM release) but is not marked wheel: "
                                    "add @pytest.mark.wheel (or the module's pytestmark), or make it need no release")


def pytest_collection_finish(session):
    """Start the background prefetch when wheel-layer tests are going to run."""
    if not session.config.option.collectonly and any(i.get_closest_marker("wheel") for i in session.items):
        _prefetch(RELEASES)


def pytest_sessionfinish(session, exitstatus):
    """A layer that selects no test (``-m wheel`` on a checkout without wheel tests) passes:
    pytest's exit 5 (no tests collected) becomes 0 when a ``-m`` selection caused it."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.getoption("markexpr"):
        session.exitstatus = pytest.ExitCode.OK


@pytest.fixture(autouse=True)
def _the_stack_is_the_series(monkeypatch):
    """Every test's series is the stack fixture unless it names another (module docstring)."""
    monkeypatch.setenv("PATCHQ_SERIES", str(stack.SERIES))


@pytest.fixture(scope="session", autouse=True)
def _the_stack_is_left_as_found():
    """No test writes into the committed stack fixture (a test that writes copies it first)."""
    before = stack.files()
    yield
    assert stack.files() == before, "a test wrote into tests/testing/stack/: copy it first (series_copy)"


@pytest.fixture(autouse=True)
def _layer_guard(request, monkeypatch, tmp_path_factory):
    """A test outside the wheel layer runs offline (``PATCHQ_OFFLINE=1``, also for the CLI
    it starts) on an empty cache of its own, so a warm ``~/.cache/patchq`` can never hide a
    fast-layer test that reaches for a release: it fails (see
    :func:`pytest_runtest_makereport`), never skips, exactly as on a fresh CI machine."""
    if request.node.get_closest_marker("wheel") is None:
        monkeypatch.setenv("PATCHQ_OFFLINE", "1")
        monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path_factory.mktemp("empty-cache")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item (``item.rep_call``) for fixtures to read; turn a
    fast-layer test that skipped for want of a release (PATCHQ_OFFLINE) into a failure."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and item.get_closest_marker("wheel") is None and "PATCHQ_OFFLINE" in str(rep.longrepr):
        rep.outcome = "failed"
        rep.longrepr = (f"{item.nodeid} needs a vLLM release but is not in the wheel layer: "
                        f"mark it @pytest.mark.wheel (docs/testing.md). {rep.longrepr}")
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture
def make_site(vllm_site, tmp_path_factory, request):
    """Factory: ``make_site(version="0.23.0")`` -> a fresh hard-linked copy of that install.

    After the test, the pristine install is checked (see module docstring), and the copy
    is deleted when the test passed (a copy is ~4000 entries; pytest would keep three
    sessions' worth and delete them at the next start). A failed test's copy stays."""
    used: list[tuple[str, Path]] = []

    def make(version: str = DEFAULT_VERSION, runtime: bool = True) -> Path:
        pristine = vllm_site(version)
        dst = tmp_path_factory.mktemp(f"vllm-{version}") / "site-packages"
        link_copy(pristine, dst)
        if runtime:  # the stack's patched vLLM imports stack_runtime: make it importable there (as pip would)
            (dst / RUNTIME_PTH).write_text(str(stack.RUNTIME) + "\n")
        used.append((version, dst))
        return dst

    yield make
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.passed:
        for _, dst in used:
            shutil.rmtree(dst.parent, ignore_errors=True)
    for version in {v for v, _ in used}:
        site, before = vllm_site.snapshots[version]
        changed = [rel for rel, st in snapshot(site).items() if before.get(rel) != st]
        assert not changed, f"a test (or patchq) wrote through a hard link into the pristine install: {changed[:5]}"
        assert not _intact(site), f"pristine vllm {version} target files differ from RECORD: {_intact(site)}"


@pytest.fixture
def site(make_site) -> Path:
    """A fresh hard-linked copy of vLLM 0.23.0's site-packages (uv's layout)."""
    return make_site(DEFAULT_VERSION)


@pytest.fixture
def cli():
    """:func:`support.run_cli`: ``cli(*args, env=None, fast=True, wrap=())`` -> CliResult."""
    return run_cli


@pytest.fixture
def small(tmp_path, monkeypatch):
    """:func:`testing.small_world.make`: the small series and an installed vLLM 0.1.0 (no release)."""
    from testing import small_world

    return small_world.make(tmp_path, monkeypatch)


@pytest.fixture
def series_copy(tmp_path) -> Path:
    """A copy of the stack fixture's ``series/`` and ``anchors/`` (returns the series dir)."""
    return stack.copy(tmp_path / "project")


@pytest.fixture
def immutable():
    """``immutable(*dirs)``: make directories immutable (``chattr +i``), undone after the test.

    Immutable directories refuse new entries and renames even to root (unlike ``chmod``,
    which root ignores). Skips when ``chattr`` is unsupported here. Never pass a FILE of a
    test site: its inode is shared with the pristine install.
    """
    done: list[Path] = []

    def make(*dirs: Path) -> None:
        if shutil.which("chattr") is None:
            pytest.skip("chattr (e2fsprogs) is not installed")
        for d in dirs:
            assert Path(d).is_dir(), f"{d}: only directories (files share inodes with the pristine install)"
            proc = subprocess.run(["chattr", "+i", str(d)], capture_output=True, text=True)
            if proc.returncode != 0:
                pytest.skip(f"chattr +i unsupported here: {proc.stderr.strip()}")
            done.append(Path(d))

    yield make
    for d in reversed(done):
        subprocess.run(["chattr", "-i", str(d)], check=False)
