"""The user's workflow at the front door: exit codes of bad input, closed pipes, Ctrl-C,
help, `--json` before the verb, the `next:` lines, serve, colour and progress.

No vLLM release: the throwaway series and site-packages of ``testing/tiny.py`` (``tiny``: one
patch on a three-line ``vllm/tiny.py`` with a real RECORD). Everything runs the real CLI in
a subprocess. Each test here failed before the fix it covers (issue 27).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from support import REPO, own_vllm, run_cli
from testing.tiny import one_line

# -- exit codes of malformed input: 2, never 70 (internal) or 3 (not found) ------------------


@pytest.mark.parametrize("args, words", [
    (["fingerprint", "--releases", "banana"], "--releases 'banana': not a valid version"),
    (["fingerprint", "--releases", ">=banana"], "not a valid version specifier: '>=banana'"),
    (["rebase", "--to", "banana"], "--to 'banana': not a valid version"),
    (["rebase", "--to", "0.23.0", "--from", "banana"], "--from 'banana': not a valid version"),
])
def test_malformed_versions_are_usage_errors(tiny, args, words):
    out = run_cli(*args, env=tiny["env"])
    assert out.rc == 2, out
    assert words in one_line(out.stderr) and "internal error" not in out.stderr, out


# -- closed pipes, Ctrl-C --------------------------------------------------------------------


def _closed_stdout(args, env):
    proc = subprocess.Popen([sys.executable, "-m", "patchq", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first write (`patchq --help | true`)
    err = proc.stderr.read().decode()
    return proc.wait(), err


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["upstream", "--help"]])
def test_help_into_a_closed_pipe_exits_141_quietly(tiny, args):
    rc, err = _closed_stdout(args, {**os.environ, **tiny["env"]})
    assert (rc, err) == (141, ""), err


def test_ctrl_c_says_interrupted_and_exits_130(tiny):
    """A series file that takes its time to import; Ctrl-C while the full CLI loads it."""
    slow = tiny["series"] / "tiny.py"
    started = tiny["series"].parent / "importing"
    mark = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)\n"
    slow.write_text(mark + slow.read_text())
    env = {**os.environ, **tiny["env"]}
    proc = subprocess.Popen([sys.executable, "-m", "patchq", "diff", "--profile", "good", "--site-packages",
                             str(tiny["site"])], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:  # past typer, into the series import
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.decode().splitlines() == ["patchq: interrupted"] and out == b""


# -- help and options ------------------------------------------------------------------------


def test_help_prints_every_summary_whole():
    out = run_cli("--help", env={"COLUMNS": "80"})
    assert out.rc == 0 and not any(line.endswith("...") for line in out.stdout.splitlines()[1:]), out.stdout
    flat = " ".join(out.stdout.split())
    assert "test Check each patch's expected verdicts and stored diffs per release (patchq.testing)." in flat
    assert all(len(line) <= 80 for line in out.stdout.splitlines())
    wide = run_cli("--help", env={"COLUMNS": "160"})
    assert any(len(line) > 80 for line in wide.stdout.splitlines())  # not cut at click's 80 columns


def test_json_before_the_verb(tiny):
    for fast in (True, False):
        out = run_cli("--json", "list", env=tiny["env"], fast=fast)
        assert out.rc == 0 and out.json["schema"] == "patchq.list/1", out
    failed = run_cli("--json", "rebase", "--to", "banana", env=tiny["env"])
    assert failed.rc == 2 and failed.json["exit_code"] == 2 and failed.stderr == "", failed


def test_shell_completion_is_typers():
    env = {"_PATCHQ_COMPLETE": "complete_bash", "COMP_WORDS": "patchq ap", "COMP_CWORD": "1"}
    out = run_cli(env=env, fast=False)
    assert out.rc == 0 and out.stdout.split() == ["apply"], out
    profiles = run_cli(env={**env, "COMP_WORDS": "patchq apply --profile k", "COMP_CWORD": "3"}, fast=False)
    assert profiles.stdout.split() == ["kv"], profiles  # the series of the run: the stack fixture
    patches = run_cli(env={**env, "COMP_WORDS": "patchq check --patch a", "COMP_CWORD": "3"}, fast=False)
    assert patches.stdout.split() == ["align-backoff"], patches
    # the shell named, not the one typer would detect from the parent process (sh under some CIs)
    script = run_cli("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert script.rc == 0 and "_PATCHQ_COMPLETE=complete_bash" in script.stdout, script


# -- check on an install that carries the profile ---------------------------------------------

CHECKED_PATCH = '''
import ast

from patchq import edits, postcheck
from patchq.series import patch, variant


def plus_one(definition, matched, ctx):
    return edits.replace(definition, matched[0], edits.stmts("x = 42"))


def upstream_check(source):
    found = postcheck.definition(source, "answer", "vllm.tiny")
    body = "".join(ast.unparse(stmt) for stmt in found.node.body) if found is not None else ""
    return "upstream answers 42" if "x = 42" in body else None


PATCH = patch(id="tiny", summary="the answer is 42", why="a test", applies=">=0.1",
              variants=[variant(">=0.1,<1", edits={"x": plus_one})], upstream_check=upstream_check)
'''


def test_upstream_check_reads_the_pristine_definition_on_a_patched_install(tiny):
    """The planner hands a patch's upstream_check a pristine view of an installed vLLM; it
    used to share the installed source's definition index, so on a patched install (where
    the sentinel shifts the lines) it cut the pristine text at the patched text's lines:
    ``upstream check raised AttributeError`` while check said ok."""
    (tiny["series"] / "tiny.py").write_text(CHECKED_PATCH)
    env, site = tiny["env"], tiny["site"]
    assert run_cli("apply", "--profile", "good", "--site-packages", site, env=env).rc == 0
    checked = run_cli("check", "--profile", "good", "--site-packages", site, "--json", env=env)
    assert checked.rc == 0, checked
    (row,) = checked.json["patches"]
    assert row["notes"] == [] and row["upstream_check"] == {"verdict": "not-upstreamed", "reason": ""}, row


# -- status and the series ----------------------------------------------------------------------


def test_status_reports_a_series_file_that_does_not_compile(tiny):
    """A patch outside the applied profile with a syntax error: apply of the profile works
    (only the served profile must resolve), status says the series is broken (exit 2)."""
    env, site = tiny["env"], tiny["site"]
    (tiny["series"] / "broken.py").write_text("PATCH = patch(\n")
    assert run_cli("apply", "--profile", "good", "--site-packages", site, env=env).rc == 0
    for fast in (True, False):
        out = run_cli("status", "--site-packages", site, env=env, fast=fast)
        assert out.rc == 2, out
        assert f"! series error: {tiny['series'] / 'broken.py'}:1: SyntaxError: " in out.stdout
    doc = run_cli("status", "--site-packages", site, "--json", env=env).json
    assert doc["series_errors"] == [f"{tiny['series'] / 'broken.py'}:1: SyntaxError: '(' was never closed"]
    (tiny["series"] / "broken.py").unlink()
    assert run_cli("status", "--site-packages", site, env=env).rc == 0


# -- what a message names -----------------------------------------------------------------------


def test_patch_runs_name_their_patches_in_the_header(tiny):
    env, sp = tiny["env"], ("--site-packages", str(tiny["site"]))
    checked = run_cli("check", "--patch", "tiny", *sp, env=env)
    assert checked.stdout.startswith("check --patch tiny on vllm 0.23.0 (installed)\n"), checked
    assert checked.json is None and run_cli("check", "--patch", "tiny", *sp, "--json", env=env).json["patch_ids"] == [
        "tiny"]
    applied = run_cli("apply", "--patch", "tiny", *sp, env=env)
    assert applied.rc == 0 and applied.stdout.startswith("apply --patch tiny on vllm 0.23.0:\n"), applied
    reverted = run_cli("revert", "--patch", "tiny", *sp, env=env)
    assert reverted.rc == 0 and "removed tiny" in reverted.stdout, reverted


def test_check_names_the_command_that_records_a_fingerprint(tiny):
    out = run_cli("check", "--profile", "good", "--site-packages", tiny["site"], env=tiny["env"])
    assert out.rc == 0, out
    assert ("no fingerprint recorded for answer (vllm/tiny.py:1) "
            "(`patchq fingerprint --patch tiny --releases 0.23.0` records them)") \
        in " ".join(out.stdout.split()), out.stdout


def test_run_errors_use_the_one_prefix(tiny):
    out = run_cli("run", "--profile", "good", "--site-packages", tiny["site"], "--", "/nonexistent/serve",
                  env=tiny["env"])
    assert out.rc == 127, out
    assert out.stderr.splitlines()[-1] == "patchq: error: cannot run /nonexistent/serve: No such file or directory"
    (tiny["series"] / "tiny.py").write_text((tiny["series"] / "tiny.py").read_text().replace('"x = 41"', '"x = 40"'))
    (tiny["anchors"] / "tiny.toml").write_text('[anchors.x]\nmodule = "vllm.tiny"\nqualname = "answer"\n'
                                               'node = "x = 40"\n')
    failed = run_cli("run", "--profile", "good", "--site-packages", tiny["site"], "--", "true", env=tiny["env"])
    assert failed.rc == 1, failed
    error = next(ln for ln in failed.stderr.splitlines() if ln.startswith("patchq: error:"))
    assert error.startswith("patchq: error: 1 patch(es) failed") and error.endswith("; nothing was run"), failed
    assert failed.stderr.splitlines()[-1].startswith("next: `patchq check --profile good`"), failed


def test_init_runs_git_init_and_names_patchq_fingerprint(tmp_path):
    out = run_cli("init", str(tmp_path / "mine"), "--json")
    assert out.rc == 0 and out.json["git"] == "initialized" and (tmp_path / "mine" / ".git").is_dir(), out
    anchors = (tmp_path / "mine" / "anchors" / "example-quiet-logger.toml").read_text()
    assert "written by `patchq fingerprint --patch example-quiet-logger`" in anchors and "python -m" not in anchors
    inner = run_cli("init", str(tmp_path / "mine" / "sub"))
    assert inner.rc == 0 and f"already in the git repository at {tmp_path / 'mine'}" in inner.stdout, inner
    assert not (tmp_path / "mine" / "sub" / ".git").exists()
    readme = (tmp_path / "mine" / "README.md").read_text()
    assert "pypi.org" not in readme


# -- patchq serve ---------------------------------------------------------------------------------

FAKE_VLLM = '#!/bin/sh\necho "vllm $* | PATCHQ_EXPECT_PROFILE=$PATCHQ_EXPECT_PROFILE LEVEL=$LEVEL"\n'


def _skip_with_a_vllm_of_its_own() -> None:
    """The serve scenarios put the tiny site on PYTHONPATH. In an environment with its own
    vLLM (README command 1 run before command 2), serve targets that install and rightly
    refuses to patch it while another vllm is imported first (exit 5)."""
    own = own_vllm()
    if own:
        pytest.skip(f"this environment has a vLLM of its own ({own}): serve targets it")


def test_serve_applies_then_execs_vllm_with_the_profile_flags(tiny, tmp_path):
    """`patchq serve` (what a series' serve.sh wrapper runs): apply, then exec
    vllm with the generic flags, the profile's serve table and the extra args."""
    _skip_with_a_vllm_of_its_own()
    with open(tiny["series"] / "profiles.toml", "a") as fh:
        fh.write('\n[profiles.good.serve]\nargs = ["--enforce-eager"]\nenv = {LEVEL = "${LOG:-INFO}"}\n')
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text(FAKE_VLLM)
    fake.chmod(0o755)
    site = tiny["site"]
    env = {**tiny["env"], "PYTHONPATH": str(site), "VLLM": str(fake), "MODEL": "/m", "PORT": "9000"}
    out = run_cli("serve", "--profile", "good", "--", "--seed", "1", env=env)
    assert out.rc == 0, out
    assert "x = 42" in (site / "vllm" / "tiny.py").read_text()
    assert out.stdout.splitlines()[-1] == (
        "vllm serve /m --served-model-name qwen --host 0.0.0.0 --port 9000 --max-model-len 16384 "
        "--gpu-memory-utilization 0.85 --max-num-seqs 4 --enable-prefix-caching --enforce-eager --seed 1 "
        "| PATCHQ_EXPECT_PROFILE=good LEVEL=INFO")
    again = run_cli("serve", env={**env, "LOG": "DEBUG"})  # the applied profile; the no-op apply
    assert again.rc == 0 and "nothing to do" in again.stdout and again.stdout.endswith("LEVEL=DEBUG\n"), again
    dry = run_cli("serve", "--profile", "good", "--dry-run", env=env)
    assert dry.rc == 0 and dry.stdout.splitlines()[:4] == [
        "# [profiles.good.serve] reads LOG=INFO (default INFO); set them to change what is served",
        "export PATCHQ_EXPECT_PROFILE=good", "export PATCHQ_STRICT=1", "export LEVEL=INFO"], dry
    assert dry.stdout.splitlines()[-1].startswith(f"exec {fake} serve /m "), dry


def test_serve_names_a_missing_vllm_and_writes_nothing(tiny):
    site = tiny["site"]
    env = {**tiny["env"], "PYTHONPATH": str(site), "PATH": "/nonexistent"}
    beside = os.path.join(os.path.dirname(sys.executable), "vllm")
    if os.access(beside, os.X_OK):
        pytest.skip(f"{beside} exists: this environment has a vllm")
    out = run_cli("serve", "--profile", "good", env=env)
    assert out.rc == 127, out
    # vllm is installed there (the tiny site), only its script is missing: said as such
    line = one_line(out.stderr)
    assert line.startswith("patchq: error: vllm ") and "but has no `vllm` script beside" in line, out
    assert "x = 41" in (site / "vllm" / "tiny.py").read_text()


def test_serve_does_not_serve_a_profile_that_does_not_apply(tiny, tmp_path):
    _skip_with_a_vllm_of_its_own()
    fake = tmp_path / "vllm"
    fake.write_text(FAKE_VLLM)
    fake.chmod(0o755)
    (tiny["anchors"] / "tiny.toml").write_text('[anchors.x]\nmodule = "vllm.tiny"\nqualname = "answer"\n'
                                               'node = "x = 40"\n')
    env = {**tiny["env"], "PYTHONPATH": str(tiny["site"]), "VLLM": str(fake)}
    out = run_cli("serve", "--profile", "good", env=env)
    assert out.rc == 1 and "vllm serve" not in out.stdout, out
    assert out.stderr.splitlines()[-1] == "patchq: error: profile good was not applied (report above); not serving"


# -- next: lines -------------------------------------------------------------------------------


def _break_anchor(tiny):
    (tiny["anchors"] / "tiny.toml").write_text('[anchors.x]\nmodule = "vllm.tiny"\nqualname = "answer"\n'
                                               'node = "x = 40"\n')


def test_every_verb_ends_with_its_obvious_next_step(tiny):
    env, site = tiny["env"], tiny["site"]
    sp = ("--site-packages", str(site))
    assert run_cli("apply", "--profile", "good", *sp, env=env).rc == 0
    assert "next:" not in run_cli("status", *sp, env=env).stdout  # all is well: nothing to do
    # the series changed since apply: stale
    (tiny["series"] / "tiny.py").write_text((tiny["series"] / "tiny.py").read_text() + "\n# edited\n")
    stale = run_cli("status", *sp, env=env)
    assert stale.rc == 7 and stale.stdout.splitlines()[-1] == (
        "next: `patchq apply --profile good` re-applies the changed patches"), stale
    # a patch that no longer applies: check and apply say where to look
    _break_anchor(tiny)
    checked = run_cli("check", "--profile", "good", *sp, env=env)
    assert checked.rc == 1 and checked.stdout.splitlines()[-1].startswith(
        "next: `patchq rebase --to 0.23.0 --patch tiny` carries them to vllm 0.23.0"), checked
    failed = run_cli("apply", "--profile", "good", *sp, env=env)
    assert failed.rc == 1 and failed.stderr.splitlines()[-1] == (
        "next: `patchq check --profile good` shows why per patch; `patchq upgrade` rebases what moved"), failed
    # `pip install vllm==0.24.0`: new files (here: the old pristine ones), the journal of the old release
    from testing.tiny import TINY

    (site / "vllm" / "tiny.py").unlink()
    (site / "vllm" / "tiny.py").write_text(TINY)
    di = site / "vllm-0.23.0.dist-info"
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.24.0\n")
    di.rename(site / "vllm-0.24.0.dist-info")
    upgraded = run_cli("status", *sp, env=env)
    assert upgraded.rc == 0 and upgraded.stdout.splitlines()[-1] == (
        "next: `patchq upgrade` checks every patch of profile good on this vllm, rebases what moved and applies it")


# -- colour and progress --------------------------------------------------------------------------


def _on_a_terminal(args, env, stdout_tty=True, stderr_tty=True, timeout=120):
    """Run ``python -m patchq ARGS`` with stdout/stderr on a pseudo-terminal (or a pipe);
    returns (exit code, stdout bytes, stderr bytes)."""
    import pty
    import select

    fds, ours = {}, {}
    for name, tty in (("out", stdout_tty), ("err", stderr_tty)):
        parent, child = pty.openpty() if tty else os.pipe()
        fds[name], ours[name] = child, parent
    proc = subprocess.Popen([sys.executable, "-m", "patchq", *args], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                            stdout=fds["out"], stderr=fds["err"])
    for fd in fds.values():
        os.close(fd)
    got = {"out": b"", "err": b""}
    open_fds = {ours["out"]: "out", ours["err"]: "err"}
    deadline = time.monotonic() + timeout
    while open_fds and time.monotonic() < deadline:
        ready, _, _ = select.select(list(open_fds), [], [], 1)
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the pty's other side closed
                chunk = b""
            if chunk:
                got[open_fds[fd]] += chunk
            else:
                os.close(fd)
                del open_fds[fd]
    return proc.wait(timeout=timeout), got["out"], got["err"]


def test_colour_on_a_terminal_honours_no_color_and_force_color(tiny):
    env, site = tiny["env"], tiny["site"]
    assert run_cli("apply", "--profile", "good", "--site-packages", site, env=env).rc == 0
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    base.update({**env, "TERM": "xterm"})
    green = b"\x1b[32mapplied"
    rc, out, _ = _on_a_terminal(["status", "--site-packages", str(site)], base)
    assert rc == 0 and green in out, out
    rc, out, _ = _on_a_terminal(["status", "--site-packages", str(site)], {**base, "NO_COLOR": "1"})
    assert rc == 0 and b"\x1b[" not in out and b"applied" in out, out
    piped = run_cli("status", "--site-packages", site, env={**env, "NO_COLOR": ""})  # not a terminal
    assert piped.rc == 0 and "\x1b[" not in piped.stdout
    forced = run_cli("status", "--site-packages", site, env={**env, "NO_COLOR": "", "FORCE_COLOR": "1"})
    assert "\x1b[32mapplied" in forced.stdout, forced
    both = run_cli("status", "--site-packages", site, env={**env, "NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert "\x1b[" not in both.stdout  # NO_COLOR wins
    error = run_cli("apply", "--profile", "nope", "--site-packages", site,
                    env={**env, "NO_COLOR": "", "FORCE_COLOR": "1"})
    assert error.rc == 2 and error.stderr.startswith("\x1b[31mpatchq: error:\x1b[0m unknown profile"), error
    rc, out, err = _on_a_terminal(["--json", "status", "--site-packages", str(site)], base)
    assert b"\x1b[" not in out  # JSON is never coloured


def test_matrix_progress_on_a_terminal_only(tiny, tmp_path):
    """A bar on stderr while the matrix runs when stderr is a terminal; nothing otherwise."""
    index = tiny["cache"] / "index"
    index.mkdir(parents=True)
    (index / "vllm.json").write_text(json.dumps({"package": "vllm", "fetched": time.time(), "source": "pypi-json",
                                                 "versions": ["0.23.0", "0.24.0"]}))
    env = {**os.environ, **tiny["env"], "TERM": "xterm"}
    args = ["matrix", "--releases", "0.23.0,0.24.0", "--profiles", "good", "--workers", "1",
            "--out", str(tmp_path / "m")]
    rc, out, err = _on_a_terminal(args, env, stdout_tty=False)
    assert rc == 1, (out, err)  # offline: neither release can be read
    assert b"matrix: 2 release(s)" in err or b"matrix: 0.2" in err, err
    piped = run_cli(*args, env=tiny["env"])
    assert piped.rc == 1 and piped.stderr == "", piped


def test_the_fast_path_imports_neither_progress_nor_colour_libraries(tiny):
    env, site = {**os.environ, **tiny["env"], "TERM": "xterm"}, tiny["site"]
    assert run_cli("apply", "--profile", "good", "--site-packages", site, env=tiny["env"]).rc == 0
    for args in (["apply", "--profile", "good"], ["status"]):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "patchq", *args, "--site-packages", str(site)],
                              cwd=REPO, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
        heavy = {m for m in imported if m.split(".")[0] in ("rich", "typer", "click", "libcst", "packaging")
                 or m == "patchq.progress"}
        assert not heavy, (args, sorted(heavy))


def test_status_with_nothing_applied_names_apply(tiny):
    out = run_cli("status", "--site-packages", tiny["site"], env=tiny["env"])
    assert out.rc == 0 and out.stdout.splitlines()[-1] == (
        "next: `patchq apply --profile NAME` patches this vllm (`patchq list` shows the profiles)"), out


def test_upgrade_in_another_series_names_where_the_profile_came_from(tiny, tmp_path):
    """The journal's profile comes from another series (the tiny one): upgrade run with a
    different series says so and how to name it, not just "unknown profile"."""
    site = str(tiny["site"])
    assert run_cli("apply", "--profile", "good", "--site-packages", site, env=tiny["env"]).rc == 0
    other = tmp_path / "other"
    (other / "series").mkdir(parents=True)
    (other / "anchors").mkdir()
    (other / "series" / "profiles.toml").write_text('[profiles.mine]\npatches = []\n')
    env = {**tiny["env"], "PATCHQ_SERIES": str(other / "series"), "PATCHQ_ANCHORS": str(other / "anchors")}
    out = run_cli("upgrade", "--site-packages", site, env=env)
    assert out.rc == 2 and "the applied profile 'good' is not a profile of series" in out.stderr, out
    tiny_series = tiny["env"]["PATCHQ_SERIES"]  # the journal names it: the message does too
    assert f"`patchq upgrade --series {tiny_series}`" in out.stderr and "internal error" not in out.stderr


def test_run_warns_when_this_vllm_has_no_torch(tiny, tmp_path):
    """vLLM installed with --no-deps (the tiny site: no torch beside it): `patchq run` still
    runs the command (it may not import vllm) but says first why an import would fail. The
    interpreter runs with -S and this environment's packages minus torch (symlinked)."""
    import site as site_mod
    from pathlib import Path

    libs = tmp_path / "libs"
    libs.mkdir()
    for sp in map(Path, site_mod.getsitepackages()):
        for entry in sp.iterdir():
            if entry.name.startswith(("torch", "_distutils_hack")) or entry.suffix == ".pth" or \
                    (libs / entry.name).exists():
                continue
            (libs / entry.name).symlink_to(entry)
    path = os.pathsep.join([str(tiny["site"]), str(REPO), str(libs)])
    env = {**tiny["env"], "PYTHONPATH": path, "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    cmd = [sys.executable, "-S", "-m", "patchq", "run", "--profile", "good", "--", "true"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out
    assert "patchq: warning: vllm" in out.stderr and "has no torch beside it" in out.stderr, out.stderr
    quiet = subprocess.run(cmd, env={**env, "PATCHQ_SERVE_NO_TORCH_CHECK": "1"}, capture_output=True, text=True,
                           cwd=tmp_path)
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet
