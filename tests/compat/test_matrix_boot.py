"""patchq.compat.matrix_boot: boot records (the lab's JSON lines) grouped under their profile
row, each run's verdict and line (records in the lab's shape, written here)."""

from __future__ import annotations

from patchq.compat import matrix_boot

RECORDS = [
    {"profile": "kv", "release": "0.26.0", "result": "serves", "boot_s": 203.4},
    {"profile": "kv", "run": "kv-run", "mode": "run", "site_pristine": True, "release": "0.26.0",
     "result": "ok", "boot_s": 220},
    {"profile": "kv-minus-unify", "run": "neg-unify", "release": "0.26.0", "result": "failed",
     "error_line": "AssertionError: assert new_spec.page_size_bytes == max_page_size",
     "expected": {"result": "fails", "error": "page_size_bytes == max_page_size"}},
    {"profile": "kv-minus-unify", "run": "neg-unify", "release": "0.33.0", "result": "serves",
     "expected": {"result": "fails", "error": "page_size_bytes"}},
    {"profile": "full", "release": "0.26.0", "result": "failed", "error_line": "CUDA error: out of memory"},
    {"profile": "full", "release": "0.26.0", "level": "cpu-boot", "result": "not-cpu-bootable",
     "reason": "no FP8 kernel on CPU"},
    {"profile": "other", "release": "0.26.0", "result": "serves"},
]


def test_rows_and_controls():
    assert matrix_boot.row_profile("kv-minus-unify") == "kv" and matrix_boot.row_profile("full") == "full"
    assert matrix_boot.serves("OK") and matrix_boot.serves("ready") and not matrix_boot.serves("failed")


def test_group_gives_each_row_its_primary_run_and_worst_verdict():
    out = matrix_boot.group(RECORDS, ["kv", "full"])
    assert set(out) == {"kv", "full"}  # "other" is not a profile asked for
    entry = out["kv"]["0.26.0"]
    assert (entry["primary"], entry["result"], entry["boot_s"], entry["verdict"]) == ("kv", "serves", 203.4, "ok")
    assert [r["run"] for r in entry["runs"]] == ["kv", "kv-run", "neg-unify"]  # plain, runtime, controls
    assert [r["verdict"] for r in entry["runs"]] == ["serves", "serves", "fails-as-expected"]
    only_control = out["kv"]["0.33.0"]
    assert only_control["primary"] is None and only_control["result"] is None
    assert only_control["verdict"] == "unexpected" and only_control["runs"][0]["verdict"] == "serves-unexpectedly"
    assert out["full"]["0.26.0"]["verdict"] == "fail"


def test_the_cpu_level_is_its_own_and_never_fails():
    cpu = matrix_boot.group(RECORDS, ["full"], level="cpu-boot")
    (run,) = cpu["full"]["0.26.0"]["runs"]
    assert run["verdict"] == matrix_boot.NOT_CPU and cpu["full"]["0.26.0"]["verdict"] == "ok"
    assert run["text"] == "full not CPU-bootable: no FP8 kernel on CPU"


def test_run_lines():
    entry = matrix_boot.group(RECORDS, ["kv", "full"])
    texts = [r["text"] for r in entry["kv"]["0.26.0"]["runs"]]
    assert texts == ["kv ok 203 s", "kv-run (runtime) ok 220 s, site pristine",
                     "neg-unify fails as expected: AssertionError: assert new_spec.page_size_bytes == max_page_size"]
    assert entry["kv"]["0.33.0"]["runs"][0]["text"] == (
        "neg-unify SERVES, not as expected: without the reverted patch no 'page_size_bytes' on 0.33.0")
    assert entry["full"]["0.26.0"]["runs"][0]["text"] == "full FAILS: CUDA error: out of memory"


def test_a_failure_the_unpatched_control_shares_is_upstreams():
    """cpu-boot 0.30.0 as a CPU lab records it: kv fails, and the unpatched run (no profile,
    nothing applied: a ``run --pristine``) fails with the same error line. The run
    names that control and is not a failure of the patches; another error on the same release,
    or a control that serves, leaves a failure (issue 39: the matrix showed ✗ kv FAILS in red)."""
    error = "TypeError: Cannot inspect kernel parameters for function"
    cpu = {"level": "cpu-boot", "release": "0.30.0"}
    records = [{**cpu, "profile": "kv", "result": "fails", "error_line": error, "patches_applied": ["backend-tiles"]},
               {**cpu, "profile": "base", "result": "fails", "error_line": "RuntimeError: other"},
               {**cpu, "run": "pristine-kv", "profile": None, "patches_applied": [], "result": "fails",
                "error_line": error},
               {**cpu, "profile": "kv", "release": "0.31.0", "result": "fails", "error_line": error},
               {**cpu, "run": "pristine-kv", "profile": None, "release": "0.31.0", "patches_applied": [],
                "result": "serves"}]
    out = matrix_boot.group(records, ["base", "kv"], level="cpu-boot")
    (run,) = out["kv"]["0.30.0"]["runs"]
    assert (run["verdict"], run["upstream_control"]) == ("fails-upstream", "pristine-kv")
    assert run["text"] == (f"kv fails unpatched too: upstream (pristine-kv, nothing applied, fails the same way "
                           f"on 0.30.0: {error})")
    assert out["kv"]["0.30.0"]["verdict"] == "unexpected"  # amber, never the red ✗ of a failure
    assert out["base"]["0.30.0"]["runs"][0]["verdict"] == "fails"  # another error: the patches' failure
    assert out["kv"]["0.31.0"]["runs"][0]["verdict"] == "fails"  # the control served there
    assert set(out) == {"base", "kv"}  # the control is no row of its own
