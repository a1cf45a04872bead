"""patchq.env.fsutil: atomic replacement (never through a hard link) and stale pyc removal."""

from __future__ import annotations

import os
import stat

import pytest

from patchq.env import fsutil


def test_atomic_write_replaces_the_file_and_breaks_a_hard_link(tmp_path):
    shared = tmp_path / "cache-copy.py"
    shared.write_bytes(b"old\n")
    target = tmp_path / "site" / "mod.py"
    target.parent.mkdir()
    os.link(shared, target)  # as uv installs it
    os.chmod(target, 0o600)
    fsutil.atomic_write(target, b"new\n")
    assert target.read_bytes() == b"new\n" and shared.read_bytes() == b"old\n"
    assert target.stat().st_ino != shared.stat().st_ino
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # the existing file's mode is kept
    assert sorted(p.name for p in target.parent.iterdir()) == ["mod.py"]  # no temporary file left


def test_atomic_write_of_a_new_file_and_an_explicit_mode(tmp_path):
    fsutil.atomic_write(tmp_path / "a", b"x", sync_dir=False)
    fsutil.atomic_write(tmp_path / "b", b"y", mode=0o755)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o755


def test_a_failed_write_leaves_the_old_bytes_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "mod.py"
    target.write_bytes(b"old\n")

    def fail(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(fsutil.os, "replace", fail)
    with pytest.raises(OSError):
        fsutil.atomic_write(target, b"new\n")
    assert target.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["mod.py"]


def test_invalidate_pycache_removes_only_that_modules_pycs(tmp_path):
    src = tmp_path / "utils.py"
    src.write_text("X = 1\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    for name in ("utils.cpython-312.pyc", "utils.cpython-312.opt-1.pyc", "utils2.cpython-312.pyc",
                 "other.cpython-312.pyc"):
        (cache / name).write_bytes(b"")
    removed = fsutil.invalidate_pycache(src)
    assert sorted(p.name for p in removed) == ["utils.cpython-312.opt-1.pyc", "utils.cpython-312.pyc"]
    assert sorted(p.name for p in cache.iterdir()) == ["other.cpython-312.pyc", "utils2.cpython-312.pyc"]
    assert fsutil.invalidate_pycache(tmp_path / "none.py") == []


def test_a_symlinked_pycache_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "utils.cpython-312.pyc").write_bytes(b"")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__pycache__").symlink_to(elsewhere)
    assert fsutil.invalidate_pycache(pkg / "utils.py") == []
    assert (elsewhere / "utils.cpython-312.pyc").exists()


def test_stale_temp_files_are_those_whose_writer_is_gone(tmp_path):
    """atomic_write names its temp file with its pid: a file of a pid that no longer runs
    (a kill -9 between the write and the rename) or an old one is stale; a live writer's is not."""
    import os
    import subprocess
    import sys
    import time

    from patchq.env import fsutil

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    dead = tmp_path / f".x.toml.{gone}.abcd_123.patchq-tmp"
    live = tmp_path / f".x.toml.{os.getpid()}.abcd_124.patchq-tmp"
    old = tmp_path / ".x.toml.abcd_125.patchq-tmp"  # an older patchq's name: no pid
    young = tmp_path / ".y.toml.abcd_126.patchq-tmp"
    for p in (dead, live, old, young):
        p.write_text("[partial")
    os.utime(old, (time.time() - 2 * fsutil.STALE_AGE,) * 2)
    (tmp_path / "anchors.toml").write_text("x = 1\n")
    assert sorted(fsutil.stale_temp(tmp_path)) == sorted([str(dead), str(old)])
    fsutil.atomic_write(tmp_path / "new.toml", b"y = 2\n")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".new.toml")) == []


def test_the_crash_hook_is_honoured_only_from_the_source_checkout(tmp_path):
    """PATCHQ_FAULT_AFTER_WRITES / _REPO_WRITES were live in an installed wheel: now only a
    patchq run from its checkout (the test layer) stops itself; a wheel ignores them."""
    import subprocess
    import sys

    from patchq.env import fsutil

    assert fsutil._source_checkout()  # this test runs from the checkout
    code = ("import os, sys\nfrom patchq.env import fsutil\n{patch}"
            "os.environ['PATCHQ_FAULT_AFTER_WRITES'] = '1'\nfsutil.fault_point('PATCHQ_FAULT_AFTER_WRITES')\n"
            "print('still here')\n")
    here = subprocess.run([sys.executable, "-c", code.format(patch="")], capture_output=True, text=True)
    assert here.returncode == 99 and "still here" not in here.stdout
    wheel = subprocess.run([sys.executable, "-c", code.format(patch="fsutil._source_checkout = lambda: False\n")],
                           capture_output=True, text=True)
    assert wheel.returncode == 0 and "still here" in wheel.stdout
    # an installed copy of the package (no pyproject.toml of patchq beside it) is not the checkout
    import shutil

    from support import REPO

    site = tmp_path / "site-packages"
    shutil.copytree(REPO / "patchq", site / "patchq", ignore=shutil.ignore_patterns("__pycache__"))
    probe = subprocess.run([sys.executable, "-c", "from patchq.env import fsutil; print(fsutil._source_checkout())"],
                           capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert probe.stdout.strip() == "False", probe.stderr
