"""``serve.sh``: a thin caller of ``patchq serve`` with this series' profiles (what it exports
and runs, dry; the missing-patchq message)."""

from __future__ import annotations

import os
import subprocess
import sys

from spark_support import SPARK


def _serve_sh(*args, cwd, env=None, script="serve.sh"):
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ")}
    full.update({"PATCHQ": str(os.path.join(os.path.dirname(sys.executable), "patchq")), "SERIES": str(SPARK),
                 **(env or {})})
    return subprocess.run(["bash", str(SPARK / script), *args], cwd=cwd, env=full, capture_output=True, text=True)


def test_serve_sh_dry_run_of_dense(tmp_path):
    dry = _serve_sh("--dry-run", "dense", "--", "--seed", "1", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    note, *lines = dry.stdout.splitlines()  # first, the variables the profile's serve table reads
    assert note.startswith("# [profiles.dense.serve] reads TOOL_PARSER=qwen3_coder (default qwen3_coder), ")
    assert lines[:2] == ["export PATCHQ_EXPECT_PROFILE=dense", "export PATCHQ_STRICT=1"]
    assert lines[2].split()[1:] == ["apply", "--profile", "dense", "--series", str(SPARK)]
    # serve.sh prefers the vllm script beside patchq (README command 1 installs one into .venv)
    beside = os.path.join(os.path.dirname(sys.executable), "vllm")
    vllm = beside if os.access(beside, os.X_OK) else "vllm"
    assert lines[3].startswith(f"exec {vllm} serve /model ") and lines[3].endswith(
        """--speculative-config '{"method":"dflash","model":"/drafter","num_speculative_tokens":12,"""
        """"attention_backend":"FLASH_ATTN"}' --seed 1""")
    assert _serve_sh("--dry-run", "nope", cwd=tmp_path).returncode == 2
    assert "--dry-run" in _serve_sh("--help", cwd=tmp_path).stdout


def test_serve_sh_names_a_missing_patchq(tmp_path):
    proc = _serve_sh("dense", cwd=tmp_path, env={"PATCHQ": str(tmp_path / "no-patchq")})
    assert proc.returncode == 127, proc
    assert proc.stderr.startswith(f"serve.sh: patchq not found (PATCHQ={tmp_path / 'no-patchq'}") and \
        "patchq is not on PyPI" in proc.stderr, proc.stderr
