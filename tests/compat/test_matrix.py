"""``patchq matrix``: cells equal per-profile checks, changes, renderings, evidence merge.

Real releases only (0.23.0, 0.24.0, 0.26.0, 0.33.0 from the release cache); the frozen
0.23.0-only series (``tests/drift/series-0.23``) gives a matrix where statuses change.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from patchq.compat import check, matrix, matrix_boot, matrix_render
from patchq import series
from patchq.vllmdist import sources
from patchq.errors import UsageError

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

REPO = Path(__file__).resolve().parents[2]
FROZEN = REPO / "tests" / "drift" / "series-0.23" / "series"


def cells_of(doc, profile, pid):
    return {v: (c["status"], c["blocking"]) for v, c in doc["cells"][profile][pid].items()}


@pytest.fixture(scope="module")
def current_doc():
    return matrix.build(["0.33.0", "0.23.0", "0.26.0"], ["base", "dflash", "dense"], workers=2)


@pytest.fixture(scope="module")
def frozen_doc():
    return matrix.build(["0.23.0", "0.24.0", "0.26.0", "0.33.0"], ["base", "dense"], series_dir=str(FROZEN),
                        workers=2)


def test_cells_equal_a_check_of_each_profile_alone(current_doc):
    doc = current_doc
    assert doc["schema"] == "patchq.matrix/1"
    assert doc["releases"] == ["0.23.0", "0.26.0", "0.33.0"]
    s = series.load()
    for version in doc["releases"]:
        source = sources.release_source(version)
        for profile in ("base", "dflash", "dense"):
            alone = check.check(source, s.patches_of(profile))
            assert list(doc["cells"][profile]) == list(s.profile(profile).patches)
            for row in alone:
                cell = doc["cells"][profile][row.id][version]
                want = row.to_dict()
                assert {k: cell[k] for k in want} == want, (version, profile, row.id)
    assert doc["exit_code"] == 0 and doc["errors"] == {}
    assert doc["timing"]["workers"] == 2 and set(doc["timing"]["per_release_s"]) == set(doc["releases"])


def test_current_series_changes(current_doc):
    doc = current_doc
    assert cells_of(doc, "dense", "prefix-align") == {
        "0.23.0": ("applies", False), "0.26.0": ("applies", False), "0.33.0": ("upstreamed", False)}
    assert doc["first_change"]["dense"] == {
        "fla-shmem": None, "unify-kv-page": None, "prefix-align": "0.33.0",
        "inc-hybrid-fp8": None, "int8-lmhead": None}
    (change,) = doc["changes"]["dflash"]["prefix-align"]
    assert (change["release"], change["from"], change["to"]) == ("0.33.0", "applies", "upstreamed")
    assert all(c["level"] == "source" for per in doc["cells"].values() for row in per.values() for c in row.values())


def test_frozen_series_matrix(frozen_doc):
    doc = frozen_doc
    # docs/drift.md: fla moved at 0.26; unify re-indented at 0.24, moved module at 0.33; prefix
    # back-off rewritten at 0.28; inc restructured at 0.24; int8 call moved at 0.26
    assert doc["first_change"]["dense"] == {
        "fla-shmem": "0.26.0", "unify-kv-page": "0.24.0", "prefix-align": "0.26.0",
        "inc-hybrid-fp8": "0.24.0", "int8-lmhead": "0.26.0"}
    # three-way drift (docs/drift.md): the 0.24.0 re-indent and the 0.26.0 mamba branch touch
    # the patch's insertion point: review (was applies-drifted, blocking for the uncovered range)
    assert cells_of(doc, "dense", "unify-kv-page") == {
        "0.23.0": ("applies", False), "0.24.0": ("review", True),
        "0.26.0": ("review", True), "0.33.0": ("review", True)}
    assert [(c["release"], c["to"]) for c in doc["changes"]["dense"]["prefix-align"]] == [
        ("0.26.0", "applies-drifted"), ("0.33.0", "conflict")]
    assert cells_of(doc, "base", "fla-shmem") == cells_of(doc, "dense", "fla-shmem")
    assert doc["exit_code"] == 1
    blocked = doc["cells"]["dense"]["inc-hybrid-fp8"]["0.24.0"]
    assert blocked["level"] is None and blocked["levels"]["source"]["result"] == "fail"


def test_renderings(frozen_doc, tmp_path):
    paths = matrix.write(frozen_doc, tmp_path)
    assert sorted(p.name for p in paths.values()) == ["matrix.html", "matrix.json", "matrix.md"]
    assert json.loads(paths["json"].read_text()) == json.loads(json.dumps(frozen_doc))

    md = paths["md"].read_text()
    assert "| patch | 0.23.0 | 0.24.0 | 0.26.0 | 0.33.0 | first change |" in md
    # °: applies on a release nobody reviewed (0.24.0 has 0.23.0's fingerprint, not its own record)
    assert "| fla-shmem | applies (src) | applies° (src) | **moved** | **moved** | 0.26.0 |" in md
    assert "| unify-kv-page | applies (src) | **REVIEW** | **REVIEW** | **REVIEW** | 0.24.0 |" in md
    assert "## Blocking cells" in md and "- dense / inc-hybrid-fp8 / 0.24.0: conflict:" in md
    assert "  - 0.26.0: applies → moved: no variant of fla-shmem covers vllm 0.26.0" in md

    page = paths["html"].read_text()
    assert page.startswith("<!doctype html>") and "<style>" in page
    assert "<script" not in page and "<link" not in page
    refs = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert refs and all(r.startswith("#") for r in refs)  # self-contained: in-page links only
    ids = set(re.findall(r' id="([^"]+)"', page))
    assert all(r[1:] in ids for r in refs)  # every cell links to its detail row
    cell = frozen_doc["cells"]["dense"]["int8-lmhead"]["0.26.0"]
    title = matrix_render._e(matrix_render._title(cell))
    assert f'title="{title}"' in page
    assert "expected 1 match(es) of `logits = lm_head.quant_method.apply(" in matrix_render._title(cell)
    assert 'class="blk" style="background:#ffcdd2"' in page  # blocking conflict: red, outlined
    assert "<pre>--- 0.23.0/vllm/v1/core/kv_cache_utils.py:1029 unify_kv_cache_spec_page_size" in page


def test_levels_and_boot_evidence(tmp_path):
    levels = [
        {"release": "0.23.0", "profile": "dense", "patch": "unify-kv-page", "level": "import", "result": "ok",
         "detail": "imported vllm.v1.core.kv_cache_utils"},
        {"release": "0.23.0", "profile": "dense", "patch": "unify-kv-page", "level": "probe", "result": "ok",
         "detail": "{}"},
        {"release": "0.33.0", "profile": "dense", "patch": "int8-lmhead", "level": "import", "result": "fail",
         "detail": "ImportError: x"},
        {"release": "0.33.0", "profile": "pristine", "patch": "unify-kv-page", "level": "probe",
         "result": "fail", "detail": "AssertionError"},
    ]
    boot = [{"release": "0.23.0", "profile": "dense", "result": "ok", "boot_s": 46.0, "error_line": ""},
            {"release": "0.33.0", "profile": "dense", "result": "fail", "boot_s": None,
             "error_line": "AssertionError: block_size must be divisible by hash_block_size"}]
    (tmp_path / "levels.json").write_text(json.dumps({"schema": "patchq.levels/1", "records": levels}))
    boot.append({"release": "0.23.0", "run": "dense-bf16head", "profile": "dense", "result": "fails",
                 "boot_s": 3.0, "error_line": "a variant run of the profile"})
    boot.append({"release": "0.23.0", "run": "neg-unify", "profile": "dflash-minus-unify", "result": "fails"})
    (tmp_path / "boot.json").write_text("".join(json.dumps(r) + "\n" for r in boot))  # JSON Lines
    doc = matrix.build(["0.23.0", "0.33.0"], ["dense"], workers=1,
                       levels=matrix.load_records(tmp_path / "levels.json"),
                       boot=matrix.load_records(tmp_path / "boot.json"))
    cells = doc["cells"]["dense"]
    unify = cells["unify-kv-page"]["0.23.0"]
    assert unify["level"] == "boot" and unify["failed_level"] is None
    assert [unify["levels"][k]["result"] for k in ("source", "import", "probe", "boot")] == ["ok"] * 4
    assert cells["fla-shmem"]["0.23.0"]["level"] == "boot"  # boot covers every applied patch
    int8 = cells["int8-lmhead"]["0.33.0"]  # a failed import level blocks (patchq.probe.merge)
    assert int8["level"] is None and int8["failed_level"] == "import" and int8["blocking"]
    assert int8["status"] == "fails-import" and int8["source_status"] == "applies"
    assert int8["reason"] == "import level failed: ImportError: x" and doc["exit_code"] == 1
    prefix = cells["prefix-align"]["0.33.0"]  # upstreamed: nothing applied, the boot says nothing of it
    assert prefix["status"] == "upstreamed" and "boot" not in prefix["levels"] and prefix["level"] == "source"
    assert cells["unify-kv-page"]["0.33.0"]["pristine_probe"] == {"result": "fail", "detail": "AssertionError"}
    assert doc["boot"]["dense"]["0.33.0"]["error_line"].startswith("AssertionError")
    assert "dflash" not in doc["boot"]  # a negative control of a profile outside the matrix
    assert [r["run"] for r in doc["boot"]["dense"]["0.23.0"]["runs"]] == ["dense", "dense-bf16head"]
    md = matrix_render.markdown(doc)
    assert ("| *boot* | dense ok 46 s<br>✗ dense-bf16head FAILS: a variant run of the profile | "
            "✗ dense FAILS: AssertionError: block_size must be divisible by hash_block_size | |") in md
    assert "| unify-kv-page | applies (boot) | applies (src) |" in md
    page = matrix_render.html(doc)
    assert page.count('<td class="boot boot-fail">') == 2
    assert '<div class="run-fail" title="dense FAILS: AssertionError: block_size must be' in page


BOOT_EVIDENCE = REPO / "lab" / "evidence" / "boot-results.jsonl"


@pytest.fixture(scope="module")
def boot_doc():
    return matrix.build(["0.23.0", "0.26.0"], ["dflash", "dense"], workers=2,
                        boot=matrix.load_records(BOOT_EVIDENCE))


def test_boot_row_carries_every_run(boot_doc):
    """The H200 records of 0.23.0 and 0.26.0 (lab/boot.py): 9 runs a release, 5 under dflash, 2 under dense."""
    texts = {v: [r["text"] for r in e["runs"]] for v, e in boot_doc["boot"]["dflash"].items()}
    assert texts["0.23.0"] == [
        "dflash ok 211 s", "dflash-prefix ok 223 s", "dflash-run (runtime) ok 203 s, site pristine",
        "neg-prefix-align fails as expected: AssertionError: block_size must be divisible by hash_block_size",
        "neg-unify fails as expected: assert new_spec.page_size_bytes == max_page_size"]
    assert texts["0.26.0"] == [
        "dflash ok 136 s", "dflash-prefix ok 147 s", "dflash-run (runtime) ok 127 s, site pristine",
        "neg-prefix-align SERVES, not as expected: without prefix-align no "
        "'block_size must be divisible by hash_block_size' on 0.26.0",
        "neg-unify SERVES, not as expected: without unify-kv-page no 'page_size_bytes == max_page_size' on 0.26.0"]
    e23, e26 = boot_doc["boot"]["dflash"]["0.23.0"], boot_doc["boot"]["dflash"]["0.26.0"]
    assert (e23["primary"], e23["verdict"], e23["boot_s"]) == ("dflash", "ok", 211.2)
    assert (e26["primary"], e26["verdict"], e26["result"]) == ("dflash", "unexpected", "serves")
    neg = {r["run"]: r for r in e26["runs"] if r["control"]}
    assert neg["neg-unify"]["reverted"] == ["unify-kv-page"] and neg["neg-prefix-align"]["reverted"] == ["prefix-align"]
    assert {r["verdict"] for r in neg.values()} == {"serves-unexpectedly"}
    assert "pads Mamba unscaled" in neg["neg-unify"]["note"]  # the variant note of the reverted patch at 0.26
    assert [r["mode"] for r in e26["runs"]] == ["disk", "disk", "runtime", "disk", "disk"]
    dense = {v: [r["text"] for r in e["runs"]] for v, e in boot_doc["boot"]["dense"].items()}
    assert dense == {"0.23.0": ["dense ok 400 s", "dense-bf16head ok 180 s, greedy = dense"],
                     "0.26.0": ["dense ok 282 s", "dense-bf16head ok 202 s, greedy differs from dense at token 22"]}
    for v in ("0.23.0", "0.26.0"):  # the primary run serves: every applied patch reached boot
        assert {pid: c["level"] for pid, c in ((p, boot_doc["cells"]["dflash"][p][v])
                for p in ("fla-shmem", "unify-kv-page", "prefix-align"))} == dict.fromkeys(
            ("fla-shmem", "unify-kv-page", "prefix-align"), "boot")


def test_boot_row_renderings(boot_doc):
    md = matrix_render.markdown(boot_doc)
    row = next(line for line in md.splitlines() if line.startswith("| *boot* | dflash ok 211 s"))
    assert row.split(" | ")[2].split("<br>")[3:] == [
        "! neg-prefix-align SERVES, not as expected: without prefix-align no "
        "'block_size must be divisible by hash_block_size' on 0.26.0",
        "! neg-unify SERVES, not as expected: without unify-kv-page no 'page_size_bytes == max_page_size' on 0.26.0"]
    assert "- 0.26.0 neg-unify: neg-unify SERVES" in md and "An informative result, not a failure" in md
    page = matrix_render.html(boot_doc)
    assert page.count('<td class="boot boot-ok">') == 3 and page.count('<td class="boot boot-unexpected">') == 1
    assert page.count('<div class="run-unexp"') == 2 and "run-fail" not in page.split("<h2>Details")[0].split("</style>")[1]
    assert '<li class="run-unexp">0.26.0 neg-unify: ' in page


def test_boot_row_of_controls_only_has_no_primary():
    recs = [r for r in matrix.load_records(BOOT_EVIDENCE) if r["profile"].startswith("dflash-minus-")]
    entry = matrix_boot.group(recs, ["dflash"])["dflash"]["0.23.0"]
    assert (entry["primary"], entry["result"], entry["verdict"]) == (None, None, "ok")
    assert [r["verdict"] for r in entry["runs"]] == ["fails-as-expected"] * 2
    assert [r["reverted"] for r in entry["runs"]] == [[], []]  # no series given: nothing named


def test_levels_of_another_patch_hash_are_stale():
    cell = {"hash": "aaaaaaaaaaaa", "blocking": False, "status": "applies"}
    matrix.merge_levels(cell, {"import": {"hash": "bbbbbbbbbbbb", "result": "ok", "detail": "x"}}, None)
    assert cell["levels"]["import"]["result"] == "stale"
    assert "re-run patchq probe" in cell["levels"]["import"]["detail"]
    assert (cell["level"], cell["failed_level"]) == ("source", None)


def test_load_records_rejects_garbage(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"records": 3}')
    with pytest.raises(UsageError):
        matrix.load_records(bad)
    with pytest.raises(UsageError):
        matrix.load_records(tmp_path / "missing.json")


def _row(pid, touched=(), blocking=False, compile_failed=False, left_edits=None):
    """A row; a blocking one is a patch the plan failed (no edits left) unless ``left_edits``."""
    return check.PatchCheck(id=pid, hash="", status="applies", blocking=blocking, touched=set(touched),
                            compile_failed=compile_failed,
                            left_edits=(not blocking) if left_edits is None else left_edits)


def test_view_is_exact_rules():
    order = ["a", "b", "c"]
    rows = {"a": _row("a", {"x.py"}), "b": _row("b", {"y.py"}), "c": _row("c", {"x.py"})}
    assert check.view_is_exact(["a", "b"], order, rows)  # prefix, no compile failure
    assert check.view_is_exact(["b"], order, rows)  # shares no file with a or c
    assert not check.view_is_exact(["c"], order, rows)  # a edited x.py before c
    assert not check.view_is_exact(["c", "a"], order, rows)  # not in union order
    rows["c"] = _row("c", {"x.py"}, blocking=True, compile_failed=True)
    assert not check.view_is_exact(["a"], order, rows)  # c's compile failure fails a too
    rows["c"] = _row("c", {"x.py"}, blocking=True)
    assert check.view_is_exact(["a"], order, rows)  # c failed after a without a compile failure: no trace
    rows = {"a": _row("a", {"x.py"}), "b": _row("b", {"x.py"}, blocking=True), "c": _row("c", {"x.py"})}
    assert check.view_is_exact(["a", "c"], order, rows)  # b failed without compile failure: no trace
    rows["b"] = _row("b", {"x.py"}, blocking=True, left_edits=True)  # b blocks (review) but its edits stayed
    assert not check.view_is_exact(["a", "c"], order, rows)


def test_non_prefix_profile_is_planned_alone(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(REPO / "series", root / "series", ignore=shutil.ignore_patterns("__pycache__", "diffs"))
    shutil.copytree(REPO / "anchors", root / "anchors")
    with open(root / "series" / "profiles.toml", "a") as fh:
        fh.write('\n[profiles.backoff-only]\ndescription = "prefix-align alone"\npatches = ["prefix-align"]\n')
    s = series.load(root / "series")
    source = sources.release_source("0.23.0")
    views = check.check_profiles(source, s, ["dense", "backoff-only"])
    order = check.union_order({"dense": list(s.profile("dense").patches), "backoff-only": ["prefix-align"]})
    rows = {r.id: r for r in check.check(source, [s.patch(p) for p in order])}
    # unify-kv-page edits kv_cache_utils.py before prefix-align: a view would not be exact
    assert not check.view_is_exact(["prefix-align"], order, rows)
    alone = check.check(source, [s.patch("prefix-align")])
    assert [r.to_dict() for r in views["backoff-only"]] == [r.to_dict() for r in alone]


def test_cli_matrix(tmp_path, cli):
    out = tmp_path / "m"
    res = cli("matrix", "--releases", "0.23.0,0.33.0", "--profiles", "base,dense", "--out", str(out), "--json")
    assert res.rc == 0, res.stderr
    assert res.json["schema"] == "patchq.matrix/1" and res.json["releases"] == ["0.23.0", "0.33.0"]
    assert {p.name for p in out.iterdir()} == {"matrix.json", "matrix.md", "matrix.html"}
    res = cli("matrix", "--releases", "0.23.0", "--profiles", "nope", "--out", str(out))
    assert res.rc == 2 and "unknown profile" in res.stderr
    res = cli("matrix", "--releases", "0.23.0,>=0.24", "--out", str(out))
    assert res.rc == 2


@pytest.mark.parametrize("breakage, where", [
    (("anchors", "fla-shmem.toml", "[anchors.target\n"), "fla-shmem.toml: "),
    (("series", "fla_shmem.py", "PATCH = patch(\n"), "fla_shmem.py:"),
    (("series", "profiles.toml", None), "profiles.toml: profile base lists 'fla-shmemm', which has no series file"),
])
def test_malformed_series_data_fails_the_whole_matrix_with_exit_2(tmp_path, cli, series_copy, breakage, where):
    """A broken file of the series is exit 2 naming it, as for every other command: never a
    release "not checked" (exit 1) with the reason only in matrix.json."""
    folder, name, text = breakage
    path = series_copy.parent / folder / name
    path.write_text(path.read_text().replace('"fla-shmem"', '"fla-shmemm"', 1) if text is None else text)
    res = cli("matrix", "--releases", "0.23.0,0.26.0", "--profiles", "base", "--series", str(series_copy),
              "--out", str(tmp_path / "m"))
    assert res.rc == 2, res.stdout + res.stderr
    # one error line (a warning of a stale release list may stand before it)
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("patchq: error: ")]
    assert where in line, res.stderr
    assert not (tmp_path / "m" / "matrix.json").exists()
