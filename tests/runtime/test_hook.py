"""patchq.runtime.hook: the import hook's checksummed manifests and sources."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchq.runtime import hook


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=1, max_size=400), where=st.integers(min_value=0), bit=st.integers(0, 7))
def test_a_flipped_hook_manifest_is_refused_before_marshal(data, where, bit):
    packed = bytearray(hook.pack(hook.MANIFEST_TAG, data))
    assert hook.unpack(hook.MANIFEST_TAG, bytes(packed)) == data
    packed[where % len(packed)] ^= 1 << bit
    assert hook.unpack(hook.MANIFEST_TAG, bytes(packed)) is None


def test_pack_layout_and_wrong_tag_or_length():
    packed = hook.pack(hook.CODE_TAG, b"payload")
    assert packed[:4] == b"PQC1" and int.from_bytes(packed[8:16], "big") == 7 and packed[16:] == b"payload"
    assert hook.unpack(hook.MANIFEST_TAG, packed) is None  # a code file is not a manifest
    assert hook.unpack(hook.CODE_TAG, packed + b"x") is None
    assert hook.unpack(hook.CODE_TAG, packed[:10]) is None


def test_read_manifest_accepts_only_an_intact_manifest(tmp_path):
    import marshal

    good = {"schema": hook.SCHEMA, "modules": {"vllm.x": {"source": "/s/x.py"}}, "key": "k"}
    path = tmp_path / hook.MANIFEST
    path.write_bytes(hook.pack(hook.MANIFEST_TAG, marshal.dumps(good)))
    assert hook.read_manifest(path) == good
    path.write_bytes(hook.pack(hook.MANIFEST_TAG, marshal.dumps({"schema": "other/1", "modules": {}})))
    with pytest.raises(ValueError, match="not a patchq.hook/1 manifest"):
        hook.read_manifest(path)
    path.write_bytes(hook.pack(hook.MANIFEST_TAG, marshal.dumps(good))[:-1])
    with pytest.raises(ValueError, match="damaged"):
        hook.read_manifest(path)


def test_start_ticks_identifies_this_process():
    mine = hook.start_ticks()
    assert isinstance(mine, int) and mine == hook.start_ticks(os.getpid())
    assert hook.start_ticks(2 ** 22 + 12345) is None  # no such process


@pytest.mark.parametrize("what", ["file-o+w", "dir-o+w", "file-other-uid"])
def test_a_manifest_another_user_can_write_is_refused(tmp_path, what):
    """issue 38: the hook's marshal files get the cache's ownership rule."""
    import marshal

    good = {"schema": hook.SCHEMA, "modules": {}, "key": "k"}
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    path = hook_dir / hook.MANIFEST
    path.write_bytes(hook.pack(hook.MANIFEST_TAG, marshal.dumps(good)))
    if what == "file-o+w":
        os.chmod(path, 0o666)
    elif what == "dir-o+w":
        os.chmod(hook_dir, 0o777)
    else:
        if os.geteuid() != 0:
            pytest.skip("chown to another uid needs root")
        os.chown(path, 65534, 65534)
    with pytest.raises(ValueError, match="writable by others|owned by uid 65534"):
        hook.read_manifest(str(path))


@pytest.mark.parametrize("how", ["o+w", "other-uid"])
def test_a_code_file_another_user_can_write_is_compiled_again(tmp_path, how):
    import hashlib
    import marshal

    text = "X = 'patched'\n"
    src = tmp_path / "served.py"
    src.write_text(text)
    entry = {"path": str(tmp_path / "m.py"), "source": str(src), "package": False, "patches": [],
             "patched_sha256": hashlib.sha256(text.encode()).hexdigest()}
    h = hook.Hook(str(tmp_path), {"modules": {"m": entry}, "profile": "p"})
    loader = hook.PatchedLoader(h, "m", entry)
    planted = compile("X = 'planted'\n", entry["path"], "exec")
    code_path = loader._code_path()
    os.makedirs(os.path.dirname(code_path))
    key = hook._magic() + entry["patched_sha256"].encode("ascii")
    with open(code_path, "wb") as fh:
        fh.write(hook.pack(hook.CODE_TAG, key + marshal.dumps(planted)))
    ns: dict = {}
    exec(loader.get_code(), ns)
    assert ns["X"] == "planted"  # a code file of this user's is loaded as it is (keyed by the text's sha256)
    if how == "o+w":
        os.chmod(code_path, 0o666)
    else:
        if os.geteuid() != 0:
            pytest.skip("chown to another uid needs root")
        os.chown(code_path, 65534, 65534)
    with open(code_path, "wb") as fh:  # keeps its owner and mode
        fh.write(hook.pack(hook.CODE_TAG, key + marshal.dumps(planted)))
    ns = {}
    exec(hook.PatchedLoader(h, "m", entry).get_code(), ns)
    assert ns["X"] == "patched"
    assert hook.untrusted(code_path, os.stat(code_path)) is None  # replaced by this process's own
