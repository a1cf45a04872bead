"""Every blocking verdict names one remedy that works (issue 35, item 6): per kind of remedy
(:func:`patchq.report.remedy_kind`), a real case whose check blocks, the step its ``remedy``
names, and the same check passing after it. Series repos of ``patchq init`` with patches
imported from diffs of real release files, and NeMo-RL's import guard (tests/verdicts).

``review`` (a ``review`` row whose transform applies) is proved in test_review_flow.py
(date-fmt on 0.31.0, date-long on 0.31.0); here: ``rebase`` for a conflict and for a
release no variant covers, ``fix-series`` for a patch edited after it was verified, and
``relation`` for two patches of one profile rewriting one statement."""

from __future__ import annotations

import difflib
import re
import shutil
from pathlib import Path

import pytest

from patchq.vllmdist import releases
from support import run_cli

pytestmark = pytest.mark.wheel
OLD = '_DATE_FORMAT = "%m-%d %H:%M:%S"\n'


def _import(repo: Path, tmp: Path, pid: str, release: str, new: str, profile: str) -> None:
    text = (releases.release_tree(release) / "vllm/logger.py").read_text(encoding="utf-8")
    diff = tmp / f"{pid}-{release}.diff"
    diff.write_text("".join(difflib.unified_diff(text.splitlines(True), text.replace(OLD, new).splitlines(True),
                                                 "a/vllm/logger.py", "b/vllm/logger.py")), encoding="utf-8")
    res = run_cli("import", diff, "--id", pid, "--release", release, "--profile", profile, "--series", repo)
    assert res.rc == 0, res.stderr


def _init(tmp_path: Path) -> Path:
    repo = tmp_path / "stack"
    assert run_cli("init", repo).rc == 0
    return repo


def _row(repo: Path, version: str, *select: str) -> tuple[int, dict]:
    res = run_cli("check", *select, "--vllm", version, "--series", repo, "--json")
    return res.rc, res.json


def test_conflict_is_cleared_by_the_rebase_it_names(tmp_path):
    # 0.32.0 added CustomTool and ToolChoiceCustom to the import the patch rewrites: its
    # replace finds no place. rebase --write leaves the conflicted module in the work
    # directory; resolved by hand, --continue --write writes a variant from 0.32.0 on
    stack = tmp_path / "nemo"
    shutil.copytree(Path(__file__).resolve().parents[1] / "verdicts" / "nemo-rl", stack)
    series, pid = stack / "series", "nemo-namespace-tool-import"
    rc, doc = _row(series, "0.32.0", "--patch", pid)
    (row,) = doc["patches"]
    assert (rc, row["status"]) == (1, "conflict")
    assert row["remedy"].startswith(f"`patchq rebase --to 0.32.0 --patch {pid} --write`")
    res = run_cli("rebase", "--to", "0.32.0", "--patch", pid, "--write", "--series", series, "--json")
    (rp,) = res.json["patches"]
    assert (res.rc, rp["status"]) == (1, "conflict")
    work = Path(rp["units"][0]["files"][0])
    assert work.name == "module.vllm.tool_parsers.utils.py"
    text = work.read_text(encoding="utf-8")
    resolved, n = re.subn(r"<<<<<<< [^\n]*\n=======\n    NamespaceTool,\n    ToolChoiceCustom,\n>>>>>>> vllm 0.32.0\n",
                          "    ToolChoiceCustom,\n", text)  # upstream's new name stays, NamespaceTool goes to the guard
    assert n == 1
    work.write_text(resolved, encoding="utf-8")
    res = run_cli("rebase", "--to", "0.32.0", "--patch", pid, "--write", "--continue", "--series", series, "--json")
    assert (res.rc, res.json["patches"][0]["status"]) == (0, "clean"), res.stdout
    rc, doc = _row(series, "0.32.0", "--patch", pid)
    assert (rc, doc["patches"][0]["status"], doc["patches"][0]["remedy"]) == (0, "applies", None)
    rc, doc = _row(series, "0.25.1", "--patch", pid)  # where it was made: the older variant, untouched
    assert (rc, doc["patches"][0]["status"]) == (0, "applies")


def test_a_release_no_variant_covers_is_cleared_by_the_rebase_it_names(tmp_path):
    # date-fmt made on 0.29.0, its variant ending before 0.30.0: on 0.30.0 check tries it and
    # blocks; rebase --write widens the variant and records the release it carried it to
    repo = _init(tmp_path)
    _import(repo, tmp_path, "date-fmt", "0.29.0", '_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"\n', "dates")
    mod = repo / "series" / "date_fmt.py"
    mod.write_text(mod.read_text().replace("variant('>=0.29.0',", "variant('>=0.29.0,<0.30',"))
    rc, doc = _row(repo, "0.30.0", "--profile", "dates")
    (row,) = doc["patches"]
    assert rc == 1 and row["blocking"] and row["tried_variant"] == "<0.30,>=0.29.0"
    assert row["remedy"].startswith("`patchq rebase --to 0.30.0 --patch date-fmt --write`")
    res = run_cli("rebase", "--to", "0.30.0", "--patch", "date-fmt", "--write", "--series", repo, "--json")
    assert (res.rc, res.json["patches"][0]["status"]) == (0, "clean"), res.stdout
    rc, doc = _row(repo, "0.30.0", "--profile", "dates")
    assert (rc, doc["patches"][0]["status"], doc["patches"][0]["blocking"]) == (0, "applies", False)


