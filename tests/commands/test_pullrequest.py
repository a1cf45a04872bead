"""patchq.commands.pullrequest: the pull-request body and commit message of ``patchq upgrade
--commit``, from a real upgrade of the small series to a release where its class was renamed
(the rebase proposes a new variant: a person is needed)."""

from __future__ import annotations

import os
from pathlib import Path

from patchq.commands import pullrequest, upgrade
from testing.small_series import UTILS_PY, write_release


def test_a_rebase_that_needs_a_person_is_said_first_with_its_files(small):
    cache = Path(os.environ["PATCHQ_CACHE_DIR"])
    write_release(cache, "0.1.0")
    write_release(cache, "0.2.1", utils=UTILS_PY.replace("class Backend", "class Renamed"))
    doc, code = upgrade.run(small.series, small.target, "base", "0.2.1", True,
                            workdir=str(small.root / ".patchq-rebase"))
    assert code == 1 and pullrequest.needs_person(doc) == ["bump-default"]
    body = pullrequest.render(doc)
    lines = body.splitlines()
    assert lines[0] == "# vLLM 0.2.1: `patchq upgrade` carried the series (profile base)"
    assert lines[2] == "**A person is needed** for bump-default: see below."
    assert "| bump-default | gone → gone | needs-variant | `.patchq-rebase/0.2.1/bump-default/bump-default.diff` |" \
        in lines
    (row,) = [ln for ln in lines if ln.startswith("| bump-default | **needs-variant** |")]
    assert "`.patchq-rebase/0.2.1/bump-default/" in row  # relative to the repo: the same on every machine
    assert str(small.root) not in body
    assert [ln for ln in lines if ln.startswith("- ")][-1].startswith("- resolve bump-default in .patchq-rebase/0.2.1 ")
    assert pullrequest.commit_message(doc).splitlines() == [
        "patchq upgrade: carry the series to vLLM 0.2.1", "", "bump-default: gone -> gone, rebase needs-variant", "",
        "A person is needed for bump-default (the pull request says why)."]
