"""patchq.commands.upgrade: check a profile on the installed or a named release, rebase what
needs it, apply when it is safe (the small world; releases in the layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq.commands import upgrade
from patchq.errors import UsageError
from testing.small_series import UTILS_PY, write_release
from testing.small_world import UTILS


def test_the_installed_release_is_checked_and_the_profile_applied(small):
    doc, code = upgrade.run(small.series, small.target, "base", None, write=False)
    assert code == 0 and doc["ok"] and (doc["profile"], doc["to"], doc["installed"]) == ("base", "0.1.0", "0.1.0")
    assert [(p["id"], p["check"], p["applied"]) for p in doc["patches"]] == [("bump-default", "applies", True)]
    assert doc["apply"]["written"] == [UTILS] and "DEFAULT = 101376" in small.utils()


def test_a_release_not_installed_is_checked_and_nothing_is_applied(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")  # the release a rebase starts from
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.2.0")
    doc, code = upgrade.run(small.series, small.target, "base", "0.2.0", write=False)
    assert code == 0 and doc["to"] == "0.2.0" and doc["apply"] is None and "101376" not in small.utils()
    gone = UTILS_PY.replace("class Backend", "class Renamed")
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.2.1", utils=gone)
    doc, code = upgrade.run(small.series, small.target, "base", "0.2.1", write=False, workdir=str(small.root / "w"))
    (row,) = doc["patches"]
    assert code == 1 and not doc["ok"] and (row["check"], row["blocking"], row["applied"]) == ("gone", True, False)
    assert row["rebase"] == "needs-variant"  # the rebase finds the renamed class by its body
    assert doc["next"]  # says what to do about it


def test_without_a_profile_given_or_applied_it_is_a_usage_error(small):
    with pytest.raises(UsageError):
        upgrade.run(small.series, small.target, None, None, write=False)
    with pytest.raises(UsageError, match="--to 'next'"):
        upgrade.run(small.series, small.target, "base", "next", write=False)


def test_a_patch_check_asks_to_review_is_sent_to_patchq_review_not_to_a_hand_edit(small):
    """Upstream changed what bump-default touches (the installed 0.1.0 differs from the one
    reviewed): check says review, and the next step is patchq review (a fresh user's find:
    upgrade said to change the series by hand)."""
    small.reinstall(small.utils().replace("return self.DEFAULT", "return self.DEFAULT + 1"))
    doc, code = upgrade.run(small.series, small.target, "base", None, write=False)
    (row,) = doc["patches"]
    assert code == 1 and (row["check"], row["blocking"], row["applied"]) == ("review", True, False)
    assert doc["next"][0].startswith("`patchq review bump-default --vllm 0.1.0` shows what upstream changed")
    assert not any("by hand" in step for step in doc["next"]), doc["next"]
