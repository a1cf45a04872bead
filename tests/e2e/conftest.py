"""Fixtures of the CLI scenarios."""

from __future__ import annotations

import pytest

from testing import tiny as tiny_world


@pytest.fixture
def tiny(tmp_path) -> dict:
    """The tiny world (:func:`testing.tiny.write`): a one-patch series and a fake site-packages."""
    return tiny_world.write(tmp_path)
