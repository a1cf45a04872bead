"""Stat stamps (patchq.env.stamp) and the no-op apply / status that use them (issue 25):
a change to any series file, patched file or the installed vLLM is still seen."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from patchq import fastpath, series as series_mod
from patchq.commands import apply as apply_cmd
from patchq.env import stamp, status as st
from patchq.plan.anchors import ast_index, fingerprint_ast
from patchq.vllmdist import sources

from . import small_series

KEY = {"command": "test", "where": "here"}


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PATCHQ_STAMPS", raising=False)
    return tmp_path / "cache"


def _later() -> int:
    """A verification that started well after every file of the test was written."""
    return time.time_ns() + 2 * stamp.SETTLE_NS


def _files(tmp_path: Path) -> tuple[Path, Path]:
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.py").write_text("A = 1\n")
    return d, d / "a.py"


def test_unchanged_inputs_give_the_payload(cache: Path, tmp_path: Path) -> None:
    d, a = _files(tmp_path)
    assert stamp.save(KEY, [str(a), str(tmp_path / "absent")], [(str(d), (".py",))], "payload", _later())
    assert stamp.load(KEY) == "payload"
    assert stamp.load({"command": "test", "where": "elsewhere"}) is None


def test_a_fresh_file_is_never_stamped(cache: Path, tmp_path: Path) -> None:
    d, a = _files(tmp_path)
    assert not stamp.save(KEY, [str(a)], [], "payload", stamp.now())  # written just now: not settled
    assert stamp.load(KEY) is None
    future = time.time_ns() + 10 * stamp.SETTLE_NS  # a file time ahead of this host's clock
    os.utime(a, ns=(future, future))
    assert not stamp.save(KEY, [str(a)], [], "payload", _later())


@pytest.mark.parametrize("change", ["same-size rewrite, mtime restored", "replaced by rename", "removed",
                                    "absent file created", "entry added", "entry renamed"])
def test_any_change_is_seen(cache: Path, tmp_path: Path, change: str) -> None:
    d, a = _files(tmp_path)
    absent = d / "b.toml"
    assert stamp.save(KEY, [str(a), str(absent)], [(str(d), (".py", ".toml"))], "payload", _later())
    old = os.stat(a)
    if change == "same-size rewrite, mtime restored":
        a.write_text("A = 2\n")  # ctime moves on, whatever utime says
        os.utime(a, ns=(old.st_atime_ns, old.st_mtime_ns))
        assert os.stat(a).st_mtime_ns == old.st_mtime_ns and os.stat(a).st_size == old.st_size
    elif change == "replaced by rename":
        (d / "new.tmp").write_text("A = 2\n")
        os.replace(d / "new.tmp", a)
    elif change == "removed":
        a.unlink()
    elif change == "absent file created":
        absent.write_text("")
    elif change == "entry added":
        (d / "c.py").write_text("")
    else:
        shutil.move(str(a), str(d / "z.py"))
        shutil.move(str(d / "z.py"), str(a))  # same name and bytes again, but the directory changed
    assert stamp.load(KEY) is None


def test_a_damaged_stamp_is_ignored(cache: Path, tmp_path: Path) -> None:
    d, a = _files(tmp_path)
    assert stamp.save(KEY, [str(a)], [], "payload", _later())
    (path,) = (cache / "stamps").iterdir()
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # the payload
    path.write_bytes(bytes(data))
    assert stamp.load(KEY) is None
    path.write_bytes(b"")
    assert stamp.load(KEY) is None


def test_off_by_environment(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d, a = _files(tmp_path)
    assert stamp.save(KEY, [str(a)], [], "payload", _later())
    monkeypatch.setenv("PATCHQ_STAMPS", "0")
    assert stamp.load(KEY) is None


# -- the no-op apply and status -------------------------------------------------------


@pytest.fixture()
def applied(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A small site-packages with profile ``base`` applied, and a clock that sees every
    file as settled (the stamps are saved by the first verified no-op / status)."""
    site = small_series.write_site(tmp_path / "site")
    repo = tmp_path / "repo"
    small_series.write_series(repo, fingerprint=fingerprint_ast(ast_index(small_series.UTILS_PY)["Backend"][0]))
    s = series_mod.load(str(repo / "series"))
    doc, code = apply_cmd.apply(sources.installed(str(site)), s, "base")
    assert code == 0, doc
    monkeypatch.setattr(stamp, "now", _later)
    return {"site": str(site), "series": str(repo / "series"), "anchors": str(repo / "anchors"), "repo": repo}


def _noop(w: dict) -> dict | None:
    return fastpath._noop_apply(w["site"], w["series"], w["anchors"], "base")


def _stamps(cache: Path) -> list[Path]:
    return sorted((cache / "stamps").glob("*.stamp")) if (cache / "stamps").is_dir() else []


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


def test_status_is_stamped_and_sees_a_change(applied: dict, cache: Path) -> None:
    first = st.collect(applied["site"], applied["series"], applied["anchors"])
    assert len(_stamps(cache)) == 1
    again = st.collect(applied["site"], applied["series"], applied["anchors"])
    assert again == first and list(again) == list(first)  # the same document, keys in the same order
    utils = Path(applied["site"]) / "vllm" / "ops" / "utils.py"
    old = os.stat(utils)
    utils.write_text(utils.read_text().replace("101376", "101377"))
    os.utime(utils, ns=(old.st_atime_ns, old.st_mtime_ns))
    after = st.collect(applied["site"], applied["series"], applied["anchors"])
    assert [f["state"] for f in after["files"]] == ["modified"]
    assert st.exit_code(after) != 0


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
