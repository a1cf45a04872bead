"""patchq.commands.list_: the series' profiles and patches from their declarations (``patchq.list/1``)."""

from __future__ import annotations

import pytest

from patchq.commands import list_
from patchq.errors import SeriesError


def test_profiles_and_patches(small):
    doc, code = list_.run(str(small.series.root))
    assert code == 0 and doc["schema"] == "patchq.list/1"
    assert doc["profiles"] == [{"name": "base", "description": "the one patch", "patches": ["bump-default"]},
                               {"name": "none", "description": "nothing", "patches": []}]
    (row,) = doc["patches"]
    assert row["id"] == "bump-default" and row["summary"] == "Backend.DEFAULT becomes 101376"


def test_a_profile_naming_an_unknown_patch_is_a_series_error(small):
    (small.series.root / "profiles.toml").write_text('[profiles.bad]\npatches = ["nope"]\n')
    with pytest.raises(SeriesError, match=r"profile 'bad' names unknown patch\(es\) nope"):
        list_.run(str(small.series.root))
