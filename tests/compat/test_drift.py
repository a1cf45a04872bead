"""patchq.compat.drift: recorded fingerprints, the nearest verified release and the drift diff
against it, on the small series with its release in an offline cache of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patchq import series as S
from patchq.compat import drift
from patchq.model import AnchorSpec, Patch, Variant
from patchq.plan import anchors as A
from patchq.plan import engine
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_release, write_series, write_tree

REL = "vllm/ops/utils.py"


@pytest.fixture(autouse=True)
def _fresh_release_memo():
    drift._release_source.cache_clear()  # memoized per process: another test's cache must not leak in
    yield
    drift._release_source.cache_clear()


def _patch(**fps: dict[str, str]) -> Patch:
    anchors = {aid: AnchorSpec(id=aid, module="vllm.ops.utils", qualname="Backend", node=None, fingerprints=fp)
               for aid, fp in fps.items()}
    return Patch(id="p", summary="", why="", applies=SpecifierSet(">=0"),
                 variants=(Variant(SpecifierSet(">=0"), edits={}),), anchors=anchors)


def test_fingerprints_of_a_definition_merge_across_its_anchors():
    patch = _patch(old={"0.1.0": "aaaa"}, new={"0.2.0": "bbbb", "0.3.0": "aaaa"})
    assert drift.recorded_fingerprints(patch, "Backend") == {"0.1.0": "aaaa", "0.2.0": "bbbb", "0.3.0": "aaaa"}
    assert drift.recorded_fingerprints(patch, "Other") == {}
    assert drift.verified_release(patch, "Backend", "aaaa", Version("0.2.5")) == "0.1.0"
    assert drift.verified_release(patch, "Backend", "aaaa", Version("0.4")) == "0.3.0"
    assert drift.verified_release(patch, "Backend", "cccc", Version("0.4")) is None


@pytest.mark.parametrize("version, want", [("0.2.0", "0.2.0"), ("0.2.9", "0.2.0"), ("0.0.1", "0.1.0"),
                                           ("9.0", "0.10.0")])
def test_nearest_verified_is_the_newest_at_or_below_else_the_oldest_above(version, want):
    assert drift.nearest_verified(["0.10.0", "0.1.0", "0.2.0"], Version(version)) == want
    assert drift.nearest_verified([], Version(version)) is None


def test_the_drift_entry_is_the_definitions_diff_from_the_verified_release(tmp_path):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")  # the layer's own empty cache
    fp = A.fingerprint_ast(A.ast_index(UTILS_PY)["Backend"][0])
    patch = S.load(write_series(tmp_path, fingerprint=fp)).patch("bump-default")
    tree = write_tree(tmp_path / "tree")
    (tree / REL).write_text(UTILS_PY.replace("        return self.DEFAULT\n", "        return self.DEFAULT * 2\n"))
    target = sources.source_tree(tree, version="0.2.0")
    (result,) = engine.plan(target, [patch]).results
    (anchor,) = result.anchors
    assert anchor.verified is None and anchor.fingerprint != fp  # drifted
    known = drift.recorded_fingerprints(patch, "Backend")
    entry = drift.drift_entry(patch.anchors["default"], anchor, target, (tree / REL).read_text(), known)
    assert (entry["base"], entry["base_path"], entry["base_line"], entry["note"]) == ("0.1.0", REL, 4, "")
    assert entry["diff"].splitlines()[:2] == [f"--- 0.1.0/{REL}:4 Backend", f"+++ 0.2.0/{REL}:4 Backend"]
    assert "-        return self.DEFAULT\n+        return self.DEFAULT * 2\n" in entry["diff"]


def test_without_a_record_or_a_cached_release_the_entry_says_why(tmp_path):
    patch = S.load(write_series(tmp_path)).patch("bump-default")
    tree = write_tree(tmp_path / "tree")
    target = sources.source_tree(tree, version="0.2.0")
    (anchor,) = engine.plan(target, [patch]).results[0].anchors
    spec, text = patch.anchors["default"], (tree / REL).read_text()
    assert drift.drift_entry(spec, anchor, target, text, [])["note"] == \
        "no verified release recorded for Backend (anchor default) in anchors/"
    entry = drift.drift_entry(spec, anchor, target, text, ["0.1.0"])
    assert (entry["base"], entry["diff"], entry["note"]) == (
        "0.1.0", None, "vllm 0.1.0 is not in patchq's release cache: no diff")


def test_module_level_anchors_of_two_files_keep_their_own_fingerprints():
    # one patch, a module-level anchor in each of two files, both recorded on 0.33.0: each
    # file is verified by its own record (merged by qualname, the second hid the first)
    anchors = {aid: AnchorSpec(id=aid, module=mod, qualname="<module>", fingerprints={"0.33.0": fp})
               for aid, mod, fp in (("a", "vllm.logger", "aaaa"), ("b", "vllm.utils.network_utils", "bbbb"))}
    patch = Patch(id="p", summary="", why="", applies=SpecifierSet(">=0"),
                  variants=(Variant(SpecifierSet(">=0"), edits={}),), anchors=anchors)
    assert drift.recorded_fingerprints(patch, "<module>", "vllm/logger.py") == {"0.33.0": "aaaa"}
    assert drift.recorded_fingerprints(patch, "<module>", "vllm/utils/network_utils/__init__.py") == {"0.33.0": "bbbb"}
    v = Version("0.33.0")
    assert drift.verified_release(patch, "<module>", "aaaa", v, "vllm/logger.py") == "0.33.0"
    assert drift.verified_release(patch, "<module>", "aaaa", v, "vllm/utils/network_utils.py") is None


@pytest.mark.parametrize("how", ["file-removed", "another-release"])
def test_a_damaged_reference_release_is_a_cache_error_never_a_verdict(tmp_path, how):
    """issue 38 (low): a check concurrent with `cache prune --keep 0` gave a different verdict: a
    reference release damaged under it read as "not in the cache". A damaged cached reference
    that cannot be fetched again (offline) is a CacheError (exit 3), whoever reads it."""
    import shutil

    from patchq.compat import check
    from patchq.errors import CacheError

    cache = Path(os.environ["PATCHQ_CACHE_DIR"])
    base = write_release(cache, "0.1.0")
    fp = A.fingerprint_ast(A.ast_index(UTILS_PY)["Backend"][0])
    patch = S.load(write_series(tmp_path, fingerprint=fp)).patch("bump-default")
    tree = write_tree(tmp_path / "tree")
    (tree / REL).write_text(UTILS_PY.replace("        return self.DEFAULT\n", "        return self.DEFAULT * 2\n"))
    target = sources.source_tree(tree, version="0.2.0")
    (row,) = check.check(target, [patch])
    assert row.status == "applies-drifted" and row.drift[0]["base"] == "0.1.0" and row.drift[0]["diff"]
    drift._release_source.cache_clear()
    if how == "file-removed":
        (base / REL).unlink()
    else:
        other = write_release(tmp_path / "other", "0.0.9")
        shutil.rmtree(base)
        shutil.copytree(other, base)
    with pytest.raises(CacheError, match="cache clean"):
        check.check(sources.source_tree(tree, version="0.2.0"), [patch])
