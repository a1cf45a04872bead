"""patchq.env.hookdir: the hook directories of ``patchq run`` (keyed per environment, patch set
and planner), built from a plan of the small world and reused while nothing changed."""

from __future__ import annotations

from patchq.env import hookdir
from patchq.runtime import hook
from testing.small_world import UTILS


def test_module_names():
    assert hookdir.module_name("vllm/ops/utils.py") == ("vllm.ops.utils", False)
    assert hookdir.module_name("vllm/ops/__init__.py") == ("vllm.ops", True)


def test_the_hook_dir_is_keyed_by_site_version_profile_and_digest(small, tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHQ_RUNTIME_DIR", str(tmp_path / "procs"))
    assert hookdir.runtime_dir() == tmp_path / "procs"
    a = hookdir.hook_dir_for(small.site, "0.1.0", "base", "d1")
    assert a.parent == hookdir.cache_root() / "runtime" / "hooks" and a.name.startswith("base-")
    assert a == hookdir.hook_dir_for(small.site, "0.1.0", "base", "d1")
    assert a != hookdir.hook_dir_for(small.site, "0.1.0", "base", "d2") != hookdir.hook_dir_for(small.site, "0.2.0",
                                                                                                "base", "d1")


def test_build_serves_the_patched_text_and_is_reused_until_a_file_changes(small):
    manifest = hookdir.build(small.target, small.series, "base")
    directory = hookdir.hook_dir_for(small.site, "0.1.0", "base", manifest["digest"])
    assert manifest["hook_dir"] == str(directory) and manifest["key"] == directory.name
    assert [(p["id"], p["status"]) for p in manifest["patches"]] == [("bump-default", "ok")]
    entry = manifest["modules"]["vllm.ops.utils"]
    assert (entry["relpath"], entry["kind"]) == (UTILS, "patched")
    assert "DEFAULT = 101376" in open(entry["source"]).read()
    assert "101376" not in small.utils()  # served at import time; nothing applied on disk
    assert hook.read_manifest(directory / hook.MANIFEST)["modules"].keys() == manifest["modules"].keys()
    assert hookdir.load_warm(directory, small.site) is not None
    (small.site / UTILS).write_text(small.utils() + "# changed\n")
    assert hookdir.load_warm(directory, small.site) is None


def test_a_hook_dir_another_user_can_write_is_prepared_again(small, capsys):
    """issue 38: the hook's marshal files get the cache's ownership rule: a directory (or a file a
    process imports from it) writable by others is not used, and build replaces it whole."""
    import os

    manifest = hookdir.build(small.target, small.series, "base")
    directory = hookdir.hook_dir_for(small.site, "0.1.0", "base", manifest["digest"])
    assert hookdir.load_warm(directory, small.site) is not None
    planted = directory / "planted.py"
    planted.write_text("raise SystemExit('planted')\n")
    os.chmod(directory / "sitecustomize.py", 0o666)
    assert hookdir.load_warm(directory, small.site) is None
    assert f"ignoring the cached hook directory {directory}" in capsys.readouterr().err
    hookdir.build(small.target, small.series, "base")
    assert not planted.exists() and (directory / "sitecustomize.py").stat().st_mode & 0o777 == 0o644
    assert hookdir.load_warm(directory, small.site) is not None
