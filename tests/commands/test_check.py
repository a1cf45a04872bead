"""patchq.commands.check: a profile's verdicts on an installed vLLM or a source tree (``patchq.check/1``)."""

from __future__ import annotations

import pytest

from patchq.commands import check
from patchq.errors import UsageError
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_tree
from testing.small_world import UTILS


def test_the_verified_release_applies(small):
    doc, code = check.run(small.target, small.series, "base")
    assert (code, doc["ok"], doc["schema"], doc["counts"]) == (0, True, "patchq.check/1", {"applies": 1})
    (row,) = doc["patches"]
    assert (row["id"], row["status"], row["blocking"], row["reason"]) == (
        "bump-default", "applies", False, "fingerprints identical to verified vllm 0.1.0")
    assert [(a["path"], a["line"], a["verified"]) for a in row["anchors"]] == [(UTILS, 4, "0.1.0")]


def test_upstreamed_and_gone(small, tmp_path):
    tree = write_tree(tmp_path / "tree")
    doc, code = check.run(sources.source_tree(tree, version="0.3.0"), small.series, None)  # None: every patch
    assert code == 0 and [(r["status"], r["blocking"]) for r in doc["patches"]] == [("upstreamed", False)]
    (tree / UTILS).write_text(UTILS_PY.replace("class Backend", "class Renamed"))
    doc, code = check.run(sources.source_tree(tree, version="0.2.0"), small.series, "base")
    assert code == 1 and not doc["ok"] and [(r["status"], r["blocking"]) for r in doc["patches"]] == [("gone", True)]


def test_an_unknown_profile_is_a_usage_error(small):
    with pytest.raises(UsageError, match="unknown profile 'bsae'"):
        check.run(small.target, small.series, "bsae")


def test_a_patch_never_fingerprinted_gets_the_one_remedy_new_names(small):
    """A patch fresh from ``patchq new`` has no fingerprint: check's reason, its next line and
    ``new``'s next line all name ``patchq fingerprint --releases``, never ``review --accept``
    (issue 39: two remedies for one state)."""
    from patchq import report
    from patchq import series as series_mod

    toml = small.root / "anchors" / "bump-default.toml"
    toml.write_text(toml.read_text().split("[anchors.default.fingerprints]")[0])
    doc, code = check.run(small.target, series_mod.load(str(small.series.root)), "base")
    assert code == 0 and doc["patches"][0]["status"] == "applies-drifted"
    remedy = "`patchq fingerprint --patch bump-default --releases 0.1.0`"
    assert remedy in doc["patches"][0]["reason"]
    steps = report.check_next(doc)
    assert steps == [f"{remedy} records vllm 0.1.0, where it applies, as its reviewed release"]
    assert "patchq review" not in report.check_text(doc)


def test_check_of_the_installed_vllm_names_a_newer_release(small):
    """The release list the index gave last (cached; check asks no network) names a release newer
    than the installed one: check says so and how to carry the profile there (issue 39)."""
    import os
    from pathlib import Path

    from patchq import report
    from testing.small_series import write_index

    doc, _ = check.run(small.target, small.series, "base")
    assert doc["newest_release"] is None  # no list cached: nothing said
    write_index(Path(os.environ["PATCHQ_CACHE_DIR"]), ["0.1.0", "0.2.0"])
    doc, code = check.run(small.target, small.series, "base")
    assert code == 0 and doc["newest_release"] == "0.2.0"
    note = ("note: vllm 0.2.0 is out (the newest release the index lists): `patchq upgrade --profile base --to "
            "0.2.0` checks and rebases the profile for it before you install it")
    assert report.check_text(doc).splitlines()[-1] == note and report.check_next(doc) == []  # a note, not a step
    tree_doc, _ = check.run(sources.source_tree(write_tree(small.root / "tree"), version="0.1.0"), small.series, "base")
    assert tree_doc["newest_release"] is None  # only the installed vllm is compared with the index
