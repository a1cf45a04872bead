"""patchq.commands (the package): version_arg, the one parser of a version option."""

from __future__ import annotations

import pytest
from packaging.version import Version

from patchq.commands import version_arg
from patchq.errors import UsageError


def test_a_version_is_parsed_and_stripped():
    assert version_arg(" 0.23.0 ", "--to") == Version("0.23.0")
    assert version_arg("0.33.0rc1", "--to") == Version("0.33.0rc1")


def test_anything_else_is_a_usage_error_naming_the_option():
    with pytest.raises(UsageError, match=r"--from 'latest': not a valid version \(e.g. 0.23.0\)") as err:
        version_arg("latest", "--from")
    assert err.value.exit_code == 2
