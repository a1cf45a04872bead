"""A user's own files, caches, the runtime hook and hostile input (issue 28), through the CLI.

The ``suite`` tests run the classes of ``tests/testing/safety_suite.py`` (the CLI in
subprocesses, one fresh offline world per case); they need no release but take a minute or
two, so they are in the wheel layer (``@pytest.mark.wheel``); ``bench/reliability.py --safety
N`` runs many more. The in-process checks of each module live with the module's tests:
``tests/authoring/test_repowrite.py`` (atomic writes, transactions), ``tests/test_discovery.py``
(configs that cannot be planted), ``tests/test_hashing.py`` (ids and modules that name paths),
``tests/test_jsonsafe.py``, ``tests/env/test_runtime_status.py``, ``tests/runtime/test_hook.py``,
``tests/authoring/test_fingerprints.py`` (comments kept).
"""

from __future__ import annotations

import random

import pytest

from testing import safety_suite

# -- item 1: --dir misuse, through the CLI on a small installed site --------------------------


def test_edit_and_record_never_take_over_a_directory_they_did_not_make(tmp_path):
    world = safety_suite.make_world(tmp_path)
    before = safety_suite.snapshot(world.repo)
    site = ("--site-packages", world.site)
    for target in (".", world.repo / ".git"):
        r = safety_suite.pq(world, "edit", "mine", "--file", "vllm/ops/utils.py", "--dir", target, *site)
        assert r.rc == 2 and "not empty and was not made by `patchq edit`" in r.err, r
        r = safety_suite.pq(world, "record", "mine", "--dir", target, *site)
        assert r.rc == 2 and "holds no edit" in r.err, r
    assert safety_suite.snapshot(world.repo) == before  # the repo, .git included, byte for byte


# -- the classes of tests/testing/safety_suite.py (a minute or two: the wheel layer) ------------------


@pytest.mark.wheel
@pytest.mark.parametrize("cls", sorted(safety_suite.CLASSES))
def test_suite_class_is_clean(cls):
    tally = safety_suite.run_class(cls, 2, random.Random(cls).randrange(1000))
    assert tally.clean, "\n".join(tally.failures)
