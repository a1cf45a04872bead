"""``patchq check`` of the Spark series on real releases: where each patch lands, per release.

The per-release variants make every profile apply, or be upstreamed / absent, on 0.15.1,
0.19.1, 0.23.0, 0.26.0 and 0.33.0; the status of each (patch, release) is also in the series'
store (``series/diffs/<patch>.expect.toml``, ``tests/test_patches.py``), the locations are here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchq import series
from patchq.compat import check
from patchq.vllmdist import releases, sources

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

SERIES = Path(__file__).resolve().parents[1] / "series"


def release(version: str) -> sources.CodeSource:
    try:
        return sources.release_source(version)
    except Exception as exc:  # offline without a cached wheel
        pytest.skip(f"vllm {version} not available: {exc}")


def rows_by_id(rows) -> dict:
    return {r.id: r for r in rows}


def run_check(version: str, profile: str = "dense") -> dict:
    s = series.load(SERIES)
    return rows_by_id(check.check(release(version), s.patches_of(profile)))


def first_loc(row) -> tuple:
    a = row.anchors[0]
    return a["path"], a["qualname"], a["line"]


# docs/drift.md + the variants: fla-shmem at its new path from 0.26.0, unify-kv-page in
# kv_cache_planning from 0.33.0, int8-lmhead in _apply_head from 0.26.0, inc-hybrid-fp8
# in the quantization/inc/ package from 0.24.0, prefix-align upstreamed from 0.28.0.
CURRENT = {
    "0.23.0": {
        "fla-shmem": ("applies", "vllm/model_executor/layers/fla/ops/utils.py", "Backend", 179),
        "unify-kv-page": ("applies", "vllm/v1/core/kv_cache_utils.py", "unify_kv_cache_spec_page_size", 1029),
        "prefix-align": ("applies", "vllm/v1/core/kv_cache_utils.py", "resolve_kv_cache_block_sizes", 593),
        "inc-hybrid-fp8": ("applies", "vllm/model_executor/layers/quantization/inc.py", "INCConfig.__init__", 55),
        "int8-lmhead": ("applies", "vllm/model_executor/layers/logits_processor.py", "LogitsProcessor._get_logits", 89),
    },
    "0.26.0": {
        "fla-shmem": ("applies", "vllm/third_party/flash_linear_attention/ops/utils.py", "Backend", 179),
        "unify-kv-page": ("applies", "vllm/v1/core/kv_cache_utils.py", "unify_kv_cache_spec_page_size", 1067),
        "prefix-align": ("applies", "vllm/v1/core/kv_cache_utils.py", "resolve_kv_cache_block_sizes", 626),
        "inc-hybrid-fp8": ("applies", "vllm/model_executor/layers/quantization/inc/inc.py", "INCConfig.__init__", 49),
        "int8-lmhead": ("applies", "vllm/model_executor/layers/logits_processor.py", "LogitsProcessor._apply_head", 99),
    },
    "0.33.0": {
        "fla-shmem": ("applies", "vllm/third_party/flash_linear_attention/ops/utils.py", "Backend", 179),
        "unify-kv-page": ("applies", "vllm/v1/core/kv_cache_planning.py", "unify_kv_cache_spec_page_size", 346),
        "prefix-align": ("upstreamed", "vllm/v1/core/kv_cache_utils.py", "resolve_kv_cache_block_sizes", 816),
        "inc-hybrid-fp8": ("applies", "vllm/model_executor/layers/quantization/inc/inc.py", "INCConfig.__init__", 71),
        "int8-lmhead": ("applies", "vllm/model_executor/layers/logits_processor.py", "LogitsProcessor._apply_head",
                        136),
    },
}


@pytest.mark.parametrize("version", sorted(CURRENT))
def test_series_on_real_release(version):
    rows = run_check(version)
    for pid, (status, path, qualname, line) in CURRENT[version].items():
        row = rows[pid]
        assert row.status == status, (pid, row.reason)
        assert not row.blocking
        assert first_loc(row) == (path, qualname, line), pid
        if status == "applies":
            assert all(a["verified"] == version for a in row.anchors), row.anchors
            assert row.reason == f"fingerprints identical to verified vllm {version}"
            assert row.level == "source" and row.drift == []
    assert check.exit_code(rows.values()) == 0


def test_prefix_align_upstreamed_from_0_28_agrees_with_its_check():
    row = run_check("0.28.0", profile="dflash")["prefix-align"]
    assert row.status == "upstreamed" and row.variant_kind == "upstreamed" and row.variant == ">=0.28"
    assert row.upstream_check["verdict"] == "upstreamed"
    assert "upstream check:" in row.reason and not row.notes
    assert row.anchors[0]["qualname"] == "resolve_kv_cache_block_sizes"


@pytest.mark.parametrize("version", ["0.15.1", "0.19.1"])
def test_prefix_align_absent_is_confirmed(version):
    row = run_check(version, profile="dflash")["prefix-align"]
    assert (row.status, row.confirmed, row.blocking) == ("absent", True, False)
    assert "confirmed: anchors mamba-backoff do not resolve" in row.reason
    assert row.anchors == []


def test_cli_check_vllm_0_33_dense_exits_0(tmp_path):
    """From inside the series repo (its patchq.toml), as its CI runs it."""
    proc = subprocess.run([sys.executable, "-m", "patchq", "check", "--vllm", "0.33.0", "--profile", "dense", "--json"],
                          capture_output=True, text=True, cwd=SERIES.parent,
                          env={k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_SERIES")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "patchq.check/1" and doc["ok"] and doc["exit_code"] == 0
    assert doc["vllm"] == {"version": "0.33.0", "kind": "release",
                           "root": str(releases.release_tree("0.33.0")), "dist": "vllm"}
    assert [p["id"] for p in doc["patches"]] == list(series.load(SERIES).profile("dense").patches)
    assert {p["id"]: p["status"] for p in doc["patches"]} == {
        pid: v[0] for pid, v in CURRENT["0.33.0"].items()}
    assert doc["counts"] == {"applies": 4, "upstreamed": 1}
