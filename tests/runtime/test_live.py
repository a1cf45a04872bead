"""patchq.runtime.live: what profile is live in a process, from the applied journal of the small
world (disk mode); the import-hook mode runs in tests/e2e/test_runtime.py."""

from __future__ import annotations

import types

from patchq.commands import apply
from patchq.runtime import live
from testing.small_world import UTILS


def test_nothing_applied_is_none(small):
    found = live.check_disk(str(small.site), modules={})
    assert found.mode == live.NONE and not found.ok and found.source.endswith(".patchq/journal.json")


def test_an_applied_profile_is_live_until_a_file_changes(small):
    apply.apply(small.target, small.series, "base")
    h = small.series.patch("bump-default").hash
    found = live.check_disk(str(small.site), modules={})
    assert (found.mode, found.profile, found.patches, found.ok) == (live.DISK, "base", [f"bump-default:{h}"], True)
    assert found.digest and len(found.digest) >= 12
    elsewhere = types.SimpleNamespace(__file__="/elsewhere/vllm/ops/utils.py")
    stale = live.check_disk(str(small.site), modules={"vllm.ops.utils": elsewhere})
    assert stale.problems == [f"vllm.ops.utils was loaded from /elsewhere/vllm/ops/utils.py, not {small.site / UTILS}"]
    (small.site / UTILS).write_text(small.utils().replace(f"# patchq:bump-default:{h}", "# gone"))
    problems = live.check_disk(str(small.site), modules={}).problems
    assert problems == [f"{UTILS} changed since apply", f"{UTILS} lacks the sentinel of bump-default:{h}"]


def test_a_damaged_journal_is_a_problem_not_a_crash(small):
    apply.apply(small.target, small.series, "base")
    (small.site / ".patchq" / "journal.json").write_text('{"schema": 1, "files": []}')
    found = live.check_disk(str(small.site), modules={})
    assert found.mode == live.DISK and found.problems[0].startswith("journal damaged: ")


def test_detect_finds_the_site_of_the_vllm_in_the_process(small):
    apply.apply(small.target, small.series, "base")
    vllm = types.SimpleNamespace(__file__=str(small.site / "vllm" / "__init__.py"))
    assert live.vllm_site({"vllm": vllm}) == str(small.site)
    assert live.detect(modules={"vllm": vllm}).profile == "base"
    assert live.module_name("vllm/a/__init__.py") == "vllm.a" and live.module_name("vllm/a/b.py") == "vllm.a.b"
