"""Series discovery: --series, $PATCHQ_SERIES, patchq.toml / [tool.patchq] walking up, bundled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchq import discovery
from patchq.errors import SeriesError, UnsafeConfig
from support import REPO, run_cli
from testing import small_series


def _repo(root, config="patchq.toml", body='series = "s"\nanchors = "a"\n'):
    (root / "s").mkdir(parents=True)
    (root / "a").mkdir()
    (root / "s" / "profiles.toml").write_text('[profiles.p]\npatches = []\n')
    (root / config).write_text(body)
    return root


def test_config_found_walking_up(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.delenv("PATCHQ_ANCHORS", raising=False)
    root = _repo(tmp_path / "proj")
    deep = root / "x" / "y"
    deep.mkdir(parents=True)
    loc = discovery.find(cwd=deep)
    assert (loc.series, loc.anchors, loc.origin, loc.config) == (
        root / "s", root / "a", "config", root / "patchq.toml")
    assert discovery.anchors_for(root / "s") == root / "a"


def test_pyproject_tool_table_and_plain_pyproject_skipped(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    root = _repo(tmp_path / "proj", "pyproject.toml", '[tool.patchq]\nseries = "s"\nanchors = "a"\n')
    inner = root / "sub"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no [tool.patchq]: keep walking
    loc = discovery.find(cwd=inner)
    assert loc.config == root / "pyproject.toml" and loc.series == root / "s"


def test_explicit_and_env_win(tmp_path, monkeypatch):
    root = _repo(tmp_path / "proj")
    other = _repo(tmp_path / "other")
    monkeypatch.setenv("PATCHQ_SERIES", str(other))  # a repo root with patchq.toml
    assert discovery.find(cwd=root).series == other / "s"
    assert discovery.find(cwd=root).origin == "PATCHQ_SERIES"
    assert discovery.find(root / "s", cwd=root).origin == "--series"


def test_no_series_names_what_was_searched(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.setattr(discovery, "BUNDLED_ROOT", str(tmp_path / "nobundle"))
    monkeypatch.setattr(discovery, "CHECKOUT_ROOT", str(tmp_path / "nocheckout"))
    with pytest.raises(SeriesError) as err:
        discovery.find(cwd=tmp_path)
    msg = str(err.value)
    assert "--series" in msg and "$PATCHQ_SERIES" in msg and "patchq.toml" in msg
    assert str(tmp_path) in msg and "patchq init" in msg


def test_config_naming_a_missing_series(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    (tmp_path / "patchq.toml").write_text('series = "nope"\n')
    with pytest.raises(SeriesError, match="names series directory .*nope.*no profiles.toml"):
        discovery.find(cwd=tmp_path)


@pytest.mark.wheel
def test_list_and_status_say_which_series(tmp_path, site):
    doc = json.loads(run_cli("list", "--json").stdout)
    assert doc["series"] == {"dir": str(REPO / "series"), "anchors": str(REPO / "anchors"),
                             "from": "config", "config": str(REPO / "pyproject.toml")}
    st = run_cli("status", "--json", "--site-packages", str(site))
    assert json.loads(st.stdout)["series"]["from"] == "config"
    human = run_cli("status", "--site-packages", str(site)).stdout
    assert human.splitlines()[0] == f"series {REPO / 'series'} (from {REPO / 'pyproject.toml'})"


@pytest.mark.slow
def test_the_wheel_carries_the_spark_series(tmp_path):
    """Built and installed as a wheel (no checkout around), patchq uses its bundled series."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "dist"), str(REPO)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("patchq-*.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                    "--target", str(target), str(wheel)], check=True, capture_output=True)
    bundled = target / "patchq" / "_bundled"
    assert (target / "patchq" / "py.typed").is_file()  # PEP 561: series repos type-check against patchq
    assert sorted(p.name for p in (bundled / "anchors").glob("*.toml")) == sorted(
        p.name for p in (REPO / "anchors").glob("*.toml"))
    assert (bundled / "series" / "diffs" / "0.23.0" / "fla-shmem.diff").is_file()
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ")}
    env["PYTHONPATH"] = str(target)
    proc = subprocess.run([sys.executable, "-m", "patchq", "list", "--json"], cwd=away, env=env,
                          capture_output=True, text=True)
    doc = json.loads(proc.stdout)
    assert doc["series"] == {"dir": str(bundled / "series"), "anchors": str(bundled / "anchors"),
                             "from": "bundled", "config": None}
    assert [p["name"] for p in doc["profiles"]] == ["base", "mtp", "dflash", "dense"]


