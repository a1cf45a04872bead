"""patchq.commands.fingerprint: which releases a run names, and recording or checking a
definition's fingerprint (the small series, its release 0.1.0 in the layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import hashing
from patchq.commands import fingerprint as fp_cmd
from patchq.errors import UsageError
from testing.small_series import write_release


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
