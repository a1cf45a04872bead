"""``patchq matrix``: cells equal per-profile checks, changes, renderings, evidence merge.

Real releases only (0.23.0, 0.24.0, 0.26.0, 0.28.0, 0.33.0 from the release cache); the frozen
0.23.0-only series (``tests/drift/series-0.23``) gives a matrix where statuses change, the
stack fixture (``testing/stack.py``) the levels and boot evidence merged into its cells.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from patchq import series
from patchq.compat import check, matrix, matrix_render
from patchq.errors import UsageError
from patchq.vllmdist import sources
from testing import stack

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

REPO = Path(__file__).resolve().parents[2]
FROZEN = REPO / "tests" / "drift" / "series-0.23" / "series"


def cells_of(doc, profile, pid):
    return {v: (c["status"], c["blocking"]) for v, c in doc["cells"][profile][pid].items()}


@pytest.fixture(scope="module")
def current_doc():
    return matrix.build(["0.33.0", "0.23.0", "0.26.0"], ["base", "dflash", "dense"], series_dir=str(FROZEN),
                        workers=2)


@pytest.fixture(scope="module")
def frozen_doc():
    return matrix.build(["0.23.0", "0.24.0", "0.26.0", "0.33.0"], ["base", "dense"], series_dir=str(FROZEN),
                        workers=2)


def test_cells_equal_a_check_of_each_profile_alone(current_doc):
    doc = current_doc
    assert doc["schema"] == "patchq.matrix/1"
    assert doc["releases"] == ["0.23.0", "0.26.0", "0.33.0"]
    s = series.load(FROZEN)
    for version in doc["releases"]:
        source = sources.release_source(version)
        for profile in ("base", "dflash", "dense"):
            alone = check.check(source, s.patches_of(profile))
            assert list(doc["cells"][profile]) == list(s.profile(profile).patches)
            for row in alone:
                cell = doc["cells"][profile][row.id][version]
                want = row.to_dict()
                assert {k: cell[k] for k in want} == want, (version, profile, row.id)
    assert doc["exit_code"] == 1 and doc["errors"] == {}  # the frozen series blocks on 0.26.0 and 0.33.0
    assert doc["timing"]["workers"] == 2 and set(doc["timing"]["per_release_s"]) == set(doc["releases"])


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
    """Records of the stack fixture's full profile (import, probe, boot, as a lab writes them)
    merged into its cells: 0.23.0 applies everywhere, 0.24.0 applies head-gemv (its import
    fails) and backend-tiles (its pristine probe fails), 0.28.0 has align-backoff upstream."""
    levels = [
        {"release": "0.23.0", "profile": "full", "patch": "page-scale", "level": "import", "result": "ok",
         "detail": "imported vllm.v1.core.kv_cache_utils"},
        {"release": "0.23.0", "profile": "full", "patch": "page-scale", "level": "probe", "result": "ok",
         "detail": "{}"},
        {"release": "0.24.0", "profile": "full", "patch": "head-gemv", "level": "import", "result": "fail",
         "detail": "ImportError: x"},
        {"release": "0.24.0", "profile": "pristine", "patch": "backend-tiles", "level": "probe",
         "result": "fail", "detail": "AssertionError"},
    ]
    boot = [{"release": "0.23.0", "profile": "full", "result": "ok", "boot_s": 46.0, "error_line": ""},
            {"release": "0.28.0", "profile": "full", "result": "fail", "boot_s": None,
             "error_line": "AssertionError: block_size must be divisible by hash_block_size"}]
    (tmp_path / "levels.json").write_text(json.dumps({"schema": "patchq.levels/1", "records": levels}))
    boot.append({"release": "0.23.0", "run": "full-bf16head", "profile": "full", "result": "fails",
                 "boot_s": 3.0, "error_line": "a variant run of the profile"})
    boot.append({"release": "0.23.0", "run": "neg-page", "profile": "kv-minus-page", "result": "fails"})
    (tmp_path / "boot.json").write_text("".join(json.dumps(r) + "\n" for r in boot))  # JSON Lines
    doc = matrix.build(["0.23.0", "0.24.0", "0.28.0"], ["full"], workers=1, series_dir=str(stack.SERIES),
                       levels=matrix.load_records(tmp_path / "levels.json"),
                       boot=matrix.load_records(tmp_path / "boot.json"))
    cells = doc["cells"]["full"]
    page = cells["page-scale"]["0.23.0"]
    assert page["level"] == "boot" and page["failed_level"] is None
    assert [page["levels"][k]["result"] for k in ("source", "import", "probe", "boot")] == ["ok"] * 4
    assert cells["backend-tiles"]["0.23.0"]["level"] == "boot"  # boot covers every applied patch
    head = cells["head-gemv"]["0.24.0"]
    # a failed import level blocks (patchq.probe.merge): the source verdict is kept beside it
    assert head["status"] == "fails-import" and head["source_status"] == "applies" and head["blocking"]
    assert head["level"] is None and head["failed_level"] == "import" and doc["exit_code"] == 1
    align = cells["align-backoff"]["0.28.0"]  # upstreamed: nothing applied, the boot says nothing of it
    assert align["status"] == "upstreamed" and "boot" not in align["levels"] and align["level"] == "source"
    assert cells["backend-tiles"]["0.24.0"]["pristine_probe"] == {"result": "fail", "detail": "AssertionError"}
    assert doc["boot"]["full"]["0.28.0"]["error_line"].startswith("AssertionError")
    assert "kv" not in doc["boot"]  # a negative control of a profile outside the matrix
    assert [r["run"] for r in doc["boot"]["full"]["0.23.0"]["runs"]] == ["full", "full-bf16head"]
    md = matrix_render.markdown(doc)
    assert ("| *boot* | full ok 46 s<br>✗ full-bf16head FAILS: a variant run of the profile |  | "
            "✗ full FAILS: AssertionError: block_size must be divisible by hash_block_size | |") in md
    assert "| page-scale | applies (boot) |" in md
    page = matrix_render.html(doc)
    assert page.count('<td class="boot boot-fail">') == 2
    assert '<div class="run-fail" title="full FAILS: AssertionError: block_size must be' in page


def test_levels_of_another_patch_hash_are_stale():
    cell = {"hash": "aaaaaaaaaaaa", "blocking": False, "status": "applies"}
    matrix.merge_levels(cell, {"import": {"hash": "bbbbbbbbbbbb", "result": "ok", "detail": "x"}}, None)
    assert cell["levels"]["import"]["result"] == "stale"
    assert "series has aaaaaaaaaaaa: re-run patchq probe" in cell["levels"]["import"]["detail"]
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
    sdir = stack.copy(tmp_path / "project")
    with open(sdir / "profiles.toml", "a") as fh:
        fh.write('\n[profiles.backoff-only]\ndescription = "align-backoff alone"\npatches = ["align-backoff"]\n')
    s = series.load(sdir)
    source = sources.release_source("0.23.0")
    views = check.check_profiles(source, s, ["full", "backoff-only"])
    order = check.union_order({"full": list(s.profile("full").patches), "backoff-only": ["align-backoff"]})
    rows = {r.id: r for r in check.check(source, [s.patch(p) for p in order])}
    # page-scale edits kv_cache_utils.py before align-backoff: a view would not be exact
    assert not check.view_is_exact(["align-backoff"], order, rows)
    alone = check.check(source, [s.patch("align-backoff")])
    assert [r.to_dict() for r in views["backoff-only"]] == [r.to_dict() for r in alone]


def test_cli_matrix(tmp_path, cli):
    out = tmp_path / "m"
    res = cli("matrix", "--releases", "0.23.0,0.24.0", "--profiles", "base", "--out", str(out), "--json")
    assert res.rc == 0, res.stderr
    assert res.json["schema"] == "patchq.matrix/1" and res.json["releases"] == ["0.23.0", "0.24.0"]
    assert {p.name for p in out.iterdir()} == {"matrix.json", "matrix.md", "matrix.html"}
    res = cli("matrix", "--releases", "0.23.0", "--profiles", "nope", "--out", str(out))
    assert res.rc == 2 and "unknown profile" in res.stderr
    res = cli("matrix", "--releases", "0.23.0,>=0.24", "--out", str(out))
    assert res.rc == 2


@pytest.mark.parametrize("breakage, where", [
    (("anchors", "backend-tiles.toml", "[anchors.target\n"), "backend-tiles.toml: "),
    (("series", "backend_tiles.py", "PATCH = patch(\n"), "backend_tiles.py:"),
    (("series", "profiles.toml", None), "profiles.toml: profile base lists 'backend-tilesx', which has no series file"),
])
def test_malformed_series_data_fails_the_whole_matrix_with_exit_2(tmp_path, cli, series_copy, breakage, where):
    """A broken file of the series is exit 2 naming it, as for every other command: never a
    release "not checked" (exit 1) with the reason only in matrix.json."""
    folder, name, text = breakage
    path = series_copy.parent / folder / name
    path.write_text(path.read_text().replace('"backend-tiles"', '"backend-tilesx"', 1) if text is None else text)
    res = cli("matrix", "--releases", "0.23.0,0.26.0", "--profiles", "base", "--series", str(series_copy),
              "--out", str(tmp_path / "m"))
    assert res.rc == 2, res.stdout + res.stderr
    # one error line (a warning of a stale release list may stand before it)
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("patchq: error: ")]
    assert where in line, res.stderr
    assert not (tmp_path / "m" / "matrix.json").exists()
