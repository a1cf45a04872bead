"""patchq.commands.fingerprint: which releases a run names, and recording or checking a
definition's fingerprint (the small series, its release 0.1.0 in the layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import hashing
from patchq.commands import fingerprint as fp_cmd
from patchq.errors import UsageError
from testing.small_series import UTILS_PY, write_release


def test_only_an_explicit_list_names_releases():
    assert fp_cmd.is_explicit("0.29.0,0.30.0") and fp_cmd.is_explicit("0.29.0")
    assert not fp_cmd.is_explicit(">=0.23") and not fp_cmd.is_explicit(None)


def test_check_passes_on_the_recorded_release_and_record_adds_a_named_one(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.2.0")
    doc, code = fp_cmd.run(small.series, [], None, check=True)
    assert code == 0 and doc["ok"] and doc["releases"] == ["0.1.0"] and doc["changed"] == []
    toml = small.root / "anchors" / "bump-default.toml"
    doc, code = fp_cmd.run(small.series, ["bump-default"], "0.2.0", by="tester")
    assert code == 0 and doc["releases"] == ["0.2.0"] and doc["changed"] == [str(toml)]
    data = hashing.toml_module().loads(toml.read_text())
    fps = data["anchors"]["default"]["fingerprints"]
    assert fps["0.2.0"] == fps["0.1.0"]  # the same tree: the same fingerprint
    assert data["reviews"]["0.2.0"]["by"] == "tester" and data["reviews"]["0.2.0"]["how"] == "fingerprint"


def test_an_out_of_date_record_fails_the_check(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    toml = small.root / "anchors" / "bump-default.toml"
    fp = hashing.toml_module().loads(toml.read_text())["anchors"]["default"]["fingerprints"]["0.1.0"]
    toml.write_text(toml.read_text().replace(fp, "0" * 16))
    doc, code = fp_cmd.run(small.series, [], None, check=True)
    assert code == 1 and not doc["ok"] and doc["changed"] == [str(toml)]
    assert "0" * 16 in toml.read_text()  # a check writes nothing


def test_unknown_patch_and_malformed_range_are_usage_errors(small):
    with pytest.raises(UsageError, match="unknown patch"):
        fp_cmd.run(small.series, ["nope"], None)
    with pytest.raises(UsageError):
        fp_cmd.select_releases(">=banana")


def test_a_named_release_that_check_blocks_is_refused_and_nothing_is_written(small):
    """Naming a release is not a review: on 0.2.0, where ``Backend`` drifted next to the
    patched statement, check says ``review`` (blocking); recording its fingerprint would turn
    that into ``applies`` with nobody having seen the three-way view. Nothing is written,
    not even the unblocked 0.1.1 named beside it, and the next step is ``patchq review``."""
    from patchq.compat import drift

    drift._release_source.cache_clear()
    cache = Path(os.environ["PATCHQ_CACHE_DIR"])
    write_release(cache, "0.1.0")
    write_release(cache, "0.1.1")
    write_release(cache, "0.2.0", utils=UTILS_PY.replace("    DEFAULT = 102400\n",
                                                         "    DEFAULT = 102400\n    LIMIT = DEFAULT * 2\n"))
    toml = small.root / "anchors" / "bump-default.toml"
    before = toml.read_bytes()
    try:
        doc, code = fp_cmd.run(small.series, ["bump-default"], "0.1.1,0.2.0", by="tester")
    finally:
        drift._release_source.cache_clear()
    assert code == 1 and not doc["ok"] and doc["changed"] == [] and toml.read_bytes() == before
    assert list(doc["blocked"]) == ["bump-default"] and doc["blocked"]["bump-default"]["0.2.0"]["status"] == "review"
    assert "0.1.1" not in doc["blocked"]["bump-default"]
    text = fp_cmd.render_text(doc)
    assert text.startswith("nothing recorded: check blocks 1 patch(es) on a named release")
    assert "  bump-default on 0.2.0: review: " in text
    assert "patchq review bump-default --vllm 0.2.0" in text
