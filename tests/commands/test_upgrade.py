"""patchq.commands.upgrade: check a profile on the installed or a named release, rebase what
needs it, apply when it is safe (the small world; releases in the layer's own cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq.commands import upgrade
from patchq.errors import UsageError
from testing.small_series import UTILS_PY, write_release
from testing.small_world import UTILS


def test_the_installed_release_is_checked_and_the_profile_applied(small):
    doc, code = upgrade.run(small.series, small.target, "base", None, write=False)
    assert code == 0 and doc["ok"] and (doc["profile"], doc["to"], doc["installed"]) == ("base", "0.1.0", "0.1.0")
    assert [(p["id"], p["check"], p["applied"]) for p in doc["patches"]] == [("bump-default", "applies", True)]
    assert doc["apply"]["written"] == [UTILS] and "DEFAULT = 101376" in small.utils()


def test_a_release_not_installed_is_checked_and_nothing_is_applied(small):
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")  # the release a rebase starts from
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.2.0")
    doc, code = upgrade.run(small.series, small.target, "base", "0.2.0", write=False)
    assert code == 0 and doc["to"] == "0.2.0" and doc["apply"] is None and "101376" not in small.utils()
    gone = UTILS_PY.replace("class Backend", "class Renamed")
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.2.1", utils=gone)
    doc, code = upgrade.run(small.series, small.target, "base", "0.2.1", write=False, workdir=str(small.root / "w"))
    (row,) = doc["patches"]
    assert code == 1 and not doc["ok"] and (row["check"], row["blocking"], row["applied"]) == ("gone", True, False)
    assert row["rebase"] == "needs-variant"  # the rebase finds the renamed class by its body
    assert doc["next"]  # says what to do about it


def test_without_a_profile_given_or_applied_it_is_a_usage_error(small):
    with pytest.raises(UsageError):
        upgrade.run(small.series, small.target, None, None, write=False)
    with pytest.raises(UsageError, match="--to 'next'"):
        upgrade.run(small.series, small.target, "base", "next", write=False)


def test_a_patch_check_asks_to_review_is_sent_to_patchq_review_not_to_a_hand_edit(small):
    """Upstream changed what bump-default touches (the installed 0.1.0 differs from the one
    reviewed): check says review, and the next step is patchq review (a fresh user's find:
    upgrade said to change the series by hand)."""
    small.reinstall(small.utils().replace("return self.DEFAULT", "return self.DEFAULT + 1"))
    doc, code = upgrade.run(small.series, small.target, "base", None, write=False)
    (row,) = doc["patches"]
    assert code == 1 and (row["check"], row["blocking"], row["applied"]) == ("review", True, False)
    assert doc["next"][0].startswith("`patchq review bump-default --vllm 0.1.0` shows what upstream changed")
    assert not any("by hand" in step for step in doc["next"]), doc["next"]


def _git(root: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def released(small):
    """The small series in a git repository; releases 0.1.0 (verified) and 0.2.0 (the same code)
    in the cache and on the (cached) index."""
    from testing.small_series import write_index

    cache = Path(os.environ["PATCHQ_CACHE_DIR"])
    write_release(cache, "0.1.0")
    write_release(cache, "0.2.0")
    write_index(cache, ["0.1.0", "0.2.0"])
    _git(small.root, "init", "-q", "-b", "main")
    _git(small.root, "add", "-A")
    _git(small.root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "series")
    return small


def test_the_release_pipeline_commits_to_a_branch_and_writes_the_pull_request(released, tmp_path, monkeypatch):
    """`upgrade --to 0.2.0 --write --branch b --commit` with no vLLM installed (a CI job): every
    profile checked, the release's fingerprints and expected output recorded, the matrix to the
    newest release, one commit on b, and the pull-request body beside upgrade.json."""
    import json

    from patchq.commands import matrix, pullrequest

    monkeypatch.setattr(matrix, "DEFAULT_FLOOR", "0.1.0")
    root = released.root
    pipe = upgrade.Pipeline(branch="b", commit=True, workers=1)
    doc, code = upgrade.run(released.series, None, None, "0.2.0", True, pipeline=pipe)
    assert code == 0 and doc["ok"] and doc["profile"] is None and doc["profiles"] == ["base", "none"]
    assert (doc["installed"], doc["apply"], doc["rebased"], doc["reviews"]) == (None, None, [], [])
    assert [(p["id"], p["before"], p["check"]) for p in doc["patches"]] == [("bump-default", "applies", "applies")]
    assert sorted(Path(p).relative_to(root).as_posix() for p in doc["recorded"]) == [
        "anchors/bump-default.toml", "series/diffs/0.2.0/bump-default.diff", "series/diffs/bump-default.expect.toml"]
    assert doc["matrix"]["releases"] == ["0.1.0", "0.2.0"] and doc["matrix"]["column"] == {
        "base": {"bump-default": "applies (src)"}, "none": {}}
    assert _git(root, "rev-parse", "--abbrev-ref", "HEAD") == "b" and _git(root, "rev-parse", "--short", "HEAD") == \
        doc["commit"]
    assert _git(root, "log", "-1", "--format=%B") == pullrequest.commit_message(doc).strip()
    out = root / ".patchq-upgrade" / "0.2.0"
    assert (doc["out"], doc["pull_request"]) == (str(out), str(out / "pull-request.md"))
    assert json.loads((out / "upgrade.json").read_text())["commit"] == doc["commit"]
    body = (out / "pull-request.md").read_text()
    assert body == pullrequest.render(doc) and "**No person is needed**" in body
    assert "| bump-default | applies → applies | - | `anchors/bump-default.toml`, " in body
    assert (out / "matrix" / "matrix.html").is_file()
    assert doc["next"][0] == (
        f"`git push origin b`, then open its pull request with {out / 'pull-request.md'} as the body")
    text = upgrade.render_text(doc)
    assert text.startswith("upgrade 2 profiles (base, none): vllm - -> 0.2.0 (installed: none; ")
    assert f"branch b: committed {doc['commit']}" in text


def test_a_review_goes_into_the_pull_request_with_its_three_way_view(released, tmp_path):
    """Upstream changed what the patch touches on 0.2.1: check says review (blocking), nothing is
    recorded for it, exit 1, and the body carries patchq review's view and how to accept it."""
    from patchq.commands import pullrequest
    from patchq.compat import drift

    drift._release_source.cache_clear()
    drifted = UTILS_PY.replace("    DEFAULT = 102400\n", "    DEFAULT = 102400\n    LIMIT = DEFAULT * 2\n")
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.2.1", utils=drifted)
    pipe = upgrade.Pipeline(out=str(tmp_path / "out"), matrix=False)
    doc, code = upgrade.run(released.series, released.target, "base", "0.2.1", True, pipeline=pipe)
    drift._release_source.cache_clear()
    assert code == 1 and not doc["ok"] and [r["id"] for r in doc["reviews"]] == ["bump-default"]
    assert doc["recorded"] == [] and doc["commit"] is None and doc["matrix"] is None
    body = pullrequest.render(doc)
    assert "**A person is needed** for bump-default" in body and "### bump-default: review" in body
    assert doc["reviews"][0]["view"].splitlines()[0] in body and "```text" in body
    assert "`patchq review bump-default --vllm 0.2.1 --accept`" in body
    assert (tmp_path / "out" / "pull-request.md").read_text() == body


