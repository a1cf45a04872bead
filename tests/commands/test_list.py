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


@pytest.mark.parametrize(("old", "new", "line"), [('applies=">=0.1",', 'applies=">=zero",', 16),
                                                  ('variant(">=0.3",', 'variant(">=zero",', 20)])
def test_a_bad_applies_range_names_the_file_line_and_patch(small, old, new, line):
    """list reads plain literals without importing the module: its message names the
    file, the literal's line and the patch as the loader's does."""
    module = small.root / "series" / "bump_default.py"
    module.write_text(module.read_text().replace(old, new))
    with pytest.raises(SeriesError, match=rf"^{module}:{line}: patch bump-default: bad applies-range '>=zero'"):
        list_.run(str(small.root / "series"))
