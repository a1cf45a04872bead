"""``check`` of a long series in forked shares (:mod:`patchq.compat.fanout`): the same rows as
one process, on a real release; the grouping and the "apart" rule on real series data."""

from __future__ import annotations

import pytest

from patchq import series
from patchq.compat import check, fanout
from patchq.compat.variants import effective_patches
from testing.spread import spread_series


def test_patches_that_share_a_module_or_a_relation_are_one_group(tmp_path):
    mods = [("vllm.a", "f", "0" * 16), ("vllm.b", "g", "0" * 16), ("vllm.a", "h", "0" * 16),
            ("vllm.c", "k", "0" * 16), ("vllm.d", "m", "0" * 16)]
    root = spread_series(tmp_path, None, 0, {4: ', requires=["fan-1"]'}, modules=mods)
    patches = series.load(root).patches_of("all")
    assert fanout.groups(patches) == [[0, 2], [1, 4], [3]]
    assert fanout.deal([[0, 2], [1, 4], [3]], 2) == [[0, 2, 3], [1, 4]]


def test_shares_are_apart_unless_one_reads_a_file_whose_definitions_another_changed():
    a = fanout.Share([0], changed={"vllm/a.py"}, accessed={"vllm/a.py", "vllm/x.py"})
    b = fanout.Share([1], changed={"vllm/b.py"}, accessed={"vllm/b.py", "vllm/a.py"})
    assert fanout.apart([a, b])  # b read a.py, whose definitions a's edits kept
    a.requalified = {"vllm/a.py"}  # a's patch added a definition to a.py: b's lookup there may differ
    assert not fanout.apart([a, b])
    c = fanout.Share([2], changed={"vllm/b.py"}, accessed={"vllm/b.py"})
    assert not fanout.apart([fanout.Share([0], changed={"vllm/a.py"}), b, c])  # two shares changed b.py


@pytest.mark.wheel
def test_a_long_series_checks_the_same_in_forked_shares_as_in_one_process(tmp_path, monkeypatch):
    from patchq.vllmdist import releases, sources

    try:
        root = spread_series(tmp_path, releases.release_tree("0.23.0"), 40)
        target = sources.release_source("0.26.0")
    except Exception as exc:  # offline without a cached wheel
        pytest.skip(f"vllm release not available: {exc}")
    monkeypatch.setenv("PATCHQ_VERDICT_CACHE", "0")
    patches = series.load(root).patches_of("all")
    planned, tried = effective_patches(patches, target.version)
    fanned = fanout.check(target, patches, planned, tried, None, 2)
    assert fanned is not None  # 40 modules, 40 groups: the shares were apart
    rows, shares = fanned
    assert sorted(i for s in shares for i in s.indices) == list(range(40))
    monkeypatch.setenv("PATCHQ_CHECK_WORKERS", "1")
    alone = check.check(sources.release_source("0.26.0"), patches)
    assert [r.to_dict() for r in rows] == [r.to_dict() for r in alone]
    statuses = {r.status for r in alone}
    # 0.26.0 changed some of the functions: the three-way verdicts ran, and found the inserted
    # statement (a name nothing reads) apart from every upstream change
    assert statuses == {"applies", "applies-drifted"}
