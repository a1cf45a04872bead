"""patchq.commands.serve: a profile's serve flags (``serve-args``) and the serve plan."""

from __future__ import annotations

import pytest

from patchq import series as series_mod
from patchq.commands import serve
from patchq.errors import SeriesError, UsageError

SERVE = '''
[profiles.base.serve]
args = ["--max-model-len", "${MAX_LEN:-4096}", "--cost", "$$5"]
env = {VLLM_USE_V1 = "1", EXTRA = "${EXTRA}"}
'''


@pytest.fixture
def served(small):
    path = small.series.root / "profiles.toml"
    path.write_text(path.read_text() + SERVE)
    return series_mod.load(small.series.root)


def test_expand():
    assert serve.expand("${A:-x} ${B} $$HOME", {"A": "", "B": "b"}) == "x b $HOME"


def test_serve_args_are_expanded(served):
    doc, code = serve.run(served, "base", {"MAX_LEN": "8192"})
    assert code == 0 and doc["schema"] == "patchq.serve-args/1"
    assert doc["args"] == ["--max-model-len", "8192", "--cost", "$5"]
    assert doc["env"] == {"VLLM_USE_V1": "1", "EXTRA": ""} and doc["env_withheld"] is None
    assert serve.render_text(doc).splitlines() == doc["args"]
    assert serve.run(served, "none", {})[0]["args"] == []  # no serve table


def test_bad_tables_and_profiles(served):
    path = served.root / "profiles.toml"
    with pytest.raises(UsageError, match="unknown profile"):
        serve.run(served, "nope")
    path.write_text(path.read_text().replace('args = ["--max-model-len"', 'args = [1, "--max-model-len"'))
    with pytest.raises(SeriesError, match="serve.args must be a list of strings"):
        serve.run(series_mod.load(served.root), "base")


def test_the_variables_a_profile_reads_are_named(served, monkeypatch):
    """``[profiles.base.serve]`` reads MAX_LEN and EXTRA: the dry run names them with the value each
    takes, serve-args' JSON lists them, and ``serve --help`` says where to look (issue 39: the help
    hid DRAFTER, NUM_SPEC_TOKENS, ... of the Spark profiles)."""
    from support import run_cli

    doc, _ = serve.run(served, "base", {"MAX_LEN": "8192"})
    assert doc["variables"] == {"MAX_LEN": {"default": "4096", "value": "8192"},
                                "EXTRA": {"default": "", "value": ""}}
    monkeypatch.setenv("MAX_LEN", "8192")
    plan = serve.serve_plan(served, "base", None, [], dry_run=True)
    text = serve.dry_run_text(plan)
    assert text.splitlines()[0] == ("# [profiles.base.serve] reads MAX_LEN=8192 (default 4096), EXTRA= (no default); "
                                    "set them to change what is served")
    res = run_cli("serve", "--help", env={"COLUMNS": "1000"})
    assert "--dry-run lists each with the value it takes" in res.stdout
