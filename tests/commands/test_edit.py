"""patchq.commands.edit: ``patchq edit`` prepares a working copy, ``patchq record`` turns the edit
into an anchored patch of the series (the small world; its release 0.1.0 in the layer's own
cache, where record verifies the new patch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.commands import edit
from patchq.errors import UsageError
from patchq.plan import engine
from testing.small_series import write_release
from testing.small_world import UTILS


@pytest.fixture
def world(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    return small


def test_edit_then_record_makes_a_patch_that_applies(world):
    doc, code = edit.edit(world.series, world.target, "double-get", [UTILS], in_place=False)
    assert code == 0 and doc["mode"] == "copy" and [f["path"] for f in doc["files"]] == [UTILS]
    copy = Path(doc["files"][0]["edit"])
    assert copy.read_text() == world.utils() and doc["files"][0]["base"] == "pristine"
    assert edit.render_edit(doc).splitlines()[-1] == "then: patchq record double-get"
    copy.write_text(copy.read_text().replace("        return self.DEFAULT\n", "        return self.DEFAULT * 2\n"))
    rec, code = edit.record(world.series, world.target, "double-get", [], profile=None, apply=False)
    assert code == 0 and rec["profile"] == "default" and rec["profile_created"] and rec["added_to_profile"]
    assert "+        return self.DEFAULT * 2\n" in rec["diff"] and not Path(doc["dir"]).exists()
    loaded = series_mod.load(world.series.root)
    assert loaded.profile("default").patches == ("double-get",)
    (result,) = engine.plan(world.target, [loaded.patch("double-get")]).results
    assert result.status == engine.OK and result.anchors[0].qualname == "Backend.get"
    assert world.utils().count("* 2") == 0  # record did not apply (apply=False)


def test_refusals(world):
    with pytest.raises(UsageError, match="patch brand-new is new: name the file"):
        edit.edit(world.series, world.target, "brand-new", [], in_place=False)
    doc, _ = edit.edit(world.series, world.target, "unchanged", [UTILS], in_place=False)
    with pytest.raises(UsageError, match="nothing changed in vllm/ops/utils.py"):
        edit.record(world.series, world.target, "unchanged", [], profile=None, apply=False)
    with pytest.raises(UsageError, match="use kebab-case"):
        edit.edit(world.series, world.target, "Not_An_Id", [UTILS], in_place=False)


def test_editing_an_existing_patch_starts_from_its_result(world):
    doc, code = edit.edit(world.series, world.target, "bump-default", [], in_place=False)
    (row,) = doc["files"]
    assert code == 0 and row["base"] == "patched" and "DEFAULT = 101376" in Path(row["edit"]).read_text()
    assert "# patchq:" not in Path(row["edit"]).read_text()  # sentinels are patchq's, not the author's


def _installed(world, version: str):
    """vLLM ``version`` of the small world, installed beside it and cached as a release."""
    from patchq.vllmdist import sources
    from testing.small_series import write_site

    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), version)
    return sources.installed(write_site(world.root.parent / f"site-{version}", version))


def _refine(world, target, old: str, new: str, patch_id: str = "bump-default"):
    """``patchq edit`` of ``patch_id`` on ``target``, ``old`` -> ``new`` in the copy, then ``record``."""
    series = series_mod.load(world.series.root)
    doc, _ = edit.edit(series, target, patch_id, [], in_place=False)
    copy = Path(doc["files"][0]["edit"])
    assert old in copy.read_text(), copy.read_text()
    copy.write_text(copy.read_text().replace(old, new))
    return edit.record(series, target, patch_id, [], profile=None, apply=False)


def _result(world, version: str) -> str:
    from patchq.vllmdist.sources import release_source

    loaded = series_mod.load(world.series.root)
    plan = engine.plan(release_source(version), [loaded.patch("bump-default")])
    assert plan.results[0].status == engine.OK, plan.results[0].reason
    return plan.patched[UTILS]


def test_refining_inside_a_variant_adds_a_variant_from_that_release(world):
    """bump-default's edit variant covers >=0.1,<0.3; refined on 0.2.0 it keeps 0.1.x as it
    was and gets a new variant from 0.2.0 on, fingerprinted on 0.2.0 only."""
    target = _installed(world, "0.2.0")
    rec, code = _refine(world, target, "DEFAULT = 101376", "DEFAULT = 101377")
    assert code == 0 and rec["variant"] == {"action": "added", "range": ">=0.2.0,<0.3",
                                            "capped": {"from": ">=0.1,<0.3", "to": ">=0.1,<0.2.0"}}
    loaded = series_mod.load(world.series.root).patch("bump-default")
    assert [(str(v.applies), v.kind) for v in loaded.variants] == [
        ("<0.2.0,>=0.1", "edit"), ("<0.3,>=0.2.0", "edit"), (">=0.3", "upstreamed")]
    (new_anchor,) = loaded.variants[1].edits
    assert rec["import"]["anchors"][0]["id"] == new_anchor == "backend-0-2-0"
    assert dict(loaded.anchors[new_anchor].fingerprints) == {"0.2.0": rec["import"]["anchors"][0]["fingerprint"]}
    assert list(loaded.anchors["default"].fingerprints) == ["0.1.0"]  # what it had
    assert "DEFAULT = 101377" in _result(world, "0.2.0") and "DEFAULT = 101376" in _result(world, "0.1.0")
    # refined again on 0.2.0: the variant that starts there gets the new operations in place
    module = Path(loaded.source_file)
    text = module.read_text()
    rec, code = _refine(world, target, "DEFAULT = 101377", "DEFAULT = 101378")
    assert code == 0 and rec["variant"] == {"action": "edits-replaced", "range": ">=0.2.0,<0.3", "capped": None}
    assert module.read_text() == text.replace("DEFAULT = 101377", "DEFAULT = 101378")
    assert "DEFAULT = 101378" in _result(world, "0.2.0") and "DEFAULT = 101376" in _result(world, "0.1.0")


def test_refining_where_a_hand_written_variant_starts_gives_it_new_edits(world):
    """Refined on 0.1.0, where bump-default's hand-written edit variant starts: that variant
    gets statement operations; the later variant and the applies-range stay."""
    rec, code = _refine(world, world.target, "DEFAULT = 101376", "DEFAULT = 101379")
    assert code == 0 and rec["variant"] == {"action": "edits-replaced", "range": ">=0.1,<0.3", "capped": None}
    loaded = series_mod.load(world.series.root).patch("bump-default")
    assert [str(v.applies) for v in loaded.variants] == ["<0.3,>=0.1", ">=0.3"] and str(loaded.applies) == ">=0.1"
    assert "DEFAULT = 101379" in _result(world, "0.1.0")
    assert "OPS_0_1_0 = {" in Path(loaded.source_file).read_text()


def test_refining_a_patch_recorded_on_this_release_replaces_it(world):
    doc, _ = edit.edit(world.series, world.target, "double-get", [UTILS], in_place=False)
    copy = Path(doc["files"][0]["edit"])
    copy.write_text(copy.read_text().replace("        return self.DEFAULT\n", "        return self.DEFAULT * 2\n"))
    edit.record(world.series, world.target, "double-get", [], profile=None, apply=False)
    rec, code = _refine(world, world.target, "self.DEFAULT * 2", "self.DEFAULT * 3", "double-get")
    assert code == 0 and rec["variant"] == {"action": "replaced", "range": ">=0.1.0", "capped": None}
    assert [str(v.applies) for v in series_mod.load(world.series.root).patch("double-get").variants] == [">=0.1.0"]


def test_refining_where_a_verdict_variant_covers_is_refused_and_keeps_the_edit(world):
    """On 0.3.0 bump-default says upstreamed: an edit there has no variant to go into."""
    target = _installed(world, "0.3.0")
    files = {p: p.read_bytes() for p in world.root.rglob("*") if p.is_file() and ".patchq-edit" not in p.parts}
    with pytest.raises(UsageError, match=r"its variant >=0.3 says upstreamed there, so the edit has no variant to go "
                                         r"into; nothing was written, the edit stays in .*\. Give the patch an "
                                         r"edit variant covering vllm 0.3.0 .* then `patchq record bump-default` "
                                         r"writes the edit into it") as err:
        _refine(world, target, "DEFAULT = 102400", "DEFAULT = 7")
    assert "rebase" not in str(err.value)
    assert {p: p.read_bytes() for p in files} == files
    assert (world.root / ".patchq-edit/bump-default/vllm/ops/utils.py").read_text().count("DEFAULT = 7") == 1
    # what the message says carries the edit: an (empty) edit variant there, then record
    module = world.series.root / "bump_default.py"
    module.write_text(module.read_text().replace('variant(">=0.3", upstreamed="0.3 sets 101376 itself")',
                                                 'variant(">=0.3", edits={})'))
    series = series_mod.load(world.series.root)
    rec, code = edit.record(series, target, "bump-default", [], profile=None, apply=False)
    assert code == 0 and rec["variant"] == {"action": "edits-replaced", "range": ">=0.3", "capped": None}
    plan = engine.plan(target, [series_mod.load(world.series.root).patch("bump-default")])
    assert "DEFAULT = 7" in plan.patched[UTILS]


@pytest.mark.wheel
def test_recording_a_patch_again_keeps_what_the_user_said(tmp_path, make_site):
    """issue 37 item 5: `record` of an existing patch (here its one variant starts at the
    installed vLLM 0.26.0: the edit replaces its edits) replaced the summary with "imported
    from patchq record (copy edit)" and dropped the why, the upstream links and the
    relations. The edit's operations change; what the user wrote stays."""
    from patchq.vllmdist import sources

    target = sources.installed(make_site("0.26.0", runtime=False))
    root = tmp_path / "repo" / "series"
    root.mkdir(parents=True)
    (root / "profiles.toml").write_text("[profiles.metrics]\npatches = []\n")

    def record(pid: str, rel: str, old: str, new: str):
        series = series_mod.load(root)
        doc, _ = edit.edit(series, target, pid, [rel] if pid not in series.all_patch_ids() else [], in_place=False)
        copy = Path(doc["files"][0]["edit"])
        assert copy.read_text().count(old) == 1, old
        copy.write_text(copy.read_text().replace(old, new))
        return edit.record(series, target, pid, [], profile="metrics" if pid not in series.all_patch_ids() else None,
                           apply=False)

    topk = "vllm/v1/sample/ops/topk_topp_sampler.py"
    doc_end = "        PyTorch-native implementation of top-k and top-p sampling.\n\n" \
              "        The logits tensor may be updated in-place.\n        \"\"\"\n"
    assert record("sampler-kind", topk, doc_end, doc_end + "        self.last_kind = \"native\"\n")[1] == 0
    assert record("count-topk", topk, "        self.use_fp64_gumbel = use_fp64_gumbel\n",
                  "        self.use_fp64_gumbel = use_fp64_gumbel\n        self.num_topk_calls = 0\n\n")[1] == 0
    module = root / "count_topk.py"
    text = module.read_text()
    for old, new in (("summary='imported from patchq record (copy edit) (vllm 0.26.0)'",
                      "summary='count the top-k/top-p samplers'"),
                     ("why='Imported from patchq record (copy edit); describe why vLLM needs it.'",
                      "why='the metrics exporter reads it'"),
                     ("applies='>=0.26.0',", "applies='>=0.26.0',\n    upstream=['https://example.org/pr/1'],\n"
                                            "    requires=['sampler-kind'],")):
        assert old in text, old
        text = text.replace(old, new)
    module.write_text(text)
    anchors = root.parent / "anchors" / "count-topk.toml"
    anchors.write_text("format = 2\n" + anchors.read_text() + '\n[reviews."0.26.0"]\nby = "ana"\n'
                       'at = "2026-12-06T00:00:00Z"\nhow = "fingerprint"\n')
    rec, code = record("count-topk", topk, "self.num_topk_calls = 0", "self.num_topk_calls = 1")
    assert code == 0 and rec["variant"]["action"] == "replaced" and rec["profile"] == "metrics"
    patch = series_mod.load(root).patch("count-topk")
    assert (patch.summary, patch.why, list(patch.upstream), list(patch.requires), str(patch.applies)) == \
        ("count the top-k/top-p samplers", "the metrics exporter reads it", ["https://example.org/pr/1"],
         ["sampler-kind"], ">=0.26.0")
    assert "self.num_topk_calls = 1" in module.read_text() and "self.num_topk_calls = 0" not in module.read_text()
    assert series_mod.load(root).profile("metrics").patches == ("sampler-kind", "count-topk")
    assert '[reviews."0.26.0"]\nby = "ana"' in anchors.read_text()  # who reviewed a release it keeps
    # a summary given on the command line is the user's word too
    rec, code = edit.record(*_started(root, target, "count-topk", "self.num_topk_calls = 1", "self.num_topk_calls = 2"),
                            profile=None, apply=False, summary="count samplers")
    assert code == 0 and series_mod.load(root).patch("count-topk").summary == "count samplers"
    assert series_mod.load(root).patch("count-topk").why == "the metrics exporter reads it"


