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