def test_pipeline_usage_errors_come_before_anything_runs(released):
    with pytest.raises(UsageError, match="--branch and --commit commit what the upgrade writes: give --write"):
        upgrade.run(released.series, None, None, "0.2.0", False, pipeline=upgrade.Pipeline(branch="b"))
    with pytest.raises(UsageError, match="--level boot: unknown; known: source, probe"):
        upgrade.run(released.series, None, None, "0.2.0", False, pipeline=upgrade.Pipeline(levels=("boot",)))
    with pytest.raises(UsageError, match="no vllm is installed here: give --to VERSION"):
        upgrade.run(released.series, None, None, None, False)
    assert _git(released.root, "rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_to_latest_is_the_newest_release_the_index_lists(released, monkeypatch):
    """`--to latest` asks the index now: the release it gained is the one carried to."""
    from patchq.vllmdist import releases
    from testing.fake_index import FakeIndex

    monkeypatch.delenv("PATCHQ_OFFLINE", raising=False)
    monkeypatch.setattr(releases, "_fetch_pip_index", lambda package: (_ for _ in ()).throw(RuntimeError("no pip")))
    with FakeIndex(["0.1.0"]) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        index.add("0.2.0")
        doc, code = upgrade.run(released.series, released.target, "base", "latest", False)
    assert code == 0 and doc["to"] == "0.2.0" and doc["apply"] is None


def test_check_vllm_latest_is_the_newest_release_the_index_lists(released):
    """`check --vllm latest`, as `upgrade --to latest`: the newest release of the (cached) index."""
    from patchq.compat import check

    assert str(check.target_for("latest").version) == "0.2.0"
    assert str(check.target_for(" Latest ").version) == "0.2.0"
