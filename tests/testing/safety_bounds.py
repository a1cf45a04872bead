"""Reliability classes of issue 38 (round 4): every file patchq reads is bounded, serve checks
what it execs, the trust rule covers every file of a walked-up series, and the low findings.

Each class is a function ``(world, rng, tally) -> case`` on a fresh world of
:mod:`testing.safety_suite` (a series repo found by walking up, an installed vLLM-shaped
site, a cached release, an ``outside`` directory), registered in its ``CLASSES`` when
``safety_suite`` is imported (it imports this module last; import ``safety_suite``, not
this), so ``bench/reliability.py --safety N`` runs them with the others. A class names what a
trial must show; anything else is counted as there: exit 70 or a traceback, a hang, a
wrong exit code, a lie (exit 0, or a report, saying something untrue), bytes lost (a file
that must not change did, or ``revert --all --force`` left a target off RECORD), a write
outside.

Classes (:data:`CLASSES`):

``toml``       a deeply nested, huge, non-UTF-8 or non-regular TOML file (profiles.toml,
               an anchors file, patchq.toml, pyproject's [tool.patchq], an expect file);
``import``     hostile diffs for ``import`` (FIFO, devices, huge, UTF-16, latin-1,
               git-quoted and escaping paths);
``serve``      serve tables and variables ``serve`` cannot exec (NUL bytes, env names,
               ``PATCHQ_*`` in a profile's env, an unbalanced ``VLLM_EXTRA_ARGS``, E2BIG);
``trust``      a walked-up series whose profiles.toml, anchors or expect file or
               ``.patchq-edit`` is another user's (chown 65534) or world-writable, and a
               symlinked ``.patchq-edit`` (needs root: chown);
``recovery``   a malformed or refused series, a damaged journal, a directory or FIFO where a
               target file belongs: ``revert --all --force`` restores every file;
``hook-race``  ``apply``/``revert`` rewrite the site while a ``patchq run`` child imports;
``rt-profile`` a running profile gains, loses or drops its patches: ``status --runtime``;
``editable``   an editable vLLM: ``status`` and ``apply`` agree;
``interrupt``  a series module raising KeyboardInterrupt / SystemExit at import;
``temp``       temp files a killed writer left in the series (planted, or a real kill -9 at
               a random instant of ``fingerprint``/``new``);
``python``     ``--python`` that is not a Python interpreter;
``crlf``       CRLF targets: inserted lines follow the file, revert is byte-exact;
``fault-env``  the crash-hook variables in an installed (non-checkout) patchq.
"""

from __future__ import annotations

import difflib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from testing import safety_suite, small_series
from testing.safety_suite import (
    PATCHED,
    REPO_ROOT,
    Run,
    Tally,
    World,
    check_outside,
    judge,
    pq,
    site_at_record,
    snapshot,
)

SITE = "--site-packages"
DEEP = "x = " + "[" * 5000 + "]" * 5000 + "\n"


def _root_only(tally: Tally, case: str) -> str | None:
    """The case name marked skipped when not root (chown to another uid needs it)."""
    if os.geteuid() != 0:
        tally.skipped += 1
        tally.trials -= 1
        return case + " (skipped: needs root for chown)"
    return None


def _repo_files(world: World) -> dict[str, str]:
    return snapshot(world.repo, skip=(".patchq-edit", ".patchq-txn", "series/__pycache__"))


def _names(run: Run, path: Path, tally: Tally, case: str) -> None:
    """An exit-2 refusal must name the file it is about."""
    if run.rc == 2 and str(path) not in run.err + run.out:
        tally.bad("wrong_exit", case, f"{run}: the refusal does not name {path}")


# ---------------------------------------------------------------------------------- toml


