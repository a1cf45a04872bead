"""``patchq check``: statuses, reasons and locations on real vLLM wheels and a drift corpus.

Three sets of evidence:

* the stack fixture (``testing/stack.py``) on real releases: its absent and upstreamed
  variants confirmed or contradicted by the code, the CLI's document;
* a series **as it was for 0.23.0 only** (``tests/drift/series-0.23/``: frozen copy
  with its 0.23.0 fingerprints; a frozen copy of the Spark series' 0.23.0 variants, owned by these
  tests) on later releases: the "before an upgrade" view, whose statuses follow the Spark
  series' ``spark/docs/drift.md`` change by change;
* the drift corpus (``tests/drift/cases/*.toml``, checked with that frozen series): real 0.23.0
  trees edited the way upstream drifts (reformatted, re-wrapped, renamed locals, moved module, duplicate
  names, deleted definition, function turned method, duplicated anchor statement).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from patchq import series
from patchq.compat import check
from patchq.vllmdist import releases, sources
from testing import stack

REPO = Path(__file__).resolve().parents[2]
DRIFT = REPO / "tests" / "drift"
FROZEN = DRIFT / "series-0.23" / "series"
sys.path.insert(0, str(DRIFT))

import corpus  # noqa: E402

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel


def release(version: str) -> sources.CodeSource:
    try:
        return sources.release_source(version)
    except Exception as exc:  # offline without a cached wheel
        pytest.skip(f"vllm {version} not available: {exc}")


def rows_by_id(rows) -> dict:
    return {r.id: r for r in rows}


def run_check(version: str, series_root=FROZEN, profile: str = "dense") -> dict:
    s = series.load(series_root)
    return rows_by_id(check.check(release(version), s.patches_of(profile)))


def table(rows: dict) -> dict:
    return {pid: (r.status, r.blocking) for pid, r in rows.items()}


def first_loc(row) -> tuple:
    a = row.anchors[0]
    return a["path"], a["qualname"], a["line"]


@pytest.mark.parametrize("version", ["0.15.1", "0.19.1"])
def test_an_absent_claim_is_confirmed(version):
    row = rows_by_id(check.check(release(version), series.load(stack.SERIES).patches_of("kv")))["align-backoff"]
    assert (row.status, row.confirmed, row.blocking) == ("absent", True, False)
    assert "confirmed: anchors mamba-backoff do not resolve" in row.reason
    assert row.anchors == []


def test_absent_claim_contradicted_by_the_code():
    """The real 0.23.0 tree presented as 0.19.1: the absent variant is contradicted."""
    tree = releases.release_tree("0.23.0")
    source = sources.source_tree(tree, version="0.19.1")
    row = rows_by_id(check.check(source, series.load(stack.SERIES).patches_of("kv")))["align-backoff"]
    assert row.status == "absent" and row.confirmed is False
    assert "contradicted: resolve_kv_cache_block_sizes (vllm/v1/core/kv_cache_utils.py:593) resolves" in row.reason
    assert row.notes == ["absent variant contradicted: an anchored definition exists"]


def test_an_upstreamed_claim_agrees_with_the_patchs_check():
    row = rows_by_id(check.check(release("0.28.0"), series.load(stack.SERIES).patches_of("kv")))["align-backoff"]
    assert row.status == "upstreamed" and row.variant_kind == "upstreamed" and row.variant == ">=0.28"
    assert row.upstream_check["verdict"] == "upstreamed"
    assert "upstream check:" in row.reason and not row.notes


def test_upstreamed_claim_contradicted_by_the_check():
    """The real 0.23.0 tree presented as 0.28.0: align-backoff's variant says upstreamed,
    its own upstream check finds the old back-off."""
    tree = releases.release_tree("0.23.0")
    source = sources.source_tree(tree, version="0.28.0")
    row = rows_by_id(check.check(source, series.load(stack.SERIES).patches_of("kv")))["align-backoff"]
    assert row.status == "upstreamed"
    assert row.upstream_check["verdict"] == "not-upstreamed"
    assert "the patch's upstream check disagrees" in row.reason
    assert row.notes == ["upstreamed variant contradicted by the patch's upstream check"]


def test_cli_check_release_json(cli):
    res = cli("check", "--vllm", "0.23.0", "--profile", "full", "--json")
    assert res.rc == 0, res.stdout
    doc = json.loads(res.stdout)
    assert doc["schema"] == "patchq.check/1" and doc["ok"] and doc["exit_code"] == 0
    assert doc["vllm"] == {"version": "0.23.0", "kind": "release",
                           "root": str(releases.release_tree("0.23.0")), "dist": "vllm"}
    assert [p["id"] for p in doc["patches"]] == stack.FULL
    assert doc["counts"] == {"applies": 5}
    keys = {"id", "hash", "status", "reason", "blocking", "variant", "variant_kind", "tried_variant",
            "confirmed", "anchors", "upstream_check", "drift", "notes", "level",
            "relations", "upstream_evidence", "threeway", "reviewed", "remedy"}  # threeway, reviewed, remedy: added
    assert all(set(p) == keys for p in doc["patches"])


def test_cli_check_text_and_usage(cli):
    res = cli("check", "--vllm", "0.23.0", "--profile", "kv")
    assert res.rc == 0
    assert "check kv on vllm 0.23.0 (release)" in res.stdout and "applies" in res.stdout
    assert cli("check", "--vllm", "0.23.0").rc == 2  # neither --profile nor --all
    assert cli("check", "--vllm", "0.23.0", "--source", "/tmp", "--all").rc == 2


# ---------------------------------------------------------------------------
# the 0.23.0-only series on later releases: what a user sees before upgrading

FROZEN_EXPECT = {
    # (status, blocking, path of the first location)
    "0.15.1": {
        "fla-shmem": ("applies", False, "vllm/model_executor/layers/fla/ops/utils.py"),
        "prefix-align": ("not-applicable", False, None),  # applies >=0.20.2
        # no variant below 0.20.2: the nearest one applies, but INCConfig differs from 0.23.0 where
        # the patch edits it (three-way: review)
        "inc-hybrid-fp8": ("review", True, "vllm/model_executor/layers/quantization/inc.py"),
        "int8-lmhead": ("not-applicable", False, None),  # applies >=0.17.1
    },
    "0.24.0": {
        "fla-shmem": ("applies", False, "vllm/model_executor/layers/fla/ops/utils.py"),
        # TEXT-FAIL(AST-OK): re-indented into an if-branch; the transform still applies, but the
        # re-indent touches the patch's insertion point (three-way): review
        "unify-kv-page": ("review", True, "vllm/v1/core/kv_cache_utils.py"),
        "prefix-align": ("applies", True, "vllm/v1/core/kv_cache_utils.py"),  # no variant >=0.24
        # quantization/inc.py -> inc/ package; check_quantized branches gone
        "inc-hybrid-fp8": ("conflict", True, "vllm/model_executor/layers/quantization/inc/inc.py"),
        "int8-lmhead": ("applies", False, "vllm/model_executor/layers/logits_processor.py"),
    },
    "0.26.0": {
        "fla-shmem": ("moved", True, "vllm/third_party/flash_linear_attention/ops/utils.py"),
        # upstream's new mamba branch next to the patch's insertion (three-way): review
        "unify-kv-page": ("review", True, "vllm/v1/core/kv_cache_utils.py"),
        # DCP edits elsewhere: the three-way comparison proves them apart
        "prefix-align": ("applies-drifted", True, "vllm/v1/core/kv_cache_utils.py"),
        "inc-hybrid-fp8": ("conflict", True, "vllm/model_executor/layers/quantization/inc/inc.py"),
        "int8-lmhead": ("conflict", True, "vllm/model_executor/layers/logits_processor.py"),  # _apply_head
    },
    "0.33.0": {
        "fla-shmem": ("moved", True, "vllm/third_party/flash_linear_attention/ops/utils.py"),
        # moved to kv_cache_planning, with 0.26.0's mamba branch next to the insertion: review
        "unify-kv-page": ("review", True, "vllm/v1/core/kv_cache_planning.py"),
        "prefix-align": ("conflict", True, "vllm/v1/core/kv_cache_utils.py"),  # rewritten at 0.28.0
        "inc-hybrid-fp8": ("conflict", True, "vllm/model_executor/layers/quantization/inc/inc.py"),
        "int8-lmhead": ("conflict", True, "vllm/model_executor/layers/logits_processor.py"),
    },
}


@pytest.mark.parametrize("version", sorted(FROZEN_EXPECT))
def test_frozen_0_23_series_before_upgrade(version):
    rows = run_check(version, FROZEN)
    for pid, (status, blocking, path) in FROZEN_EXPECT[version].items():
        row = rows[pid]
        assert (row.status, row.blocking) == (status, blocking), (pid, row.reason)
        if path:
            assert row.anchors[0]["path"] == path, pid
        covered = series.load(FROZEN).patch(pid).variant_for(version) is not None
        if status != "not-applicable" and not covered:
            assert row.tried_variant and row.reason.startswith(f"no variant of {pid} covers vllm {version}")
    assert check.exit_code(rows.values()) == (1 if any(v[1] for v in FROZEN_EXPECT[version].values()) else 0)


def test_frozen_reasons_and_drift_diff():
    rows = run_check("0.24.0", FROZEN)
    unify = rows["unify-kv-page"]
    # the re-indent rewrote the scaling the patch's insertion reads (data flow: new_block_size)
    assert ("upstream changed what this patch touches: `new_block_size`: upstream's change at "
            "vllm/v1/core/kv_cache_utils.py:1081-1097" in unify.reason)
    (entry,) = unify.threeway
    assert (entry["base"], entry["base_path"], entry["base_line"], entry["path"], entry["line"]) == (
        "0.23.0", "vllm/v1/core/kv_cache_utils.py", 1029, "vllm/v1/core/kv_cache_utils.py", 1049)
    assert [f["rule"] for f in entry["findings"]] == ["names"]
    assert "+            if new_spec.page_size_bytes != max_page_size:" in entry["view"]
    (drift,) = unify.drift
    assert (drift["base"], drift["base_path"], drift["base_line"], drift["line"]) == (
        "0.23.0", "vllm/v1/core/kv_cache_utils.py", 1029, 1049)
    diff = drift["diff"]
    assert diff.startswith("--- 0.23.0/vllm/v1/core/kv_cache_utils.py:1029 unify_kv_cache_spec_page_size\n"
                           "+++ 0.24.0/vllm/v1/core/kv_cache_utils.py:1049 unify_kv_cache_spec_page_size\n")
    assert "+            if max_page_size % layer_page_size == 0:\n" in diff
    assert "-            new_spec = replace(layer_spec, block_size=new_block_size)\n" in diff
    assert "+                new_spec = replace(layer_spec, block_size=new_block_size)\n" in diff
    inc = rows["inc-hybrid-fp8"]
    assert ("expected at least 2 match(es) of `if not self.check_quantized(weight_bits): ...` in INCConfig, found 0"
            in inc.reason)
    assert inc.tried_variant == "<0.24,>=0.20.2"

    rows = run_check("0.33.0", FROZEN)
    unify = rows["unify-kv-page"]
    assert ("unify_kv_cache_spec_page_size is not in vllm.v1.core.kv_cache_utils any more: found in "
            "vllm/v1/core/kv_cache_planning.py:346") in unify.reason and unify.status == "review"
    assert unify.anchors[0]["moved"] is True
    assert "expected 1 match(es)" in rows["prefix-align"].reason and "found 0" in rows["prefix-align"].reason


# ---------------------------------------------------------------------------
# the drift corpus


@pytest.fixture(scope="module")
def base_tree() -> Path:
    try:
        return releases.release_tree("0.23.0")
    except Exception as exc:
        pytest.skip(f"vllm 0.23.0 tree not available: {exc}")


def build_case(name, base_tree, tmp_path) -> sources.CodeSource:
    root = corpus.build(name, base_tree, tmp_path / name)
    return sources.source_tree(root, version="0.23.0")


@pytest.mark.parametrize("name", corpus.case_names())
def test_drift_corpus(name, base_tree, tmp_path):
    case = corpus.load_case(name)
    source = build_case(name, base_tree, tmp_path)
    assert source.kind == "source" and source.dist_info is None
    rows = rows_by_id(check.check(source, series.load(FROZEN).patches_of("dense")))
    expect = case.get("expect", {})
    for pid, row in rows.items():
        want = expect.get(pid, {"status": "applies"})
        assert row.status == want["status"], (pid, row.reason)
        assert row.blocking == want.get("blocking", row.status in ("conflict", "gone")), pid
        if "path" in want:
            assert row.anchors[0]["path"] == want["path"], pid
        if "qualname" in want:
            assert row.anchors[0]["qualname"] == want["qualname"], pid
        if "line" in want:
            assert row.anchors[0]["line"] == want["line"], pid
        for text in want.get("reason", []):
            assert text in row.reason, (pid, row.reason)
        if "verified" in want:
            assert {a["verified"] for a in row.anchors} == {want["verified"]}, pid
        for text in want.get("diff", []):
            assert any(text in (d.get("diff") or "") for d in row.drift), (pid, row.drift)
        if row.status == "applies":
            assert row.reason.startswith("fingerprints identical to verified vllm"), pid
    assert check.exit_code(rows.values()) == case.get("exit_code", 0)


def test_corpus_never_writes_the_release_cache(base_tree, tmp_path):
    target = base_tree / "vllm/v1/core/kv_cache_utils.py"
    before = target.read_bytes()
    corpus.build("renamed-locals", base_tree, tmp_path / "x")
    assert target.read_bytes() == before
    assert (tmp_path / "x/vllm/v1/core/kv_cache_utils.py").read_bytes() != before


def test_cli_check_source_tree(base_tree, tmp_path, cli):
    root = corpus.build("deleted", base_tree, tmp_path / "deleted")
    res = cli("check", "--source", str(root), "--as-version", "0.23.0", "--profile", "dflash", "--series", FROZEN,
              "--json")
    assert res.rc == 1, res.stdout
    doc = json.loads(res.stdout)
    assert doc["vllm"]["kind"] == "source" and doc["vllm"]["version"] == "0.23.0"
    assert {p["id"]: p["status"] for p in doc["patches"]} == {
        "fla-shmem": "applies", "unify-kv-page": "applies", "prefix-align": "gone"}
    assert not doc["ok"] and doc["counts"] == {"applies": 2, "gone": 1}


def test_check_installed_reads_pristine_copies(site, cli):
    """An installed vLLM that patchq already patched is checked as apply plans it: from
    the journal's pristine copies, so the statuses are those of the pristine release."""
    assert cli("apply", "--profile", "full", "--site-packages", str(site)).rc == 0
    patched = (site / "vllm/v1/core/kv_cache_utils.py").read_text()
    assert "patchq:page-scale:" in patched
    res = cli("check", "--profile", "full", "--site-packages", str(site), "--json")
    assert res.rc == 0, res.stdout
    assert res.json["vllm"]["kind"] == "installed"
    assert {p["id"]: p["status"] for p in res.json["patches"]} == {pid: "applies" for pid in stack.FULL}
    assert all(a["verified"] == "0.23.0" for p in res.json["patches"] for a in p["anchors"])
    assert (site / "vllm/v1/core/kv_cache_utils.py").read_text() == patched  # check writes nothing


def test_rows_classified_in_forked_processes_equal_those_of_one(monkeypatch):
    """A long series is classified in forked processes (issue 25): the same rows, in order."""
    from patchq.compat import check as checking

    monkeypatch.setenv("PATCHQ_VERDICT_CACHE", "0")
    patches = series.load(FROZEN).patches_of("dense")
    source = release("0.33.0")
    monkeypatch.setenv("PATCHQ_CHECK_WORKERS", "1")
    one = [r.to_dict() for r in checking.check(source, patches)]
    monkeypatch.setattr(checking, "PARALLEL_FROM", 1)
    monkeypatch.setenv("PATCHQ_CHECK_WORKERS", "2")
    assert [r.to_dict() for r in checking.check(release("0.33.0"), patches)] == one
