"""Tests for patchq.vllmdist.releases: release lists, wheel lookup/download, extracted trees.

Trees are extracted into a temporary PATCHQ_CACHE_DIR whose wheels/ symlinks to the
real wheels in the shared cache (~/.cache/patchq/wheels), so the shared cache is
only read. Tests that need a real wheel skip when it is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from pathlib import Path

import platformdirs
import pytest
from packaging.version import Version

from patchq.vllmdist import releases as R
from patchq.vllmdist.releases import ReleaseError

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

REAL_CACHE = Path(os.environ.get("PATCHQ_CACHE_DIR") or platformdirs.user_cache_dir("patchq"))
REAL_WHEELS = REAL_CACHE / "wheels"
REPO = Path(__file__).resolve().parents[2]


def real_wheel(version: str) -> Path:
    """The whole wheel in the real cache (downloaded once: these tests read the zip)."""
    old = os.environ.get("PATCHQ_CACHE_DIR")
    os.environ["PATCHQ_CACHE_DIR"] = str(REAL_CACHE)
    try:
        return R.wheel_path(version)
    finally:
        if old is None:
            os.environ.pop("PATCHQ_CACHE_DIR", None)
        else:
            os.environ["PATCHQ_CACHE_DIR"] = old


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    (root / "wheels").mkdir(parents=True)
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(root))
    return root


def link_wheel(cache: Path, version: str) -> Path:
    src = real_wheel(version)
    dst = cache / "wheels" / src.name
    dst.symlink_to(src)
    return dst


def make_wheel(directory: Path, filename: str, members: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


# ----------------------------------------------------------- filter (pure)

AVAILABLE = ["0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.26.0", "0.33.0", "0.34.0"]


def test_filter_range():
    got = R.filter_releases(AVAILABLE, ">=0.20.2,<=0.33.0")
    assert got == [Version(v) for v in ["0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.26.0", "0.33.0"]]
    assert all(isinstance(v, Version) for v in got)


def test_filter_range_spaces_and_compatible():
    assert R.filter_releases(AVAILABLE, ">= 0.22, < 0.26") == [Version("0.22.1"), Version("0.23.0")]
    assert R.filter_releases(AVAILABLE, "~=0.20.0") == [Version("0.20.2")]
    assert R.filter_releases(AVAILABLE, ">1.0") == []


def test_filter_explicit_list_sorted_and_deduplicated():
    assert R.filter_releases(AVAILABLE, "0.26.0,0.23.0") == [Version("0.23.0"), Version("0.26.0")]
    assert R.filter_releases(AVAILABLE, "0.23.0 0.26.0, 0.23") == [Version("0.23.0"), Version("0.26.0")]
    assert R.filter_releases(AVAILABLE, "0.21.0") == [Version("0.21.0")]


def test_filter_explicit_list_returns_index_spelling():
    got = R.filter_releases(AVAILABLE, "0.23")
    assert got == [Version("0.23.0")] and str(got[0]) == "0.23.0"


@pytest.mark.parametrize(
    "given, key",
    [("0.23", "0.23.0"), ("0.23.0", "0.23.0"), ("0.23.0.0", "0.23.0"), ("0.9.0.1", "0.9.0.1"),
     ("1!2.0rc1.post2.dev3+abc", "1!2.0.0rc1.post2.dev3+abc"), (Version("0.6.1.post1"), "0.6.1.post1")],
)
def test_version_key(given, key):
    assert R.version_key(given) == key
    assert Version(R.version_key(given)) == Version(str(given))


def test_filter_none_is_everything_sorted():
    shuffled = list(reversed(AVAILABLE))
    assert R.filter_releases(shuffled, None) == sorted(Version(v) for v in AVAILABLE)
    assert R.filter_releases(shuffled, "  ") == sorted(Version(v) for v in AVAILABLE)


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("0.23.0,0.24.0", "0.24.0"),  # not released
        (">=0.20,0.23.0", "mixes"),
        (">=banana", "specifier"),
        ("0.23.0,banana", "banana"),
    ],
)
def test_filter_errors_are_one_line(spec, needle):
    from patchq.errors import UsageError

    # a release that is not a version at all is a usage error (exit 2); the rest exit 3
    with pytest.raises(UsageError if needle == "banana" else ReleaseError) as err:
        R.filter_releases(AVAILABLE, spec)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_filter_range_excludes_prereleases_unless_named():
    versions = ["0.23.0", "0.24.0rc1", "0.24.0"]
    assert R.filter_releases(versions, ">=0.23") == [Version("0.23.0"), Version("0.24.0")]


# ------------------------------------------------- PEP 691 parsing (pure)


def test_final_versions_from_simple_json():
    def f(name, yanked=False):
        return {"filename": name, "yanked": yanked, "url": "x", "hashes": {}}

    payload = {
        "meta": {"api-version": "1.1"},
        "name": "vllm",
        "files": [
            f("vllm-0.2.1-cp311-cp311-manylinux1_x86_64.whl", True),
            f("vllm-0.2.1.tar.gz", "broken"),  # every file yanked -> release yanked
            f("vllm-0.21.0-1-cp38-abi3-manylinux_2_24_x86_64.whl"),
            f("vllm-0.21.0-cp38-abi3-manylinux_2_24_x86_64.whl"),
            f("vllm-0.23.0-2-cp38-abi3-manylinux_2_28_aarch64.whl"),
            f("vllm-0.23.0.tar.gz", True),  # one live file is enough
            f("vllm-0.24.0rc1-cp38-abi3-manylinux_2_28_x86_64.whl"),
            f("vllm-0.25.0.dev3.tar.gz"),
            f("vllm-0.6.1.post1.tar.gz"),
            f("not-vllm-9.9.9.tar.gz"),
            f("garbage.zip"),
            f("vllm-0.4.0.post1-cp310-cp310-manylinux1_x86_64.whl"),
        ],
    }
    assert R.final_versions(payload) == [
        Version("0.4.0.post1"), Version("0.6.1.post1"), Version("0.21.0"), Version("0.23.0")
    ]


# ------------------------------------------------ list_releases and its cache


def test_list_releases_caches_and_honours_max_age(cache, monkeypatch):
    calls = []

    def fetch(package):
        calls.append(package)
        return [Version("0.22.0"), Version("0.23.0"), Version("0.26.0")], "test"

    monkeypatch.setattr(R, "_fetch_versions", fetch)
    assert R.list_releases(">=0.23") == [Version("0.23.0"), Version("0.26.0")]
    saved = json.loads((cache / "index" / "vllm.json").read_text())
    assert saved["versions"] == ["0.22.0", "0.23.0", "0.26.0"] and saved["source"] == "test"
    assert R.list_releases("0.22.0") == [Version("0.22.0")]
    assert len(calls) == 1  # fresh: no second fetch
    R.list_releases(max_age=0)
    R.list_releases(refresh=True)
    assert len(calls) == 3


def test_another_users_release_list_or_wheel_is_not_used(cache, monkeypatch, capsys):
    """issue 38: the cache's entries get the rule of walked-up configs; another user's (here:
    world-writable) release list is fetched again and its wheel passed over, each with a note."""
    import os

    listing = cache / "index" / "vllm.json"
    listing.parent.mkdir()
    listing.write_text(json.dumps({"fetched": time.time(), "source": "x", "versions": ["0.99.0"]}))
    os.chmod(listing, 0o666)
    monkeypatch.setattr(R, "_fetch_versions", lambda package: ([Version("0.23.0")], "test"))
    assert R.list_releases() == [Version("0.23.0")]
    wheel = cache / "wheels" / "vllm-0.23.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"PK")
    assert R.find_wheel(wheel.parent, "0.23.0") == wheel
    os.chmod(wheel, 0o666)
    assert R.find_wheel(wheel.parent, "0.23.0") is None
    err = capsys.readouterr().err
    assert f"ignoring the cached release list {listing}" in err and f"ignoring the cached wheel {wheel}" in err


def test_list_releases_offline_uses_stale_cache(cache, monkeypatch):
    (cache / "index").mkdir()
    (cache / "index" / "vllm.json").write_text(
        json.dumps({"fetched": time.time() - 30 * 86400, "source": "x", "versions": ["0.23.0", "0.33.0"]})
    )

    def offline(package):
        raise ConnectionError("URLError: no network")

    monkeypatch.setattr(R, "_fetch_versions", offline)
    assert R.list_releases() == [Version("0.23.0"), Version("0.33.0")]


def test_list_releases_offline_without_cache_is_one_line_error(cache, monkeypatch):
    monkeypatch.setattr(R, "SIMPLE_INDEX_URL", "http://127.0.0.1:9/simple/")

    def pip_down(package):
        raise RuntimeError("ERROR: No matching distribution found for vllm")

    monkeypatch.setattr(R, "_fetch_pip_index", pip_down)
    with pytest.raises(ReleaseError) as err:
        R.list_releases()
    msg = str(err.value)
    assert "cannot list vllm releases" in msg and "no cached list" in msg and "\n" not in msg


def test_list_releases_falls_back_to_pip(cache, monkeypatch):
    monkeypatch.setattr(R, "SIMPLE_INDEX_URL", "http://127.0.0.1:9/simple/")
    monkeypatch.setattr(R, "_fetch_pip_index", lambda package: [Version("0.30.0")])
    assert R.list_releases() == [Version("0.30.0")]
    assert json.loads((cache / "index" / "vllm.json").read_text())["source"] == "pip-index"


def test_list_releases_network(cache):
    """Real PyPI; skipped offline."""
    try:
        got = R.list_releases(">=0.20.2,<=0.33.0", refresh=True)
    except ReleaseError as exc:
        pytest.skip(f"offline: {exc}")
    assert got[0] == Version("0.20.2") and got[-1] == Version("0.33.0")
    assert Version("0.23.0") in got and got == sorted(got)
    assert not any(v.is_prerelease for v in got)


# ------------------------------------------------------------------ wheels


def test_find_wheel_parses_build_and_platform_tags(tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    for name in [
        "vllm-0.23.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm-0.23.0-2-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm-0.23.0-3-cp38-abi3-manylinux_2_28_aarch64.whl",  # wrong arch
        "vllm-0.23.0.1-cp38-abi3-manylinux_2_28_x86_64.whl",  # other version
        "vllm_flash_attn-0.23.0-cp38-abi3-manylinux_2_28_x86_64.whl",  # other project
        "vllm-0.23.0-junk.whl",
        "vllm-0.20.2-cp38-abi3-manylinux_2_35_x86_64.whl",
    ]:
        (d / name).write_bytes(b"")
    assert R.find_wheel(d, "0.23.0").name == "vllm-0.23.0-2-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert R.find_wheel(d, Version("0.20.2")).name.startswith("vllm-0.20.2-cp38")
    assert R.find_wheel(d, "0.23") is not None  # 0.23 == 0.23.0
    assert R.find_wheel(d, "0.24.0") is None
    assert R.find_wheel(tmp_path / "missing", "0.23.0") is None


def test_real_cache_wheels_found_without_pip(monkeypatch):
    real_wheel("0.23.0")

    def no_pip(*a, **k):
        raise AssertionError("pip must not run for a cached wheel")

    monkeypatch.setattr(R.subprocess, "run", no_pip)
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(REAL_CACHE))
    assert R.wheel_path("0.23.0").name == "vllm-0.23.0-2-cp38-abi3-manylinux_2_28_x86_64.whl"
    if R.find_wheel(REAL_WHEELS, "0.21.0"):
        assert R.wheel_path("0.21.0").name == "vllm-0.21.0-1-cp38-abi3-manylinux_2_24_x86_64.whl"
    if R.find_wheel(REAL_WHEELS, "0.20.2"):
        assert R.wheel_path("0.20.2").name == "vllm-0.20.2-cp38-abi3-manylinux_2_35_x86_64.whl"
    assert Version("0.23.0") in R.cached_wheels()


def test_wheel_path_downloads_once_with_pip(cache, monkeypatch):
    seen = []

    def fake_pip(cmd, **kwargs):
        seen.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / "vllm-0.99.0-3-cp38-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"w")
        (dest / "vllm-0.99.0-9-cp38-abi3-manylinux_2_28_aarch64.whl").write_bytes(b"x")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(R.subprocess, "run", fake_pip)
    got = R.wheel_path("0.99.0")
    assert got == cache / "wheels" / "vllm-0.99.0-3-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert got.read_bytes() == b"w"
    cmd = seen[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"]
    assert cmd[-1] == "vllm==0.99.0"
    for flag in ["--no-deps", "--only-binary=:all:"]:
        assert flag in cmd
    assert cmd[cmd.index("--python-version") + 1] == "3.12"
    assert cmd[cmd.index("--implementation") + 1] == "cp"
    plats = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--platform"]
    assert plats == list(R.PLATFORMS) and "manylinux_2_35_x86_64" in plats
    assert R.wheel_path("0.99.0") == got and len(seen) == 1
    # the temporary download dir is gone, the decoy was not kept
    assert sorted(p.name for p in (cache / "wheels").iterdir() if not p.name.endswith(".lock")) == [
        f".{got.name}.sha256", got.name]  # the wheel and its recorded sha256 (checked on every later read)


def test_wheel_path_pip_failure_is_one_line(cache, monkeypatch):
    def failing_pip(cmd, **kwargs):
        return subprocess.CompletedProcess(
            cmd, 1, "", "ERROR: Could not find a version that satisfies the requirement vllm==0.98.0\n"
            "ERROR: No matching distribution found for vllm==0.98.0\n"
        )

    monkeypatch.setattr(R.subprocess, "run", failing_pip)
    with pytest.raises(ReleaseError) as err:
        R.wheel_path("0.98.0")
    assert str(err.value) == (
        "cannot download the vllm==0.98.0 wheel: ERROR: No matching distribution found for vllm==0.98.0"
    )
    assert not list((cache / "wheels").glob(".dl-*"))


# ------------------------------------------------------------------- trees


def test_release_tree_real_0_23_0(cache):
    link_wheel(cache, "0.23.0")
    root = R.release_tree("0.23.0")
    assert root == cache / "releases" / "0.23.0"
    kv = root / "vllm" / "v1" / "core" / "kv_cache_utils.py"
    assert kv.is_file() and "def unify_kv_cache_spec_page_size" in kv.read_text()
    dist = root / "vllm-0.23.0.dist-info"
    assert (dist / "RECORD").is_file() and (dist / "METADATA").is_file()
    assert "Version: 0.23.0" in (dist / "METADATA").read_text()
    files = [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".patchq")]
    assert all(p.suffix == ".py" for p in files if dist not in p.parents)
    with zipfile.ZipFile(real_wheel("0.23.0")) as zf:
        expected = {
            n for n in zf.namelist()
            if (n.startswith("vllm/") and n.endswith(".py")) or n.startswith("vllm-0.23.0.dist-info/")
        }
    assert {p.relative_to(root).as_posix() for p in files} == expected
    # RECORD lists every extracted .py
    record = {line.split(",")[0] for line in (dist / "RECORD").read_text().splitlines()}
    assert {n for n in expected if n.endswith(".py")} <= record
    assert not [p for p in (cache / "releases").iterdir() if ".tmp-" in p.name]


def test_release_tree_second_call_opens_no_zip(cache, monkeypatch):
    link_wheel(cache, "0.23.0")
    first = R.release_tree("0.23.0")

    def boom(*a, **k):
        raise AssertionError("zip opened on a warm tree")

    monkeypatch.setattr(zipfile, "ZipFile", boom)
    monkeypatch.setattr(R, "wheel_path", boom)
    started = time.perf_counter()
    assert R.release_tree("0.23.0") == first
    assert R.release_tree(Version("0.23")) == first
    assert time.perf_counter() - started < 0.05


def test_release_tree_concurrent_processes(cache):
    link_wheel(cache, "0.23.0")
    script = textwrap.dedent(
        """
        import sys, time
        from patchq.vllmdist import releases as R
        extracted = []
        real = R._extract
        def counting(*a, **k):
            extracted.append(1)
            return real(*a, **k)
        R._extract = counting
        start = float(sys.argv[1])
        while time.time() < start:
            time.sleep(0.001)
        print(R.release_tree("0.23.0"), len(extracted))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.time() + 1.5  # both interpreters are up by then
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(start)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    results = [o[0].split() for o in outs]
    assert results[0][0] == results[1][0] == str(cache / "releases" / "0.23.0")
    assert sorted(int(r[1]) for r in results) == [0, 1]  # exactly one extraction
    root = Path(results[0][0])
    info = json.loads((root / ".patchq-extracted-v1").read_text())
    assert (root / R.VERIFIED).is_file()
    n_files = sum(1 for p in root.rglob("*") if p.is_file()) - 2  # the extraction marker and R.VERIFIED
    assert n_files == info["files"] > 1900
    assert not [p for p in (cache / "releases").iterdir() if ".tmp-" in p.name]


