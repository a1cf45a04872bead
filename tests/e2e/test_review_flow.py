"""The review flow on a real vLLM 0.26.0 install: drift that is not provably apart blocks
``check`` and ``apply`` alike; ``patchq review --accept`` records the release (who/when)
and both proceed; ``fingerprint`` with a range never blesses an unreviewed release."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchq import hashing

pytestmark = pytest.mark.wheel
tomllib = hashing.toml_module()


SCALED = "                new_spec = replace(layer_spec, block_size=new_block_size)\n"
PADDED = SCALED + ("                if new_spec.page_size_bytes != max_page_size:\n"
                   "                    new_spec = replace(new_spec, page_size_padded=max_page_size)\n")


def test_review_blocks_check_and_apply_until_accepted(tmp_path, make_site, cli):
    # an insertion after the scaled replace of unify_kv_cache_spec_page_size, recorded on
    # 0.25.1: 0.26.0 adds the mamba padding branch next to it
    repo = _stack_with_diff(tmp_path, "pad-after", "0.25.1", {"vllm/v1/core/kv_cache_utils.py": (SCALED, PADDED)})
    anchors = repo / "anchors"
    res = cli("check", "--patch", "pad-after", "--vllm", "0.26.0", "--series", repo, "--json")
    assert res.rc == 1, res.stdout
    (row,) = res.json["patches"]
    assert (row["status"], row["blocking"]) == ("review", True)
    assert "upstream changed what this patch touches" in row["reason"]
    assert re.search(r"vllm/v1/core/kv_cache_utils\.py:\d+", row["reason"])
    (entry,) = row["threeway"]
    # the new mamba `elif` before the scaling branch decides whether the patch's insertion runs
    assert entry["base"] == "0.25.1" and entry["findings"][0]["rule"] == "control"
    assert "== upstream's change (base -> theirs)" in entry["view"]

    site = make_site("0.26.0")
    before = (site / "vllm/v1/core/kv_cache_utils.py").read_bytes()
    res = cli("apply", "--patch", "pad-after", "--site-packages", site, "--series", repo, "--json")
    assert res.rc == 1, res.stdout
    (failed,) = res.json["patches"]
    assert (failed["status"], failed["failure"]) == ("failed", "review")
    assert (site / "vllm/v1/core/kv_cache_utils.py").read_bytes() == before  # nothing written

    res = cli("review", "pad-after", "--vllm", "0.26.0", "--series", repo, "--json")
    assert res.rc == 1 and res.json["accepted"] is False and res.json["status"] == "review"
    res = cli("review", "pad-after", "--vllm", "0.26.0", "--series", repo, "--accept",
              "--by", "tester", "--note", "mamba branch is a separate case", "--json")
    assert res.rc == 0 and res.json["accepted"] is True, res.stdout
    data = tomllib.loads((anchors / "pad-after.toml").read_text(encoding="utf-8"))
    assert data["format"] == 2
    assert data["reviews"]["0.26.0"]["by"] == "tester" and data["reviews"]["0.26.0"]["how"] == "review"
    assert data["reviews"]["0.26.0"]["status"] == "review"
    (anchor,) = data["anchors"].values()
    assert "0.26.0" in anchor["fingerprints"]

    res = cli("check", "--patch", "pad-after", "--vllm", "0.26.0", "--series", repo, "--json")
    assert res.rc == 0
    (row,) = res.json["patches"]
    assert (row["status"], row["reviewed"]) == ("applies", True)
    res = cli("apply", "--patch", "pad-after", "--site-packages", site, "--series", repo)
    assert res.rc == 0, res.stdout + res.stderr

    # a range refreshes what was reviewed and names the rest: 0.27.0 stays unreviewed
    res = cli("fingerprint", "--patch", "pad-after", "--releases", ">=0.26,<0.28", "--series", repo, "--json")
    assert res.rc == 0 and "0.27.0" in res.json["skipped"]["pad-after"]
    data = tomllib.loads((anchors / "pad-after.toml").read_text(encoding="utf-8"))
    (anchor,) = data["anchors"].values()
    assert "0.27.0" not in anchor["fingerprints"]


# -- module-level anchors are first-class (issue 35, item 4) ---------------------------------


def _stack_with_diff(tmp_path, patch_id: str, release: str, edits: dict[str, tuple[str, str]],
                     profile: str = "default", repo=None):
    """A series repo (``patchq init``; or ``repo``) holding ``patch_id`` in ``profile``,
    imported from a diff of the real release's files: relpath -> (old line, new line)."""
    import difflib

    from patchq.vllmdist import releases
    from support import run_cli

    if repo is None:
        repo = tmp_path / "stack"
        assert run_cli("init", repo).rc == 0
    tree = releases.release_tree(release)
    parts = []
    for rel, (old, new) in edits.items():
        text = (tree / rel).read_text(encoding="utf-8")
        assert text.count(old) == 1, (rel, old)
        parts += difflib.unified_diff(text.splitlines(True), text.replace(old, new).splitlines(True),
                                      f"a/{rel}", f"b/{rel}")
    diff = tmp_path / f"{patch_id}.diff"
    diff.write_text("".join(parts), encoding="utf-8")
    res = run_cli("import", diff, "--id", patch_id, "--release", release, "--profile", profile, "--series", repo,
                  "--json")
    assert res.rc == 0 and res.json["verified"], res.stdout + res.stderr
    return repo