# -- discovery that cannot be planted (issue 28) ---------------------------------------------


def _config_tree(root: Path) -> Path:
    small_series.write_series(root)
    (root / "patchq.toml").write_text('series = "series"\nanchors = "anchors"\n')
    (root / "work").mkdir()
    return root / "work"


def test_a_config_owned_by_another_uid_is_refused_with_the_way_to_opt_in(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.delenv(discovery.SAFE_ENV, raising=False)
    shared = tmp_path / "shared"
    work = _config_tree(shared)
    for p in [shared, *shared.rglob("*")]:
        os.chown(p, 65534, 65534)
    os.chmod(shared, 0o777)
    with pytest.raises(UnsafeConfig) as err:
        discovery.find(cwd=work)
    msg = str(err.value)
    assert "owned by uid 65534" in msg or "writable by others" in msg
    assert f"--series {shared}" in msg and f"{discovery.SAFE_ENV}={shared}" in msg and "CVE-2022-24765" in msg
    monkeypatch.setenv(discovery.SAFE_ENV, str(shared))
    assert discovery.find(cwd=work).series == shared / "series"
    monkeypatch.delenv(discovery.SAFE_ENV)
    assert discovery.find(shared, cwd=work).origin == "--series"  # an explicit choice


def test_a_world_writable_config_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.delenv(discovery.SAFE_ENV, raising=False)
    work = _config_tree(tmp_path / "proj")
    os.chmod(tmp_path / "proj" / "series", 0o777)
    with pytest.raises(UnsafeConfig, match="writable by others"):
        discovery.find(cwd=work)
    os.chmod(tmp_path / "proj" / "series", 0o755)
    assert discovery.find(cwd=work).origin == "config"


def test_the_refusal_says_where_the_config_was_found(tmp_path, monkeypatch):
    """In the working directory itself, or above it (naming the working directory)."""
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.delenv(discovery.SAFE_ENV, raising=False)
    root = tmp_path / "proj"
    work = _config_tree(root)
    os.chmod(root / "series", 0o777)
    with pytest.raises(UnsafeConfig) as err:
        discovery.find(cwd=root)
    assert f"refusing the project config {root / 'patchq.toml'} found in the working directory: " in str(err.value)
    with pytest.raises(UnsafeConfig) as err:
        discovery.find(cwd=work)
    assert f"found above the working directory {work}: " in str(err.value)
    monkeypatch.chdir(root)  # the default: the process's working directory
    with pytest.raises(UnsafeConfig, match="found in the working directory: "):
        discovery.find()
    os.chmod(root / "series", 0o755)


@pytest.mark.parametrize("body", ['series = "../elsewhere/series"\n', 'series = "series"\nanchors = "/etc"\n',
                                  'series = "series"\ngoldens = "../../x"\n', 'series = "link"\n'])
def test_config_paths_stay_inside_the_repo(tmp_path, monkeypatch, body):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    small_series.write_series(tmp_path / "elsewhere")
    repo = tmp_path / "repo"
    small_series.write_series(repo)
    os.symlink(tmp_path / "elsewhere" / "series", repo / "link")
    (repo / "patchq.toml").write_text(body)
    with pytest.raises(SeriesError, match="outside"):
        discovery.find(cwd=repo)
