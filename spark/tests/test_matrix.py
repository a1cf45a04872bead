"""The Spark series in ``patchq matrix``: how its cells change across releases, and the H200
boot records of its profiles (``lab/evidence/boot-results.jsonl``, ``docs/boot.md``) merged
into the boot row."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchq.compat import matrix, matrix_boot, matrix_render

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

SPARK = Path(__file__).resolve().parents[1]
SERIES = str(SPARK / "series")


def cells_of(doc, profile, pid):
    return {v: (c["status"], c["blocking"]) for v, c in doc["cells"][profile][pid].items()}


@pytest.fixture(scope="module")
def current_doc():
    return matrix.build(["0.33.0", "0.23.0", "0.26.0"], ["base", "dflash", "dense"], series_dir=SERIES, workers=2)


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


BOOT_EVIDENCE = SPARK / "lab" / "evidence" / "boot-results.jsonl"


@pytest.fixture(scope="module")
def boot_doc():
    return matrix.build(["0.23.0", "0.26.0"], ["dflash", "dense"], series_dir=SERIES, workers=2,
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
