"""Adopting patchq for another patch stack: init, new, edit/record, fingerprint, test (real vLLM 0.23.0)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import tomllib

from support import record_hashes, run_cli, sha256_path
from testing import stack


def _init(tmp_path):
    repo = tmp_path / "stack"
    res = run_cli("init", str(repo), "--json")
    assert res.rc == 0, res.stderr
    assert {os.path.relpath(w, repo) for w in res.json["written"]} == {
        "patchq.toml", "series/profiles.toml", "series/example_quiet_logger.py",
        "anchors/example-quiet-logger.toml", "tests/test_patches.py", ".github/workflows/patchq.yml",
        "README.md", ".gitignore", ".pre-commit-config.yaml",
        "series/diffs/example-quiet-logger.expect.toml", "series/diffs/0.23.0/example-quiet-logger.diff"}
    return repo


def _hand_edit(path, old, new):
    """Edit an installed file the way an editor does (a new inode: the cached install stays intact)."""
    text = path.read_text()
    assert old in text
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text.replace(old, new, 1))
    os.replace(tmp, path)


@pytest.mark.wheel  # checks and fingerprints real releases
def test_init_example_applies_and_its_test_passes(tmp_path):
    repo = _init(tmp_path)
    assert run_cli("init", str(repo)).rc == 2  # never overwrites
    check = run_cli("check", "--profile", "example", "--vllm", "0.23.0", "--series", str(repo), "--json")
    assert [p["status"] for p in check.json["patches"]] == ["applies"]
    regen = run_cli("test", "--regen", "--releases", "0.23.0", "--series", str(repo), "--json")
    assert regen.rc == 0 and regen.json["cases"][0]["written"]
    golden = repo / "series/diffs/0.23.0/example-quiet-logger.diff"
    assert '+    if name == "vllm.example.quiet":  # example-quiet-logger\n' in golden.read_text()
    assert 'applies' in (repo / "series/diffs/example-quiet-logger.expect.toml").read_text()
    assert not (repo / "tests/goldens").exists()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout  # 0.23.0 (named) and 0.15.1 (its authoring release: the oldest fingerprint)
    # an edit of the patch that changes no code changes only the sentinel's hash: still passes
    mod = repo / "series/example_quiet_logger.py"
    mod.write_text(mod.read_text().replace("Replace it with your own.", "Replace it with yours."))
    assert run_cli("test", "--series", str(repo)).rc == 0
    # a changed patch fails its test, showing the change of its diff
    mod.write_text(mod.read_text().replace("logger.disabled = True", "logger.disabled = False"))
    bad = run_cli("test", "--series", str(repo), "--json")
    problem = bad.json["cases"][0]["problems"][0]
    assert bad.rc == 1 and "the diff differs from the stored" in problem and "example-quiet-logger.diff" in problem
    assert "-+        logger.disabled = True\n++        logger.disabled = False" in problem
    # pytest --patchq-regen (the plugin's option) records the new result; then everything passes
    regen2 = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--patchq-regen", "tests"],
                            cwd=repo, capture_output=True, text=True)
    assert regen2.returncode == 0, regen2.stdout
    assert "logger.disabled = False" in golden.read_text()
    assert run_cli("test", "--series", str(repo)).rc == 0
    # output of a patch the series no longer has is named, not ignored
    ghost = repo / "series/diffs/0.23.0/gone-patch.diff"
    ghost.write_text(golden.read_text())
    stray = run_cli("test", "--series", str(repo), "--json")
    assert stray.rc == 1 and stray.json["cases"][-1]["patch"] == "gone-patch"
    assert stray.json["cases"][-1]["problems"] == [f"gone-patch is not a patch of this series, but the store holds "
                                                   f"its output: {ghost} (remove them, or restore the patch)"]


@pytest.mark.wheel  # checks and fingerprints real releases
def test_new_scaffolds_a_patch_that_applies(tmp_path):
    repo = _init(tmp_path)
    res = run_cli("new", "pad-note", "--at", "vllm.v1.core.kv_cache_utils:unify_kv_cache_spec_page_size",
                  "--node", "new_spec = replace(layer_spec, block_size=new_block_size)", "--vllm", "0.23.0",
                  "--series", str(repo), "--json")
    assert res.rc == 0, res.stderr
    anchors = tomllib.loads((repo / "anchors/pad-note.toml").read_text())["anchors"]
    assert anchors == {"target": {"module": "vllm.v1.core.kv_cache_utils", "count": 1,
                                  "qualname": "unify_kv_cache_spec_page_size",
                                  "node": "new_spec = replace(layer_spec, block_size=new_block_size)"}}
    profiles = tomllib.loads((repo / "series/profiles.toml").read_text())["profiles"]
    assert profiles["default"]["patches"] == ["pad-note"]
    assert run_cli("new", "pad-note", "--at", "vllm.x:y", "--vllm", "0.23.0", "--series", str(repo)).rc == 2
    # every part of the anchor is checked against the release; nothing is written on a refusal
    for bad in (["--at", "vllm.loggr:init_logger"], ["--at", "vllm.logger:init_loger"],
                ["--at", "vllm.logger:init_logger", "--node", "logger = getLogger(name)"],
                ["--at", "vllm.logger:init_logger", "--applies", "banana"]):
        res = run_cli("new", "bad-one", *bad, "--vllm", "0.23.0", "--series", str(repo))
        assert res.rc == 2 and ("did you mean" in res.stderr or "nearest" in res.stderr
                                or "not a version range" in res.stderr), res.stderr
        assert not (repo / "series/bad_one.py").exists()
    # a module-level constant is a module-level anchor (anchors format 2) that check resolves
    assert run_cli("new", "date-fmt", "--at", "vllm.logger:_DATE_FORMAT", "--vllm", "0.23.0", "--profile", "dates",
                   "--series", str(repo)).rc == 0
    date = tomllib.loads((repo / "anchors/date-fmt.toml").read_text())
    assert date["format"] == 2 and date["anchors"]["target"]["qualname"] == "<module>"
    dcheck = run_cli("check", "--profile", "dates", "--vllm", "0.23.0", "--series", str(repo), "--json")
    assert dcheck.json["patches"][0]["status"] == "applies-drifted", dcheck.json  # `new` records no release
    # a module-level anchor has no line to name; the command recording the release runs as printed
    assert "no fingerprint recorded for the module-level statements of vllm/logger.py (`patchq fingerprint " \
           "--patch date-fmt --releases 0.23.0` records them)" in dcheck.json["patches"][0]["reason"], dcheck.json
    fp = run_cli("fingerprint", "--patch", "pad-note", "--releases", "0.23.0,0.24.0", "--series", str(repo), "--json")
    assert fp.rc == 0 and fp.json["changed"] == [str(repo / "anchors/pad-note.toml")]
    table = tomllib.loads((repo / "anchors/pad-note.toml").read_text())["anchors"]["target"]["fingerprints"]
    assert table == {"0.23.0": "ee6c706d66eb7d5e", "0.24.0": "49c49d48d0c0092d"}
    check = run_cli("check", "--profile", "default", "--vllm", "0.23.0", "--series", str(repo), "--json")
    assert [p["status"] for p in check.json["patches"]] == ["applies"]


@pytest.mark.wheel  # checks and fingerprints real releases
def test_fingerprint_records_only_inside_the_range(tmp_path):
    repo = _init(tmp_path)
    mod = repo / "series/example_quiet_logger.py"
    mod.write_text(mod.read_text().replace('applies=">=0.15"', 'applies=">=0.24"'))
    anchors = repo / "anchors/example-quiet-logger.toml"
    anchors.write_text(anchors.read_text().split("[anchors.get-logger.fingerprints]")[0])
    res = run_cli("fingerprint", "--releases", "0.23.0,0.24.0", "--series", str(repo), "--json")
    assert res.rc == 0
    fps = tomllib.loads(anchors.read_text())["anchors"]["get-logger"]["fingerprints"]
    assert fps == {"0.24.0": "dc32b1a00eb7242b"}


def test_record_in_place_hand_edit(tmp_path, site):
    repo = _init(tmp_path)
    logger = site / "vllm/logger.py"
    _hand_edit(logger, "    logger = logging.getLogger(name)\n",
               "    logger = logging.getLogger(name)\n    if name.startswith(\"vllm.noisy\"):\n"
               "        logger.setLevel(logging.WARNING)\n")
    edited = logger.read_text()
    res = run_cli("record", "quiet-noisy", "--site-packages", str(site), "--series", str(repo), "--json")
    assert res.rc == 0, res.stdout + res.stderr
    assert res.json["files"] == ["vllm/logger.py"] and res.json["environment"]["action"] == "applied"
    assert [a["qualname"] for a in res.json["import"]["anchors"]] == ["init_logger"]
    kept = res.json["environment"]["apply"]["foreign_kept"]["vllm/logger.py"]
    assert open(kept).read() == edited  # the hand edit is kept
    status = run_cli("status", "--site-packages", str(site), "--series", str(repo), "--json")
    assert status.rc == 0
    assert {p["id"]: p["status"] for p in status.json["patches"]}["quiet-noisy"] == "applied"
    # record applied this series: the journal says so, as after `patchq apply` (another series is
    # then told which one applied it, never "a series not recorded")
    assert status.json["applied_from"]["dir"] == str(repo / "series")
    # the patched file is the hand edit plus the sentinel line
    lines = [ln for ln in logger.read_text().splitlines(True) if not ln.startswith("# patchq:quiet-noisy:")]
    assert "".join(lines) == edited
    check = run_cli("check", "--profile", "default", "--site-packages", str(site), "--series", str(repo), "--json")
    assert [(p["id"], p["status"]) for p in check.json["patches"]] == [("quiet-noisy", "applies")]
    revert = run_cli("revert", "--all", "--site-packages", str(site), "--series", str(repo))
    assert revert.rc == 0 and sha256_path(logger) == record_hashes(site)["vllm/logger.py"]


def test_record_no_apply_restores_pristine(tmp_path, site):
    repo = _init(tmp_path)
    logger = site / "vllm/logger.py"
    _hand_edit(logger, "    logger = logging.getLogger(name)\n",
               "    logger = logging.getLogger(name)\n    logger.propagate = False\n")
    res = run_cli("record", "no-prop", "--no-apply", "--site-packages", str(site), "--series", str(repo), "--json")
    assert res.rc == 0, res.stdout + res.stderr
    assert res.json["environment"]["action"] == "restored"
    assert sha256_path(logger) == record_hashes(site)["vllm/logger.py"]


def test_edit_working_copy_then_record_and_refine(tmp_path, site):
    repo = _init(tmp_path)
    res = run_cli("edit", "tune", "--file", "vllm.logger", "--site-packages", str(site), "--series", str(repo),
                  "--json")
    assert res.rc == 0, res.stderr
    copy = repo / ".patchq-edit/tune/vllm/logger.py"
    assert res.json["files"] == [{"path": "vllm/logger.py", "edit": str(copy), "base": "pristine"}]
    assert copy.read_bytes() == (site / "vllm/logger.py").read_bytes()
    assert run_cli("record", "tune", "--site-packages", str(site), "--series", str(repo)).rc == 2  # no change yet
    copy.write_text(copy.read_text().replace("    logger = logging.getLogger(name)\n",
                                             "    logger = logging.getLogger(name)\n    logger.propagate = False\n", 1))
    rec = run_cli("record", "tune", "-p", "extra", "--site-packages", str(site), "--series", str(repo), "--json")
    assert rec.rc == 0, rec.stdout + rec.stderr
    assert rec.json["environment"]["action"] == "untouched" and not copy.exists()
    assert rec.json["profile_created"] and "extra" not in rec.json["known_profiles"]  # said, as a typo would be
    assert sha256_path(site / "vllm/logger.py") == record_hashes(site)["vllm/logger.py"]
    # refine: the working copy starts from the patch's result; recording replaces the patch
    again = run_cli("edit", "tune", "--site-packages", str(site), "--series", str(repo), "--json")
    assert again.json["files"][0]["base"] == "patched" and "logger.propagate = False" in copy.read_text()
    copy.write_text(copy.read_text().replace("logger.propagate = False", "logger.propagate = True"))
    rec2 = run_cli("record", "tune", "--apply", "--site-packages", str(site), "--series", str(repo), "--json")
    assert rec2.rc == 0, rec2.stdout + rec2.stderr
    assert "logger.propagate = True" in (site / "vllm/logger.py").read_text()
    assert "logger.propagate = False" not in (site / "vllm/logger.py").read_text()
    profiles = tomllib.loads((repo / "series/profiles.toml").read_text())["profiles"]
    assert profiles["extra"]["patches"] == ["tune"] and profiles["default"]["patches"] == []
    assert rec2.json["profile"] == "extra"
    # a patch that also applies before this release is never narrowed by a re-record: the
    # edit replaces the edits of the variant that starts here, the applies-range stays
    module = repo / "series" / "tune.py"
    module.write_text(module.read_text().replace("applies='>=0.23.0'", "applies='>=0.20.0'", 1))
    assert "applies='>=0.20.0'" in module.read_text()
    run_cli("revert", "--all", "--site-packages", str(site), "--series", str(repo))
    assert run_cli("edit", "tune", "--site-packages", str(site), "--series", str(repo)).rc == 0
    copy.write_text(copy.read_text().replace("logger.propagate = True", "logger.propagate = None"))
    kept = run_cli("record", "tune", "--site-packages", str(site), "--series", str(repo), "--json")
    assert kept.rc == 0 and kept.json["variant"] == {"action": "edits-replaced", "range": ">=0.23.0",
                                                     "capped": None}, kept
    assert "applies='>=0.20.0'" in module.read_text() and "logger.propagate = None" in module.read_text()
    assert not copy.exists()


def test_cache_sizes_prune_and_clean(tmp_path):
    from testing.small_series import write_release

    cache = tmp_path / "cache"  # never the shared cache
    trees = {}
    for v, size in (("0.23.0", 10), ("0.24.0", 20), ("0.26.0", 40)):
        (cache / "wheels").mkdir(parents=True, exist_ok=True)
        (cache / "wheels" / f"vllm-{v}-cp38-abi3-manylinux_2_31_x86_64.whl").write_bytes(b"w" * size)
        tree = write_release(cache, v)
        trees[v] = size + sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
    (cache / "index").mkdir()
    (cache / "index" / "vllm.json").write_bytes(b"{}")
    env = {"PATCHQ_CACHE_DIR": str(cache)}
    doc = run_cli("cache", "--json", env=env).json
    assert [(r["version"], r["bytes"]) for r in doc["releases"]] == list(trees.items())
    assert doc["other"] == {"index": 2} and doc["total_bytes"] == sum(trees.values()) + 2
    (cache / "releases" / "0.23.0" / "mine.txt").write_text("the user's own\n")
    refused = run_cli("cache", "prune", "--keep", "1", env=env)
    assert refused.rc == 2 and "releases/0.23.0/mine.txt" in refused.stderr, refused
    (cache / "releases" / "0.23.0" / "mine.txt").unlink()
    pruned = run_cli("cache", "prune", "--keep", "1", "--json", env=env).json
    assert pruned["kept"] == ["0.26.0"] and [r["version"] for r in pruned["releases"]] == ["0.26.0"]
    assert len(pruned["removed"]) == 4
    assert run_cli("cache", "prune", "--keep", "-1", env=env).rc == 2
    cleaned = run_cli("cache", "clean", "--json", env=env).json
    assert cleaned["total_bytes"] == 0 and [p.name for p in cache.iterdir()] == ["CACHEDIR.TAG"]


def test_serve_flags_per_profile_and_dry_run(tmp_path):
    kv = run_cli("serve-args", "--profile", "kv", "--json", env={"NUM_SPEC_TOKENS": "3"}).json
    assert kv["args"][-2:] == ["--speculative-config", '{"method":"ngram","num_speculative_tokens":3}']
    dry = run_cli("serve", "--dry-run", "--profile", "full", "--", "--seed", "1", cwd=tmp_path)
    assert dry.rc == 0, dry
    note, *lines = dry.stdout.splitlines()  # first, the variables the profile's serve table reads
    assert note.startswith("# [profiles.full.serve] reads TOOL_PARSER=hermes (default hermes), ")
    assert lines[:2] == ["export PATCHQ_EXPECT_PROFILE=full", "export PATCHQ_STRICT=1"]
    assert lines[2].split()[1:] == ["apply", "--profile", "full"]
    # patchq serve prefers the vllm script beside patchq (README command 1 installs one into .venv)
    beside = os.path.join(os.path.dirname(sys.executable), "vllm")
    vllm = beside if os.access(beside, os.X_OK) else "vllm"
    assert lines[3].startswith(f"exec {vllm} serve /model ") and lines[3].endswith(
        """--speculative-config '{"method":"ngram","num_speculative_tokens":4}' --seed 1""")
    # a user's profile serves with its own table; its env only when the series is chosen
    # explicitly (--series): found by walking up, serve stops and says how
    repo = _init(tmp_path)
    walk = {"PATCHQ_SERIES": "", "LOG_LEVEL": "DEBUG"}
    walked = run_cli("serve", "--dry-run", "--profile", "example", cwd=repo, env=walk)
    assert walked.rc == 2 and f"--series {repo}" in walked.stderr, walked
    mine = run_cli("serve", "--dry-run", "--profile", "example", "--series", repo, cwd=repo, env=walk)
    assert mine.rc == 0, mine
    assert "export VLLM_LOGGING_LEVEL=DEBUG" in mine.stdout.splitlines()
    assert mine.stdout.splitlines()[-1].endswith("--enable-prefix-caching --enforce-eager")
    assert run_cli("serve", "--dry-run", "--profile", "nope", cwd=repo, env=walk).rc == 2


def test_patch_option_pushes_and_pops_one_patch(site):
    sp = ("--site-packages", str(site))
    assert run_cli("apply", "--patch", "page-scale", *sp).rc == 0
    pushed = run_cli("apply", "--patch", "backend-tiles", "--patch", "align-backoff", *sp, "--json").json
    assert pushed["ok"] and pushed["added"] == ["backend-tiles", "align-backoff"]
    status = run_cli("status", *sp, "--json").json
    assert status["profile"] == "kv"  # exactly kv's patches now
    assert status["applied_from"]["dir"].endswith("stack/series")  # apply --patch records its series too
    popped = run_cli("revert", "--patch", "backend-tiles", *sp, "--json").json
    assert popped["removed"] == ["backend-tiles"]
    rows = {p["id"]: p["status"] for p in run_cli("status", *sp, "--json").json["patches"]}
    assert {pid: rows.pop(pid) for pid in ("backend-tiles", "page-scale", "align-backoff", "fp8-experts",
                                           "head-gemv")} == {
        "backend-tiles": "not-applied", "page-scale": "applied", "align-backoff": "applied",
        "fp8-experts": "not-applied", "head-gemv": "not-applied"}
    assert set(rows.values()) <= {"not-applied"}  # a patch added to the series later is in no profile here
    check = run_cli("check", "--patch", "align-backoff", "--vllm", "0.23.0", "--json").json
    assert [(p["id"], p["status"]) for p in check["patches"]] == [("align-backoff", "applies")]
    diff = run_cli("diff", "--patch", "backend-tiles", "--vllm", "0.23.0")
    assert diff.rc == 0 and diff.stdout.startswith(f"diff --git a/{stack.UTILS} b/{stack.UTILS}\n--- a/{stack.UTILS}\n")
    assert "+    DEFAULT = 101376  # patchq backend-tiles\n" in diff.stdout
    assert run_cli("apply", "--patch", "nope", *sp).rc == 2
    assert run_cli("apply", *sp).rc == 2


def test_record_refuses_an_edit_that_does_not_parse(tmp_path, site):
    repo = _init(tmp_path)
    assert run_cli("edit", "broken", "--file", "vllm/logger.py", "--site-packages", str(site),
                   "--series", str(repo)).rc == 0
    copy = repo / ".patchq-edit/broken/vllm/logger.py"
    copy.write_text(copy.read_text().replace("    logger = logging.getLogger(name)\n",
                                             "    logger = logging.getLogger(name)\n      oops = 1\n", 1))
    res = run_cli("record", "broken", "--site-packages", str(site), "--series", str(repo))
    assert res.rc == 1 and "vllm/logger.py" in res.stderr and "not valid Python (unexpected indent)" in res.stderr
    assert not (repo / "series/broken.py").exists() and not (repo / "anchors/broken.toml").exists()
