"""patchq.hashing: the stdlib digests and tables of a series (profiles, anchors, patch files)."""

from __future__ import annotations

import os

import pytest

from patchq.errors import SeriesError, UsageError
from testing import small_series


def test_patch_ids_and_anchor_modules_cannot_name_paths(tmp_path):
    from patchq import series as S
    from patchq.hashing import anchor_tables, profile_tables

    series = small_series.write_series(tmp_path)
    (series / "profiles.toml").write_text('[profiles.p]\npatches = ["../../outside/x"]\n')
    with pytest.raises(SeriesError, match="not a patch id"):
        profile_tables(series / "profiles.toml")
    with pytest.raises(UsageError, match="holds a path"):
        S.module_file(series, "../x")
    for module in ("/etc/passwd", "vllm/../../x", "os.path", "vllm..x"):
        (tmp_path / "anchors" / "m.toml").write_text(f'[anchors.a]\nmodule = "{module}"\nqualname = "q"\n')
        with pytest.raises(SeriesError, match="not a module of the vllm package"):
            anchor_tables(tmp_path / "anchors" / "m.toml")


def test_a_series_file_that_is_a_directory_or_fifo_is_a_series_error(tmp_path):
    from patchq.hashing import series_summary

    series = small_series.write_series(tmp_path)
    (series / "other.py").mkdir()
    with pytest.raises(SeriesError, match="not a regular file"):
        series_summary(series, tmp_path / "anchors")
    (series / "other.py").rmdir()
    os.mkfifo(series / "other.py")
    with pytest.raises(SeriesError, match="not a regular file"):  # and never blocks
        series_summary(series, tmp_path / "anchors")
