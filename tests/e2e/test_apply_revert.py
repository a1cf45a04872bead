"""apply / revert / status / diff / list on a real vLLM 0.23.0 install, through the CLI.

Every test works on ``site``: a hard-linked copy of a cached ``pip install --no-deps``
of the vLLM 0.23.0 wheel (uv's layout; see conftest.py). The fixture checks after each
test that the cached pristine install was not written through a link. The series is the
stack fixture (``testing/stack.py``): ``full`` patches four files, ``kv`` three of its patches.
"""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import RUNTIME_PTH
from support import (
    contents,
    definition_source,
    mask_sentinel_hashes,
    record_hashes,
    replace_file,
    sha256_bytes,
    sha256_path,
    snapshot,
)
from testing import stack

VERSION = "0.23.0"
FULL = stack.FULL
KV_PATCHES = stack.KV
UTILS, LOGITS, INC, KV = stack.UTILS, stack.LOGITS, stack.INC, stack.KV_UTILS
FULL_FILES = stack.FULL_FILES
#: file -> the outermost definitions the full profile changes in it
FULL_DEFS = stack.FULL_DEFS
LOCK = ".patchq/lock"


# -- helpers ---------------------------------------------------------------------


def apply(cli, site, profile="full", *extra, **kw):
    return cli("apply", "--profile", profile, "--site-packages", site, "--json", *extra, **kw)


def revert(cli, site, *args, **kw):
    return cli("revert", *args, "--site-packages", site, "--json", **kw)


def status(cli, site, *extra, **kw):
    res = cli("status", "--site-packages", site, "--json", *extra, **kw)
    assert res.json is not None, res
    return res


def by_id(doc) -> dict[str, dict]:
    """The rows of the stack's patches."""
    return {p["id"]: p for p in doc["patches"] if p["id"] in FULL}


def file_states(doc) -> dict[str, str]:
    return {f["path"]: f["state"] for f in doc["files"]}


def one_line_error(res) -> str:
    """The CLI's error: exactly one line on stderr, nothing on stdout."""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("patchq: error: "), res
    assert res.stdout == "", res
    return lines[0]


def vllm_snapshot(site: Path) -> dict:
    """Stat of every file except patchq's lock file (opening the lock is not a write)."""
    return snapshot(site, skip=(LOCK,))


def record_of(site: Path) -> dict[str, str]:
    return record_hashes(site)


def assert_record(site: Path, relpaths) -> None:
    rec = record_of(site)
    for rel in relpaths:
        assert sha256_path(site / rel) == rec[rel], f"{rel} differs from its RECORD hash"


@pytest.fixture(scope="session")
def full_bytes(pristine_site) -> dict[str, bytes]:
    """relpath -> the fully patched bytes of each file of the full profile (planned in memory)."""
    from patchq import series
    from patchq.plan import engine
    from patchq.vllmdist import sources

    plan = engine.plan(sources.installed(pristine_site), series.load(stack.SERIES).patches_of("full"))
    assert plan.ok and sorted(plan.patched) == FULL_FILES
    return {rel: text.encode("utf-8") for rel, text in plan.patched.items()}


@pytest.fixture
def series_hashes() -> dict[str, str]:
    """The series' current patch hashes (per test: the series may be edited meanwhile)."""
    from patchq import series

    s = series.load(stack.SERIES)
    return {pid: s.patch(pid).hash for pid in FULL}


# -- apply --------------------------------------------------------------------------


