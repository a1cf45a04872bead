"""patchq.authoring.merge: the three-way merge a rebase runs per definition (git merge-file),
and rebase_patch carrying the small series' patch between two small source trees."""

from __future__ import annotations

import shutil

import pytest

from patchq.authoring import merge
from patchq.sentinels import sentinel_comment
from patchq.vllmdist import sources
from testing.small_series import UTILS_PY, write_tree

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git merge-file needs git")

BASE = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n"


def test_merge_file_merges_apart_changes_and_marks_a_conflict():
    ours = BASE.replace("b = 2", "b = 20")
    theirs = BASE.replace("e = 5", "e = 50")
    merged, conflicts = merge.merge_file(ours, BASE, theirs, ("patched", "0.1.0", "0.2.0"))
    assert conflicts == 0 and merged == "a = 1\nb = 20\nc = 3\nd = 4\ne = 50\n"
    merged, conflicts = merge.merge_file(ours, BASE, BASE.replace("b = 2", "b = 200"), ("patched", "0.1.0", "0.2.0"))
    assert conflicts == 1 and "<<<<<<< patched\nb = 20\n" in merged and ">>>>>>> 0.2.0\n" in merged


def test_sentinels_are_stripped_and_line_ranges_spliced():
    text = "x = 1\n" + sentinel_comment("p", "0" * 12) + "\ndef f():\n    pass\n"
    assert merge.strip_sentinels(text) == "x = 1\ndef f():\n    pass\n"
    assert merge.splice_many("1\n2\n3\n4\n", [(2, 3, "two-three\n"), (4, 4, "four\n")]) == "1\ntwo-three\nfour\n"


def test_a_rebase_to_a_release_that_changed_elsewhere_is_clean(small, tmp_path):
    patch = small.series.patch("bump-default")
    old = sources.source_tree(write_tree(tmp_path / "old"), version="0.1.0")
    moved_on = UTILS_PY.replace("        return self.DEFAULT\n", "        return int(self.DEFAULT)\n")
    new = sources.source_tree(write_tree(tmp_path / "new", utils=moved_on), version="0.2.0")
    res = merge.rebase_patch(patch, old, new, tmp_path / "work")
    assert (res.status, res.merge, res.transform) == ("clean", "clean", "carries-forward")
    assert res.target_variant == "edit <0.3,>=0.1" and set(res.fingerprints["default"]) == {"0.1.0", "0.2.0"}
    assert "+    DEFAULT = 101376\n" in res.old_diff and "+    DEFAULT = 101376\n" in res.new_diff
    assert [p.marker for p in res.range_diff] == ["="]


def test_a_rebase_onto_a_conflicting_change_writes_the_conflict_and_nothing_else(small, tmp_path):
    patch = small.series.patch("bump-default")
    old = sources.source_tree(write_tree(tmp_path / "old"), version="0.1.0")
    clash = UTILS_PY.replace("    DEFAULT = 102400\n", "    DEFAULT = 204800\n")
    new = sources.source_tree(write_tree(tmp_path / "new", utils=clash), version="0.2.0")
    res = merge.rebase_patch(patch, old, new, tmp_path / "work")
    assert (res.merge, res.status) == ("conflict", "conflict"), (res.merge, res.status)
    written = sorted(p for p in (tmp_path / "work").rglob("*") if p.is_file())
    assert written and all(p.is_relative_to(merge.unit_dir(tmp_path / "work", "0.2.0", "bump-default"))
                           for p in written)
    assert any("<<<<<<<" in p.read_text() for p in written)


def test_a_patch_with_no_edit_variant_at_the_base_is_skipped(small, tmp_path):
    patch = small.series.patch("bump-default")
    tree = sources.source_tree(write_tree(tmp_path / "t"), version="0.3.0")  # upstreamed there
    res = merge.rebase_patch(patch, tree, tree, tmp_path / "work")
    assert res.status == "skipped" and "is 'upstreamed': nothing to carry" in res.reason


@pytest.mark.wheel
def test_statement_operations_merge_by_structure_where_git_conflicts_on_neighbouring_lines(tmp_path):
    """issue 35, 1c: a guard imported at the top of MediaConnector.fetch_image (0.26.0, after
    the docstring). 0.34.0 rewrote the docstring and the first statement: git merge-file
    conflicts on the lines around the guard, and the rebase conflicted the same way check
    did. The imported operations place it at the top of the body there, keeping all of
    0.34.0's code, and the unit merges by structure."""
    from patchq import series as series_mod
    from patchq.authoring import importer
    from patchq.plan import diffs
    from patchq.vllmdist.sources import release_source

    rel = "vllm/multimodal/media/connector.py"
    text = release_source("0.26.0").read_text(rel)
    at = text.index("    def fetch_image(")
    guard = "        if image_url.startswith(\"file:\"):\n            raise ValueError(\"no local files\")\n\n"
    i = text.index("        image_io = ImageMediaIO(", at)
    root = tmp_path / "series"
    root.mkdir()
    (root / "profiles.toml").write_text("[profiles.default]\npatches = []\n")
    plan = importer.build(diffs.unified(rel, text, text[:i] + guard + text[i:]), "no-file-urls", "0.26.0")
    importer.write_verified(plan, series_mod.load(root), None, False, "the diff")
    patch = series_mod.load(root).patch("no-file-urls")
    res = merge.rebase_patch(patch, release_source("0.26.0"), release_source("0.34.0"), tmp_path / "work")
    (unit,) = res.units
    assert (res.status, res.transform, unit.by_structure, unit.conflicts) == ("clean", "carries-forward", True, 1)
    assert '(e.g. preserving the alpha channel).\n        """\n' + guard + "        image_io = self._image_io(" \
           in unit.merged
    assert not (tmp_path / "work").exists()  # nothing to resolve


# NeMo-RL's import guard of vllm/tool_parsers/utils.py (tests/verdicts/nemo-rl), 0.25.1 -> 0.28.0/0.32.0
@pytest.mark.wheel
def test_a_module_level_patch_merges_its_module(tmp_path):
    from patchq import series
    from patchq.vllmdist.sources import release_source
    from support import REPO

    patch = series.load(REPO / "tests/verdicts/nemo-rl/series").patch("nemo-namespace-tool-import")
    old = release_source("0.25.1")
    # 0.28.0 added an import at the top and helpers further down: the module merges cleanly
    res = merge.rebase_patch(patch, old, release_source("0.28.0"), tmp_path / "work")
    assert (res.status, res.merge, res.transform) == ("clean", "clean", "carries-forward"), res.reason
    (unit,) = res.units
    assert (unit.qualname, unit.base_path, unit.upstream_changed) == ("<module>", "vllm/tool_parsers/utils.py", True)
    assert "+import keyword as _python_keyword\n" not in res.new_diff  # upstream's, not the patch's
    assert "+    from openai.types.responses import NamespaceTool\n" in res.new_diff
    # 0.32.0 added names to the very import the patch rewrites: a conflict, in the module's work file
    res = merge.rebase_patch(patch, old, release_source("0.32.0"), tmp_path / "work")
    assert (res.status, res.merge) == ("conflict", "conflict")
    work = merge.unit_dir(tmp_path / "work", "0.32.0", patch.id) / "module.vllm.tool_parsers.utils.py"
    assert res.units[0].files[0] == str(work)
    assert "<<<<<<< nemo-namespace-tool-import on vllm 0.25.1" in work.read_text()
