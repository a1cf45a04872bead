"""The reliability suite: damaged and hostile state dirs, concurrent writers, kill -9.

Every case runs on a real vLLM 0.23.0 install with the stack fixture's full profile applied and checks
the rules of ``tests/testing/reliability.py`` (no traceback, a documented exit code, never exit 0
with a wrong report, nothing lost after ``revert --all --force``, nothing written outside
site-packages). CI-sized (about two minutes); the ``slow`` variants and
``bench/reliability.py`` run many more cases.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conftest import RUNTIME_PTH
from support import link_copy
from testing import reliability as rel
from testing import stack

#: no shrinking: a failing case is reported as generated (shrinking re-runs patchq for minutes)
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.reuse, Phase.generate])


@pytest.fixture(scope="module")
def bed(vllm_site, tmp_path_factory):
    """A site-packages with the stack's full profile applied, reset before each case (see reliability.Bed)."""
    site = tmp_path_factory.mktemp("reliability") / "site-packages"
    link_copy(vllm_site("0.23.0"), site)
    (site / RUNTIME_PTH).write_text(str(stack.RUNTIME) + "\n")
    return rel.make_bed(site)


def _assert_clean(tally: rel.Tally) -> None:
    assert tally.clean, "\n".join([tally.line(), *tally.failures])


def _case(bed, mutations, commands, rnd) -> rel.Tally:
    tally = rel.Tally()
    bed.reset()
    desc = rel.mutate(bed, rnd, mutations)
    tally.cases += 1
    for cmd in commands:
        res = rel.run_inprocess(*cmd, "--site-packages", str(bed.site), "--json")
        rel.check_run(bed, res, tally, desc, cmd[0])
    rel.finish(bed, tally, desc)
    return tally


mutations = st.lists(st.sampled_from(rel.MUTATIONS), min_size=1, max_size=3)
commands = st.lists(st.sampled_from(rel.COMMANDS), min_size=1, max_size=3)


@settings(max_examples=80, **SETTINGS)
@given(mutations=mutations, commands=commands, rnd=st.randoms(use_true_random=False))
def test_damaged_and_hostile_state(bed, mutations, commands, rnd):
    _assert_clean(_case(bed, mutations, commands, rnd))


@pytest.mark.slow
@settings(max_examples=300, **SETTINGS)
@given(mutations=mutations, commands=commands, rnd=st.randoms(use_true_random=False))
def test_damaged_and_hostile_state_long(bed, mutations, commands, rnd):
    _assert_clean(_case(bed, mutations, commands, rnd))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12)


@settings(max_examples=40, **SETTINGS)
@given(field=st.sampled_from(["", "files", "patches", "series", "profile_hashes", "results", "vllm", "profile"]),
       value=json_values, rnd=st.randoms(use_true_random=False))
def test_any_json_in_the_journal(bed, field, value, rnd):
    """journal.json holding arbitrary JSON (whole, or one field of the real journal)."""
    tally = rel.Tally()
    bed.reset()
    path = bed.state_dir / "journal.json"
    data = json.loads(path.read_text())
    if field:
        data[field] = value
    else:
        data = value
    path.write_text(json.dumps(data))
    tally.cases += 1
    for cmd in [("status",), *rnd.sample(rel.COMMANDS[1:], 2)]:
        res = rel.run_inprocess(*cmd, "--site-packages", str(bed.site), "--json")
        rel.check_run(bed, res, tally, f"journal {field or 'whole'} = {value!r}", cmd[0])
    rel.finish(bed, tally, f"journal {field or 'whole'} = {value!r}")
    _assert_clean(tally)


@pytest.mark.parametrize("seed", [1, 2])
def test_concurrent_apply_and_revert(bed, seed):
    tally = rel.Tally()
    rel.concurrent_case(bed, random.Random(seed), tally, n=3)
    _assert_clean(tally)


@pytest.mark.parametrize("start,verb", [("pristine", ("apply", "--profile", "full")),
                                        ("full", ("revert", "--all")),
                                        ("full", ("apply", "--profile", "kv"))])
@pytest.mark.parametrize("writes", [1, 3])
def test_kill_9_after_each_write_then_the_next_command_completes(bed, start, verb, writes):
    tally = rel.Tally()
    bed.reset()
    site = str(bed.site)
    if start == "pristine":
        assert rel.run_inprocess("revert", "--all", "--site-packages", site, "--json").rc == 0
    res = rel.run_subprocess(*verb, "--site-packages", site, "--json", env={"PATCHQ_FAULT_AFTER_WRITES": str(writes)})
    assert res.rc == 99 or (res.rc == 0 and writes >= 3), res  # kv from full writes two files
    desc = f"{verb} killed after {writes}"
    tally.cases += 1
    again = rel.run_inprocess(*verb, "--site-packages", site, "--json")
    rel.check_run(bed, again, tally, desc, verb[0])
    assert again.rc == 0, again
    assert not (bed.state_dir / "txn").exists()
    rel.finish(bed, tally, desc)
    _assert_clean(tally)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_kill_9_at_a_random_instant(bed, seed):
    tally = rel.Tally()
    rel.kill_case(bed, random.Random(seed), tally)
    _assert_clean(tally)