def test_apply_full_changes_exactly_the_five_patches_definitions(site, pristine_site, cli):
    import libcst as cst

    from patchq.plan.anchors import index_definitions

    res = apply(cli, site)
    assert res.rc == 0, res
    doc = res.json
    assert doc["ok"] and not doc["noop"] and doc["error"] is None
    assert doc["written"] == FULL_FILES
    assert doc["added"] == FULL and doc["removed"] == [] and doc["restored"] == []
    assert [p["status"] for p in doc["patches"]] == ["ok"] * 5

    # only the four files got new inodes; everything else is still the pristine link
    before, after = snapshot(pristine_site), snapshot(site)
    relinked = sorted(rel for rel, st in before.items() if after[rel].ino != st.ino)
    assert relinked == FULL_FILES
    assert all(rel.startswith(".patchq/") for rel in set(after) - set(before) - {RUNTIME_PTH})
    for rel in FULL_FILES:
        assert os.stat(site / rel).st_nlink == 1, f"{rel} still shares an inode"

    # putting the changed definitions back gives the pristine file, byte for byte
    for rel, qualnames in FULL_DEFS.items():
        pristine_text = (pristine_site / rel).read_text(encoding="utf-8")
        pristine_defs = index_definitions(cst.parse_module(pristine_text))
        patched = cst.parse_module((site / rel).read_text(encoding="utf-8"))
        for qualname in qualnames:
            (new,) = index_definitions(patched)[qualname]
            (old,) = pristine_defs[qualname]
            assert not new.deep_equals(old), f"{qualname} was not changed"
            patched = patched.deep_replace(new, old)
        assert patched.code == pristine_text, f"{rel} changed outside {qualnames}"


def test_apply_never_writes_through_a_hard_link(site, pristine_site, cli):
    for rel in FULL_FILES:
        assert os.stat(site / rel).st_ino == os.stat(pristine_site / rel).st_ino  # linked (uv layout)
    assert apply(cli, site).rc == 0
    for rel in FULL_FILES:
        assert os.stat(site / rel).st_ino != os.stat(pristine_site / rel).st_ino
    assert_record(pristine_site, FULL_FILES)


def test_apply_twice_changes_no_byte_and_writes_nothing(site, cli):
    first = apply(cli, site)
    assert first.rc == 0, first
    files = contents(site, FULL_FILES + [".patchq/journal.json"])
    snap = vllm_snapshot(site)

    again = cli("apply", "--profile", "full", "--site-packages", site)  # fast path, text
    assert again.rc == 0, again
    assert "nothing to do" in again.stdout
    assert vllm_snapshot(site) == snap and contents(site, files) == files

    full = apply(cli, site, fast=False)  # the full engine path agrees
    assert full.rc == 0, full
    assert full.json["noop"] and full.json["written"] == [] and full.json["added"] == []
    assert vllm_snapshot(site) == snap and contents(site, files) == files

    fast_json = apply(cli, site)
    assert fast_json.rc == 0 and fast_json.json["noop"] and fast_json.json["written"] == []
    assert [p["id"] for p in fast_json.json["patches"]] == FULL


def test_apply_preserves_mode_and_drops_stale_bytecode(site, cli):
    # break the link first: a chmod on a linked file would change the pristine install
    replace_file(site / KV, (site / KV).read_bytes())
    os.chmod(site / KV, 0o640)
    for rel in (KV, INC, "vllm/v1/core/block_pool.py"):
        py_compile.compile(str(site / rel), doraise=True)

    def pyc(rel):
        return sorted((site / rel).parent.joinpath("__pycache__").glob(Path(rel).stem + ".*.pyc"))

    assert pyc(KV) and pyc(INC)

    assert apply(cli, site).rc == 0
    assert os.stat(site / KV).st_mode & 0o777 == 0o640
    assert os.stat(site / INC).st_mode & 0o777 == os.stat(site / "vllm/v1/core/block_pool.py").st_mode & 0o777
    assert pyc(KV) == [] and pyc(INC) == []
    assert pyc("vllm/v1/core/block_pool.py"), "bytecode of an unpatched module must stay"


