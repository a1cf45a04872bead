"""Recovery paths a user meets in the field, on real vLLM installs through the CLI.

- a vLLM upgrade under an applied profile (files replaced, one moved into a package);
- an environment edited by someone else (the old sentinel scripts, a hand edit);
- a lost or damaged journal;
- a write that fails half-way (the files written before it are rolled back).
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from support import record_hashes, replace_file, sha256_path

UTILS = "vllm/model_executor/layers/fla/ops/utils.py"
KV = "vllm/v1/core/kv_cache_utils.py"
INC_023 = "vllm/model_executor/layers/quantization/inc.py"
TARGETS_023 = [UTILS, KV, INC_023, "vllm/model_executor/layers/logits_processor.py"]


def _pristine(site, relpaths):
    record = record_hashes(site)
    return {rel: sha256_path(site / rel) == record[rel] for rel in relpaths}


def test_upgrade_under_an_applied_profile_forgets_the_old_journal(make_site, cli):
    old = make_site("0.23.0")
    assert cli("apply", "--profile", "full", "--site-packages", old).rc == 0
    # what `pip install vllm==0.24.0` leaves: the new release's files, patchq's old state
    new = make_site("0.24.0")
    shutil.copytree(old / ".patchq", new / ".patchq")
    assert not (new / INC_023).exists()  # inc.py became the package inc/ in 0.24.0

    rc, out, err, doc = cli("status", "--site-packages", new, "--json")
    assert rc == 0, err
    assert doc["profile"] is None and "0.23.0" in doc["note"]
    assert {p["status"] for p in doc["patches"]} == {"not-applied"}
    assert {f["state"] for f in doc["files"]} == {"pristine"}

    # the stack fixture's variants end at 0.23/0.25: its base profile is what carries over
    rc, out, err, doc = cli("apply", "--profile", "base", "--site-packages", new, "--json")
    assert rc == 0, err
    assert [p["status"] for p in doc["patches"]] == ["ok"]
    assert json.loads((new / ".patchq" / "journal.json").read_text())["vllm"] == "0.24.0"
    assert cli("revert", "--all", "--site-packages", new).rc == 0
    changed = [f for f in doc["written"]]
    assert all(_pristine(new, changed).values())


def test_an_old_script_edit_is_refused_then_restored_from_the_wheel(site, cli):
    text = (site / UTILS).read_text()
    replace_file(site / UTILS, text.replace("DEFAULT = 102400  # Default", "DEFAULT = 101376  # SPARK-PATCH"))

    rc, out, err, doc = cli("apply", "--profile", "full", "--site-packages", site, "--json")
    assert rc == 4 and UTILS in doc["error"] and "revert --all --force" in doc["error"]
    assert not (site / ".patchq" / "journal.json").exists()

    rc, out, err, doc = cli("revert", "--all", "--force", "--site-packages", site, "--json")
    assert rc == 0, err
    assert doc["written"] == [UTILS] and _pristine(site, [UTILS])[UTILS]
    kept = doc["foreign_kept"][UTILS]
    assert "SPARK-PATCH" in open(kept).read()
    assert cli("apply", "--profile", "full", "--site-packages", site).rc == 0


def test_a_hand_edit_of_a_patched_file_is_reported_as_foreign(site, cli):
    assert cli("apply", "--profile", "full", "--site-packages", site).rc == 0
    replace_file(site / KV, (site / KV).read_text() + "# my hand edit\n")
    rc, out, err, doc = cli("apply", "--profile", "kv", "--site-packages", site, "--json")
    assert rc == 4 and KV in doc["error"]  # not an anchor failure: the edit is named


def test_a_deleted_journal_is_refused_and_revert_force_restores(site, cli):
    assert cli("apply", "--profile", "full", "--site-packages", site).rc == 0
    (site / ".patchq" / "journal.json").unlink()
    rc, out, err, doc = cli("apply", "--profile", "full", "--site-packages", site, "--json")
    assert rc == 4  # sentinels without a journal: never patched twice
    assert cli("status", "--site-packages", site).rc == 7
    assert cli("revert", "--all", "--force", "--site-packages", site).rc == 0
    assert all(_pristine(site, TARGETS_023).values())


@pytest.mark.parametrize("garbage", ['{"files": {', "[]", '{"schema": 99}'])
def test_a_damaged_journal_exits_6_and_revert_force_sets_it_aside(site, cli, garbage):
    assert cli("apply", "--profile", "full", "--site-packages", site).rc == 0
    (site / ".patchq" / "journal.json").write_text(garbage)
    for fast in (True, False):
        rc, out, err, _ = cli("status", "--site-packages", site, fast=fast)
        assert rc == 6 and err.count("\n") == 1 and err.startswith("patchq: error:"), err
    rc, out, err, doc = cli("status", "--site-packages", site, "--json")
    assert rc == 6 and doc == {"ok": False, "error": doc["error"], "exit_code": 6}
    assert cli("revert", "--all", "--site-packages", site).rc == 6
    assert cli("revert", "--all", "--force", "--site-packages", site).rc == 0
    assert all(_pristine(site, TARGETS_023).values())
    assert list((site / ".patchq").glob("journal.json.damaged-*"))
    assert cli("apply", "--profile", "full", "--site-packages", site).rc == 0


def test_a_failed_write_rolls_back_the_files_written_before_it(site, cli):
    if shutil.which("chattr") is None:
        pytest.skip("chattr (e2fsprogs) is not installed")
    replace_file(site / KV, (site / KV).read_bytes())  # own inode: never chattr a linked file
    before = {rel: sha256_path(site / rel) for rel in TARGETS_023}
    if subprocess.run(["chattr", "+i", str(site / KV)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this filesystem")
    try:
        rc, out, err, doc = cli("apply", "--profile", "full", "--site-packages", site, "--json")
    finally:
        subprocess.run(["chattr", "-i", str(site / KV)], check=True)
    assert rc == 5 and "rolled back" in doc["error"], doc
    assert {rel: sha256_path(site / rel) for rel in TARGETS_023} == before
    assert not (site / ".patchq" / "txn").exists()
    assert cli("status", "--site-packages", site).rc == 0
