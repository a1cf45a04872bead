"""A series repo written by the previous patchq keeps its goldens in layout 1
(``tests/goldens/<patch>/expect.toml`` + ``<release>/<qualname>.before.py/.after.py``):
``patchq test`` and the pytest plugin read it with the same results, ``--regen`` rewrites
it in place, and ``patchq test --migrate`` moves it into the store (``series/diffs/``)
only when nothing would be lost. The repo is ``tests/drift/series-layout1`` (real files
the previous patchq wrote; its README says how), on the real releases 0.15.1, 0.23.0, 0.33.0.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, run_cli

pytestmark = pytest.mark.wheel  # real releases

FIXTURE = REPO / "tests" / "drift" / "series-layout1"
PATCH = "example-quiet-logger"
RELEASES = ["0.15.1", "0.23.0", "0.33.0"]


@pytest.fixture
def old_repo(tmp_path) -> Path:
    repo = tmp_path / "stack"
    shutil.copytree(FIXTURE, repo)
    return repo


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _break(repo: Path) -> None:
    mod = repo / "series" / "example_quiet_logger.py"
    mod.write_text(mod.read_text().replace("logger.disabled = True", "logger.disabled = False"))


def test_a_layout1_repo_tests_as_before(old_repo):
    """What the previous patchq printed for this repo (``patchq test --json``), plus the
    added ``layout`` field; the pytest module it wrote passes too."""
    res = run_cli("test", "--series", str(old_repo), "--json")
    assert res.rc == 0, res
    assert res.json["goldens"] == str(old_repo / "tests" / "goldens")
    assert res.json["cases"] == [{"patch": PATCH, "release": v, "status": "applies", "ok": True, "problems": [],
                                  "written": [], "warnings": [], "layout": "goldens"} for v in RELEASES]
    assert "`patchq test --migrate` moves them" in run_cli("test", "--series", str(old_repo)).stdout
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=old_repo, capture_output=True, text=True)
    assert proc.returncode == 0 and "3 passed" in proc.stdout, proc.stdout + proc.stderr


def test_a_changed_patch_fails_its_layout1_golden_and_regen_rewrites_it_in_place(old_repo):
    _break(old_repo)
    bad = run_cli("test", "--series", str(old_repo), "--json")
    assert bad.rc == 1
    assert all("init_logger.after.py differs from its golden" in c["problems"][0] for c in bad.json["cases"])
    regen = run_cli("test", "--regen", "--series", str(old_repo), "--json")
    assert regen.rc == 0, regen
    assert not (old_repo / "series" / "diffs").exists()  # layout 1 stays layout 1 until --migrate
    after = old_repo / "tests" / "goldens" / PATCH / "0.23.0" / "init_logger.after.py"
    assert "logger.disabled = False" in after.read_text()
    assert run_cli("test", "--series", str(old_repo)).rc == 0


def test_migrate_moves_layout1_into_the_store_losing_nothing(old_repo):
    before = _files(old_repo / "tests" / "goldens")
    res = run_cli("test", "--migrate", "--series", str(old_repo), "--json")
    assert res.rc == 0, res
    assert res.json["migrate"] is True and res.json["cases"][0]["ok"]
    assert not (old_repo / "tests" / "goldens").exists()
    store = old_repo / "series" / "diffs"
    assert sorted(_files(store)) == [f"{v}/{PATCH}.diff" for v in RELEASES] + [f"{PATCH}.expect.toml"]
    assert 'logger.disabled = True' in (store / "0.23.0" / f"{PATCH}.diff").read_text()
    # the stored diffs, applied to the pristine releases, give every old definition file back
    from patchq import testing
    from patchq.authoring import diffstore
    from patchq.vllmdist.sources import release_source

    for v in RELEASES:
        pristine = {"vllm/logger.py": release_source(v).read_text("vllm/logger.py")}
        patched = diffstore.apply_diff(pristine, (store / v / f"{PATCH}.diff").read_text())
        assert testing.definition(patched["vllm/logger.py"], "init_logger") == \
            before[f"{PATCH}/{v}/init_logger.after.py"].decode()
        assert testing.definition(pristine["vllm/logger.py"], "init_logger") == \
            before[f"{PATCH}/{v}/init_logger.before.py"].decode()
    again = run_cli("test", "--series", str(old_repo), "--json")
    assert again.rc == 0 and [c["layout"] for c in again.json["cases"]] == ["diffs"] * 3
    assert [c["release"] for c in again.json["cases"]] == RELEASES
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=old_repo, capture_output=True, text=True)
    assert proc.returncode == 0 and "3 passed" in proc.stdout, proc.stdout + proc.stderr
    assert run_cli("test", "--migrate", "--series", str(old_repo)).rc == 0  # nothing left to move: a no-op


def test_migrate_refuses_while_a_layout1_case_fails_and_writes_nothing(old_repo):
    _break(old_repo)
    before = _files(old_repo)
    res = run_cli("test", "--migrate", "--series", str(old_repo), "--json")
    assert res.rc == 1
    assert res.json["cases"][0]["problems"][-1].startswith(f"{PATCH}: not migrated")
    assert _files(old_repo) == before
    assert "then `patchq test --migrate --patch example-quiet-logger`" in \
        run_cli("test", "--migrate", "--series", str(old_repo)).stdout
    assert run_cli("test", "--migrate", "--regen", "--series", str(old_repo)).rc == 2


def test_regen_refuses_a_blocking_verdict_on_the_release_the_patch_was_made_on(tmp_path):
    # `patchq init`'s example patch, recorded on 0.15.1 (its oldest fingerprint), with its
    # anchor pattern mistyped by hand: check says conflict on 0.15.1 itself. A regen stored
    # `conflict` as the expected verdict there (a warning, exit 0), so the test stayed green
    from support import run_cli

    repo = tmp_path / "stack"
    assert run_cli("init", repo).rc == 0
    anchors = repo / "anchors" / "example-quiet-logger.toml"
    anchors.write_text(anchors.read_text().replace('node = "logger = logging.getLogger(name)"',
                                                   'node = "logger = logging.getLogger(nam)"'))
    before = _files(repo / "series")
    res = run_cli("test", "--regen", "--releases", "0.15.1", "--series", repo, "--json")
    assert res.rc == 1 and not res.json["ok"], res.stdout
    (case,) = [c for c in res.json["cases"] if c["release"] is None or c["release"] == "0.15.1"]
    problem = next(p for p in case["problems"] if "the patch was made on or recorded as verified on" in p)
    assert "check says conflict, which is blocking" in problem and "nothing written" in problem
    assert "fix anchors/example-quiet-logger.toml or the patch" in problem  # the remedy check names
    # 0.23.0, recorded before and verified too, keeps its expected verdict: nothing written
    assert _files(repo / "series") == before
    assert any("vllm 0.23.0: check says conflict" in p for c in res.json["cases"] for p in c["problems"])