def case_toml(world: World, rng: random.Random, tally: Tally) -> str:
    """A TOML file patchq reads, made hostile: every command that reads it exits 2 naming
    it (a RecursionError was exit 70 for every command); ``revert --all --force`` restores."""
    site = (SITE, world.site)
    pq(world, "apply", "--profile", "base", *site)
    which = rng.choice(["profiles", "anchors", "config", "pyproject", "expect"])
    kind = rng.choice(["deep-arrays", "deep-tables", "deep-inline", "huge", "latin1", "fifo", "dir"])
    case = f"toml/{which}/{kind}"
    path = {"profiles": world.repo / "series" / "profiles.toml",
            "anchors": world.repo / "anchors" / "bump-default.toml", "config": world.repo / "patchq.toml",
            "pyproject": world.repo / "pyproject.toml",
            "expect": world.repo / "series" / "diffs" / "bump-default.expect.toml"}[which]
    if which == "pyproject":
        (world.repo / "patchq.toml").unlink()
        path.write_text('[tool.patchq]\nseries = "series"\nanchors = "anchors"\n')
    if which == "expect":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('[verdicts]\n"0.1.0" = "applies"\n')
    old = path.read_text()
    body = {"deep-arrays": DEEP, "deep-tables": "[" + ".".join(f"t{i}" for i in range(rng.choice([40, 400]))) + "]\n",
            "deep-inline": "y = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
            "huge": "# " + "x" * (1 << 20) + "\n", "latin1": None, "fifo": None, "dir": None}[kind]
    if kind in ("fifo", "dir"):
        path.unlink()
        os.mkfifo(path) if kind == "fifo" else path.mkdir()
    elif kind == "latin1":
        path.write_bytes(old.encode() + b'\nz = "caf\xe9"\n')
    elif which == "config" or which == "pyproject":
        path.write_text(body + old if not body.startswith("[") else old + body)
    else:
        path.write_text(old + "\n" + body)
    out_before = snapshot(world.outside)
    verbs = [("list",), ("status", *site), ("apply", "--profile", "base", *site), ("serve-args", "--profile", "base"),
             ("check", "--profile", "base", "--vllm", "0.1.0"), ("test",)]
    for args in rng.sample(verbs, 3):
        r = pq(world, *args, tally=tally)
        if not judge(r, {0, 1, 2, 7}, tally, f"{case}/{args[0]}"):
            continue
        reads = (which in ("profiles", "config", "pyproject") or (which == "anchors" and args[0] != "serve-args")
                 or (which == "expect" and args[0] == "test"))
        if kind in ("fifo", "dir") and which in ("config", "pyproject"):
            reads = False  # skipped by the walk, as a directory named patchq.toml always was
        if reads and r.rc == 0:
            tally.bad("lies", f"{case}/{args[0]}", f"{r}: exit 0 although it reads the damaged {path.name}")
        if r.rc == 2:
            _names(r, path, tally, f"{case}/{args[0]}")
    force = pq(world, "revert", "--all", "--force", *site, tally=tally)
    judge(force, {0}, tally, case + "/force")
    if force.rc == 0 and not site_at_record(world):
        tally.bad("bytes_lost", case, f"{force}: a target file is not at RECORD after the forced revert")
    check_outside(world, out_before, tally, case)
    return case


# -------------------------------------------------------------------------------- import


def _utils_diff(a: str = "a/vllm/ops/utils.py", b: str = "b/vllm/ops/utils.py") -> str:
    old = small_series.UTILS_PY
    new = old.replace("        return self.DEFAULT\n", "        return self.DEFAULT * 2\n")
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), a, b))


def case_import(world: World, rng: random.Random, tally: Tally) -> str:
    """Hostile input for ``import``: refused with its documented code and one line, nothing
    written (a FIFO hung, /dev/zero was OOM-killed, non-UTF-8 was exit 70, ../ and other
    paths got exit 2 or 1 by chance); a git-quoted path imports."""
    kind = rng.choice(["fifo", "dev-zero", "dev-urandom", "dir", "huge", "utf16", "latin1", "quoted",
                       "up", "absolute", "other-package", "vllm-up", "ok"])
    case = f"import/{kind}"
    diff = world.root / "in.diff"
    text = _utils_diff()
    want = 1
    if kind in ("fifo", "dev-zero", "dev-urandom", "dir", "huge"):
        want = 2
        if kind == "fifo":
            os.mkfifo(diff)
        elif kind == "dir":
            diff.mkdir()
        elif kind == "huge":
            diff.write_text(text + "#" * (1 << 20) + "\n")
        else:
            diff = Path("/dev/zero" if kind == "dev-zero" else "/dev/urandom")
    elif kind == "utf16":
        diff.write_bytes(text.encode("utf-16"))
    elif kind == "latin1":
        diff.write_bytes(text.encode().replace(b"* 2", b"* \xe9"))
    elif kind == "quoted":
        diff.write_text(_utils_diff('"a/vllm/ops/\\165tils.py"', '"b/vllm/ops/utils.py"'))  # \165 = u
        want = 0
    elif kind == "ok":
        diff.write_text(text)
        want = 0
    else:
        path = {"up": "../x.py", "absolute": "/etc/passwd", "other-package": "b/other/x.py",
                "vllm-up": "b/vllm/../x.py"}[kind]
        diff.write_text(_utils_diff(path, path))
    before = _repo_files(world)
    out_before = snapshot(world.outside)
    r = pq(world, "import", diff, "--id", "mine", "--release", "0.1.0", tally=tally, timeout=120)
    if judge(r, {want}, tally, case) and want != 0 and _repo_files(world) != before:
        tally.bad("bytes_lost", case, f"{r}: the series changed although the import was refused")
    if want == 0 and r.rc == 0 and not (world.repo / "series" / "mine.py").is_file():
        tally.bad("lies", case, f"{r}: exit 0 but no series/mine.py")
    if kind == "dev-zero" and r.rc == 2 and "not a regular file" not in r.err:
        tally.bad("wrong_exit", case, f"{r}: /dev/zero refused for another reason")
    check_outside(world, out_before, tally, case)
    return case


