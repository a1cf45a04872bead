"""patchq.trust: the one ownership rule for walked-up configs and patchq's cache (git's
safe.directory): yours or root's, and not writable by others; PATCHQ_SAFE_DIRECTORIES opts in."""

from __future__ import annotations

import os

import pytest

from patchq import discovery, trust


def test_yours_and_not_world_writable_is_trusted(tmp_path):
    path = tmp_path / "f"
    path.write_text("")
    os.chmod(path, 0o664)  # group write is a deliberate share: accepted
    assert trust.ownership_problem(str(path)) is None
    assert trust.stat_problem(str(path), os.stat(path)) is None
    assert trust.ownership_problem(str(tmp_path / "absent")) is None


def test_world_writable_or_another_uid_is_not(tmp_path):
    path = tmp_path / "f"
    path.write_text("")
    os.chmod(path, 0o666)
    assert trust.ownership_problem(str(path)) == f"{path} is writable by others (mode 666)"
    os.chmod(path, 0o644)
    link = tmp_path / "link"
    os.symlink(path, link)
    assert trust.ownership_problem(str(link)) is None  # a link's own mode is not looked at
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    os.chown(path, 65534, 65534)
    assert trust.ownership_problem(str(link)).startswith(f"{link} is owned by uid 65534, not by you")


def test_opting_in_and_discovery_uses_the_same_rule(tmp_path, monkeypatch):
    monkeypatch.setenv(trust.SAFE_ENV, os.pathsep.join(["/elsewhere", str(tmp_path)]))
    assert trust.opted_in(str(tmp_path)) and not trust.opted_in(str(tmp_path / "sub"))
    monkeypatch.setenv(trust.SAFE_ENV, "*")
    assert trust.opted_in("/any")
    assert discovery.ownership_problem is trust.ownership_problem and discovery.SAFE_ENV == trust.SAFE_ENV