def test_release_tree_concurrent_threads(cache, monkeypatch):
    link_wheel(cache, "0.23.0")
    calls = []
    real = R._extract
    monkeypatch.setattr(R, "_extract", lambda *a: calls.append(1) or real(*a))
    results, errors = [], []
    barrier = threading.Barrier(4)

    def worker():
        try:
            barrier.wait()
            results.append(R.release_tree("0.23.0"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(set(results)) == 1 and len(results) == 4
    assert len(calls) == 1


def test_release_tree_selection_and_incomplete_tree(cache):
    make_wheel(
        cache / "wheels",
        "vllm-0.0.1-7-cp38-abi3-manylinux_2_28_x86_64.whl",
        {
            "vllm/__init__.py": "x = 1\n",
            "vllm/sub/mod.py": "y = 2\n",
            "vllm/_C.abi3.so": "bin",
            "vllm/third_party/kernel.h": "h",
            "vllm/py.typed": "",
            "vllm-0.0.1.dist-info/METADATA": "Name: vllm\nVersion: 0.0.1\n",
            "vllm-0.0.1.dist-info/RECORD": "vllm/__init__.py,,\n",
            "vllm-0.0.1.dist-info/licenses/LICENSE": "MIT",
            "other_top/x.py": "z = 3\n",
        },
    )
    # a tree left without its marker (e.g. by hand) is replaced, not trusted
    junk = cache / "releases" / "0.0.1"
    junk.mkdir(parents=True)
    (junk / "stale.txt").write_text("old")
    (cache / "releases" / ".0.0.1.tmp-crashed").mkdir()
    root = R.release_tree("0.0.1")
    got = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert got == [
        ".patchq-extracted-v1",
        ".patchq-verified.json",  # the sha256 of RECORD, recorded with the tree
        "vllm-0.0.1.dist-info/METADATA",
        "vllm-0.0.1.dist-info/RECORD",
        "vllm-0.0.1.dist-info/licenses/LICENSE",
        "vllm/__init__.py",
        "vllm/sub/mod.py",
    ]
    assert sorted(p.name for p in (cache / "releases").iterdir()) == [".0.0.1.lock", "0.0.1"]


def test_release_tree_refuses_path_traversal(cache):
    make_wheel(
        cache / "wheels",
        "vllm-0.0.2-cp38-abi3-manylinux_2_28_x86_64.whl",
        {"vllm/../../evil.py": "boom", "vllm-0.0.2.dist-info/RECORD": ""},
    )
    with pytest.raises(ReleaseError, match="unsafe path"):
        R.release_tree("0.0.2")
    assert not (cache / "evil.py").exists() and not (cache / "releases" / "0.0.2").exists()


def test_release_tree_bad_version():
    from patchq.errors import UsageError

    with pytest.raises(UsageError, match="not a valid version"):  # a usage error: exit 2
        R.release_tree("latest")