# --------------------------------------------------------------------------------- serve


_SHOW_ENV = "#!/bin/sh\necho \"STRICT=$PATCHQ_STRICT EXPECT=$PATCHQ_EXPECT_PROFILE ARGS=$#\"\n"


def case_serve(world: World, rng: random.Random, tally: Tally) -> str:
    """What ``serve`` would exec: exit 2 naming profiles.toml (NUL, env names), naming
    VLLM_EXTRA_ARGS, 126 for E2BIG (a 10 MB argument said 127 "not found"); a profile's
    PATCHQ_* never reaches the served process (PATCHQ_STRICT=0 turned off the liveness stop)."""
    kind = rng.choice(["nul-arg", "nul-env", "eq-key", "empty-key", "own-vars", "extra-quote", "e2big", "ok"])
    mode = rng.choice(["dry-run", "json", "serve-args", "serve"])
    case = f"serve/{kind}/{mode}"
    show = world.root / "vllm-show"
    show.write_text(_SHOW_ENV)
    show.chmod(0o755)
    table = {"nul-arg": 'args = ["a\\u0000b"]', "nul-env": 'env = {A = "x\\u0000"}', "eq-key": 'env = {"A=B" = "x"}',
             "empty-key": 'env = {"" = "x"}', "own-vars": 'env = {PATCHQ_STRICT = "0", PATCHQ_EXPECT_PROFILE = "none"}',
             "extra-quote": "", "e2big": 'args = ["' + "x" * (300 << 10) + '"]', "ok": 'args = ["--x"]'}[kind]
    profiles = world.repo / "series" / "profiles.toml"
    profiles.write_text(profiles.read_text() + f"\n[profiles.base.serve]\n{table}\n")
    env = {"VLLM": str(show), "PATCHQ_SERVE_NO_TORCH_CHECK": "1", "PYTHONPATH": str(world.site)}
    if kind == "extra-quote":
        env["VLLM_EXTRA_ARGS"] = "--served-model-name 'unbalanced"
    series = ("--series", world.repo)
    args = {"dry-run": ("serve", "--profile", "base", "--dry-run", *series),
            "json": ("serve", "--profile", "base", "--dry-run", "--json", *series),
            "serve-args": ("serve-args", "--profile", "base", "--env", *series),
            "serve": ("serve", "--profile", "base", *series)}[mode]
    want = {"nul-arg": 2, "nul-env": 2, "eq-key": 2, "empty-key": 2, "own-vars": 0, "extra-quote": 2,
            "e2big": 126, "ok": 0}[kind]
    if mode == "serve-args" and kind in ("extra-quote", "e2big"):
        want = 0  # serve-args neither splits VLLM_EXTRA_ARGS nor execs
    if mode in ("dry-run", "json") and kind == "e2big":
        want = 0  # a dry run lists it among its warnings
    r = pq(world, *args, env=env, tally=tally)
    if not judge(r, {want}, tally, case):
        return case
    if want == 2 and kind != "extra-quote":
        _names(r, profiles, tally, case)
    if kind == "extra-quote" and want == 2 and "VLLM_EXTRA_ARGS" not in r.err + r.out:
        tally.bad("wrong_exit", case, f"{r}: does not name VLLM_EXTRA_ARGS")
    if kind == "e2big" and mode in ("dry-run", "json") and "E2BIG" not in r.err + r.out:
        tally.bad("lies", case, f"{r}: the dry run does not warn that the command is too long to exec")
    if kind == "own-vars" and ("PATCHQ_STRICT=0" in r.out or "STRICT=0" in r.out or '"PATCHQ_STRICT": "0"' in r.out
                               or "EXPECT=none" in r.out or "PATCHQ_EXPECT_PROFILE=none" in r.out):
        tally.bad("lies", case, f"{r}: a profile's PATCHQ_* reached the served process: {r.out[-200:]}")
    if mode == "serve" and r.rc == 0 and "STRICT=1 EXPECT=base" not in r.out:
        tally.bad("lies", case, f"{r}: served without patchq's own variables: {r.out[-200:]}")
    pq(world, "revert", "--all", "--force", SITE, world.site)
    return case


