"""patchq.commands.upstream: ``upstream sync`` builds the releases' history as a git repository,
``upstream log`` shows how each anchored definition changed (two small cached releases)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from patchq.commands import upstream
from patchq.errors import UsageError
from testing.small_series import UTILS_PY, write_release

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the history is a git repository")


@pytest.fixture
def synced(small):
    cache = Path(os.environ["PATCHQ_CACHE_DIR"])
    write_release(cache, "0.1.0")
    write_release(cache, "0.2.0", utils=UTILS_PY.replace("        return self.DEFAULT\n",
                                                         "        return int(self.DEFAULT)\n"))
    return small


def test_sync_then_log(synced):
    doc, code = upstream.sync("0.1.0,0.2.0")
    assert code == 0 and doc["schema"] == "patchq.upstream-sync/1" and doc["kind"] == "releases"
    assert doc["releases"] == ["0.1.0", "0.2.0"] and sorted(doc["added"]) == ["0.1.0", "0.2.0"]
    again, _ = upstream.sync("0.1.0,0.2.0")
    assert again["added"] == [] and sorted(again["skipped"]) == ["0.1.0", "0.2.0"]
    log, code = upstream.log(synced.series, "bump-default")
    (definition,) = log["definitions"]
    assert code == 0 and (definition["qualname"], definition["anchors"]) == ("Backend", ["default"])
    assert definition["releases"] == {"0.1.0": "vllm/ops/utils.py", "0.2.0": "vllm/ops/utils.py"}
    assert len(definition["changes"]) >= 1


def test_usage_errors(synced):
    with pytest.raises(UsageError, match="give --releases SPEC"):
        upstream.sync(None)
