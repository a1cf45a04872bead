"""patchq.probe.merge: a failed import or probe level blocks a cell (fails-import, fails-probe);
not probeable, skipped and stale records neither pass nor fail."""

from __future__ import annotations

import pytest

from patchq.errors import UsageError
from patchq.probe import merge


def _rec(profile, patch, level, result, detail=""):
    return {"release": "0.34.0", "profile": profile, "patch": patch, "level": level, "result": result,
            "detail": detail}


def test_failure_names_the_shallowest_failed_level():
    assert merge.failure({"import": {"result": "ok"}, "probe": {"result": "fail", "detail": "case x: E"}}) == \
        ("fails-probe", "probe level failed: case x: E")
    assert merge.failure({"import": {"result": "fail", "detail": "NameError"}})[0] == "fails-import"
    for neutral in ("skip", "stale", "not-probeable"):
        assert merge.failure({"import": {"result": neutral}, "probe": {"result": neutral}}) is None


def test_block_keeps_the_source_status():
    row = {"id": "p", "status": "applies", "reason": "clean", "blocking": False}
    merge.block(row, {"import": {"result": "ok"}, "probe": {"result": "fail", "detail": "case a: boom"}})
    assert row == {"id": "p", "status": "fails-probe", "reason": "probe level failed: case a: boom",
                   "blocking": True, "source_status": "applies"}


def test_cells_sum_the_records_pristine_aside():
    recs = [_rec("full", "a", "import", "ok"), _rec("full", "a", "probe", "ok"),
            _rec("full", "b", "import", "fail", "x"), _rec("full", "b", "probe", "skip"),
            _rec("full", "c", "import", "not-probeable"), _rec("full", "c", "probe", "not-probeable"),
            _rec("pristine", "a", "probe", "fail")]
    got = {c["patch"]: (c["status"], c["blocking"]) for c in merge.cells(recs)}
    assert got == {"a": ("probe", False), "b": ("fails-import", True), "c": ("not-probeable", False)}


def test_deepen_check_blocks_and_recounts():
    doc = {"ok": True, "exit_code": 0, "counts": {"applies": 2}, "patches": [
        {"id": "a", "status": "applies", "reason": "", "blocking": False},
        {"id": "b", "status": "applies", "reason": "", "blocking": False}]}
    merge.deepen_check(doc, [_rec("full", "a", "import", "ok"), _rec("full", "a", "probe", "ok"),
                             _rec("full", "b", "import", "ok"), _rec("full", "b", "probe", "fail", "case z: E")],
                       {"a": "full", "b": "full"}, None)
    assert doc["counts"] == {"applies": 1, "fails-probe": 1} and doc["exit_code"] == 1 and not doc["ok"]
    assert doc["patches"][0]["levels"]["probe"]["result"] == "ok" and doc["probe"] == {"probeable": True,
                                                                                         "why": None}


def test_level_option():
    assert merge.check_level(None) == "source" and merge.check_level("probe") == "probe"
    with pytest.raises(UsageError, match="use one of source, probe"):
        merge.check_level("boot")