# --------------------------------------------------------------------------------- trust


def case_trust(world: World, rng: random.Random, tally: Tally) -> str:
    """A walked-up series whose profiles.toml, anchors or expect file, or .patchq-edit is
    another user's or world-writable: refused (exit 2, the opt-in named), never used; a
    symlinked .patchq-edit is never followed (edit wrote outside the repo)."""
    which = rng.choice(["profiles", "anchors", "expect", "edit-dir", "edit-link"])
    how = rng.choice(["chown", "o+w"]) if which != "edit-link" else "link"
    case = f"trust/{which}/{how}"
    if how == "chown":
        skipped = _root_only(tally, case)
        if skipped:
            return skipped
    site = (SITE, world.site)
    path = {"profiles": world.repo / "series" / "profiles.toml",
            "anchors": world.repo / "anchors" / "bump-default.toml",
            "expect": world.repo / "series" / "diffs" / "bump-default.expect.toml",
            "edit-dir": world.repo / ".patchq-edit", "edit-link": world.repo / ".patchq-edit"}[which]
    if which == "expect":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('[verdicts]\n"0.1.0" = "upstreamed"\n')  # a hostile expectation
    if which == "profiles":  # a hostile profile: base applies nothing
        path.write_text(path.read_text().replace('patches = ["bump-default"]', "patches = []"))
    if which in ("edit-dir", "edit-link"):
        if which == "edit-dir":
            path.mkdir()
        else:
            os.symlink(world.outside, path)
    if how == "chown":
        os.chown(path, 65534, 65534, follow_symlinks=False)
    elif how == "o+w":
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    args = {"profiles": rng.choice([("apply", "--profile", "base", *site), ("list",), ("status", *site)]),
            "anchors": rng.choice([("apply", "--profile", "base", *site), ("check", "--profile", "base", "--vllm",
                                                                           "0.1.0")]),
            "expect": ("test",),
            "edit-dir": ("edit", "mine", "--file", "vllm/ops/utils.py", *site),
            "edit-link": ("edit", "mine", "--file", "vllm/ops/utils.py", *site)}[which]
    out_before = snapshot(world.outside)
    site_before = snapshot(world.site)
    r = pq(world, *args, tally=tally)
    if judge(r, {2}, tally, case):
        _names(r, path, tally, case)
        if which != "edit-link" and "PATCHQ_SAFE_DIRECTORIES" not in r.err + r.out:
            tally.bad("wrong_exit", case, f"{r}: the refusal does not say how to opt in")
    if snapshot(world.site) != site_before:
        tally.bad("outside", case, f"{r}: site-packages changed although the series was refused")
    check_outside(world, out_before, tally, case)
    if which != "edit-link":  # opted in: the same command is not refused for it
        ok = pq(world, *args, env={"PATCHQ_SAFE_DIRECTORIES": str(world.repo)}, tally=tally)
        if judge(ok, {0, 1, 2, 7}, tally, case + "/opted-in") and "refusing" in ok.err:
            tally.bad("wrong_exit", case, f"{ok}: refused although opted in")
    pq(world, "revert", "--all", "--force", *site)
    return case


# ------------------------------------------------------------------------------ recovery


