"""Context is the profile (issue 35, item 7): ``check --all`` and ``matrix`` judge each patch
with the patches of its own profile, never stacked on another profile's. Two profiles of a
series repo rewrite the same constant of vllm/logger.py (real releases 0.30.0 and 0.31.0)."""

from __future__ import annotations

import difflib

import pytest

from patchq.vllmdist import releases
from support import run_cli

pytestmark = pytest.mark.wheel
OLD = '_DATE_FORMAT = "%m-%d %H:%M:%S"\n'


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """``patchq init``, then date-iso (profile iso) and date-long (profile long), each
    imported from a diff of vllm/logger.py on 0.30.0 that rewrites _DATE_FORMAT."""
    tmp = tmp_path_factory.mktemp("ctx")
    repo = tmp / "stack"
    assert run_cli("init", repo).rc == 0
    text = (releases.release_tree("0.30.0") / "vllm/logger.py").read_text(encoding="utf-8")
    for pid, profile, new in (("date-iso", "iso", '"%Y-%m-%d"'), ("date-long", "long", '"%c"')):
        diff = tmp / f"{pid}.diff"
        diff.write_text("".join(difflib.unified_diff(
            text.splitlines(True), text.replace(OLD, f"_DATE_FORMAT = {new}\n").splitlines(True),
            "a/vllm/logger.py", "b/vllm/logger.py")), encoding="utf-8")
        res = run_cli("import", diff, "--id", pid, "--release", "0.30.0", "--profile", profile, "--series", repo)
        assert res.rc == 0, res.stderr
    return repo


def test_check_all_never_stacks_independent_profiles(stack):
    # before: date-long was planned on date-iso's result: "conflict: replace `_DATE_FORMAT = ...`:
    # no place match", on the very release both were imported on, naming a rebase
    res = run_cli("check", "--all", "--vllm", "0.30.0", "--series", stack, "--json")
    assert res.rc == 0, res.stdout
    assert {p["id"]: p["status"] for p in res.json["patches"]} == {
        "example-quiet-logger": "applies", "date-iso": "applies", "date-long": "applies"}


def test_a_matrix_cell_does_not_depend_on_the_other_profiles(stack, tmp_path):
    # before: with iso in the matrix, date-long's 0.31.0 cell was `conflict` (date-iso blocks
    # there with review, but its edit stayed in the plan under date-long); alone it is review
    cells = {}
    for names in ("long", "iso,long", "example,iso,long"):
        res = run_cli("matrix", "--releases", "0.30.0,0.31.0", "--profiles", names, "--out", tmp_path / names,
                      "--series", stack, "--json")
        cells[names] = {v: (c["status"], c["reason"]) for v, c in res.json["cells"]["long"]["date-long"].items()}
    assert cells["long"]["0.30.0"][0] == "applies" and cells["long"]["0.31.0"][0] == "review"
    assert cells["iso,long"] == cells["long"] == cells["example,iso,long"]
