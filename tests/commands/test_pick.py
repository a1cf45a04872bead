"""patchq.commands.pick: ``--patch``: apply, revert and check chosen patches alone."""

from __future__ import annotations

import pytest

from patchq.commands import pick
from patchq.errors import UsageError
from testing.small_world import UTILS


def test_push_then_pop_one_patch(small):
    pristine = small.utils()
    doc, code = pick.push_pop("apply", small.target, small.series, ["bump-default"])
    assert code == 0 and doc["patch_ids"] == ["bump-default"] and doc["written"] == [UTILS]
    from patchq.commands import status

    assert status.run(str(small.site))[0]["profile"] == "base"  # exactly profile base's patches: recorded as it
    assert "DEFAULT = 101376" in small.utils()
    doc, code = pick.push_pop("revert", small.target, small.series, ["bump-default"])
    assert code == 0 and doc["restored"] == [UTILS] and small.utils() == pristine


def test_check_alone_and_unknown_ids(small):
    doc, code = pick.check(small.target, small.series, ["bump-default"])
    assert code == 0 and doc["patch_ids"] == ["bump-default"] and doc["patches"][0]["status"] == "applies"
    with pytest.raises(UsageError, match="unknown patch.* nope; known: bump-default"):
        pick.chosen(small.series, ["nope"])
    plan = pick.plan_alone(small.target, small.series, ["bump-default"])
    assert plan.ok and list(plan.patched) == [UTILS]