def test_apply_kv_after_full_removes_two_patches(site, cli):
    assert apply(cli, site).rc == 0
    snap = vllm_snapshot(site)
    res = apply(cli, site, "kv")
    assert res.rc == 0, res
    doc = res.json
    assert doc["removed"] == ["fp8-experts", "head-gemv"] and doc["added"] == []
    assert doc["restored"] == sorted([INC, LOGITS]) and doc["written"] == sorted([INC, LOGITS])
    assert_record(site, [INC, LOGITS])
    now = vllm_snapshot(site)
    for rel in (UTILS, KV):
        assert now[rel] == snap[rel], f"{rel} must not be rewritten"
    st = status(cli, site)
    assert st.rc == 0
    assert {pid: p["status"] for pid, p in by_id(st.json).items()} == {
        **{p: "applied" for p in KV_PATCHES}, "fp8-experts": "not-applied", "head-gemv": "not-applied"}
    assert st.json["profile"] == "kv"
    kept = sorted(str(p.relative_to(site / ".patchq/pristine")) for p in (site / ".patchq/pristine").rglob("*.py"))
    assert kept == sorted([UTILS, KV])

    back = apply(cli, site)
    assert back.rc == 0 and back.json["added"] == ["fp8-experts", "head-gemv"], back


def test_apply_refuses_a_foreign_edit(site, cli):
    replace_file(site / KV, (site / KV).read_bytes() + b"\n# a local hotfix\n")
    snap = vllm_snapshot(site)
    res = cli("apply", "--profile", "full", "--site-packages", site)
    assert res.rc == 4, res
    assert KV in one_line_error(res)
    assert snapshot(site, skip=(".patchq/",)) == {k: v for k, v in snap.items() if not k.startswith(".patchq/")}
    assert not (site / ".patchq/journal.json").exists()


# -- status in every state --------------------------------------------------------------


def test_status_not_applied(site, cli, series_hashes):
    res = status(cli, site)
    assert res.rc == 0
    doc = res.json
    assert doc["schema"] == "patchq.status/1" and doc["vllm"] == VERSION and doc["profile"] is None
    assert not doc["pending_write"]
    assert {pid: (p["status"], p["hash"]) for pid, p in by_id(doc).items()} == {
        pid: ("not-applied", h) for pid, h in series_hashes.items()}
    states = file_states(doc)
    assert set(FULL_FILES) <= set(states) and set(states.values()) == {"pristine"}


def test_status_applied(site, cli, series_hashes):
    assert apply(cli, site).rc == 0
    res = status(cli, site)
    assert res.rc == 0
    doc = res.json
    assert doc["profile"] == "full" and doc["journal_vllm"] == VERSION
    assert {pid: (p["status"], p["applied_hash"]) for pid, p in by_id(doc).items()} == {
        pid: ("applied", h) for pid, h in series_hashes.items()}
    assert {f: file_states(doc)[f] for f in FULL_FILES} == {f: "patched" for f in FULL_FILES}
    assert by_id(doc)["page-scale"]["files"] == [KV]
    text = cli("status", "--site-packages", site)
    assert text.rc == 0 and text.stdout.count(" applied ") == 5, text


def test_status_stale_then_apply_reapplies_from_pristine(site, cli, series_copy, full_bytes):
    assert apply(cli, site).rc == 0
    module = series_copy / "backend_tiles.py"
    module.write_text(module.read_text() + "\n# an edit of the patch definition\n")
    res = status(cli, site, "--series", series_copy)
    assert res.rc == 7, res
    rows = by_id(res.json)
    assert rows["backend-tiles"]["status"] == "stale"
    new_hash = rows["backend-tiles"]["hash"]
    assert rows["backend-tiles"]["applied_hash"] != new_hash
    assert {pid: p["status"] for pid, p in rows.items() if pid != "backend-tiles"} == {p: "applied" for p in FULL[1:]}

    # the copy is another series than the one that applied full: apply refuses to replace its
    # patches (exit 7, nothing written) unless told to
    refused = apply(cli, site, "full", "--series", series_copy)
    assert refused.rc == 7 and refused.json["written"] == [] and "--replace" in refused.json["error"], refused
    res = apply(cli, site, "full", "--series", series_copy, "--replace")
    assert res.rc == 0, res
    assert res.json["added"] == ["backend-tiles"] and res.json["written"] == [UTILS]
    text = (site / UTILS).read_text()
    assert text.count("# patchq:backend-tiles:") == 1 and f"# patchq:backend-tiles:{new_hash} " in text
    planned = full_bytes[UTILS].decode("utf-8")  # the same edit under the series' own hash
    assert mask_sentinel_hashes(definition_source(text, "Backend")) == mask_sentinel_hashes(
        definition_source(planned, "Backend"))
    after = status(cli, site, "--series", series_copy)
    assert after.rc == 0 and {p["status"] for p in by_id(after.json).values()} == {"applied"}
    # against the project's own series the environment is now the stale one
    assert by_id(status(cli, site).json)["backend-tiles"]["status"] == "stale"