def case_recovery(world: World, rng: random.Random, tally: Tally) -> str:
    """``revert --all --force`` needs only the journal and the pristine copies: with the
    series malformed or refused, the journal damaged, a directory or FIFO where a target
    file belongs, it exits 0 and every target file is at RECORD."""
    site = (SITE, world.site)
    r = pq(world, "apply", "--profile", "base", *site, tally=tally)
    if not judge(r, {0}, tally, "recovery/apply"):
        return "recovery/apply"
    series = rng.choice(["deep-profiles", "garbage-profiles", "deep-config", "anchors-fifo", "txn-file", "unsafe",
                         "intact"])
    target = rng.choice(["as-applied", "dir", "fifo", "deleted", "edited"])
    journal = rng.choice(["ok", "garbage", "deep"])
    case = f"recovery/{series}/{target}/{journal}"
    if series == "unsafe" and os.geteuid() != 0:
        series = "deep-profiles"
    s = world.repo / "series"
    if series == "deep-profiles":
        (s / "profiles.toml").write_text(DEEP)
    elif series == "garbage-profiles":
        (s / "profiles.toml").write_bytes(bytes(rng.randrange(256) for _ in range(300)))
    elif series == "deep-config":
        (world.repo / "patchq.toml").write_text(DEEP)
    elif series == "anchors-fifo":
        (world.repo / "anchors" / "bump-default.toml").unlink()
        os.mkfifo(world.repo / "anchors" / "bump-default.toml")
    elif series == "txn-file":
        (world.repo / ".patchq-txn").write_text("not a journal directory\n")
    elif series == "unsafe":
        os.chown(s / "profiles.toml", 65534, 65534)
    utils = world.site / "vllm/ops/utils.py"
    if target == "dir":
        utils.unlink()
        utils.mkdir()
        (utils / "someone.txt").write_text("someone's\n")
    elif target == "fifo":
        utils.unlink()
        os.mkfifo(utils)
    elif target == "deleted":
        utils.unlink()
    elif target == "edited":
        utils.write_text(utils.read_text() + "# a hand edit\n")
    jpath = world.site / ".patchq" / "journal.json"
    if journal == "garbage":
        jpath.write_bytes(bytes(rng.randrange(256) for _ in range(200)))
    elif journal == "deep":
        jpath.write_text("[" * 50000 + "]" * 50000)
    out_before = snapshot(world.outside)
    force = pq(world, "revert", "--all", "--force", *site, tally=tally)
    judge(force, {0}, tally, case)
    if force.rc == 0 and not site_at_record(world):
        tally.bad("bytes_lost", case, f"{force}: a target file is not at RECORD after the forced revert")
    if force.rc == 0 and utils.is_file() and PATCHED in utils.read_text():
        tally.bad("lies", case, f"{force}: exit 0 but {utils} still carries the patch")
    if target == "dir" and force.rc == 0 and not list((world.site / ".patchq").rglob("someone.txt")):
        tally.bad("bytes_lost", case, f"{force}: the directory in the target's place was not kept")
    check_outside(world, out_before, tally, case)
    return case


# ----------------------------------------------------------------------------- hook race

_CHILD = "import time; time.sleep({delay}); import vllm.ops.utils as u; print(u.Backend.DEFAULT)"