def test_two_module_anchors_of_one_patch_each_verify_their_own_file(tmp_path, cli):
    # a module-level constant changed in each of two files on 0.33.0: the two <module> anchors
    # pair by (file, qualname); before, check blocked on 0.33.0 itself ("<module> is not
    # defined once on both sides"), the release the import had just verified
    repo = _stack_with_diff(tmp_path, "two-consts", "0.33.0", {
        "vllm/logger.py": ('_DATE_FORMAT = "%m-%d %H:%M:%S"\n', '_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"\n'),
        "vllm/utils/network_utils.py": ("_ZMQ_LARGE_BUFFER_SIZE = 512 * 1024**2\n",
                                        "_ZMQ_LARGE_BUFFER_SIZE = 256 * 1024**2\n")})
    res = cli("check", "--patch", "two-consts", "--vllm", "0.33.0", "--series", repo, "--json")
    (row,) = res.json["patches"]
    assert (res.rc, row["status"], row["reviewed"]) == (0, "applies", True), row["reason"]
    assert {a["path"]: a["verified"] for a in row["anchors"]} == {
        "vllm/logger.py": "0.33.0", "vllm/utils/network_utils.py": "0.33.0"}
    text = cli("check", "--patch", "two-consts", "--vllm", "0.33.0", "--series", repo).stdout
    assert "at the module-level statements of vllm/logger.py" in text and "<module>" not in text


def test_a_module_level_patch_on_a_later_release_is_reviewed_accepted_and_rebased(tmp_path, cli):
    # _DATE_FORMAT changed on 0.30.0; 0.31.0 rewrote _FORMAT right above it, added
    # _vllm_process_info right below and a logging config that reads it: check gives review
    # with the three-way view of the module's own statements, review shows it, rebase merges
    # the module, and --accept clears the very check. Before: "<module> is not defined once on
    # both sides: no three-way view", an empty review, and rebase said unsupported
    repo = _stack_with_diff(tmp_path, "date-fmt", "0.30.0", {
        "vllm/logger.py": ('_DATE_FORMAT = "%m-%d %H:%M:%S"\n', '_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"\n')})
    res = cli("check", "--patch", "date-fmt", "--vllm", "0.31.0", "--series", repo, "--json")
    (row,) = res.json["patches"]
    assert (res.rc, row["status"], row["blocking"]) == (1, "review", True)
    assert "not defined once" not in row["reason"] and "vllm/logger.py:" in row["reason"]
    (entry,) = row["threeway"]
    assert (entry["qualname"], entry["base"], entry["path"]) == ("<module>", "0.30.0", "vllm/logger.py")
    # the logging config 0.31.0 added reads _DATE_FORMAT, the name the patch rebinds
    (found,) = [f for f in entry["findings"] if f["rule"] == "names"]
    assert found["message"].startswith("`_DATE_FORMAT`: upstream's change at vllm/logger.py:"), found
    assert entry["view"].startswith("three-way view of the module-level statements of vllm/logger.py")
    assert '+_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"' in entry["view"]
    assert "+_vllm_process_info: tuple[str, int] | None = None" in entry["view"]
    # a definition is its name and header, its body is not the module's own
    assert "+def set_vllm_process_name(process_name: str, *, skip_if_set: bool = False) -> None:\n+    ...\n" \
        in entry["view"]

    shown = cli("review", "date-fmt", "--vllm", "0.31.0", "--series", repo, "--json")
    assert shown.rc == 1 and shown.json["threeway"] == row["threeway"] and not shown.json["accepted"]

    rebased = cli("rebase", "--to", "0.31.0", "--patch", "date-fmt", "--series", repo, "--json")
    (rp,) = rebased.json["patches"]
    assert (rebased.rc, rp["status"], rp["transform"]) == (0, "clean", "carries-forward"), rp["reason"]
    assert [(u["qualname"], u["merge"], u["upstream_changed"]) for u in rp["units"]] == [("<module>", "clean", True)]

    accepted = cli("review", "date-fmt", "--vllm", "0.31.0", "--accept", "--by", "tester", "--series", repo,
                   "--json")
    assert accepted.rc == 0 and accepted.json["accepted"], accepted.stdout
    assert accepted.json["after"] == {"status": "applies", "blocking": False}
    assert accepted.json["changed"] == [str(repo / "anchors" / "date-fmt.toml")]
    res = cli("check", "--patch", "date-fmt", "--vllm", "0.31.0", "--series", repo, "--json")
    assert (res.rc, res.json["patches"][0]["status"]) == (0, "applies")


