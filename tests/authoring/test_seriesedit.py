"""Splitting a variant's range where rebase or release-check starts a new variant."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patchq.authoring.seriesedit import _split_range


@pytest.mark.parametrize("old,at,capped,new", [
    (">=0.23.0", "0.26.0", ">=0.23.0,<0.26.0", ">=0.26.0"),
    ("", "0.26.0", "<0.26.0", ">=0.26.0"),
    # a rebase to an older release than a later variant: the new one ends where the old did
    (">=0.23.0,<0.33.0", "0.30.0", ">=0.23.0,<0.30.0", ">=0.30.0,<0.33.0"),
    # the old range already ends at or before the cut: kept as it is, nothing redundant
    (">=0.15,<0.24", "0.24.0", ">=0.15,<0.24", ">=0.24.0"),
    (">=0.23.0,<0.29.0", "0.30.0", ">=0.23.0,<0.29.0", ">=0.30.0"),
    (">=0.23,<=0.33.0", "0.33.0", ">=0.23,<0.33.0", ">=0.33.0,<=0.33.0"),
])
def test_split_range(old, at, capped, new):
    assert _split_range(old, at) == (capped, new)
    # never an overlap, and the cut release is the new variant's
    cut = Version(at)
    assert cut not in SpecifierSet(capped) and cut in SpecifierSet(new)
    for v in ("0.15.1", "0.20.2", "0.23.0", "0.24.0", "0.26.0", "0.29.0", "0.30.0", "0.32.0", "0.33.0", "0.34.0"):
        assert not (Version(v) in SpecifierSet(capped) and Version(v) in SpecifierSet(new)), v