def test_status_foreign_edit_of_a_patched_file(site, cli):
    assert apply(cli, site).rc == 0
    replace_file(site / KV, (site / KV).read_bytes() + b"\n# someone else\n")
    res = status(cli, site)
    assert res.rc == 7
    rows = by_id(res.json)
    assert {pid: p["status"] for pid, p in rows.items()} == {
        "backend-tiles": "applied", "page-scale": "foreign", "align-backoff": "foreign",
        "fp8-experts": "applied", "head-gemv": "applied"}
    assert KV in rows["align-backoff"]["reason"]
    assert file_states(res.json)[KV] == "modified"


def test_status_foreign_sentinel_without_journal(site, cli):
    assert apply(cli, site).rc == 0
    shutil.rmtree(site / ".patchq")
    res = status(cli, site)
    assert res.rc == 7
    for row in by_id(res.json).values():
        assert row["status"] == "foreign" and "sentinel without a journal entry" in row["reason"], row
    assert {f: file_states(res.json)[f] for f in FULL_FILES} == {f: "modified" for f in FULL_FILES}


# -- revert -------------------------------------------------------------------------------------


def test_revert_all_restores_record_hashes(site, pristine_site, cli):
    assert apply(cli, site).rc == 0
    res = revert(cli, site, "--all")
    assert res.rc == 0, res
    assert sorted(res.json["removed"]) == sorted(FULL) and res.json["restored"] == FULL_FILES
    assert_record(site, FULL_FILES)
    journal = json.loads((site / ".patchq/journal.json").read_text())
    assert journal["patches"] == {} and journal["files"] == {} and journal["profile"] is None
    assert not list((site / ".patchq").glob("pristine/**/*.py"))
    assert not (site / ".patchq/txn").exists()
    st = status(cli, site)
    assert st.rc == 0 and {p["status"] for p in st.json["patches"]} == {"not-applied"}
    assert set(file_states(st.json).values()) == {"pristine"}
    # every vllm file equals its RECORD hash again
    rec = record_of(site)
    changed = [rel for rel, st_ in snapshot(site).items()
               if rel in rec and st_.ino != os.stat(pristine_site / rel).st_ino and sha256_path(site / rel) != rec[rel]]
    assert changed == []
    again = revert(cli, site, "--all")
    assert again.rc == 0 and again.json["noop"], again


def test_revert_profile_full(site, cli):
    assert apply(cli, site).rc == 0
    res = revert(cli, site, "--profile", "full")
    assert res.rc == 0, res
    assert sorted(res.json["removed"]) == sorted(FULL)
    assert_record(site, FULL_FILES)
    st = status(cli, site)
    assert {p["status"] for p in st.json["patches"]} == {"not-applied"} and st.json["profile"] is None


