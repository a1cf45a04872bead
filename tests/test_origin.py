"""patchq.origin: where this patchq was installed from (PEP 610's direct_url.json), for install hints."""

from __future__ import annotations

import json
from importlib import metadata

import pytest

from patchq import origin
from support import REPO


def test_a_checkout_names_itself():
    assert origin.installed_from() == str(REPO)  # these tests run from the checkout
    assert origin.install_hint("py") == f"`py -m pip install {REPO}` (where this patchq was installed from)"


class _Dist:
    def __init__(self, text):
        self.text = text

    def read_text(self, name):
        assert name == "direct_url.json"
        return self.text


@pytest.fixture
def installed(monkeypatch):
    """Pretend this patchq runs from site-packages with ``direct_url.json`` holding the given text."""
    monkeypatch.setattr(origin.os.path, "isfile", lambda p: False)

    def use(text):
        monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(text))
    return use


@pytest.mark.parametrize("record, want", [
    ({"url": "file:///opt/wheels/patchq-0.1.0-py3-none-any.whl", "archive_info": {}},
     "/opt/wheels/patchq-0.1.0-py3-none-any.whl"),
    ({"url": "file:///home/me/my%20checkout", "dir_info": {"editable": True}}, "/home/me/my checkout"),
    ({"url": "https://example.invalid/p.whl", "archive_info": {}}, "https://example.invalid/p.whl"),
    ({"url": "https://github.com/x/patchq", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
     "git+https://github.com/x/patchq@abc123"),
    ({}, None),
])
def test_direct_url_json(installed, record, want):
    installed(json.dumps(record))
    assert origin.installed_from() == want


@pytest.mark.parametrize("text", [None, "not json", "[1, 2]"])
def test_a_missing_or_garbled_record_is_unknown_and_the_hint_says_how_to_build(installed, text):
    installed(text)
    assert origin.installed_from() is None
    assert origin.install_hint() == f"`python -m pip install patchq-X.Y.Z-py3-none-any.whl`; {origin.BUILD}"