def case_hook_race(world: World, rng: random.Random, tally: Tally) -> str:
    """``apply`` or ``revert`` rewrites the site while a ``patchq run`` child is about to
    import: the child prints the patched value (exit 0) or stops with one line (exit 6);
    never a traceback (it died with a 12-line HookError), never the unpatched value."""
    verb = rng.choice(["apply", "revert", "apply-revert"])
    case = f"hook-race/{verb}"
    site = (SITE, world.site)
    if verb != "apply":
        pq(world, "apply", "--profile", "base", *site)
    delay = rng.choice([0.0, 0.2, 0.5, 1.0])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_")}
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1", "PYTHONPATH": str(world.site)}, **world.env)
    tally.commands += 1
    child = subprocess.Popen([sys.executable, "-m", "patchq", "run", "--profile", "base", *site, "--", sys.executable,
                              "-c", _CHILD.format(delay=delay)], cwd=world.repo, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    time.sleep(rng.uniform(0.0, 1.2))
    for v in (["revert", "apply"] if verb == "apply-revert" else [verb]):
        args = ("revert", "--all", *site) if v == "revert" else ("apply", "--profile", "base", *site)
        judge(pq(world, *args, tally=tally), {0}, tally, f"{case}/{v}")
    try:
        out, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        tally.bad("hangs", case, "the patchq run child did not end")
        return case
    r = Run(["run"], child.returncode, out, err)
    if judge(r, {0, 6}, tally, case):
        if r.rc == 0 and out.strip() != "101376":
            tally.bad("lies", case, f"{r}: served {out.strip()!r}, not the patched value")
        # besides run's own summary line ("patchq run: profile base ..."), exactly one line: the hook's stop
        stops = [ln for ln in err.splitlines() if ln.startswith("patchq run:") and " at import time " not in ln]
        if r.rc == 6 and len(stops) != 1:
            tally.bad("wrong_exit", case, f"{r}: the stop is not one line: {err[-300:]}")
    pq(world, "revert", "--all", "--force", *site)
    return case


# ------------------------------------------------------------------------------- runtime


def _second_patch(world: World) -> None:
    s = world.repo / "series"
    (s / "other.py").write_text((s / "bump_default.py").read_text().replace('id="bump-default"', 'id="other"'))
    shutil.copy(world.repo / "anchors" / "bump-default.toml", world.repo / "anchors" / "other.toml")


def case_runtime_profile(world: World, rng: random.Random, tally: Tally) -> str:
    """A process started with profile base; then base gains, loses or loses its profile
    (or nothing changes): ``status --runtime`` says stale, exit 7 (it said live, exit 0,
    after a patch was added), and live, exit 0, only when nothing changed."""
    kind = rng.choice(["gain", "lose", "gone", "same"])
    case = f"rt-profile/{kind}"
    _second_patch(world)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_")}
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(world.site)}, **world.env)
    code = "import vllm.ops.utils as u, sys, time; print(u.Backend.DEFAULT, flush=True); time.sleep(30)"
    tally.commands += 1
    child = subprocess.Popen([sys.executable, "-m", "patchq", "run", "--profile", "base", SITE, str(world.site), "--",
                              sys.executable, "-c", code], cwd=world.repo, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline() if child.stdout else ""
        if line.strip() != "101376":
            child.kill()
            tally.bad("exit70", case, f"the run child did not start: {line!r} {child.communicate()[1][-300:]}")
            return case
        profiles = world.repo / "series" / "profiles.toml"
        text = profiles.read_text()
        if kind == "gain":
            profiles.write_text(text.replace('patches = ["bump-default"]', 'patches = ["bump-default", "other"]'))
        elif kind == "lose":
            profiles.write_text(text.replace('patches = ["bump-default"]', "patches = []"))
        elif kind == "gone":
            profiles.write_text(text.replace("[profiles.base]", "[profiles.renamed]"))
        r = pq(world, "status", "--runtime", "--json", tally=tally)
        want = 0 if kind == "same" else 7
        if judge(r, {want}, tally, case):
            rows = [p for p in (r.json or {}).get("processes", []) if p.get("profile") == "base"]
            states = {p["status"] for p in rows}
            if states != {"live" if kind == "same" else "stale"}:
                tally.bad("lies", case, f"{r}: the process reads {states or 'absent'}")
    finally:
        child.kill()
        child.communicate()
    return case


# ------------------------------------------------------------------------------ editable


def case_editable(world: World, rng: random.Random, tally: Tally) -> str:
    """An editable vLLM (dist-info, a .pth, the sources in a checkout): status and apply
    give one answer (status exited 0 naming a vLLM apply said was not there)."""
    kind = rng.choice(["direct-url", "no-direct-url", "pythonpath"])
    case = f"editable/{kind}"
    src = small_series.write_tree(world.root / "checkout")
    site = world.root / "esite"
    di = site / "vllm-0.1.0.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.1.0\n\n")
    (di / "RECORD").write_text("__editable__.vllm-0.1.0.pth,,\nvllm-0.1.0.dist-info/RECORD,,\n")
    if kind != "no-direct-url":
        (di / "direct_url.json").write_text(json.dumps({"url": f"file://{src}", "dir_info": {"editable": True}}))
    (site / "__editable__.vllm-0.1.0.pth").write_text(f"{src}\n")
    before = snapshot(src)
    if kind == "pythonpath":
        env, opts = {"PYTHONPATH": f"{site}{os.pathsep}{src}"}, ()
    else:
        env, opts = {}, (SITE, site)
    got = {}
    for args in (("status",), ("apply", "--profile", "base"), ("diff", "--profile", "base")):
        r = pq(world, *args, *opts, env=env, tally=tally)
        if judge(r, {3}, tally, f"{case}/{args[0]}"):
            got[args[0]] = r.err.strip()
    if len(set(got.values())) > 1:
        tally.bad("lies", case, f"status and apply disagree: {got}")
    if snapshot(src) != before:
        tally.bad("bytes_lost", case, "the editable checkout changed")
    return case


# ----------------------------------------------------------------------------- interrupt