def test_revert_profile_kv_keeps_the_other_patches(site, cli):
    assert apply(cli, site).rc == 0
    res = revert(cli, site, "--profile", "kv")
    assert res.rc == 0, res
    assert sorted(res.json["removed"]) == sorted(KV_PATCHES) and res.json["restored"] == sorted([UTILS, KV])
    assert_record(site, [UTILS, KV])
    st = status(cli, site)
    assert {pid: p["status"] for pid, p in by_id(st.json).items()} == {
        **{p: "not-applied" for p in KV_PATCHES}, "fp8-experts": "applied", "head-gemv": "applied"}
    # what is left is not the full profile any more
    assert st.json["profile"] != "full"


def test_revert_refuses_a_foreign_edit_and_force_keeps_a_copy(site, cli):
    assert apply(cli, site).rc == 0
    edited = (site / KV).read_bytes() + b"\n# someone else's hotfix\n"
    replace_file(site / KV, edited)
    snap = vllm_snapshot(site)

    res = cli("revert", "--all", "--site-packages", site)
    assert res.rc == 4, res
    assert KV in one_line_error(res)
    assert vllm_snapshot(site) == snap, "a refused revert must write nothing"
    as_json = revert(cli, site, "--all")
    assert as_json.rc == 4 and as_json.json["ok"] is False and KV in as_json.json["error"]
    assert vllm_snapshot(site) == snap

    forced = revert(cli, site, "--all", "--force")
    assert forced.rc == 0, forced
    kept = forced.json["foreign_kept"]
    assert list(kept) == [KV]
    kept_path = Path(kept[KV])
    assert kept_path.is_relative_to(site / ".patchq/foreign") and kept_path.read_bytes() == edited
    assert_record(site, FULL_FILES)


# -- read-only targets -----------------------------------------------------------------------


