"""patchq.authoring.scaffold: the files of ``patchq init`` and ``patchq new``, and profile edits
that keep a user's comments."""

from __future__ import annotations

import pytest

from patchq import hashing
from patchq.authoring import scaffold
from patchq.errors import SeriesError, UsageError

tomllib = hashing.toml_module()

PROFILES = '''# my profiles: keep this
[profiles.base]
description = "the base"  # and this
patches = [
  "one",  # the first
]

[profiles.other]
patches = []
'''


def test_ids_and_profile_names():
    scaffold.check_id("backend-tiles-2")
    scaffold.check_profile("dense_v2")
    for bad in ("Fla", "backend_tiles", "", "../x"):
        with pytest.raises(UsageError, match="use kebab-case"):
            scaffold.check_id(bad)
    with pytest.raises(UsageError, match="use letters, digits, - and _"):
        scaffold.check_profile("a b")


def test_add_to_profile_appends_and_keeps_the_comments(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text(PROFILES)
    assert scaffold.add_to_profile(path, "base", "two")
    text = path.read_text()
    assert tomllib.loads(text)["profiles"]["base"]["patches"] == ["one", "two"]
    for comment in ("# my profiles: keep this", "# and this", "# the first"):
        assert comment in text
    assert not scaffold.add_to_profile(path, "base", "two")  # already there: unchanged
    assert scaffold.add_to_profile(path, "other", "two") and scaffold.add_to_profile(path, "fresh", "two", "new one")
    data = tomllib.loads(path.read_text())["profiles"]
    assert data["other"]["patches"] == ["two"] and data["fresh"] == {"description": "new one", "patches": ["two"]}


def test_a_broken_profiles_file_is_not_touched(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text("[profiles.base\n")
    with pytest.raises(SeriesError, match="profiles.toml"):
        scaffold.add_to_profile(path, "base", "two")
    assert path.read_text() == "[profiles.base\n"


def test_write_new_never_overwrites(tmp_path):
    written: list[str] = []
    scaffold.write_new(tmp_path / "a.py", "x = 1\n", written)
    assert written == [str(tmp_path / "a.py")] and (tmp_path / "a.py").read_text() == "x = 1\n"
    with pytest.raises(UsageError, match="exists; refusing to overwrite it"):
        scaffold.write_new(tmp_path / "a.py", "x = 2\n", written)


def test_init_files_form_a_series_repo():
    files = scaffold.init_files("my-stack")
    assert {"patchq.toml", "series/profiles.toml", "tests/test_patches.py"} <= set(files)
    profiles = tomllib.loads(files["series/profiles.toml"])["profiles"]
    ids = [pid for p in profiles.values() for pid in p["patches"]]
    for pid in ids:
        assert f"anchors/{pid}.toml" in files
        compile(files[f"series/{pid.replace('-', '_')}.py"], pid, "exec")


def test_a_new_patch_loads_and_anchors_where_it_was_asked(small):
    py, toml = scaffold.new_patch_files("quiet-get", "vllm.ops.utils", "Backend.get", "return self.DEFAULT")
    (small.series.root / "quiet_get.py").write_text(py)
    (small.root / "anchors" / "quiet-get.toml").write_text(toml)
    from patchq import series as series_mod

    patch = series_mod.load(small.series.root).patch("quiet-get")
    (anchor,) = patch.anchors.values()
    assert (anchor.module, anchor.qualname, anchor.node) == ("vllm.ops.utils", "Backend.get", "return self.DEFAULT")
    assert patch.variants[0].kind == "edit"
    # the case skeleton next to it: the patched definition, live (patchq probe runs it)
    (case,) = patch.cases
    assert case.name == "quiet-get-is-live" and "TODO" in case.doc
    assert "patched_definition('vllm.ops.utils', 'Backend.get', 'quiet-get')" in py


def test_a_case_skeleton_finds_the_patched_definition_or_says_why(small, monkeypatch):
    import sys

    from patchq.series import patched_definition

    monkeypatch.syspath_prepend(str(small.site))
    utils = small.site / "vllm" / "ops" / "utils.py"
    try:
        with pytest.raises(AssertionError, match="does not carry patch quiet-get"):
            patched_definition("vllm.ops.utils", "Backend.get", "quiet-get")
        utils.write_text("# patchq:quiet-get:0123456789ab\n" + utils.read_text())
        sys.modules.pop("vllm.ops.utils", None)
        found = patched_definition("vllm.ops.utils", "Backend", "quiet-get")
        assert found.__name__ == "Backend"
    finally:  # the small world's vllm must not stay imported for other tests of this process
        for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            del sys.modules[name]
