"""patchq.jsonsafe: bounded, non-blocking, no-follow reads of the JSON files patchq reads back."""

from __future__ import annotations

import os

import pytest

from patchq import jsonsafe


def test_a_regular_file_is_read_and_parsed(tmp_path):
    path = tmp_path / "journal.json"
    path.write_text('{"profile": "full", "files": {"vllm/x.py": ["a", 1]}}')
    assert jsonsafe.read_file(path) == {"profile": "full", "files": {"vllm/x.py": ["a", 1]}}
    assert jsonsafe.read_bytes(path) == path.read_bytes()


def test_a_symlink_is_never_followed(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(jsonsafe.NotRegular, match="is a symlink"):
        jsonsafe.read_file(tmp_path / "link.json")


def test_a_fifo_does_not_block_and_a_directory_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(jsonsafe.NotRegular, match="not a regular file"):
        jsonsafe.read_file(tmp_path / "fifo.json")  # no writer: a blocking open would hang here
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(jsonsafe.NotRegular):
        jsonsafe.read_file(tmp_path / "dir.json")


def test_size_bound(tmp_path):
    path = tmp_path / "big.json"
    path.write_text('["' + "x" * 100 + '"]')
    with pytest.raises(jsonsafe.TooLarge, match="more than 50"):
        jsonsafe.read_file(path, max_bytes=50)
    with pytest.raises(jsonsafe.TooLarge):
        jsonsafe.loads("[1, 2, 3]", max_bytes=5)


def test_depth_bound_counts_brackets_outside_strings_only():
    assert jsonsafe.loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(jsonsafe.TooDeep, match="deeper than 64"):
        jsonsafe.loads("[" * 65 + "]" * 65)
    with pytest.raises(jsonsafe.TooDeep):
        jsonsafe.loads("[" * 200_000)  # refused before the parser recurses
    text = '{"a": "' + "[{" * 100 + '"}'  # brackets inside a string are text
    assert jsonsafe.loads(text, max_depth=2) == {"a": "[{" * 100}


def test_every_refusal_is_a_value_error_and_missing_is_file_not_found(tmp_path):
    for cls in (jsonsafe.NotRegular, jsonsafe.TooLarge, jsonsafe.TooDeep):
        assert issubclass(cls, ValueError)
    with pytest.raises(ValueError):
        jsonsafe.loads(b"\xff\xfe not utf-8")
    with pytest.raises(ValueError):
        jsonsafe.loads("{not json")
    with pytest.raises(FileNotFoundError):
        jsonsafe.read_file(tmp_path / "absent.json")


def test_json_is_read_bounded_and_never_from_a_fifo(tmp_path):
    with pytest.raises(jsonsafe.TooDeep):
        jsonsafe.loads("[" * 100000 + "]" * 100000)
    assert jsonsafe.loads('{"a": "[[[[" , "b": [[1]]}') == {"a": "[[[[", "b": [[1]]}
    with pytest.raises(jsonsafe.TooLarge):
        jsonsafe.loads(b"1" * 100, max_bytes=10)
    os.mkfifo(tmp_path / "j.json")
    with pytest.raises(jsonsafe.NotRegular):
        jsonsafe.read_file(tmp_path / "j.json")
    os.symlink(tmp_path / "j.json", tmp_path / "l.json")
    with pytest.raises(jsonsafe.NotRegular):
        jsonsafe.read_file(tmp_path / "l.json")
