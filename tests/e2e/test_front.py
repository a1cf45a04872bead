"""The front door: the one error edge, usage honesty, and the fast path serving one profile.

No vLLM wheel: a throwaway series (one patch, ``tiny``) and a throwaway site-packages
holding a three-line ``vllm/tiny.py`` with a ``vllm-0.23.0.dist-info`` whose RECORD has
its real hash. Everything runs the real CLI in a subprocess (``python -m patchq``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, run_cli
from testing.tiny import ANCHORS, PATCH, PROFILES, TINY, TYPO, one_line

# -- the error edge ------------------------------------------------------------------


def test_patchq_error_exits_with_its_code_in_one_line(tiny):
    out = run_cli("status", "--site-packages", tiny["site"] / "nowhere", env=tiny["env"])
    assert out.rc == 3, out
    assert one_line(out.stderr).startswith("patchq: error: no vllm distribution in")
    assert out.stdout == ""


def test_json_error_document(tiny):
    out = run_cli("apply", "--profile", "nope", "--site-packages", tiny["site"], "--json", env=tiny["env"])
    assert out.rc == 2, out
    assert out.json == {"ok": False, "error": out.json["error"], "exit_code": 2}
    assert "unknown profile 'nope'" in out.json["error"] and out.stderr == ""


def test_unexpected_exception_is_an_internal_error_with_a_log(tiny):
    """A bug (here: a corrupt journal cache entry the code does not expect) gives one line
    naming the log that holds the traceback, exit 70; the traceback never reaches the user."""
    code = ("import sys; from patchq.edge import guard\n"
            "def boom(argv):\n    raise ZeroDivisionError('the bug')\n"
            "sys.exit(guard(boom, sys.argv[1:]))\n")
    env = {**os.environ, **tiny["env"]}
    for args, as_json in (([], False), (["--json"], True)):
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
        assert proc.returncode == 70, proc
        message = json.loads(proc.stdout)["error"] if as_json else one_line(proc.stderr)
        assert "internal error (ZeroDivisionError: the bug)" in message and "Traceback" not in proc.stderr
        log = Path(message.rsplit("the traceback is in ", 1)[1])
        assert log.parent == tiny["cache"] / "logs"
        assert "ZeroDivisionError: the bug" in log.read_text() and "Traceback" in log.read_text()


def test_broken_pipe_is_quiet(tiny):
    """`patchq list | head -1`: the reader goes away; no traceback, no message, exit 141."""
    env = {**os.environ, **tiny["env"], "COLUMNS": "40"}
    for args in (["list"], ["run", "--profile", "good", "--site-packages", str(tiny["site"]), "--print-env"]):
        proc = subprocess.Popen([sys.executable, "-m", "patchq", *args], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()  # the reader is gone before the first write
        err = proc.stderr.read().decode()
        assert proc.wait() == 141, err
        assert err == ""


# -- usage honesty -------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["status", "--site-packages", ""],
    ["apply", "--profile", "good", "--site-packages", ""],
    ["apply", "--profile", ""],
    ["status", "--python", ""],
    ["diff", "--profile", "good", "--vllm", ""],
    ["check", "--profile", "good", "--source", ""],
    ["list", "--series", ""],
    ["run", "--profile", "good", "--site-packages", "", "--", "true"],
    ["run", "--profile", "", "--", "true"],
])
def test_empty_option_values_are_usage_errors(tiny, args):
    out = run_cli(*args, env=tiny["env"])
    assert out.rc == 2, out
    assert "must not be empty" in one_line(out.stderr), out


def test_version_and_plain_help():
    from patchq import __version__

    out = run_cli("--version")
    assert out.rc == 0 and out.stdout == f"patchq {__version__}\n"
    full = run_cli("--version", fast=False)
    assert full.rc == 0 and full.stdout == f"patchq {__version__}\n"
    helped = run_cli("check", "--help")
    assert helped.rc == 0 and "<bool>" not in helped.stdout and "--json " in helped.stdout
    run_help = run_cli("run", "--help")
    assert run_help.rc == 0 and "``" not in run_help.stdout and ":mod:" not in run_help.stdout


def test_run_print_env_json(tiny):
    out = run_cli("run", "--profile", "good", "--site-packages", tiny["site"], "--print-env", "--json",
                  env=tiny["env"])
    assert out.rc == 0, out
    assert out.json["schema"] == "patchq.run-env/1" and out.json["ok"] and out.json["profile"] == "good"
    assert list(out.json["env"]) == ["PYTHONPATH", "PATCHQ_RUNTIME_MANIFEST", "PATCHQ_RUNTIME_DIR",
                                     "PATCHQ_EXPECT_PROFILE", "PATCHQ_STRICT", "VLLM_CACHE_ROOT"]
    failed = run_cli("run", "--profile", "nope", "--site-packages", tiny["site"], "--json", "--", "true",
                     env=tiny["env"])
    assert failed.rc == 2 and failed.json["exit_code"] == 2 and not failed.json["ok"], failed
    assert "unknown profile 'nope'" in failed.json["error"] and failed.stderr == ""


# -- the fast path serves one profile --------------------------------------------------


def test_a_typo_in_another_profile_breaks_only_that_profile(tiny):
    env, site = tiny["env"], tiny["site"]
    (tiny["series"] / "profiles.toml").write_text(PROFILES + TYPO)
    first = run_cli("apply", "--profile", "good", "--site-packages", site, env=env)
    assert first.rc == 0, first
    assert "x = 42" in (site / "vllm" / "tiny.py").read_text()
    again = run_cli("apply", "--profile", "good", "--site-packages", site, env=env)
    assert again.rc == 0 and "nothing to do" in again.stdout, again
    status = run_cli("status", "--site-packages", site, "--json", env=env)  # malformed series data: exit 2
    assert status.rc == 2 and [p["status"] for p in status.json["patches"]] == ["applied"], status
    assert [e.endswith("profile typo lists 'tinny', which has no series file") for e in status.json["series_errors"]] \
        == [True], status
    ran = run_cli("run", "--profile", "good", "--site-packages", site, "--print-env", env=env)
    assert ran.rc == 0 and "export PATCHQ_EXPECT_PROFILE=good" in ran.stdout, ran
    bad = run_cli("run", "--profile", "typo", "--site-packages", site, "--print-env", env=env)
    assert bad.rc == 2 and "tinny" in one_line(bad.stderr), bad
    bad_apply = run_cli("apply", "--profile", "typo", "--site-packages", site, env=env)
    assert bad_apply.rc == 2 and "tinny" in one_line(bad_apply.stderr), bad_apply
    for args in (["check", "--profile", "typo", "--site-packages", str(site)],
                 ["matrix", "--profiles", "good,typo", "--releases", "0.1.0", "--out", str(site.parent / "m")]):
        bad = run_cli(*args, env=env)  # the file the mistake is in
        assert bad.rc == 2 and one_line(bad.stderr).endswith(
            f"profiles.toml: profile typo lists 'tinny', which has no series file (no tinny.py in "
            f"{tiny['series']})"), bad
    reverted = run_cli("revert", "--all", "--site-packages", site, env=env)
    assert reverted.rc == 0 and (site / "vllm" / "tiny.py").read_text() == TINY, reverted


def test_a_broken_file_of_a_patch_in_another_profile_breaks_only_that_profile(tiny):
    """docs/commands.md: a mistake in another profile does not stop apply, whether it is a
    series file that does not compile or an anchors file that does not parse (a fresh
    user's find: the anchors file stopped every profile)."""
    env, site = tiny["env"], tiny["site"]
    (tiny["series"] / "profiles.toml").write_text(PROFILES + '[profiles.other]\npatches = ["two"]\n')
    (tiny["series"] / "two.py").write_text(PATCH.replace('id="tiny"', 'id="two"'))
    for broken in ((tiny["anchors"] / "two.toml", "[anchors.x\n"), (tiny["series"] / "two.py", "PATCH = patch(\n")):
        broken[0].write_text(broken[1])
        applied = run_cli("apply", "--profile", "good", "--site-packages", site, env=env)
        assert applied.rc == 0 and "x = 42" in (site / "vllm" / "tiny.py").read_text(), applied
        other = run_cli("apply", "--profile", "other", "--site-packages", site, env=env)
        assert other.rc == 2 and str(broken[0]) in one_line(other.stderr), other
        assert run_cli("revert", "--all", "--site-packages", site, env=env).rc == 0
        (tiny["anchors"] / "two.toml").write_text(ANCHORS)


def test_diff_defaults_to_the_applied_profile(tiny):
    env, site = tiny["env"], tiny["site"]
    nothing = run_cli("diff", "--site-packages", site, env=env)
    assert nothing.rc == 2 and "no profile is applied" in one_line(nothing.stderr), nothing
    assert run_cli("apply", "--profile", "good", "--site-packages", site, env=env).rc == 0
    out = run_cli("diff", "--site-packages", site, "--json", env=env)
    assert out.rc == 0 and out.json["profile"] == "good" and "+    x = 42" in out.json["diff"], out


# -- series errors: one line naming the file, exit 2 ------------------------------------


@pytest.mark.parametrize("breakage, where", [
    (("series", "tiny.py", "PATCH = patch(\n"), "tiny.py:"),
    (("series", "tiny.py", "raise RuntimeError('broken on import')\n"), "tiny.py:1: RuntimeError: broken on import"),
    (("series", "profiles.toml", "profiles = 3\n"), "profiles.toml: `profiles` must be a table"),
    (("series", "profiles.toml", "[profiles.good\n"), "profiles.toml: "),
    (("anchors", "tiny.toml", '[anchors.x]\nmodule = 3\nqualname = "answer"\n'), "tiny.toml: anchors.x.module"),
    (("anchors", "tiny.toml", b"[anchors.x]\nmodule = \"\xff\"\n"), "tiny.toml: not UTF-8"),
])
def test_series_errors_name_the_file(tiny, breakage, where):
    folder, name, content = breakage
    path = tiny[folder] / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for args in (["apply", "--profile", "good", "--site-packages", str(tiny["site"])],
                 ["list"], ["diff", "--profile", "good", "--site-packages", str(tiny["site"])]):
        out = run_cli(*args, env=tiny["env"])
        assert out.rc == 2, out
        line = one_line(out.stderr)
        assert line.startswith("patchq: error: ") and where in line and str(tiny[folder]) in line, out


# -- rendering --------------------------------------------------------------------------


def test_list_reads_declarations_without_libcst(tiny):
    env = {**os.environ, **tiny["env"], "COLUMNS": "60"}
    (tiny["series"] / "profiles.toml").write_text(PROFILES + TYPO)
    typo = run_cli("list", env=tiny["env"])
    assert typo.rc == 2 and "profile 'typo' names unknown patch(es) tinny" in one_line(typo.stderr), typo
    (tiny["series"] / "profiles.toml").write_text(PROFILES)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "patchq", "list"], cwd=REPO, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "libcst" not in proc.stderr and "typer" not in proc.stderr  # the fast path answers list
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"series {tiny['series']}")  # a path is never cut: the one long line
    assert all(len(line) <= 60 for line in lines[1:]), proc.stdout
    assert "    >=0.1,<1  edit: x" in lines
    assert "    >=1       upstreamed: upstream answers 42 since 1.0" in lines
    listed = run_cli("list", "--json", env=tiny["env"])
    imported = subprocess.run([sys.executable, "-c", (
        "import json, sys; from patchq.series import load; s = load(sys.argv[1]); p = s.patch('tiny');"
        "print(json.dumps([p.hash, str(p.applies), [str(v.applies) for v in p.variants]]))"),
        str(tiny["series"])], capture_output=True, text=True, env={**os.environ, **tiny["env"]})
    h, applies, ranges = json.loads(imported.stdout)
    row = listed.json["patches"][0]
    assert (row["hash"], row["applies"], [v["applies"] for v in row["variants"]]) == (h, applies, ranges)
