"""patchq.commands.init: ``patchq init`` writes a new series repo (all its files or none)."""

from __future__ import annotations

import shutil

import pytest

from patchq import series as series_mod
from patchq.commands import init, list_
from patchq.errors import UsageError


def test_init_writes_a_loadable_series_repo(tmp_path):
    repo = tmp_path / "my-stack"
    repo.mkdir()
    doc, code = init.init(str(repo))
    assert code == 0 and doc["schema"] == "patchq.init/1" and doc["dir"] == str(repo)
    for rel in ("patchq.toml", "series/profiles.toml", "tests/test_patches.py"):
        assert str(repo / rel) in doc["written"] and (repo / rel).is_file(), rel
    assert doc["series"]["dir"] == str(repo / "series")
    if shutil.which("git"):
        assert (repo / ".git").is_dir()
    loaded = series_mod.load(repo / "series")  # the example patch loads and is listed
    listed, _ = list_.run(str(repo / "series"))
    assert [p["id"] for p in listed["patches"]] == loaded.all_patch_ids() != []


def test_init_over_an_existing_repo_writes_nothing(tmp_path):
    init.init(str(tmp_path))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts}
    with pytest.raises(UsageError, match="already has .*nothing written"):
        init.init(str(tmp_path))
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts} == before