def test_a_patch_edited_after_it_was_verified_names_the_series_as_the_fix(tmp_path):
    # init's example, recorded on 0.15.1, with its anchor pattern mistyped: a conflict on a
    # release recorded as verified is the series' doing; a rebase cannot help, the fix can
    repo = _init(tmp_path)
    anchors = repo / "anchors" / "example-quiet-logger.toml"
    good = anchors.read_text()
    anchors.write_text(good.replace("logging.getLogger(name)", "logging.getLogger(nam)"))
    rc, doc = _row(repo, "0.15.1", "--profile", "example")
    (row,) = doc["patches"]
    assert (rc, row["status"]) == (1, "conflict")
    assert row["remedy"] == ("fix anchors/example-quiet-logger.toml or the patch: example-quiet-logger fails on "
                             "vllm 0.15.1, where it was verified")
    anchors.write_text(good)
    rc, doc = _row(repo, "0.15.1", "--profile", "example")
    assert (rc, doc["patches"][0]["status"]) == (0, "applies")


def test_an_interaction_names_the_relation_or_another_profile(tmp_path):
    # two patches of one profile rewrite _DATE_FORMAT on 0.30.0: the second cannot apply on
    # the first's result. Before, check called it a conflict of its own anchor (on the release
    # it was made on) and named a rebase, which cannot help; it is an interaction, and kept
    # in two profiles each is judged with its own profile and applies
    repo = _init(tmp_path)
    _import(repo, tmp_path, "date-iso", "0.30.0", '_DATE_FORMAT = "%Y-%m-%d"\n', "dates")
    _import(repo, tmp_path, "date-long", "0.30.0", '_DATE_FORMAT = "%c"\n', "dates")
    rc, doc = _row(repo, "0.30.0", "--profile", "dates")
    rows = {p["id"]: p for p in doc["patches"]}
    assert rc == 1 and rows["date-long"]["status"] == "interaction" and rows["date-iso"]["remedy"] is None
    assert "date-long applies alone on vllm 0.30.0, but not after date-iso" in rows["date-long"]["reason"]
    assert "keep them in different profiles" in rows["date-long"]["remedy"]
    profiles = repo / "series" / "profiles.toml"
    profiles.write_text(profiles.read_text().replace('patches = ["date-iso", "date-long"]', 'patches = ["date-iso"]')
                        + '\n[profiles.long]\ndescription = "long dates"\npatches = ["date-long"]\n')
    for name in ("dates", "long"):
        rc, doc = _row(repo, "0.30.0", "--profile", name)
        assert (rc, [p["status"] for p in doc["patches"]]) == (0, ["applies"]), name
    rc, doc = _row(repo, "0.30.0", "--all")
    assert rc == 0 and {p["status"] for p in doc["patches"]} == {"applies"}


def _corpus(tmp_path: Path, stack: str) -> Path:
    dest = tmp_path / stack
    shutil.copytree(Path(__file__).resolve().parents[1] / "verdicts" / stack, dest)
    return dest / "series"


def test_a_definition_gone_for_good_is_cleared_by_the_persons_word_it_names(tmp_path):
    # NeMo-RL's runtime_env patch of RayDistributedExecutor._init_executor: vLLM 0.33.0 deleted
    # the v1 Ray executor (nothing to patch; no rename to follow). Before, the only step named
    # was a rebase, which reports `gone` again
    series, pid = _corpus(tmp_path, "nemo-rl"), "nemo-ray-init-workers-runtime-env"
    rc, doc = _row(series, "0.33.0", "--patch", pid)
    (row,) = doc["patches"]
    assert (rc, row["status"]) == (1, "gone")
    assert f"`patchq review {pid} --vllm 0.33.0 --absent WHY`" in row["remedy"]
    refused = run_cli("review", pid, "--vllm", "0.25.1", "--absent", "x", "--series", series, "--json")
    assert refused.rc == 1 and "recorded as verified on 0.25.1" in refused.json["refused"]  # its own release
    res = run_cli("review", pid, "--vllm", "0.33.0", "--absent", "0.33.0 deleted the v1 Ray executor",
                  "--series", series, "--json")
    assert res.rc == 0 and res.json["declared"]["range"] == ">=0.33.0", res.stdout
    assert res.json["after"] == {"status": "absent", "blocking": False}
    for version, status in (("0.33.0", "absent"), ("0.34.0", "absent"), ("0.25.1", "applies")):
        rc, doc = _row(series, version, "--patch", pid)
        assert (rc, doc["patches"][0]["status"]) == (0, status), version


def test_possibly_upstreamed_is_cleared_by_the_persons_word_it_names(tmp_path):
    # SkyRL's cap of get_numel_loaded (made on 0.23.0): 0.31.0 caps with
    # get_tensor_load_numel(param) where the patch had param.numel(): alike (similarity 0.92),
    # not provably the same, so check blocks; the person says upstream does it
    series, pid = _corpus(tmp_path, "skyrl"), "skyrl-numel-loaded-cap"
    rc, doc = _row(series, "0.31.0", "--patch", pid)
    (row,) = doc["patches"]
    assert (rc, row["status"]) == (1, "possibly-upstreamed")
    assert f"`patchq review {pid} --vllm 0.31.0 --upstreamed WHY`" in row["remedy"]
    res = run_cli("review", pid, "--vllm", "0.31.0", "--upstreamed", "0.31.0 caps loaded numel itself",
                  "--series", series, "--json")
    assert res.rc == 0 and res.json["after"] == {"status": "upstreamed", "blocking": False}, res.stdout
    rc, doc = _row(series, "0.31.0", "--patch", pid)
    assert (rc, doc["patches"][0]["status"]) == (0, "upstreamed")
