"""Stat stamps (patchq.env.stamp): equal stats give the payload back; any change, a fresh
file, a file in the future or a damaged stamp does not (issue 25)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from patchq.env import stamp
from testing import stamped

KEY = {"command": "test", "where": "here"}


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return stamped.use_cache(tmp_path, monkeypatch)


_later = stamped.later


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


@pytest.mark.parametrize("how", ["o+w", "other-uid"])
def test_another_users_stamp_is_ignored(cache: Path, tmp_path: Path, capsys, how: str) -> None:
    """issue 38: a stamp decides that nothing changed; one another user could have written is
    not believed (a note), and the next save replaces it with this user's."""
    d, a = _files(tmp_path)
    assert stamp.save(KEY, [str(a)], [], "payload", _later())
    (path,) = (cache / "stamps").iterdir()
    assert path.stat().st_mode & 0o777 == 0o644
    if how == "o+w":
        os.chmod(path, 0o666)
    else:
        if os.geteuid() != 0:
            pytest.skip("chown to another uid needs root")
        os.chown(path, 65534, 65534)
    assert stamp.load(KEY) is None
    assert f"patchq: note: ignoring the cached stamp {path}" in capsys.readouterr().err
    assert stamp.save(KEY, [str(a)], [], "payload", _later()) and stamp.load(KEY) == "payload"


def test_off_by_environment(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d, a = _files(tmp_path)
    assert stamp.save(KEY, [str(a)], [], "payload", _later())
    monkeypatch.setenv("PATCHQ_STAMPS", "0")
    assert stamp.load(KEY) is None


def test_another_or_a_changed_patchq_reads_no_stamp(cache: Path, tmp_path: Path, monkeypatch) -> None:
    """Every stamp names the directory patchq runs from and holds its sources: a second
    install of the same version, or patchq changed in place, computes afresh."""
    import sys
    import types

    d, a = _files(tmp_path)
    code = tmp_path / "install-a"
    code.mkdir()
    src = code / "cli.py"
    src.write_text("X = 1\n")
    module = types.ModuleType("patchq.fake_cli")
    module.__file__ = str(src)
    monkeypatch.setitem(sys.modules, "patchq.fake_cli", module)
    monkeypatch.setattr(stamp, "CODE", str(code))
    assert stamp.own_sources() == [str(src)]
    assert stamp.save(KEY, [str(a)], [], "payload", _later())
    assert stamp.load(KEY) == "payload"
    monkeypatch.setattr(stamp, "CODE", str(tmp_path / "install-b"))  # another install, same version
    assert stamp.load(KEY) is None
    monkeypatch.setattr(stamp, "CODE", str(code))
    src.write_text("X = 22\n")  # patchq edited in place
    assert stamp.load(KEY) is None


def test_the_loaded_patchq_modules_are_every_stamps_inputs() -> None:
    import patchq

    assert stamp.CODE == os.path.dirname(os.path.abspath(patchq.__file__))
    assert {patchq.__file__, stamp.__file__} <= set(stamp.own_sources())