# -- review you can trust (issue 35, item 6) ----------------------------------------------------

DATE = "vllm/logger.py", '_DATE_FORMAT = "%m-%d %H:%M:%S"\n'


def test_accept_records_what_check_saw_and_the_same_check_then_passes(tmp_path, cli):
    # two patches of two profiles rewrite _DATE_FORMAT on 0.30.0; on 0.31.0 both drift to
    # review. Accepting the second planned the whole series, where the first had already
    # replaced the statement: nothing was recorded, yet review said "accepted" and exited 0,
    # and check --profile long still blocked
    repo = _stack_with_diff(tmp_path, "date-iso", "0.30.0", {DATE[0]: (DATE[1], '_DATE_FORMAT = "%Y-%m-%d"\n')},
                            profile="iso")
    _stack_with_diff(tmp_path, "date-long", "0.30.0", {DATE[0]: (DATE[1], '_DATE_FORMAT = "%c"\n')},
                     profile="long", repo=repo)
    res = cli("check", "--profile", "long", "--vllm", "0.31.0", "--series", repo, "--json")
    assert (res.rc, res.json["patches"][0]["status"]) == (1, "review")
    res = cli("review", "date-long", "--vllm", "0.31.0", "--accept", "--by", "tester", "--series", repo, "--json")
    assert res.rc == 0 and res.json["accepted"], res.stdout
    assert res.json["changed"] == [str(repo / "anchors" / "date-long.toml")]
    assert res.json["after"] == {"status": "applies", "blocking": False}
    data = tomllib.loads((repo / "anchors" / "date-long.toml").read_text(encoding="utf-8"))
    assert "0.31.0" in data["anchors"]["module-logger"]["fingerprints"] and data["reviews"]["0.31.0"]["by"] == "tester"
    res = cli("check", "--profile", "long", "--vllm", "0.31.0", "--series", repo, "--json")
    assert (res.rc, res.json["patches"][0]["status"]) == (0, "applies")


def test_a_patch_whose_transform_fails_is_not_accepted_and_review_says_what_will(tmp_path, cli):
    # NeMo-RL's import guard on 0.32.0: the import it rewrites gained two names, its replace
    # finds no place (conflict): nothing is recorded, exit 1, and the refusal names rebase
    import shutil

    stack = tmp_path / "nemo"
    shutil.copytree(Path(__file__).resolve().parents[1] / "verdicts" / "nemo-rl", stack)
    anchors = (stack / "anchors" / "nemo-namespace-tool-import.toml").read_bytes()
    res = cli("review", "nemo-namespace-tool-import", "--vllm", "0.32.0", "--accept", "--series", stack / "series",
              "--json")
    assert res.rc == 1 and not res.json["accepted"] and res.json["status"] == "conflict"
    assert "its transform does not apply there (conflict)" in res.json["refused"]
    assert "`patchq rebase --to 0.32.0 --patch nemo-namespace-tool-import --write`" in res.json["refused"]
    assert (stack / "anchors" / "nemo-namespace-tool-import.toml").read_bytes() == anchors


# -- what the patched code meets outside its module blocks apply as it blocks check ------------


def test_apply_refuses_a_no_op_that_new_callers_rely_on_until_it_is_reviewed(tmp_path, cli):
    # vllm-gaudi's shm-check-noop (reviewed on 0.27.1) on 0.28.0: fingerprints identical, but
    # the CPU KV-offload region now calls check_shm_free_space. check says review; apply must
    # refuse it too (a fresh user's find: apply wrote it), and accept it once reviewed
    import shutil

    from patchq.vllmdist import releases

    site = tmp_path / "site"
    shutil.copytree(releases.release_tree("0.28.0"), site)  # its .py files and RECORD: an install to patch
    corpus = Path(__file__).resolve().parents[1] / "verdicts" / "vllm-gaudi"
    for part in ("series", "anchors"):
        shutil.copytree(corpus / part, tmp_path / part)
    shm = site / "vllm/distributed/device_communicators/shm_broadcast.py"
    before = shm.read_bytes()
    args = ["--patch", "shm-check-noop", "--series", str(tmp_path / "series"), "--site-packages", str(site)]
    checked = cli("check", *args, "--json")
    (row,) = checked.json["patches"]
    assert (checked.rc, row["status"]) == (1, "review")
    assert "vllm/v1/kv_offload/cpu/shared_offload_region.py:122" in row["reason"]
    applied = cli("apply", *args)
    assert applied.rc == 1 and "shared_offload_region.py:122" in applied.stderr and shm.read_bytes() == before
    accepted = cli("review", "shm-check-noop", "--vllm", "0.28.0", "--accept", "--by", "tester",
                   "--series", str(tmp_path / "series"), "--json")
    assert accepted.rc == 0 and accepted.json["after"] == {"status": "applies", "blocking": False}
    assert cli("apply", *args).rc == 0 and b"return None" in shm.read_bytes()
