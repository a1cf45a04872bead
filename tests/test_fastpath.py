"""patchq.fastpath: ``status``, ``list`` and a no-op ``apply`` answered with the standard library
(in process on the small world; the start-up cost is bench/'s, the CLI scenarios tests/e2e/'s)."""

from __future__ import annotations

import json
import subprocess
import sys

from patchq import fastpath
from patchq.commands import apply
from support import REPO


def test_what_it_does_not_answer_goes_to_the_full_cli(small):
    for argv in ([], ["check"], ["apply", "--profile", "base", "--strict"], ["apply", "--profile", ""],
                 ["status", "--profile", "base"], ["apply"]):
        assert fastpath.try_fast([*argv, "--site-packages", str(small.site)] if argv else argv) is None, argv


def test_status_and_list(small, capsys):
    assert fastpath.try_fast(["status", "--json", "--site-packages", str(small.site)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "patchq.status/1" and doc["series"]["dir"] == str(small.series.root)
    assert fastpath.try_fast(["list", "--json"]) == 0
    assert [p["id"] for p in json.loads(capsys.readouterr().out)["patches"]] == ["bump-default"]


def test_a_noop_apply_and_a_real_one(small, capsys):
    assert fastpath.try_fast(["apply", "--profile", "base", "--json", "--site-packages", str(small.site)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["noop"] is False and first["written"] == ["vllm/ops/utils.py"]  # a real apply, without typer
    assert fastpath.try_fast(["apply", "--profile", "base", "--json", "--site-packages", str(small.site)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["noop"] is True and again["written"] == [] and again["profile"] == "base"
    apply.apply(small.target, small.series, "none")  # another profile now: no longer a no-op
    assert fastpath.try_fast(["apply", "--profile", "base", "--json", "--site-packages", str(small.site)]) == 0
    assert json.loads(capsys.readouterr().out)["noop"] is False


def test_importing_it_imports_no_libcst_typer_or_rich():
    code = "import sys, patchq.fastpath; print(sorted(m for m in ('libcst', 'typer', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"
