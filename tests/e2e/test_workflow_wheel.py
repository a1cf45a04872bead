"""The user's workflow on a real vLLM 0.23.0 install (wheel layer: the ``site`` fixture).

Each test failed before the fix it covers (issue 27).
"""

from __future__ import annotations

from support import record_hashes, replace_file, run_cli


def test_check_of_the_applied_profile_on_a_patched_install(site):
    """`check --profile full` where full is applied: the patches' own upstream checks read
    the pristine definitions (they raised AttributeError / SyntaxError before)."""
    sp = ("--site-packages", str(site))
    assert run_cli("apply", "--profile", "full", *sp).rc == 0
    out = run_cli("check", "--profile", "full", *sp, "--json")
    assert out.rc == 0 and out.json["ok"], out
    assert [p["notes"] for p in out.json["patches"]] == [[]] * 5, out.json["patches"]
    assert {p["id"]: p["upstream_check"]["verdict"] for p in out.json["patches"] if p["upstream_check"]} == {
        "backend-tiles": "not-upstreamed", "align-backoff": "not-upstreamed"}


def test_apply_after_a_force_reinstall_names_what_it_added(site, tmp_path):
    """`pip install --force-reinstall` of the same vLLM puts RECORD's bytes back: the next
    apply re-applies every patch and says so (it printed `added -`)."""
    from patchq.vllmdist import releases

    sp = ("--site-packages", str(site))
    first = run_cli("apply", "--profile", "full", *sp, "--json").json
    tree = releases.release_tree("0.23.0")
    record = record_hashes(site)
    for rel in first["written"]:  # what the reinstall does: the wheel's bytes back in place
        replace_file(site / rel, (tree / rel).read_bytes())
        assert record[rel]
    again = run_cli("apply", "--profile", "full", *sp, "--json")
    assert again.rc == 0 and sorted(again.json["written"]) == sorted(first["written"]), again
    assert again.json["added"] == first["added"] == ["backend-tiles", "page-scale", "align-backoff",
                                                     "fp8-experts", "head-gemv"]
    text = run_cli("revert", "--all", *sp)
    assert text.rc == 0 and "removed align-backoff, backend-tiles, fp8-experts, head-gemv, page-scale" in text.stdout


# -- patchq upgrade ---------------------------------------------------------------------------

SHMEM_ANCHORS_023 = '''
[anchors.default]
module = "vllm.model_executor.layers.fla.ops.utils"
qualname = "Backend"
node = "DEFAULT = 102400"
count = 1

[anchors.default.fingerprints]
"0.23.0" = "b176b8f2acf3804f"
'''


def _upgraded_site(make_site, sdir):
    """A vLLM 0.26.0 install whose state is what `pip install vllm==0.26.0` leaves over a
    0.23.0 that carried profile `one` of ``sdir``: the journal of the old release."""
    import shutil

    old, new = make_site("0.23.0"), make_site("0.26.0")
    assert run_cli("apply", "--profile", "one", "--site-packages", old, "--series", sdir).rc == 0
    shutil.copytree(old / ".patchq", new / ".patchq")
    return new


def test_upgrade_checks_rebases_with_write_and_applies(make_site, tmp_path):
    """A series that knows vLLM 0.23.0 only, after an upgrade to 0.26.0: the first upgrade
    says the rebase is clean and what to run; with --write it widens the variant, records
    the fingerprints and the diff, applies, and says so per patch."""
    from testing.mini_series import SHMEM_PATCH, mini_series

    sdir = mini_series(tmp_path, "shmem-only", SHMEM_PATCH, SHMEM_ANCHORS_023)
    site = _upgraded_site(make_site, sdir)
    sp = ("--site-packages", str(site), "--series", str(sdir))
    dry = run_cli("upgrade", *sp, "--json")
    assert dry.rc == 1, dry
    (row,) = dry.json["patches"]
    assert (row["rebase"], row["blocking"], row["applied"], dry.json["apply"]) == ("clean", True, False, None)
    assert (dry.json["profile"], dry.json["from"], dry.json["to"]) == ("one", "0.23.0", "0.26.0")
    assert dry.json["next"][0].startswith("`patchq upgrade --write` records what the rebase proved for shmem-only")
    assert 'variant(">=0.15,<0.26"' in (sdir / "shmem_only.py").read_text()  # nothing written
    done = run_cli("upgrade", *sp, "--write")
    assert done.rc == 0, done
    lines = done.stdout.splitlines()
    assert lines[0] == "upgrade one: vllm 0.23.0 -> 0.26.0"
    # moved: the anchor's module hint still names the file Backend left in 0.26.0 (found by search)
    assert lines[1].split() == ["shmem-only", "moved", "->", "rebase", "clean", "->", "applied"], done.stdout
    assert f"      wrote {sdir / 'shmem_only.py'}" in lines
    steps = [ln for ln in lines if ln.startswith("next:")]  # a `note:` of a newer release may follow
    assert steps[-1] == "next: review and commit the series changes (`git diff`; --branch NAME --commit does it)", \
        done.stdout
    assert 'variant(">=0.15,<=0.26.0"' in (sdir / "shmem_only.py").read_text()
    assert "DEFAULT = 101376  # sm121" in (site / "vllm/third_party/flash_linear_attention/ops/utils.py").read_text()
    status = run_cli("status", *sp, "--json")
    assert status.rc == 0 and [p["status"] for p in status.json["patches"]] == ["applied"], status
    again = run_cli("upgrade", *sp)
    assert again.rc == 0 and "nothing to do" in again.stdout and "next:" not in again.stdout, again


def test_upgrade_to_a_release_not_installed_checks_it_and_applies_nothing(make_site, tmp_path):
    from testing.mini_series import SHMEM_PATCH, mini_series

    sdir = mini_series(tmp_path, "shmem-only", SHMEM_PATCH, SHMEM_ANCHORS_023)
    site = make_site("0.23.0")
    sp = ("--site-packages", str(site), "--series", str(sdir))
    assert run_cli("apply", "--profile", "one", *sp).rc == 0
    out = run_cli("upgrade", "--to", "0.26.0", "--write", *sp, "--json")
    assert out.rc == 0 and out.json["apply"] is None and out.json["installed"] == "0.23.0", out
    assert out.json["patches"][0]["check"] == "moved" and out.json["patches"][0]["rebase"] == "clean"
    assert any(s.startswith("review and commit") for s in out.json["next"])
    ready = run_cli("upgrade", "--to", "0.26.0", *sp)
    assert ready.rc == 0 and ready.stdout.splitlines()[-1] == (
        "next: install it (`pip install vllm==0.26.0`), then `patchq upgrade`"), ready