def case_interrupt(world: World, rng: random.Random, tally: Tally) -> str:
    """A series module raising KeyboardInterrupt or SystemExit at import: exit 2 naming the
    file (it was 130 "interrupted", or the status the module chose: sys.exit(0) read as
    success); a real SIGINT while it loads is 130."""
    kind = rng.choice(["keyboard-interrupt", "exit-0", "exit-3", "real-sigint"])
    case = f"interrupt/{kind}"
    module = world.repo / "series" / "bump_default.py"
    head = {"keyboard-interrupt": "raise KeyboardInterrupt\n", "exit-0": "import sys\nsys.exit(0)\n",
            "exit-3": "raise SystemExit(3)\n",
            "real-sigint": "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n"}
    module.write_text(head[kind] + module.read_text())
    want = {130} if kind == "real-sigint" else {2}
    site = (SITE, world.site)
    for args in rng.sample([("apply", "--profile", "base", *site), ("check", "--profile", "base", "--vllm", "0.1.0"),
                            ("diff", "--profile", "base", *site), ("check", "--patch", "bump-default", "--source",
                                                                   world.site, "--as-version", "0.1.0")], 2):
        r = pq(world, *args, tally=tally)
        if judge(r, want, tally, f"{case}/{args[0]}") and r.rc == 2:
            _names(r, module, tally, f"{case}/{args[0]}")
    return case


# ---------------------------------------------------------------------------------- temp


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


def _temps(world: World) -> list[str]:
    return sorted(str(p.relative_to(world.repo)) for d in ("series", "anchors") for p in (world.repo / d).iterdir()
                  if p.name.endswith(".patchq-tmp"))


