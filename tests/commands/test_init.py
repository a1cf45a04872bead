"""patchq.commands.init: ``patchq init`` writes a new series repo (all its files or none)."""

from __future__ import annotations

import shutil

import pytest

from patchq import series as series_mod
from patchq.commands import init, list_
from patchq.errors import UsageError


def test_init_writes_a_loadable_series_repo(tmp_path):
    repo = tmp_path / "my-stack"
    repo.mkdir()
    doc, code = init.init(str(repo))
    assert code == 0 and doc["schema"] == "patchq.init/1" and doc["dir"] == str(repo)
    for rel in ("patchq.toml", "series/profiles.toml", "tests/test_patches.py"):
        assert str(repo / rel) in doc["written"] and (repo / rel).is_file(), rel
    assert doc["series"]["dir"] == str(repo / "series")
    if shutil.which("git"):
        assert (repo / ".git").is_dir()
    loaded = series_mod.load(repo / "series")  # the example patch loads and is listed
    listed, _ = list_.run(str(repo / "series"))
    assert [p["id"] for p in listed["patches"]] == loaded.all_patch_ids() != []


def test_init_writes_the_example_expected_output_so_test_has_a_case_to_verify(tmp_path):
    """A fresh repo passes `patchq test` as written: the example's verdict and diff on
    vllm 0.23.0 are there (no case without expected output, which fails until a regen)."""
    from patchq import testing
    from patchq.authoring import diffstore, scaffold

    repo = tmp_path / "stack"
    doc, _ = init.init(str(repo))
    series = repo / "series"
    assert diffstore.read_verdicts(series, "example-quiet-logger") == {"0.23.0": "applies"}
    assert (series / "diffs" / "0.23.0" / "example-quiet-logger.diff").read_text() == scaffold.EXAMPLE_DIFF
    assert [(c.patch_id, c.release) for c in testing.cases(series=series)] == [("example-quiet-logger", "0.23.0")]
    text = init.render_init(doc)
    assert "  patchq test && pytest -q " in text and "--regen" not in text


@pytest.mark.wheel
def test_a_fresh_repo_passes_patchq_test_and_pytest_and_a_regen_changes_nothing(tmp_path, cli):
    import subprocess
    import sys

    repo = tmp_path / "stack"
    assert cli("init", repo).rc == 0
    before = {p: p.read_bytes() for p in (repo / "series").rglob("*") if p.is_file()}
    res = cli("test", "--series", repo, "--json")
    assert res.rc == 0 and [(c["release"], c["status"], c["ok"]) for c in res.json["cases"]] == [
        ("0.23.0", "applies", True)], res.stdout + res.stderr
    res = cli("test", "--regen", "--series", repo, "--json")
    assert res.rc == 0 and [c["written"] for c in res.json["cases"]] == [[]], res.stdout
    assert {p: p.read_bytes() for p in (repo / "series").rglob("*") if p.is_file()} == before
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=repo,
                            capture_output=True, text=True)
    assert tested.returncode == 0 and "1 passed" in tested.stdout, tested.stdout + tested.stderr


def test_init_over_an_existing_repo_writes_nothing(tmp_path):
    init.init(str(tmp_path))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts}
    with pytest.raises(UsageError, match="already has .*nothing written"):
        init.init(str(tmp_path))
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts} == before


def test_new_checks_the_anchor_against_pristine_text_not_the_applied_patches(small):
    """An applied patch changed the anchored statement in the installed file: `new` checks
    the anchor against the pristine text, as `check` plans and `edit` hands out."""
    from patchq.commands import apply

    apply.apply(small.target, small.series, "base")
    assert "DEFAULT = 101376" in small.utils()  # bump-default is live there
    doc, code = init.new(small.series, "x3", "vllm.ops.utils:Backend", "DEFAULT = 102400", "base", ">=0.1", None,
                         site_packages=str(small.site))
    assert code == 0 and doc["anchor"]["node"] == "DEFAULT = 102400" and doc["vllm"] == "0.1.0"
    assert (small.root / "anchors" / "x3.toml").is_file()
    with pytest.raises(UsageError, match=r"matches 0 statement\(s\) in Backend \(vllm/ops/utils.py, pristine vllm "
                                         r"0.1.0\), not 1; nearest statements: # the default DEFAULT = 102400,"):
        init.new(small.series, "x2", "vllm.ops.utils:Backend", "DEFAULT = 101376", "base", ">=0.1", None,
                 site_packages=str(small.site))
    assert not (small.root / "anchors" / "x2.toml").exists()


def test_new_on_a_hand_edited_file_reads_the_release_itself(small):
    """A file modified by someone else has no verified pristine copy here: the release's own
    file (patchq's cache) is the pristine text."""
    import os
    from pathlib import Path

    from testing import small_series

    small_series.write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    (small.site / "vllm/ops/utils.py").write_text(small.utils().replace("DEFAULT = 102400", "DEFAULT = 1"))
    assert init.pristine_text(small.target, "vllm/ops/utils.py") == small_series.UTILS_PY
    doc, code = init.new(small.series, "x3", "vllm.ops.utils:Backend", "DEFAULT = 102400", "base", ">=0.1", None,
                         site_packages=str(small.site))
    assert code == 0 and doc["anchor"]["node"] == "DEFAULT = 102400"