def _started(root: Path, target, pid: str, old: str, new: str):
    """(series, target, patch id, files): `patchq edit` of ``pid`` with ``old`` -> ``new`` in its copy."""
    series = series_mod.load(root)
    doc, _ = edit.edit(series, target, pid, [], in_place=False)
    copy = Path(doc["files"][0]["edit"])
    copy.write_text(copy.read_text().replace(old, new))
    return series, target, pid, []


def test_a_symlinked_edit_directory_is_never_followed(world, tmp_path):
    """A symlinked .patchq-edit made edit write its copies outside the repo: refused as a
    symlinked .patchq-txn is, and nothing is written there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    link = world.series.root.parent / edit.EDIT_DIR
    link.symlink_to(outside)
    with pytest.raises(UsageError, match=f"{link} is a symlink or not a directory"):
        edit.edit(world.series, world.target, "double-get", [UTILS], in_place=False)
    link.unlink()
    link.mkdir()
    (link / "double-get").symlink_to(outside)
    for call in (lambda: edit.edit(world.series, world.target, "double-get", [UTILS], in_place=False),
                 lambda: edit.record(world.series, world.target, "double-get", [], profile=None, apply=False)):
        with pytest.raises(UsageError, match="double-get is a symlink or not a directory"):
            call()
    assert list(outside.iterdir()) == []


def test_a_walked_up_series_edit_directory_is_held_to_the_trust_rule(world, monkeypatch):
    from patchq.errors import UnsafeConfig

    repo = world.series.root.parent
    (repo / "patchq.toml").write_text('series = "series"\nanchors = "anchors"\n')
    monkeypatch.delenv("PATCHQ_SERIES")
    monkeypatch.delenv("PATCHQ_ANCHORS")
    monkeypatch.chdir(repo)
    walked = series_mod.load()
    assert walked.location.origin == "config"
    (repo / edit.EDIT_DIR).mkdir()
    os.chown(repo / edit.EDIT_DIR, 65534, 65534)
    with pytest.raises(UnsafeConfig, match=f"refusing {repo / edit.EDIT_DIR}: .*owned by uid 65534"):
        edit.edit(walked, world.target, "double-get", [UTILS], in_place=False)
    os.chown(repo / edit.EDIT_DIR, 0, 0)
    doc, code = edit.edit(walked, world.target, "double-get", [UTILS], in_place=False)
    assert code == 0
