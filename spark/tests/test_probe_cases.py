"""The Spark series' cases (``cases=`` of each series module) through ``patchq probe`` on the
newest release the wheel layer probes: every applied patch reaches the probe level."""

from __future__ import annotations

import pytest
from spark_support import patchq

pytestmark = pytest.mark.wheel

NEWEST = "0.34.0"  # the release the tool's wheel layer probes too: one environment, built once


def test_the_spark_series_reaches_the_probe_level_on_the_newest_release():
    res = patchq("probe", "--vllm", NEWEST, "--profile", "dense", "--json", timeout=3600)
    assert res.rc == 0, res.stderr[-3000:]
    doc = res.json
    assert doc["schema"] == "patchq.probe/1" and doc["probeable"] and doc["env"]["torch"]["version"].endswith("+cpu")
    got = {c["patch"]: c["status"] for c in doc["cells"]}
    # prefix-align is upstreamed from 0.28.0: not applied, so neither level is reached
    assert got == {"fla-shmem": "probe", "unify-kv-page": "probe", "prefix-align": "skip",
                   "inc-hybrid-fp8": "probe", "int8-lmhead": "probe"}
    cases = {c["name"]: c["result"] for r in doc["records"] for c in r.get("cases", [])}
    assert cases == {"default-constant": "ok", "gb10-gate": "ok", "dflash-geometry": "ok", "padded-attention": "ok",
                     "fp8-shared-expert": "ok", "dispatch-bf16": "ok", "cpu-reference": "ok"}
