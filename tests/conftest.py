"""Shared fixtures: real vLLM installs, hard-linked per-test copies, and the CLI.

A real vLLM wheel (from PyPI, via :func:`patchq.dist.releases.wheel_path`, which downloads
only when the wheel is not cached) is installed once with
``pip install --no-deps --no-compile --target`` into
``<patchq cache>/test-envs/vllm-<version>/<wheel sha256[:16]>/site-packages`` and reused
by every later test run. Each test gets a COPY of it made of hard links: that is exactly
what uv does (it hard-links installed files from its cache), so a test also proves that
patchq never writes through a link. After every test the cached pristine install is
checked: same inode, size, mtime and mode for every file, and the files the series
targets still equal their RECORD hashes.

Fixtures:
    ``vllm_site(version)``   session factory: path of the cached pristine site-packages.
    ``pristine_site``        the cached pristine site-packages of vLLM 0.23.0 (read only!).
    ``make_site(version)``   per-test factory: a fresh hard-linked copy, with a ``.pth`` that
                             makes ``patchq_runtime`` importable there (``runtime=False``: without).
    ``site``                 a fresh hard-linked copy of vLLM 0.23.0's site-packages.
    ``cli``                  :func:`support.run_cli` (``cli("status", "--json", ...)``).
    ``series_copy``          a temp copy of ``series/`` + ``anchors/`` (for ``--series``).
    ``immutable``            ``immutable(dir, ...)``: ``chattr +i`` directories, undone after.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from support import REPO, link_copy, record_hashes, run_cli, sha256_path, snapshot

DEFAULT_VERSION = "0.23.0"
#: the ``.pth`` each test site gets so that ``patchq_runtime`` is importable there
RUNTIME_PTH = "patchq_runtime_checkout.pth"


def _wheel_sha256(wheel: Path, memo_dir: Path) -> str:
    """sha256 of a wheel, memoised by name, size and mtime (hashing 270 MB costs ~1 s)."""
    st = wheel.stat()
    key = f"{wheel.name}:{st.st_size}:{st.st_mtime_ns}"
    memo = memo_dir / "wheel-sha256.json"
    try:
        known = json.loads(memo.read_text())
    except (FileNotFoundError, ValueError):
        known = {}
    if key not in known:
        import hashlib

        h = hashlib.sha256()
        with open(wheel, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        known[key] = h.hexdigest()
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
        os.replace(tmp, memo)
    return known[key]


def _targets() -> list[str]:
    """relpaths of every module the series' anchors name (the files patchq may write)."""
    from patchq.hashing import anchor_modules

    out: list[str] = []
    for toml in sorted((REPO / "anchors").glob("*.toml")):
        out += [m for m in anchor_modules(toml) if m not in out]
    return out


def _intact(site: Path) -> list[str]:
    """Target files of ``site`` whose bytes differ from RECORD (empty: intact)."""
    record = record_hashes(site)
    return [rel for rel in _targets()
            if (site / rel).exists() and sha256_path(site / rel) != record.get(rel)]


def build_site(version: str) -> Path:
    """The cached pristine site-packages of vLLM ``version`` (built once per wheel).

    Raises:
        patchq.dist.releases.ReleaseError: the wheel cannot be had.
        subprocess.CalledProcessError: pip failed.
    """
    from filelock import FileLock

    from patchq.dist import releases

    wheel = releases.wheel_path(version)
    base = releases.cache_dir() / "test-envs" / f"vllm-{version}"
    sha = _wheel_sha256(wheel, base.parent)
    env = base / sha[:16]
    site = env / "site-packages"
    done = env / "installed.json"
    base.mkdir(parents=True, exist_ok=True)
    with FileLock(str(base / f".{sha[:16]}.lock")):
        if done.is_file() and not _intact(site):
            return site
        if env.exists():  # half-built or damaged: rebuild (copies hold their own links)
            shutil.rmtree(env)
        tmp = Path(tempfile.mkdtemp(dir=base, prefix=".build-"))
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
             "--disable-pip-version-check", "--target", str(tmp / "site-packages"), str(wheel)],
            check=True, capture_output=True, text=True)
        (tmp / "installed.json").write_text(json.dumps(
            {"version": version, "wheel": str(wheel), "sha256": sha}, indent=1))
        os.replace(tmp, env)
    return site


@pytest.fixture(scope="session")
def vllm_site():
    """Factory: ``vllm_site("0.23.0")`` -> the cached pristine site-packages (never write it).

    Skips when the wheel cannot be had (offline with no cache)."""
    from patchq.dist import releases

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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item (``item.rep_call``) for fixtures to read."""
    outcome = yield
    rep = outcome.get_result()
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
        if runtime:  # patched vLLM imports patchq_runtime: make it importable there (as pip would)
            (dst / RUNTIME_PTH).write_text(str(REPO / "runtime") + "\n")
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
def series_copy(tmp_path) -> Path:
    """A copy of the project's ``series/`` and ``anchors/`` (returns the series dir)."""
    root = tmp_path / "project"
    # the committed diffs (series/diffs/) are outputs: a copy starts without them
    shutil.copytree(REPO / "series", root / "series", ignore=shutil.ignore_patterns("__pycache__", "diffs"))
    shutil.copytree(REPO / "anchors", root / "anchors")
    return root / "series"


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
