"""patchq.fastpath: ``status``, ``list`` and a no-op ``apply`` answered with the standard library
(in process on the small world; the start-up cost is bench/'s, the CLI scenarios tests/e2e/'s);
the no-op apply and list from stat stamps once verified, and a change to any series file,
patched file or RECORD still seen (issue 25)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchq import fastpath
from patchq.commands import apply
from patchq.env import stamp
from support import REPO
from testing import small_series, stamped


def test_what_it_does_not_answer_goes_to_the_full_cli(small):
    for argv in ([], ["check"], ["apply", "--profile", "base", "--strict"], ["apply", "--profile", ""],
                 ["status", "--profile", "base"], ["apply"]):
        assert fastpath.try_fast([*argv, "--site-packages", str(small.site)] if argv else argv) is None, argv


def test_status_and_list(small, capsys):
    assert fastpath.try_fast(["status", "--json", "--site-packages", str(small.site)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "patchq.status/1" and doc["series"]["dir"] == str(small.series.root)
    assert fastpath.try_fast(["list", "--json"]) == 0
    assert [p["id"] for p in json.loads(capsys.readouterr().out)["patches"]] == ["bump-default"]


def test_a_noop_apply_and_a_real_one(small, capsys):
    assert fastpath.try_fast(["apply", "--profile", "base", "--json", "--site-packages", str(small.site)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["noop"] is False and first["written"] == ["vllm/ops/utils.py"]  # a real apply, without typer
    assert fastpath.try_fast(["apply", "--profile", "base", "--json", "--site-packages", str(small.site)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["noop"] is True and again["written"] == [] and again["profile"] == "base"
    apply.apply(small.target, small.series, "none")  # another profile now: no longer a no-op
    assert fastpath.try_fast(["apply", "--profile", "base", "--json", "--site-packages", str(small.site)]) == 0
    assert json.loads(capsys.readouterr().out)["noop"] is False


def test_importing_it_imports_no_libcst_typer_or_rich():
    code = "import sys, patchq.fastpath; print(sorted(m for m in ('libcst', 'typer', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


# -- stat stamps (issue 25)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return stamped.use_cache(tmp_path, monkeypatch)


_later = stamped.later


@pytest.fixture()
def applied(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A small site-packages with profile ``base`` applied, and a clock that sees every
    file as settled (the stamps are saved by the first verified no-op / status)."""
    return stamped.apply_base(tmp_path, monkeypatch)


_stamps = stamped.stamp_files


def _noop(w: dict) -> dict | None:
    return fastpath._noop_apply(w["site"], w["series"], w["anchors"], "base")


def test_noop_is_stamped_then_taken_from_the_stamp(applied: dict, cache: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert _noop(applied)["noop"] is True and len(_stamps(cache)) == 1
    from patchq import hashing

    monkeypatch.setattr(hashing, "sha256_file", lambda p: pytest.fail("hashed although stamped"))
    assert _noop(applied)["noop"] is True


@pytest.mark.parametrize("what", ["series file", "anchors file", "patched file", "RECORD rewritten"])
def test_noop_sees_a_same_size_change_behind_a_restored_mtime(applied: dict, cache: Path, what: str) -> None:
    assert _noop(applied) is not None and _stamps(cache)
    site = Path(applied["site"])
    target = {"series file": Path(applied["series"]) / "bump_default.py",
              "anchors file": Path(applied["anchors"]) / "bump-default.toml",
              "patched file": site / "vllm" / "ops" / "utils.py",
              "RECORD rewritten": site / "vllm-0.1.0.dist-info" / "RECORD"}[what]
    old = os.stat(target)
    data = target.read_bytes()
    flipped = data.replace(b"1", b"2", 1) if b"1" in data else data[:-1] + b"#"
    assert len(flipped) == len(data) and flipped != data
    target.write_bytes(flipped)
    os.utime(target, ns=(old.st_atime_ns, old.st_mtime_ns))
    got = _noop(applied)
    if what == "RECORD rewritten":  # RECORD alone: the stamp falls back to hashing, which passes
        assert got is not None
    else:
        assert got is None  # hashing again finds the change: a real apply follows


def test_list_is_stamped_and_sees_a_change(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small_series.write_series(tmp_path / "repo")
    monkeypatch.setattr(stamp, "now", _later)
    series = str(tmp_path / "repo" / "series")
    from patchq.commands import list_

    fresh, _ = list_.run(series)
    first = fastpath._listed(series)
    assert first == fresh and list(first) == list(fresh) and len(_stamps(cache)) == 1
    monkeypatch.setattr(list_, "run", lambda *a: pytest.fail("listed again although stamped"))
    assert fastpath._listed(series) == fresh
    monkeypatch.undo()
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(cache))
    monkeypatch.setattr(stamp, "now", _later)
    py = tmp_path / "repo" / "series" / "bump_default.py"
    old = os.stat(py)
    py.write_text(py.read_text().replace("GB10 gets", "GB11 gets"))
    os.utime(py, ns=(old.st_atime_ns, old.st_mtime_ns))
    changed = fastpath._listed(series)
    assert changed["patches"][0]["hash"] != fresh["patches"][0]["hash"]