def case_temp(world: World, rng: random.Random, tally: Tally) -> str:
    """Temp files a killed writer left (planted with a dead writer's pid, or a real kill -9
    at a random instant of ``fingerprint``/``new``): never read as series data, and gone
    after the next transaction (one was left after kill -9 of ``rebase --write``)."""
    kind = rng.choice(["planted", "planted", "kill"])
    case = f"temp/{kind}"
    site = (SITE, world.site)
    if kind == "planted":
        pid = _dead_pid()
        for d, name in (("anchors", "bump-default.toml"), ("series", "profiles.toml"), ("series", "bump_default.py")):
            (world.repo / d / f".{name}.{pid}.abcd{rng.randrange(1000, 9999)}.patchq-tmp").write_text("[[[garbage\0")
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_")}
        env.update({"PYTHONDONTWRITEBYTECODE": "1"}, **world.env)
        verb = rng.choice([["fingerprint", "--releases", "0.1.0"],
                           ["new", "p1", "--at", "vllm.ops.utils:Backend", "--node", "DEFAULT = ...", *map(str, site)]])
        tally.commands += 1
        proc = subprocess.Popen([sys.executable, "-m", "patchq", *verb], cwd=world.repo, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 2.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        case += f"/{verb[0]}"
    left = _temps(world)
    for args in (("list",), ("apply", "--profile", "base", *site), ("check", "--profile", "base", "--vllm", "0.1.0")):
        judge(pq(world, *args, tally=tally), {0}, tally, f"{case}/{args[0]}")
    r = pq(world, "new", "p2", "--at", "vllm.ops.utils:Backend", "--node", "DEFAULT = ...", *site, tally=tally)
    judge(r, {0}, tally, f"{case}/new")
    still = [t for t in _temps(world) if t in left]
    if r.rc == 0 and still:
        tally.bad("wrong_exit", case, f"{r}: stale temp files outlived the next transaction: {still}")
    pq(world, "revert", "--all", "--force", *site)
    return case


# -------------------------------------------------------------------------------- python


def case_python(world: World, rng: random.Random, tally: Tally) -> str:
    """``--python`` that is not a Python interpreter: exit 3 saying so (its output was taken
    for a site-packages path: "no vllm distribution in hello ..."); a python with a startup
    banner still works."""
    kind = rng.choice(["garbage", "fails", "silent", "not-executable", "directory", "missing", "banner"])
    case = f"python/{kind}"
    exe = world.root / "fake-python"
    if kind == "garbage":
        exe.write_text("#!/bin/sh\necho 'hello, I am not python'\n")
    elif kind == "fails":
        exe.write_text("#!/bin/sh\necho oops >&2\nexit 1\n")
    elif kind == "silent":
        exe.write_text("#!/bin/sh\nexit 0\n")
    elif kind == "not-executable":
        exe.write_text("print('x')\n")
    elif kind == "directory":
        exe.mkdir()
    elif kind == "banner":
        exe.write_text(f"#!/bin/sh\necho 'welcome'\nexec {sys.executable} \"$@\"\n")
    if kind not in ("not-executable", "directory", "missing"):
        exe.chmod(0o755)
    for args in rng.sample([("status",), ("apply", "--profile", "base"), ("diff", "--profile", "base")], 2):
        r = pq(world, *args, "--python", exe, tally=tally)
        if not judge(r, {3}, tally, f"{case}/{args[0]}"):
            continue
        if kind != "banner" and "no vllm distribution in" in r.err:
            tally.bad("lies", f"{case}/{args[0]}", f"{r}: its output taken for a site-packages path")
        if kind == "banner" and "no vllm distribution in" not in r.err:  # the real python's site has no vllm
            tally.bad("wrong_exit", f"{case}/{args[0]}", f"{r}: a python with a banner was not asked right")
    return case


# ---------------------------------------------------------------------------------- crlf


def _crlf_site(world: World, utils: str) -> Path:
    site = world.root / "crlf-site"
    small_series.write_site(site, utils=utils)
    return site


def case_crlf(world: World, rng: random.Random, tally: Tally) -> str:
    """A CRLF target: every line apply writes ends in CRLF (inserted lines were LF-only), and
    revert is byte-exact."""
    kind = rng.choice(["replace", "insert"])
    case = f"crlf/{kind}"
    crlf = small_series.UTILS_PY.replace("\n", "\r\n")
    site = _crlf_site(world, crlf)
    if kind == "insert":
        m = world.repo / "series" / "bump_default.py"
        m.write_text(m.read_text().replace('return edits.replace(backend, stmt, edits.stmts("DEFAULT = 101376"))',
                                           'return edits.insert_after(backend, stmt, edits.stmts("A = 1\\nif A:\\n'
                                           '    B = 2\\n"))'))
    before = (site / "vllm/ops/utils.py").read_bytes()
    r = pq(world, "apply", "--profile", "base", SITE, site, tally=tally)
    if judge(r, {0}, tally, case):
        data = (site / "vllm/ops/utils.py").read_bytes()
        if data == before:
            tally.bad("lies", case, f"{r}: exit 0 but nothing changed")
        if b"\n" in data.replace(b"\r\n", b""):
            tally.bad("lies", case, f"{r}: LF-only lines in a CRLF file: {data!r}"[:400])
    r = pq(world, "revert", "--all", SITE, site, tally=tally)
    judge(r, {0}, tally, case + "/revert")
    if (site / "vllm/ops/utils.py").read_bytes() != before:
        tally.bad("bytes_lost", case, "revert is not byte-exact")
    return case


# ----------------------------------------------------------------------------- fault env


def case_fault_env(world: World, rng: random.Random, tally: Tally) -> str:
    """The crash hooks of the test layer are off in an installed patchq (a copy of the
    package without the checkout around it): apply and new finish (they were live, and
    undocumented, in the wheel)."""
    var = rng.choice(["PATCHQ_FAULT_AFTER_WRITES", "PATCHQ_FAULT_AFTER_REPO_WRITES"])
    case = f"fault-env/{var}"
    installed = world.root / "installed"
    shutil.copytree(REPO_ROOT / "patchq", installed / "patchq", ignore=shutil.ignore_patterns("__pycache__"))
    env = {var: "1", "PYTHONPATH": str(installed)}
    site = (SITE, world.site)
    args = (("apply", "--profile", "base", *site) if var == "PATCHQ_FAULT_AFTER_WRITES" else
            ("new", "p1", "--at", "vllm.ops.utils:Backend", "--node", "DEFAULT = ...", *site))
    r = pq(world, *args, env=env, tally=tally)
    if r.rc == 99:
        tally.bad("lies", case, f"{r}: the installed patchq stopped itself half-way on {var}")
    else:
        judge(r, {0}, tally, case)
    pq(world, "revert", "--all", "--force", *site)
    return case


CLASSES = {
    "toml": case_toml,
    "import": case_import,
    "serve": case_serve,
    "trust": case_trust,
    "recovery": case_recovery,
    "hook-race": case_hook_race,
    "rt-profile": case_runtime_profile,
    "editable": case_editable,
    "interrupt": case_interrupt,
    "temp": case_temp,
    "python": case_python,
    "crlf": case_crlf,
    "fault-env": case_fault_env,
}

safety_suite.CLASSES.update(CLASSES)  # registered beside the classes of issue 28 (bench/reliability.py --safety)
