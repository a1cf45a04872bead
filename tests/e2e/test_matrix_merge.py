"""ci/matrix_merge.py merge: shards' matrices become one, every section merged (also cpu_boot)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ci"))

import matrix_merge  # noqa: E402


def _shard(release: str, status: str) -> dict:
    cell = {"id": "p", "hash": "h", "status": status, "reason": "", "blocking": False}
    return {"schema": "patchq.matrix/1", "generated": "x", "releases": [release], "dist": "vllm",
            "profiles": {"base": {"description": "", "patches": ["p"]}},
            "cells": {"base": {"p": {release: cell}}},
            "boot": {"base": {release: {"result": "serves"}}},
            "cpu_boot": {"base": {release: {"result": "serves", "level": "cpu-boot"}}},
            "changes": {}, "first_change": {}, "errors": {}, "exit_code": 0,
            "timing": {"wall_s": 1.0, "workers": 2, "per_release_s": {release: 1.0}}}


def test_merge_keeps_every_shards_boot_and_cpu_boot_rows() -> None:
    doc = matrix_merge.merge([_shard("0.33.0", "moved"), _shard("0.23.0", "applies")])
    assert doc["releases"] == ["0.23.0", "0.33.0"]
    assert list(doc["boot"]["base"]) == ["0.23.0", "0.33.0"]
    assert list(doc["cpu_boot"]["base"]) == ["0.23.0", "0.33.0"]
    assert doc["first_change"]["base"]["p"] == "0.33.0"