def _without_capabilities() -> list[str]:
    """A command prefix that runs as this uid but without capabilities, so root obeys the
    permission bits (``setpriv`` from util-linux); [] when not root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is missing: chmod cannot make a directory read-only for root")
    return [setpriv, "--inh-caps=-all", "--bounding-set=-all", "--"]


def _target_dirs(site: Path) -> list[Path]:
    return sorted({(site / rel).parent for rel in FULL_FILES})


def test_read_only_site_packages_is_refused(site, cli):
    """chmod a-w on site-packages and the target directories (never on files: their inodes
    are shared). Root ignores permission bits, so the CLI runs without capabilities."""
    wrap = _without_capabilities()
    dirs = [site, *_target_dirs(site)]
    snap = vllm_snapshot(site)
    try:
        for d in dirs:
            os.chmod(d, 0o555)
        res = cli("apply", "--profile", "full", "--site-packages", site, wrap=wrap)
        assert res.rc == 5, res
        assert "not writable" in one_line_error(res)
        as_json = apply(cli, site, wrap=wrap)
        assert as_json.rc == 5 and as_json.json["ok"] is False and "not writable" in as_json.json["error"], as_json
        st = status(cli, site, wrap=wrap)  # a read-only environment can still be inspected
        assert st.rc == 0 and {p["status"] for p in st.json["patches"]} == {"not-applied"}
    finally:
        for d in dirs:
            os.chmod(d, 0o755)
    assert vllm_snapshot(site) == snap and not (site / ".patchq").exists()


def test_read_only_target_directory_is_refused_even_for_root(site, cli, immutable):
    """An immutable directory (chattr +i) refuses new entries to root too: site-packages is
    writable, so the state directory is made, but no vLLM file and no journal is written."""
    snap = snapshot(site)
    immutable(site / "vllm/v1/core")
    res = cli("apply", "--profile", "full", "--site-packages", site)
    assert res.rc == 5, res
    assert "vllm/v1/core" in one_line_error(res)
    assert snapshot(site, skip=(".patchq/",)) == snap
    assert not (site / ".patchq/journal.json").exists() and not (site / ".patchq/txn").exists()


def test_read_only_revert_is_refused(site, cli, immutable):
    assert apply(cli, site).rc == 0
    snap = vllm_snapshot(site)
    immutable(site / "vllm/model_executor/layers/quantization")
    res = revert(cli, site, "--all")
    assert res.rc == 5, res
    assert vllm_snapshot(site) == snap


# -- crash between file writes (fault injection) ---------------------------------------


def _assert_each_pristine_or_patched(site: Path, full_bytes) -> list[str]:
    """Every file of the full profile is byte-equal to RECORD or to the fully patched text; returns the patched."""
    rec = record_of(site)
    patched = []
    for rel in FULL_FILES:
        now = sha256_path(site / rel)
        if now == sha256_bytes(full_bytes[rel]):
            patched.append(rel)
        else:
            assert now == rec[rel], f"{rel} is neither pristine nor fully patched"
    leftovers = [p for d in _target_dirs(site) for p in d.glob("*.patchq-tmp")]
    assert leftovers == []
    return patched


@pytest.mark.parametrize("writes", [1, 3])
def test_crash_during_apply_then_apply_recovers(site, cli, full_bytes, writes):
    crashed = apply(cli, site, env={"PATCHQ_FAULT_AFTER_WRITES": str(writes)})
    assert crashed.rc == 99, crashed
    assert _assert_each_pristine_or_patched(site, full_bytes) == FULL_FILES[:writes]
    st = status(cli, site)
    assert st.rc == 7 and st.json["pending_write"] is True
    assert "interrupted write is pending" in cli("status", "--site-packages", site).stdout

    res = apply(cli, site)
    assert res.rc == 0, res
    assert res.json["recovered"] == FULL_FILES[writes:]
    assert contents(site, FULL_FILES) == full_bytes
    st = status(cli, site)
    assert st.rc == 0 and not st.json["pending_write"]
    assert {p["status"] for p in by_id(st.json).values()} == {"applied"}


def test_crash_during_apply_then_revert_recovers(site, cli, full_bytes):
    assert apply(cli, site, env={"PATCHQ_FAULT_AFTER_WRITES": "2"}).rc == 99
    assert _assert_each_pristine_or_patched(site, full_bytes) == FULL_FILES[:2]
    res = revert(cli, site, "--all")
    assert res.rc == 0, res
    assert res.json["recovered"] == FULL_FILES[2:]
    assert_record(site, FULL_FILES)
    st = status(cli, site)
    assert st.rc == 0 and not st.json["pending_write"]
    assert {p["status"] for p in st.json["patches"]} == {"not-applied"}


def test_crash_during_revert_then_revert_recovers(site, cli, full_bytes):
    assert apply(cli, site).rc == 0
    assert revert(cli, site, "--all", env={"PATCHQ_FAULT_AFTER_WRITES": "1"}).rc == 99
    assert len(_assert_each_pristine_or_patched(site, full_bytes)) == 3
    assert status(cli, site).json["pending_write"] is True
    res = revert(cli, site, "--all")
    assert res.rc == 0, res
    assert_record(site, FULL_FILES)
    assert not (site / ".patchq/txn").exists()


# -- diff --------------------------------------------------------------------------------------


def _plain_copy(pristine_site: Path, dst: Path) -> Path:
    """Real copies (no links) of the full profile's files: patch/git write files their own way."""
    for rel in FULL_FILES:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pristine_site / rel, dst / rel)
    return dst


