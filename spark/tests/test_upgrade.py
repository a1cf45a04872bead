"""``patchq upgrade`` of the Spark series over a real vLLM upgrade (wheel layer)."""

from __future__ import annotations

import shutil

import pytest
from spark_support import patchq, site_of

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel


def test_upgrade_of_the_series_from_0_23_to_0_33(tmp_path):
    """The series after `pip install vllm==0.33.0` over a 0.23.0 carrying dflash: every patch
    checks, prefix-align is upstream (apply skips it), the rest is applied."""
    old = site_of("0.23.0", tmp_path / "old" / "site-packages")
    new = site_of("0.33.0", tmp_path / "new" / "site-packages")
    assert patchq("apply", "--profile", "dflash", "--site-packages", old).rc == 0
    shutil.copytree(old / ".patchq", new / ".patchq")
    out = patchq("upgrade", "--site-packages", new)
    assert out.rc == 0, out
    lines = out.stdout.splitlines()
    assert lines[0] == "upgrade dflash: vllm 0.23.0 -> 0.33.0"
    assert [ln.split() for ln in lines[1:3]] == [["fla-shmem", "applies", "->", "applied"],
                                                 ["unify-kv-page", "applies", "->", "applied"]], out.stdout
    assert lines[3].split() == ["prefix-align", "upstreamed", "->", "not", "applied", "(upstreamed:", "apply",
                                "skips", "it)"], out.stdout
    assert [ln for ln in lines if ln.startswith("next:")][-1].startswith(
        "next: restart the server on the patched files: `patchq serve --profile dflash")
    status = patchq("status", "--site-packages", new, "--json").json
    assert {p["id"]: p["status"] for p in status["patches"]}["prefix-align"] == "upstreamed"
