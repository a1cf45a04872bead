"""The review flow on a real vLLM 0.26.0 install: drift that is not provably apart blocks
``check`` and ``apply`` alike; ``patchq review --accept`` records the release (who/when)
and both proceed; ``fingerprint`` with a range never blesses an unreviewed release."""

from __future__ import annotations

import re

import pytest

from patchq import hashing

pytestmark = pytest.mark.wheel
tomllib = hashing.toml_module()


def drop_fingerprints(anchors, patch_id: str, versions: list[str]) -> None:
    """A series that never reviewed ``versions`` for ``patch_id`` (as if they were new releases)."""
    path = anchors / f"{patch_id}.toml"
    text = path.read_text(encoding="utf-8")
    for v in versions:
        text = re.sub(rf'^"{re.escape(v)}" = "[0-9a-f]+"\n', "", text, flags=re.M)
    path.write_text(text, encoding="utf-8")


def test_review_blocks_check_and_apply_until_accepted(make_site, series_copy, cli):
    anchors = series_copy.parent / "anchors"
    # unify-kv-page reviewed up to 0.25.1: 0.26.0 adds the mamba padding branch next to its insertion
    drop_fingerprints(anchors, "unify-kv-page", [f"0.{m}.{p}" for m in range(26, 34) for p in (0, 1)])
    res = cli("check", "--profile", "dflash", "--vllm", "0.26.0", "--series", series_copy, "--json")
    assert res.rc == 1, res.stdout
    row = next(p for p in res.json["patches"] if p["id"] == "unify-kv-page")
    assert (row["status"], row["blocking"]) == ("review", True)
    assert "upstream changed what this patch touches" in row["reason"]
    assert re.search(r"vllm/v1/core/kv_cache_utils\.py:\d+", row["reason"])
    (entry,) = row["threeway"]
    # the new mamba `elif` before the scaling branch decides whether the patch's insertion runs
    assert entry["base"] == "0.25.1" and entry["findings"][0]["rule"] == "control"
    assert "== upstream's change (base -> theirs)" in entry["view"]

    site = make_site("0.26.0")
    before = (site / "vllm/v1/core/kv_cache_utils.py").read_bytes()
    res = cli("apply", "--profile", "dflash", "--site-packages", site, "--series", series_copy, "--json")
    assert res.rc == 1, res.stdout
    failed = next(p for p in res.json["patches"] if p["id"] == "unify-kv-page")
    assert (failed["status"], failed["failure"]) == ("failed", "review")
    assert (site / "vllm/v1/core/kv_cache_utils.py").read_bytes() == before  # nothing written

    res = cli("review", "unify-kv-page", "--vllm", "0.26.0", "--series", series_copy, "--json")
    assert res.rc == 1 and res.json["accepted"] is False and res.json["status"] == "review"
    res = cli("review", "unify-kv-page", "--vllm", "0.26.0", "--series", series_copy, "--accept",
              "--by", "tester", "--note", "mamba branch is a separate case", "--json")
    assert res.rc == 0 and res.json["accepted"] is True, res.stdout
    data = tomllib.loads((anchors / "unify-kv-page.toml").read_text(encoding="utf-8"))
    assert data["format"] == 2
    assert data["reviews"]["0.26.0"]["by"] == "tester" and data["reviews"]["0.26.0"]["how"] == "review"
    assert data["reviews"]["0.26.0"]["status"] == "review"
    assert "0.26.0" in data["anchors"]["scaled-replace"]["fingerprints"]

    res = cli("check", "--profile", "dflash", "--vllm", "0.26.0", "--series", series_copy, "--json")
    assert res.rc == 0
    row = next(p for p in res.json["patches"] if p["id"] == "unify-kv-page")
    assert (row["status"], row["reviewed"]) == ("applies", True)
    res = cli("apply", "--profile", "dflash", "--site-packages", site, "--series", series_copy)
    assert res.rc == 0, res.stdout + res.stderr

    # a range refreshes what was reviewed and names the rest: 0.27.0 stays unreviewed
    res = cli("fingerprint", "--patch", "unify-kv-page", "--releases", ">=0.26,<0.28", "--series", series_copy,
              "--json")
    assert res.rc == 0 and "0.27.0" in res.json["skipped"]["unify-kv-page"]
    data = tomllib.loads((anchors / "unify-kv-page.toml").read_text(encoding="utf-8"))
    assert "0.27.0" not in data["anchors"]["scaled-replace"]["fingerprints"]
