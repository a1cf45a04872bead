"""The state directory under damage and hostility, one named case per test, through the CLI.

Each test sets up a real vLLM 0.23.0 site (``site``: a hard-linked copy), damages the
state or the environment in one specific way, and checks the rule it must meet: one
line on stderr (never a traceback), the documented exit code, nothing written where it
must not be, and ``revert --all --force`` bringing every target file back to RECORD.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support import REPO, record_hashes, replace_file, sha256_path, snapshot
from testing import stack

UTILS = "vllm/model_executor/layers/fla/ops/utils.py"
KV = "vllm/v1/core/kv_cache_utils.py"
INC = "vllm/model_executor/layers/quantization/inc.py"
LOGITS = "vllm/model_executor/layers/logits_processor.py"
DENSE_FILES = sorted([UTILS, KV, INC, LOGITS])


def apply(cli, site, profile="full", *extra, **kw):
    return cli("apply", "--profile", profile, "--site-packages", site, "--json", *extra, **kw)


def revert(cli, site, *args, **kw):
    return cli("revert", *args, "--site-packages", site, "--json", **kw)


def one_line(res) -> str:
    """The failure is one line on stderr (or a JSON document), never a traceback."""
    assert "Traceback" not in res.stderr, res
    if res.json is None:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("patchq: error: "), res
        return lines[0]
    return res.json.get("error") or ""


def at_record(site: Path, relpaths=DENSE_FILES) -> bool:
    rec = record_hashes(site)
    return all(sha256_path(site / rel) == rec[rel] for rel in relpaths)


def force_restores(cli, site) -> None:
    res = revert(cli, site, "--all", "--force")
    assert res.rc == 0, res
    assert at_record(site)


def flip(path: Path, offset: int = 100) -> None:
    """Flip one bit of a file (a new inode: never written through a hard link)."""
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0x01
    replace_file(path, bytes(data))


def journal(site: Path) -> dict:
    return json.loads((site / ".patchq" / "journal.json").read_text())


def set_journal(site: Path, data) -> None:
    replace_file(site / ".patchq" / "journal.json", json.dumps(data))


def crash_apply(cli, site, writes: int = 1):
    """An apply killed after ``writes`` file writes (leaves ``.patchq/txn``)."""
    res = apply(cli, site, env={"PATCHQ_FAULT_AFTER_WRITES": str(writes)})
    assert res.rc == 99 and (site / ".patchq/txn/manifest.json").is_file(), res
    return json.loads((site / ".patchq/txn/manifest.json").read_text())


# -- 1. one owner of the layout --------------------------------------------------------


@pytest.mark.parametrize("module", ["patchq/env/state.py", "patchq/env/status.py", "patchq/fastpath.py",
                                    "patchq/env/hookdir.py", "patchq/runtime/live.py"])
def test_state_paths_are_spelled_only_by_the_layout_module(module):
    text = (REPO / module).read_text()
    code = re.sub(r'""".*?"""', "", text, flags=re.S)  # docstrings may name the files
    spelled = [r'"journal\.json"', r'"\.patchq"', r'"\.write-probe', r'"owner\.json"',
               r'join\([^)]*"(pristine|txn|foreign)"', r'/ "(pristine|txn|foreign)"',
               r'environ\.get\("PATCHQ_STATE_DIR"\)']
    for pattern in spelled:
        found = re.search(pattern, code)
        assert found is None, f"{module} spells {found.group(0)} itself (ask patchq.env.layout)"


# -- 2. verified state ------------------------------------------------------------------


def test_a_damaged_pristine_copy_is_exit_6_then_force_restores_from_the_wheel(site, cli):
    assert apply(cli, site).rc == 0
    flip(site / ".patchq/pristine" / KV)
    before = {rel: sha256_path(site / rel) for rel in DENSE_FILES}
    for args in (("revert", "--all"), ("revert", "--profile", "full")):
        res = cli(*args, "--site-packages", site, "--json")
        assert res.rc == 6 and KV in one_line(res) and "damaged" in res.json["error"], res
    res = apply(cli, site, "kv")  # re-planning from the damaged copy is refused too
    assert res.rc == 6 and KV in res.json["error"], res
    res = cli("check", "--profile", "full", "--site-packages", site)  # never planned from a damaged copy
    assert res.rc == 6 and KV in one_line(res), res
    assert {rel: sha256_path(site / rel) for rel in DENSE_FILES} == before  # nothing written
    force_restores(cli, site)


def test_a_damaged_staged_file_is_exit_6_and_nothing_is_written(site, cli):
    manifest = crash_apply(cli, site, writes=1)
    pending = sorted(manifest["files"])[1:]  # the first was written before the crash
    flip(site / ".patchq/txn/files" / pending[0])
    before = {rel: sha256_path(site / rel) for rel in DENSE_FILES}
    res = apply(cli, site)
    assert res.rc == 6 and pending[0] in one_line(res), res
    assert {rel: sha256_path(site / rel) for rel in DENSE_FILES} == before
    force_restores(cli, site)


def test_a_staged_file_that_disagrees_with_its_journal_is_refused(site, cli):
    crash_apply(cli, site, writes=1)
    path = site / ".patchq/txn/manifest.json"
    data = json.loads(path.read_text())
    rel = sorted(data["files"])[-1]
    data["journal"]["files"][rel]["patched_sha256"] = "0" * 64  # manifest self-contradiction
    replace_file(path, json.dumps(data))
    res = apply(cli, site)
    assert res.rc == 6 and rel in one_line(res), res
    force_restores(cli, site)


# -- 3. confined paths --------------------------------------------------------------------


@pytest.mark.parametrize("hostile", ["../outside/escape.py", "/tmp/patchq-abs-escape.py", "vllm/../../outside/x.py",
                                     "vllm/not_in_record.py", ".patchq/journal.json", "vllm//v1/core/x.py", 7])
def test_a_journal_path_outside_record_is_exit_6(site, cli, hostile):
    outside = site.parent / "outside"
    outside.mkdir()
    (outside / "escape.py").write_text("keep me\n")
    assert apply(cli, site).rc == 0
    data = journal(site)
    if isinstance(hostile, str):
        data["files"][hostile] = data["files"].pop(KV)
        for entry in data["patches"].values():
            entry["files"] = [hostile if f == KV else f for f in entry["files"]]
    else:
        data["files"][KV]["patched_sha256"] = hostile  # a wrong JSON type
    set_journal(site, data)
    for fast in (True, False):
        res = cli("status", "--site-packages", site, fast=fast)
        assert res.rc == 6, res
        one_line(res)
    for res in (apply(cli, site), apply(cli, site, "kv"), revert(cli, site, "--all")):
        assert res.rc == 6, res
        one_line(res)
    assert (outside / "escape.py").read_text() == "keep me\n" and os.listdir(outside) == ["escape.py"]
    assert not Path("/tmp/patchq-abs-escape.py").exists()
    force_restores(cli, site)
    assert os.listdir(outside) == ["escape.py"]


def test_a_manifest_path_outside_record_is_exit_6(site, cli):
    crash_apply(cli, site, writes=1)
    path = site / ".patchq/txn/manifest.json"
    data = json.loads(path.read_text())
    data["files"]["../evil.py"] = {"from": None, "to": "a" * 64}
    replace_file(path, json.dumps(data))
    res = apply(cli, site)
    assert res.rc == 6 and "evil.py" in one_line(res), res
    assert not (site.parent / "evil.py").exists()
    force_restores(cli, site)


def test_a_symlinked_state_dir_is_refused_not_followed(site, cli, tmp_path):
    assert apply(cli, site).rc == 0
    elsewhere = tmp_path / "elsewhere"
    shutil.move(site / ".patchq", elsewhere)
    os.symlink(elsewhere, site / ".patchq")
    snap = snapshot(elsewhere)
    for res in (cli("status", "--site-packages", site), apply(cli, site), apply(cli, site, "kv"),
                revert(cli, site, "--all")):
        assert res.rc == 6 and "symlink" in one_line(res), res
    assert snapshot(elsewhere) == snap
    # the documented recovery: the link is moved aside as it is (never followed), the files
    # come back from RECORD-verified bytes, and nothing outside site-packages changes
    force_restores(cli, site)
    assert snapshot(elsewhere) == snap
    assert [p.is_symlink() for p in site.glob(".patchq.damaged-*")] == [True]


def test_a_symlinked_target_file_is_refused_and_the_link_kept(site, cli, tmp_path):
    real = tmp_path / "kv_cache_utils.py"
    real.write_bytes((site / KV).read_bytes())
    (site / KV).unlink()
    os.symlink(real, site / KV)
    before = real.read_bytes()
    res = apply(cli, site)
    assert res.rc == 5 and "symlink" in one_line(res) and KV in res.json["error"], res
    assert (site / KV).is_symlink() and real.read_bytes() == before
    assert not (site / ".patchq/journal.json").exists()


# -- 4. state keyed by environment ---------------------------------------------------------


def test_a_shared_state_dir_keeps_environments_apart(make_site, cli, tmp_path):
    a, b = make_site(), make_site()
    env = {"PATCHQ_STATE_DIR": str(tmp_path / "state")}
    assert apply(cli, a, "full", env=env).rc == 0
    assert apply(cli, b, "kv", env=env).rc == 0
    for site, profile in ((a, "full"), (b, "kv")):
        res = cli("status", "--site-packages", site, "--json", env=env)
        assert res.rc == 0 and res.json["profile"] == profile, res
        again = apply(cli, site, profile, env=env)
        assert again.rc == 0 and again.json["noop"], again
    assert len(list((tmp_path / "state").glob("env-*/journal.json"))) == 2
    for site in (a, b):
        res = revert(cli, site, "--all", env=env)
        assert res.rc == 0, res
        assert at_record(site)


def test_a_legacy_flat_state_dir_keeps_working_and_is_migrated(site, cli, tmp_path):
    base = tmp_path / "state"
    env = {"PATCHQ_STATE_DIR": str(base)}
    assert apply(cli, site, env=env).rc == 0
    (keyed,) = base.glob("env-*")
    for name in ("journal.json", "pristine"):  # what an older patchq left: a flat directory
        shutil.move(keyed / name, base / name)
    shutil.rmtree(keyed)
    res = cli("status", "--site-packages", site, "--json", env=env)
    assert res.rc == 0 and res.json["profile"] == "full", res
    assert apply(cli, site, env=env).json["noop"]
    res = revert(cli, site, "--all", env=env)
    assert res.rc == 0 and sorted(res.json["written"]) == DENSE_FILES, res
    assert at_record(site)
    assert not (base / "journal.json").exists() and (keyed / "owner.json").is_file()


def test_a_journal_of_another_version_keeps_pristine_copies_when_apply_refuses(site, cli):
    assert apply(cli, site).rc == 0
    data = journal(site)
    data["vllm"] = "0.22.0"
    set_journal(site, data)
    replace_file(site / KV, (site / KV).read_bytes() + b"# someone else\n")
    kept = sorted(p.relative_to(site) for p in (site / ".patchq/pristine").rglob("*.py"))
    assert len(kept) == 4
    res = apply(cli, site)
    assert res.rc == 4, res
    assert sorted(p.relative_to(site) for p in (site / ".patchq/pristine").rglob("*.py")) == kept


def test_versions_compare_as_versions(site, cli):
    assert apply(cli, site).rc == 0
    data = journal(site)
    data["vllm"] = "0.23"  # the same release as 0.23.0 (PEP 440)
    set_journal(site, data)
    res = cli("status", "--site-packages", site, "--json")
    assert res.rc == 0 and res.json["profile"] == "full" and not res.json["note"], res


def test_the_noop_fast_path_checks_the_applied_patch_hashes(site, cli):
    # found by bench/reliability.py: a journal whose patch entry disagrees with the series
    # answered "nothing to do" (exit 0) while status reported the patch as foreign (exit 7)
    assert apply(cli, site).rc == 0
    data = journal(site)
    data["patches"]["backend-tiles"]["hash"] = "000000000000"
    set_journal(site, data)
    res = apply(cli, site)
    assert res.rc == 0 and not res.json["noop"], res
    assert cli("status", "--site-packages", site).rc == 0


# -- 5. no silent success -------------------------------------------------------------------


def test_revert_with_a_lost_journal_fails_and_names_the_files(site, cli):
    assert apply(cli, site).rc == 0
    (site / ".patchq/journal.json").unlink()
    before = {rel: sha256_path(site / rel) for rel in DENSE_FILES}
    for args in (("--all",), ("--profile", "full")):
        res = revert(cli, site, *args)
        assert res.rc == 4, res
        msg = one_line(res)
        assert all(rel in msg for rel in DENSE_FILES), msg
    assert {rel: sha256_path(site / rel) for rel in DENSE_FILES} == before
    force_restores(cli, site)


def _second_dist_info(site: Path, name: str, owns: bool) -> None:
    src = next(site.glob("vllm-0.23.0.dist-info"))
    dst = site / name
    shutil.copytree(src, dst)
    if not owns:
        text = (dst / "RECORD").read_text()
        (dst / "RECORD").unlink()
        (dst / "RECORD").write_text(re.sub(r"(vllm/_version\.py,sha256=)\w", r"\g<1>0", text))


def test_several_dist_infos_pick_the_owner_of_the_files(site, cli):
    _second_dist_info(site, "vllm-0.9.0.dist-info", owns=False)  # "0.9.0" > "0.23.0" as strings
    for fast in (True, False):
        res = cli("status", "--site-packages", site, "--json", fast=fast)
        assert res.rc == 0 and res.json["vllm"] == "0.23.0", res
    res = apply(cli, site)
    assert res.rc == 0 and res.json["vllm"]["version"] == "0.23.0", res


def test_several_dist_infos_owning_the_files_are_exit_3(site, cli):
    _second_dist_info(site, "vllm-0.9.0.dist-info", owns=True)
    for res in (cli("status", "--site-packages", site), cli("status", "--site-packages", site, fast=False),
                apply(cli, site)):
        assert res.rc == 3, res
        msg = one_line(res)
        assert "vllm-0.9.0.dist-info" in msg and "vllm-0.23.0.dist-info" in msg


# -- 6. smaller items ----------------------------------------------------------------------


def test_the_write_probe_is_per_process(site, cli):
    (site / ".patchq/.write-probe").mkdir(parents=True)  # what a fixed name collides with
    res = apply(cli, site)
    assert res.rc == 0, res
    assert not [n for n in os.listdir(site / ".patchq") if n.startswith(".write-probe.")]


def test_a_deleted_lock_file_does_not_let_a_second_writer_in(site, cli):
    from patchq.env.state import StateDir

    assert apply(cli, site, "kv").rc == 0
    before = {rel: sha256_path(site / rel) for rel in DENSE_FILES}
    with StateDir(site).lock():
        for leftover in (site / ".patchq/lock",):
            if leftover.exists():
                leftover.unlink()
        res = apply(cli, site, env={"PATCHQ_LOCK_TIMEOUT": "1"})
    assert res.rc == 5 and "another patchq" in one_line(res), res
    assert {rel: sha256_path(site / rel) for rel in DENSE_FILES} == before


def test_a_lock_path_that_is_a_directory_does_not_break_apply(site, cli):
    (site / ".patchq/lock").mkdir(parents=True)
    res = apply(cli, site)
    assert res.rc == 0, res


def test_stray_temp_files_of_a_killed_patchq_are_removed(site, cli):
    assert apply(cli, site).rc == 0
    strays = [site / "vllm/v1/core/.kv_cache_utils.py.ab12cd34.patchq-tmp",
              site / ".patchq/pristine/vllm/v1/core/.kv_cache_utils.py.zz99yy88.patchq-tmp",
              site / ".patchq/.journal.json.a1b2c3d4.patchq-tmp"]
    for p in strays:
        p.write_bytes(b"half written")
    keep = site / "vllm/v1/core/.not-ours.tmp"
    keep.write_bytes(b"x")
    res = apply(cli, site, "kv")
    assert res.rc == 0, res
    assert not any(p.exists() for p in strays) and keep.exists()


def test_force_reinstall_of_the_same_version_reads_like_an_upgrade(site, pristine_site, cli):
    assert apply(cli, site).rc == 0
    for rel in DENSE_FILES:  # what `pip install --force-reinstall vllm==0.23.0` leaves
        replace_file(site / rel, (pristine_site / rel).read_bytes())
    for fast in (True, False):
        res = cli("status", "--site-packages", site, "--json", fast=fast)
        assert res.rc == 0, res
        assert "reinstalled" in res.json["note"] and "apply again" in res.json["note"]
        assert {p["status"] for p in res.json["patches"]} == {"not-applied"}
    res = apply(cli, site)
    assert res.rc == 0 and sorted(res.json["written"]) == DENSE_FILES, res
    assert cli("status", "--site-packages", site).rc == 0


def test_apply_into_an_environment_without_the_series_runtime_package_is_refused(make_site, cli):
    site = make_site(runtime=False)
    res = apply(cli, site)
    assert res.rc == 5, res
    msg = one_line(res)
    assert "stack_runtime" in msg and "Install the package that provides it there first" in msg  # no distribution here
    assert at_record(site) and not (site / ".patchq/journal.json").exists()
    assert apply(cli, site, "kv").rc == 0  # a profile that does not import it
    (site / "extra.pth").write_text(str(stack.RUNTIME) + "\n")
    assert apply(cli, site).rc == 0


@pytest.mark.parametrize("record", ['[1, 2]', '{"pid": "x"}', '{"pid": 1, "patches": [3]}', '{"pid": 1',
                                    b"\xff\xfe"])
def test_a_malformed_runtime_record_is_one_line_and_exit_6(cli, tmp_path, record):
    rdir = tmp_path / "procs"
    rdir.mkdir()
    (rdir / "123.json").write_bytes(record if isinstance(record, bytes) else record.encode())
    res = cli("status", "--runtime", env={"PATCHQ_RUNTIME_DIR": str(rdir)})
    assert res.rc == 6 and "123.json" in one_line(res), res


def test_a_truncated_manifest_is_exit_6_and_force_recovers(site, cli):
    crash_apply(cli, site, writes=2)
    path = site / ".patchq/txn/manifest.json"
    replace_file(path, path.read_bytes()[:40])
    for res in (apply(cli, site), revert(cli, site, "--all")):
        assert res.rc == 6 and "manifest.json" in one_line(res), res
    assert cli("status", "--site-packages", site).rc == 7  # a pending write is drift
    force_restores(cli, site)
    assert list((site / ".patchq").glob("txn.damaged-*"))


def test_a_journal_that_is_a_directory_is_exit_6(site, cli):
    assert apply(cli, site).rc == 0
    (site / ".patchq/journal.json").unlink()
    (site / ".patchq/journal.json").mkdir()
    for res in (cli("status", "--site-packages", site), cli("status", "--site-packages", site, fast=False),
                apply(cli, site), revert(cli, site, "--all")):
        assert res.rc == 6, res
        one_line(res)
    force_restores(cli, site)


@pytest.mark.parametrize("damage", ["missing", "binary"])
def test_a_missing_or_binary_record_is_exit_3(site, cli, damage):
    rec = next(site.glob("vllm-*.dist-info")) / "RECORD"
    rec.unlink()
    if damage == "binary":
        rec.write_bytes(b"vllm/__init__.py,sha256=\xff\xfe,1\n")
    for res in (cli("status", "--site-packages", site), cli("status", "--site-packages", site, fast=False),
                apply(cli, site)):
        assert res.rc == 3 and "RECORD" in one_line(res), res


def test_a_full_disk_while_pristine_copies_are_written_is_exit_5(site, cli, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mnt)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.decode().strip()}")
    try:
        res = apply(cli, site, env={"PATCHQ_STATE_DIR": str(mnt)})
        assert res.rc == 5, res
        assert "No space left" in one_line(res)
        assert at_record(site)
        assert not list(mnt.glob("env-*/journal.json"))
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
