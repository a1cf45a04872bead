"""The Spark series as a distribution: ``patchq-spark``'s wheel carries the series, its store and
anchors, and ``patchq_runtime``, and nothing else of this repo; installed beside the patchq
wheel, ``patchq apply --profile dflash`` (and ``dense``, which imports ``patchq_runtime``)
works from any directory (wheel layer, slow: it builds both wheels and a venv)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from spark_support import SPARK

pytestmark = [pytest.mark.wheel, pytest.mark.slow]

CHECKOUT = SPARK.parent  # the patchq checkout this series repo sits in


def _tracked(*dirs: str) -> set[str]:
    """Files git tracks under ``dirs`` of the series repo, relative to it."""
    out = subprocess.run(["git", "-C", str(SPARK), "ls-files", "--", *dirs], capture_output=True, text=True,
                         check=True).stdout
    return {line for line in out.splitlines() if line}


def _wheel(project: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(project)], check=True, capture_output=True)
    return out


def test_the_wheel_carries_the_series_its_store_and_runtime_package_only(tmp_path):
    (wheel,) = _wheel(SPARK, tmp_path / "dist").glob("patchq_spark-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    info = {n for n in names if n.startswith("patchq_spark-0.1.0.dist-info/")}
    want = {"patchq_spark/__init__.py"}
    want |= {"patchq_spark/" + rel for rel in _tracked("series", "anchors")}
    want |= {rel for rel in _tracked("patchq_runtime") if rel.endswith(".py")}
    assert names - info == want, sorted((names - info) ^ want)
    entry_points = zipfile.ZipFile(wheel).read("patchq_spark-0.1.0.dist-info/entry_points.txt").decode()
    assert "[patchq.series]\nspark = patchq_spark:SERIES\n" in entry_points
    pytest.importorskip("twine", reason="twine checks the metadata an index would show")
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)], capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_pip_install_patchq_and_patchq_spark_then_apply_dflash_and_dense(tmp_path):
    dist = tmp_path / "dist"
    _wheel(CHECKOUT, dist)
    _wheel(SPARK, dist)
    (tool,) = dist.glob("patchq-*.whl")
    (series,) = dist.glob("patchq_spark-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", str(tool), str(series)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-3000:]
    from spark_support import site_of

    (site,) = venv.glob("lib/python*/site-packages")
    site_of("0.23.0", site, runtime=False)  # vllm 0.23.0 as `pip install --no-deps` leaves what patchq reads
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHQ_SERIES", "PATCHQ_ANCHORS", "VIRTUAL_ENV"))}

    def patchq(*args):
        return subprocess.run([str(venv / "bin/patchq"), *args], cwd=away, env=env, capture_output=True, text=True)

    (installed,) = venv.glob("lib/python*/site-packages/patchq_spark")
    listed = patchq("list")
    assert listed.returncode == 0 and listed.stdout.splitlines()[0] == (
        f"series {installed / 'series'} (from the installed distribution patchq-spark 0.1.0)"), listed
    applied = patchq("apply", "--profile", "dflash")
    assert applied.returncode == 0, applied
    assert "patchq:unify-kv-page:" in (site / "vllm/v1/core/kv_cache_utils.py").read_text()
    dense = patchq("apply", "--profile", "dense")  # its patched vLLM imports patchq_runtime, installed with the series
    assert dense.returncode == 0, dense
    status = patchq("status")
    assert status.returncode == 0 and status.stdout.count(" applied ") == 5, status
    refused = patchq("new", "my-fix", "--at", "vllm.logger:_DATE_FORMAT", "--vllm", "0.23.0")
    assert refused.returncode == 2 and "inside the installed series of patchq-spark 0.1.0" in refused.stderr, refused