def test_diff_is_a_valid_patch_that_reproduces_apply(site, pristine_site, cli, tmp_path):
    import unidiff

    res = cli("diff", "--profile", "full", "--site-packages", site)
    assert res.rc == 0, res
    text = res.stdout
    ps = unidiff.PatchSet(text)
    assert sorted(f.path for f in ps) == FULL_FILES
    assert all(f.is_modified_file and f.source_file == f"a/{f.path}" and f.target_file == f"b/{f.path}" for f in ps)
    assert all(f.added > 0 for f in ps)
    patch_file = tmp_path / "full.diff"
    patch_file.write_text(text)

    by_git = _plain_copy(pristine_site, tmp_path / "git")
    subprocess.run(["git", "apply", "--check", "-p1", str(patch_file)], cwd=by_git, check=True)
    subprocess.run(["git", "apply", "-p1", str(patch_file)], cwd=by_git, check=True)
    by_patch = _plain_copy(pristine_site, tmp_path / "patch")
    subprocess.run(["patch", "-p1", "--dry-run", "-i", str(patch_file)], cwd=by_patch, check=True,
                   capture_output=True)
    subprocess.run(["patch", "-p1", "--no-backup-if-mismatch", "-i", str(patch_file)], cwd=by_patch, check=True,
                   capture_output=True)

    assert vllm_snapshot(site) == snapshot(site), "diff wrote nothing"
    assert not (site / ".patchq").exists()
    assert apply(cli, site).rc == 0
    applied = contents(site, FULL_FILES)
    assert contents(by_git, FULL_FILES) == applied
    assert contents(by_patch, FULL_FILES) == applied

    # after apply, diff shows what apply changed: the same text; and in JSON
    after = cli("diff", "--profile", "full", "--site-packages", site, "--json")
    assert after.rc == 0 and after.json["diff"] == text and after.json["files"] == FULL_FILES
    assert after.json["schema"] == "patchq.diff/1" and after.json["vllm"] == VERSION


def test_diff_of_the_release_equals_diff_of_the_install(site, cli):
    installed = cli("diff", "--profile", "full", "--site-packages", site)
    release = cli("diff", "--profile", "full", "--vllm", VERSION)
    assert installed.rc == 0 and release.rc == 0, (installed, release)
    assert installed.stdout == release.stdout


# -- list and errors --------------------------------------------------------------------------


def test_list_json(cli, series_hashes):
    res = cli("list", "--json")
    assert res.rc == 0, res
    doc = res.json
    assert doc["schema"] == "patchq.list/1"
    assert {p["name"]: p["patches"] for p in doc["profiles"]} == {
        "base": ["backend-tiles"], "kv": KV_PATCHES, "full": FULL}
    patches = {p["id"]: p for p in doc["patches"]}
    assert set(FULL) <= set(patches)
    for pid in FULL:
        p = patches[pid]
        assert p["hash"] == series_hashes[pid] and p["summary"] and "\n" not in p["summary"]
        assert p["applies"] and p["variants"]
        from packaging.specifiers import SpecifierSet

        covering = [v for v in p["variants"] if VERSION in SpecifierSet(v["applies"])]
        assert [v["kind"] for v in covering] == ["edit"], (pid, covering)


@pytest.mark.parametrize("args, code", [
    (["apply", "--profile", "no-such-profile"], 2),
    (["diff", "--profile", "no-such-profile"], 2),
    (["revert", "--profile", "no-such-profile"], 2),
    (["revert"], 2),
])
def test_usage_errors(site, cli, args, code):
    res = cli(*args, "--site-packages", site)
    assert res.rc == code, res
    line = one_line_error(res)
    if "no-such-profile" in args:
        assert "unknown profile 'no-such-profile'" in line and "full" in line
    res = cli(*args, "--site-packages", site, "--json")
    assert res.rc == code and res.json["ok"] is False and res.json["exit_code"] == code, res
    assert not (site / ".patchq").exists()


@pytest.mark.parametrize("verb", [["apply", "--profile", "full"], ["status"], ["revert", "--all"],
                                  ["diff", "--profile", "full"]])
def test_no_vllm_is_exit_3(tmp_path, cli, verb):
    empty = tmp_path / "empty-site"
    empty.mkdir()
    res = cli(*verb, "--site-packages", empty)
    assert res.rc == 3, res
    assert "no vllm distribution in" in one_line_error(res)
    res = cli(*verb, "--site-packages", empty, "--json")
    assert res.rc == 3 and res.json == {"ok": False, "error": res.json["error"], "exit_code": 3}
    assert list(empty.iterdir()) == []
