"""patchq.errors: the exception classes, the exit-code table (docs/exit-codes.md) and did_you_mean."""

from __future__ import annotations

import re

import pytest

from patchq import errors as E
from support import REPO

#: every exception class and the exit code the CLI contract gives it
CODES = {
    E.PatchqError: 1, E.UsageError: 2, E.SeriesError: 2, E.UnsafeConfig: 2, E.TargetNotFound: 3,
    E.ReleaseError: 3, E.CacheError: 3, E.NotProbeable: 3, E.AnchorError: 1, E.TransformError: 1, E.DiffInvalid: 1,
    E.ImportRefused: 1, E.SourceError: 1, E.ForeignEditError: 4, E.ReadOnlyError: 5, E.RepoWriteError: 5,
    E.StateError: 6, E.OtherSeriesError: 7, E.CacheRefused: 2,
}


def test_every_exception_class_is_a_patchq_error_with_its_documented_code():
    classes = {v for v in vars(E).values() if isinstance(v, type) and issubclass(v, Exception)}
    assert classes - {E.PlanFailed, E.RunPlanFailed} == set(CODES)
    for cls, code in CODES.items():
        assert issubclass(cls, E.PatchqError) and cls.exit_code == code, cls


def test_every_exit_code_constant_is_in_docs_exit_codes():
    table = (REPO / "docs" / "exit-codes.md").read_text()
    documented = {int(n) for row in re.findall(r"^\| ([0-9, ]+) \|", table, flags=re.M) for n in row.split(",")}
    constants = {v for k, v in vars(E).items() if k.startswith("EXIT_")}
    assert constants == documented


def test_every_errno_class_patchq_maps_is_in_docs_exit_codes():
    """One table (errors.ENV_ERRNOS) for every OSError the environment causes (issue 39: ENOENT
    and others were missing from the page); the exec classes of run and serve beside it."""
    import errno

    table = (REPO / "docs" / "exit-codes.md").read_text()
    for name in [*E.ENV_ERRNOS, "E2BIG", "ENOEXEC"]:
        assert f"`{name}`" in table, name
    assert E.exec_failure("x", OSError(errno.ENOEXEC, "Exec format error"))[1] == E.EXIT_CANNOT_RUN
    assert E.exec_failure("x", OSError(errno.ENOTDIR, "Not a directory"))[1] == E.EXIT_COMMAND_NOT_FOUND


def test_anchor_error_carries_its_kind_and_anchor():
    err = E.AnchorError("vllm.x: no def f", kind="gone", anchor="f")
    assert (str(err), err.kind, err.anchor, err.exit_code) == ("vllm.x: no def f", "gone", "f", 1)
    assert E.AnchorError("ambiguous").kind == "conflict"


def test_run_plan_failed_takes_the_code_of_what_failed():
    inner = E.ForeignEditError("vllm/x.py was edited by someone else")
    err = E.RunPlanFailed(inner, {"schema": "patchq.apply/1"}, "text")  # type: ignore[arg-type]
    assert (str(err), err.exit_code, err.doc, err.text) == (str(inner), 4, {"schema": "patchq.apply/1"}, "text")


@pytest.mark.parametrize("name, known, want", [
    ("fulll", ["base", "full", "kv"], "; did you mean 'full'?"),
    ("qwerty", ["base", "full"], ""),
    ("base", [], ""),
])
def test_did_you_mean(name, known, want):
    assert E.did_you_mean(name, known) == want
