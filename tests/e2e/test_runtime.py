"""Runtime mode: ``patchq run`` serves the patched source in every process of a tree.

All on a real vLLM 0.23.0 install (a hard-linked copy, see ``conftest.py``):

* a process tree (main, spawn, fork, forkserver, a spawn Pool, ``subprocess.run`` of
  python) under ``patchq run``: in every process the hook is first on ``sys.meta_path``
  and the spec the import system gets for each target module has patchq's loader, the
  real file as origin and ``co_filename``, and exactly the plan's patched text; a
  pre-existing ``sitecustomize`` still runs; ``status --runtime`` lists the process;
* the served text is byte-for-byte what ``patchq apply`` writes, and ``diff`` agrees;
* on a read-only site-packages (a read-only bind mount in a private mount namespace:
  ``unshare -m``), ``apply`` refuses with exit 5 while ``run`` works; afterwards every
  file of the install still matches its RECORD hash;
* loud failures: a patch that does not apply (exit 1, the command never starts), a
  target module imported before the hook (exit 6), a target file changed after the
  hook was prepared (the process stops on import, exit 6; the next ``run`` refuses it, exit 4);
* a warm start imports neither libcst nor the planner;
* the vLLM plugin's check, in both modes, and its ``VLLM_CACHE_ROOT`` fold;
* (slow) the real import of the patched FLA module with torch 2.13.0 CPU: executed
  patched code in main, spawn and fork children, tracebacks and ``inspect`` with the
  patched lines and line numbers.

Importing a target module needs torch (every target module imports it, and
``vllm/__init__.py`` does), so the fast tests call the import system's own
``find_spec``/``get_source``/``get_code`` on the hook's finder; the slow test executes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support import REPO, record_hashes, replace_file, sha256_path
from testing import stack

PROFILE = "full"  # touches all four target files of 0.23.0
FLA = "vllm.model_executor.layers.fla.ops.utils"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """A clean environment: private patchq cache, runtime dir and XDG cache; the stack's series."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("PATCHQ_") and k not in ("VLLM_CACHE_ROOT", "PYTHONPATH")}
    e.update({"PATCHQ_SERIES": str(stack.SERIES),
              "PATCHQ_CACHE_DIR": str(tmp_path / "cache"), "PATCHQ_RUNTIME_DIR": str(tmp_path / "procs"),
              "XDG_CACHE_HOME": str(tmp_path / "xdg"), "NO_COLOR": "1", "COLUMNS": "200"})
    return e


def patchq(*args, env, wrap=(), extra_env=None, timeout=600) -> subprocess.CompletedProcess:
    """``python -m patchq ARGS`` (cwd: the repository)."""
    full = dict(env)
    full.update(extra_env or {})
    return subprocess.run([*wrap, sys.executable, "-m", "patchq", *map(str, args)], cwd=REPO, env=full,
                          capture_output=True, text=True, timeout=timeout)


def planned(site: Path, profile: str = PROFILE) -> dict[str, str]:
    """relpath -> patched text, from the engine directly (what apply writes)."""
    from patchq import series
    from patchq.plan import engine
    from patchq.vllmdist import sources

    plan = engine.plan(sources.installed(site), series.load(stack.SERIES).patches_of(profile))
    assert plan.ok, [r.reason for r in plan.failures()]
    return plan.patched


def manifest_of(env: dict, site: Path, profile: str = PROFILE) -> dict:
    out = patchq("run", "--profile", profile, "--site-packages", site, "--print-env", env=env)
    assert out.returncode == 0, out.stderr
    exports = dict(line[len("export "):].split("=", 1) for line in out.stdout.splitlines())
    return json.loads(Path(exports["PATCHQ_RUNTIME_MANIFEST"]).read_text())


TREE = r'''
import hashlib, json, multiprocessing as mp, os, subprocess, sys

def probe(tag):
    import _patchq_hook as h
    finder = sys.meta_path[0]
    out = {"tag": tag, "pid": os.getpid(), "hook": h.STATE is not None,
           "first_finder": type(finder).__name__, "modules": {},
           "sitecustomize": sys.modules["sitecustomize"].__file__,
           "prev_sitecustomize": os.environ.get("PREV_SITECUSTOMIZE")}
    for name, entry in sorted(h.STATE.manifest["modules"].items()):
        parent = os.path.dirname(entry["path"])  # the parent package's __path__
        spec = finder.find_spec(name, [parent])
        src = spec.loader.get_source(name)
        code = spec.loader.get_code(name)
        out["modules"][name] = {"loader": type(spec.loader).__name__, "origin": spec.origin,
                                "filename": code.co_filename,
                                "sha": hashlib.sha256(src.encode()).hexdigest()}
    h.STATE.record()  # what the vLLM plugin does in every vLLM process
    return out

def put(q, tag):
    q.put(probe(tag))

if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        print(json.dumps(probe("subprocess")))
        sys.exit(0)
    results = [probe("main")]
    for method in ("spawn", "fork", "forkserver"):
        ctx = mp.get_context(method)
        q = ctx.Queue()
        p = ctx.Process(target=put, args=(q, method))
        p.start()
        results.append(q.get(timeout=120))
        p.join(120)
    with mp.get_context("spawn").Pool(2) as pool:
        results += pool.map(probe, ["pool", "pool"])
    sub = subprocess.run([sys.executable, __file__, "--probe"], capture_output=True, text=True, check=True)
    results.append(json.loads(sub.stdout))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    status = subprocess.run([sys.argv[1], "-m", "patchq", "status", "--runtime", "--json"],
                            capture_output=True, text=True, env=env, cwd=sys.argv[2])
    print(json.dumps({"results": results, "status": json.loads(status.stdout), "status_rc": status.returncode}))
'''


def test_process_tree_serves_patched_source(site, env, tmp_path):
    """Every process of a spawn/fork/forkserver/pool/subprocess tree gets the patched text."""
    want = {rel: sha(text) for rel, text in planned(site).items()}
    assert len(want) == 4
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    prev = tmp_path / "prev"  # a sitecustomize that existed before: must still run
    prev.mkdir()
    (prev / "sitecustomize.py").write_text("import os\nos.environ['PREV_SITECUSTOMIZE'] = 'ran'\n")
    out = patchq("run", "--profile", PROFILE, "--site-packages", site, "--",
                 sys.executable, script, sys.executable, REPO,
                 env=env, extra_env={"PYTHONPATH": f"{prev}{os.pathsep}{site}"})
    assert out.returncode == 0, out.stderr
    assert f"patchq run: profile {PROFILE} on vllm 0.23.0 at import time" in out.stderr
    doc = json.loads(out.stdout)
    tags = [r["tag"] for r in doc["results"]]
    assert tags == ["main", "spawn", "fork", "forkserver", "pool", "pool", "subprocess"]
    assert len({r["pid"] for r in doc["results"]}) >= 6  # the pool may run both tasks in one worker
    for r in doc["results"]:
        assert r["hook"] and r["first_finder"] == "Finder", r
        assert r["prev_sitecustomize"] == "ran" and r["sitecustomize"] == str(prev / "sitecustomize.py"), r
        got = {}
        for m in r["modules"].values():
            rel = os.path.relpath(m["origin"], site)
            assert m["loader"] == "PatchedLoader"
            assert m["filename"] == m["origin"] == str(site / rel)
            got[rel] = m["sha"]
        assert got == want, r["tag"]
    # status --runtime, asked from inside the tree: the live main process and its patches
    assert doc["status_rc"] == 0
    procs = {p["pid"]: p for p in doc["status"]["processes"]}
    main = procs[doc["results"][0]["pid"]]
    assert main["profile"] == PROFILE and main["vllm"] == "0.23.0" and main["status"] == "live"
    from patchq import series

    s = series.load(stack.SERIES)
    assert main["patches"] == [f"{p.id}:{p.hash}" for p in s.patches_of(PROFILE)]
    # after exit nothing is left running: the records are gone or pruned
    after = patchq("status", "--runtime", "--json", env=env)
    assert json.loads(after.stdout)["processes"] == []


def test_served_text_is_what_apply_writes(make_site, env):
    """The hook serves byte-for-byte what apply writes; sentinels, status and diff agree."""
    run_site, apply_site = make_site(), make_site()
    manifest = manifest_of(env, run_site)
    applied = patchq("apply", "--profile", PROFILE, "--site-packages", apply_site, env=env)
    assert applied.returncode == 0, applied.stderr
    assert len(manifest["modules"]) == 4
    for name, entry in manifest["modules"].items():
        served = Path(entry["source"]).read_bytes()
        assert served == (apply_site / entry["relpath"]).read_bytes(), name
        assert sha256_path(run_site / entry["relpath"]) == record_hashes(run_site)[entry["relpath"]]
        from patchq.sentinels import find_sentinels

        assert [f"{p}:{h}" for p, h in find_sentinels(served.decode())] and \
            {f"{p}:{h}" for p, h in find_sentinels(served.decode())} == set(entry["patches"])
    # status (apply mode) and the hook's manifest list the same patches and hashes
    st = json.loads(patchq("status", "--json", "--site-packages", apply_site, env=env).stdout)
    applied_rows = {p["id"]: p["hash"] for p in st["patches"] if p["status"] == "applied"}
    assert applied_rows == {p["id"]: p["hash"] for p in manifest["patches"] if p["status"] == "ok"}
    # diff of the untouched site (what run serves) == diff of the applied one
    d_run = patchq("diff", "--profile", PROFILE, "--site-packages", run_site, env=env)
    d_apply = patchq("diff", "--profile", PROFILE, "--site-packages", apply_site, env=env)
    assert d_run.returncode == d_apply.returncode == 0
    assert d_run.stdout == d_apply.stdout and d_run.stdout.count("+++ ") == 4
    # the same patch-set digest in both modes (journal vs series)
    from patchq.runtime.cachefold import profile_digest

    journal = json.loads((apply_site / ".patchq" / "journal.json").read_text())
    assert profile_digest(journal["profile_hashes"]) == manifest["digest"]


def _ro_wrap(site: Path) -> tuple[str, ...]:
    """A command prefix that runs the rest with ``site`` read-only (private mount ns)."""
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m unavailable: {probe.stderr.decode().strip()}")
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
    return ("unshare", "-m", "sh", "-c", script, str(site))


def test_read_only_site_apply_refuses_run_works(site, env, tmp_path):
    """A read-only site-packages: apply exits 5 with a pointer to run; run serves."""
    wrap = _ro_wrap(site)
    touch = subprocess.run([*wrap, "touch", str(site / "probe")], capture_output=True, text=True)
    assert touch.returncode != 0 and "Read-only file system" in touch.stderr
    applied = patchq("apply", "--profile", PROFILE, "--site-packages", site, env=env, wrap=wrap)
    assert applied.returncode == 5, applied
    assert "not writable" in applied.stderr + applied.stdout and "patchq run" in applied.stderr + applied.stdout
    check = ("import _patchq_hook as h, os, hashlib\n"
             "for n, e in sorted(h.STATE.manifest['modules'].items()):\n"
             "    s = h.STATE.finder.find_spec(n, [os.path.dirname(e['path'])])\n"
             "    print(n, hashlib.sha256(s.loader.get_source(n).encode()).hexdigest())\n")
    ran = patchq("run", "--profile", PROFILE, "--site-packages", site, "--", sys.executable, "-c", check,
                 env=env, wrap=wrap, extra_env={"PYTHONPATH": str(site)})
    assert ran.returncode == 0, ran.stderr
    from patchq.env.hookdir import module_name

    want = {module_name(rel)[0]: sha(text) for rel, text in planned(site).items()}
    assert dict(line.split() for line in ran.stdout.splitlines()) == want
    assert not (site / ".patchq").exists()
    # the test install holds the wheel's .py files and dist-info (not its .so/data files)
    record = {rel: h for rel, h in record_hashes(site).items() if rel.endswith(".py") or (site / rel).exists()}
    bad = [rel for rel, h in record.items() if sha256_path(site / rel) != h]
    assert len(record) > 1000 and bad == []


def test_failed_patch_runs_nothing(site, env, series_copy, tmp_path):
    """A patch that does not apply: the report, exit 1, and the command never starts."""
    anchors = series_copy.parent / "anchors" / "backend-tiles.toml"
    anchors.write_text(anchors.read_text().replace('qualname = "Backend"', 'qualname = "NoSuchBackend"'))
    marker = tmp_path / "ran"
    out = patchq("run", "--profile", "base", "--series", series_copy, "--site-packages", site, "--",
                 sys.executable, "-c", f"open({str(marker)!r}, 'w')", env=env)
    assert out.returncode == 1, out
    assert "backend-tiles" in out.stderr and "failed" in out.stderr and "nothing was run" in out.stderr
    assert not marker.exists()
    as_json = patchq("run", "--profile", "base", "--series", series_copy, "--site-packages", site,
                     "--json", "--", "true", env=env)
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and doc["command"] == "run" and not doc["ok"]
    assert [p["status"] for p in doc["patches"]] == ["failed"]


def test_module_imported_before_hook_stops_the_process(site, env):
    """A target module already in sys.modules when the hook boots: exit 6, no run."""
    manifest = manifest_of(env, site)
    code = textwrap.dedent(f"""
        import sys, types
        sys.modules[{FLA!r}] = types.ModuleType({FLA!r})  # as if a .pth file had imported it
        sys.path.insert(0, {manifest_dir(manifest)!r})
        import _patchq_hook
        _patchq_hook.boot({manifest_dir(manifest) + "/sitecustomize.py"!r})
        print("unreachable")
    """)
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 6 and "unreachable" not in out.stdout
    assert f"{FLA} imported before patchq's import hook was installed" in out.stderr


def manifest_dir(manifest: dict) -> str:
    return str(Path(manifest["modules"][FLA]["source"]).parents[1] / "hooks" / manifest["key"])


def test_changed_file_is_refused(site, env):
    """A target file replaced after the hook was prepared (apply or revert rewrote the site
    between preparation and import): the process stops with one line, exit 6 (it died with
    a 12-line HookError traceback, exit 1); run refuses."""
    manifest = manifest_of(env, site)
    rel = manifest["modules"][FLA]["relpath"]
    replace_file(site / rel, (site / rel).read_text() + "\n# edited by someone\n")
    pythonpath = f"{manifest_dir(manifest)}{os.pathsep}{site}"
    code = ("import _patchq_hook as h, os\n"  # the finder, as the import of the module reaches it (no parents)
            f"e = h.STATE.manifest['modules'][{FLA!r}]\n"
            f"h.STATE.finder.find_spec({FLA!r}, [os.path.dirname(e['path'])])\n"
            "print('unreachable')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": pythonpath})
    assert out.returncode == 6 and "unreachable" not in out.stdout
    assert out.stderr.startswith("patchq run: ") and "changed since the hook was prepared" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    again = patchq("run", "--profile", PROFILE, "--site-packages", site, "--", "true", env=env)
    assert again.returncode == 4 and rel in again.stderr


def test_warm_start_parses_nothing(site, env):
    """The second run reuses the hook dir: no libcst, no planner imported."""
    first = patchq("run", "--profile", PROFILE, "--site-packages", site, "--", "true", env=env)
    assert first.returncode == 0 and "(prepared)" in first.stderr
    warm = patchq("run", "--profile", PROFILE, "--site-packages", site, "--", "true", env=env,
                  extra_env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert warm.returncode == 0 and "(warm)" in warm.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in warm.stderr.splitlines() if line.startswith("import time:")}
    assert "patchq.commands.run" in imported
    assert not {"libcst", "patchq.plan.engine", "patchq.env.converge", "typer", "rich"} & imported


def test_expect_profile_conflict_and_print_env(site, env):
    """run refuses a conflicting PATCHQ_EXPECT_PROFILE; --print-env shows what it sets."""
    bad = patchq("run", "--profile", PROFILE, "--site-packages", site, "--", "true", env=env,
                 extra_env={"PATCHQ_EXPECT_PROFILE": "kv"})
    assert bad.returncode == 2 and "PATCHQ_EXPECT_PROFILE=kv" in bad.stderr
    out = patchq("run", "--profile", PROFILE, "--site-packages", site, "--print-env", env=env)
    exports = dict(line[len("export "):].split("=", 1) for line in out.stdout.splitlines())
    assert list(exports) == ["PYTHONPATH", "PATCHQ_RUNTIME_MANIFEST", "PATCHQ_RUNTIME_DIR",
                             "PATCHQ_EXPECT_PROFILE", "PATCHQ_STRICT", "VLLM_CACHE_ROOT"]
    manifest = json.loads(Path(exports["PATCHQ_RUNTIME_MANIFEST"]).read_text())
    assert exports["PATCHQ_EXPECT_PROFILE"] == PROFILE and exports["PATCHQ_STRICT"] == "1"
    assert exports["VLLM_CACHE_ROOT"] == f"{env['XDG_CACHE_HOME']}/vllm/patchq/{PROFILE}-{manifest['digest']}"


PLUGIN = ("import json, os\n"
          "from patchq.runtime import plugin\n"
          "try:\n"
          "    line = plugin.check()\n"
          "    print(json.dumps({'ok': True, 'line': line, 'root': os.environ.get('VLLM_CACHE_ROOT')}))\n"
          "except plugin.ProfileNotLive as exc:\n"
          "    print(json.dumps({'ok': False, 'error': str(exc)}))\n")


def _plugin(env, site, **extra) -> dict:
    out = subprocess.run([sys.executable, "-c", PLUGIN], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": str(site), **extra})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_plugin_checks_both_modes(make_site, env):
    """The plugin: live under run and after apply; stops (strict) or warns otherwise."""
    run_site, apply_site = make_site(), make_site()
    # nothing live: strict stops, non-strict warns and goes on
    none = _plugin(env, run_site, PATCHQ_EXPECT_PROFILE=PROFILE, PATCHQ_STRICT="1")
    assert not none["ok"] and "no patchq profile is live" in none["error"]
    assert _plugin(env, run_site, PATCHQ_EXPECT_PROFILE=PROFILE)["ok"]
    # runtime mode
    out = patchq("run", "--profile", PROFILE, "--site-packages", run_site, "--", sys.executable, "-c", PLUGIN,
                 env=env, extra_env={"PYTHONPATH": str(run_site)})
    live = json.loads(out.stdout)
    manifest = manifest_of(env, run_site)
    assert live["ok"] and f"profile {PROFILE} live" in live["line"] and "runtime mode" in live["line"]
    assert live["root"].endswith(f"/vllm/patchq/{PROFILE}-{manifest['digest']}")
    # disk mode, same digest, same cache root
    assert patchq("apply", "--profile", PROFILE, "--site-packages", apply_site, env=env).returncode == 0
    disk = _plugin(env, apply_site, PATCHQ_EXPECT_PROFILE=PROFILE, PATCHQ_STRICT="1")
    assert disk["ok"] and "disk mode" in disk["line"] and disk["root"] == live["root"]
    other = _plugin(env, apply_site, PATCHQ_EXPECT_PROFILE="kv", PATCHQ_STRICT="1")
    assert not other["ok"] and f"profile {PROFILE} is live (disk mode" in other["error"]
    # a patched file edited after apply (sentinel gone): not live
    rel = "vllm/model_executor/layers/fla/ops/utils.py"
    text = (apply_site / rel).read_text()
    replace_file(apply_site / rel, "\n".join(line for line in text.splitlines() if "# patchq:" not in line) + "\n")
    broken = _plugin(env, apply_site, PATCHQ_EXPECT_PROFILE=PROFILE, PATCHQ_STRICT="1")
    assert not broken["ok"]
    assert f"{rel} changed since apply" in broken["error"] and "lacks the sentinel" in broken["error"]


# -- slow: the real import, with torch 2.13.0 CPU ------------------------------------------

TORCH_DEPS = ("torch==2.13.0", "numpy", "packaging", "psutil", "pyzmq", "urllib3", "regex", "einops")


@pytest.fixture(scope="session")
def torch_python() -> str:
    """A cached venv with torch 2.13.0 CPU and what ``vllm...fla.ops.utils`` imports
    (vLLM itself comes from the test site on PYTHONPATH). Skips when pip cannot get them."""
    from filelock import FileLock

    from patchq.vllmdist import releases

    base = releases.cache_dir() / "test-envs" / "torch-2.13.0-fla"
    python = base / "bin" / "python"
    done = base / "installed.txt"
    base.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(base.parent / ".torch-2.13.0-fla.lock")):
        if not done.is_file():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(base)], check=True)
            pip = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *TORCH_DEPS],
                                 capture_output=True, text=True)
            if pip.returncode != 0:
                pytest.skip(f"cannot install {' '.join(TORCH_DEPS)}: {pip.stderr[-500:]}")
            done.write_text("\n".join(TORCH_DEPS) + "\n")
    return str(python)


REAL = r'''
import importlib, inspect, json, multiprocessing as mp, os, sys, traceback
N = "vllm.model_executor.layers.fla.ops.utils"

def probe(tag):
    m = importlib.import_module(N)
    lines, first = inspect.getsourcelines(m.Backend)
    try:
        m.Backend.get_shared_memory(None)
    except AttributeError as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
    return {"tag": tag, "pid": os.getpid(), "default": m.Backend.DEFAULT.value,
            "patchq": list(m.__patchq__), "loader": type(m.__spec__.loader).__name__,
            "file": m.__file__, "first": first, "head": lines[0], "tb": [frame.filename, frame.lineno, frame.line]}

def put(q, tag):
    q.put(probe(tag))

if __name__ == "__main__":
    out = [probe("main")]
    with mp.get_context("spawn").Pool(1) as pool:
        out += pool.map(probe, ["spawn"])
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=put, args=(q, "fork"))
    p.start(); out.append(q.get(timeout=300)); p.join(60)
    print(json.dumps(out))
'''


@pytest.mark.slow
def test_real_import_executes_patched_code(site, env, tmp_path, torch_python):
    """With torch: the patched FLA module runs (101376) in main, spawn and fork; inspect
    and tracebacks show the patched lines at the patched line numbers."""
    script = tmp_path / "real.py"
    script.write_text(REAL)
    out = patchq("run", "--profile", PROFILE, "--site-packages", site, "--", torch_python, script,
                 env=env, extra_env={"PYTHONPATH": str(site)})
    assert out.returncode == 0, out.stderr[-3000:]
    rel = "vllm/model_executor/layers/fla/ops/utils.py"
    patched = planned(site)[rel].splitlines()
    pristine = (site / rel).read_text().splitlines()
    results = json.loads(out.stdout.splitlines()[-1])
    assert [r["tag"] for r in results] == ["main", "spawn", "fork"]
    from patchq import series

    fla = series.load(stack.SERIES).patch("backend-tiles")
    for r in results:
        assert r["default"] == 101376 and r["loader"] == "PatchedLoader" and r["file"] == str(site / rel)
        assert r["patchq"] == [f"backend-tiles:{fla.hash}"]
        # inspect: the definition starts at its patched line (the sentinel comment above it)
        assert patched[r["first"] - 2].startswith("# patchq:backend-tiles:")
        assert r["head"].rstrip("\n") == patched[r["first"] - 1] == "class Backend(Enum):"
        filename, lineno, line = r["tb"]
        assert filename == str(site / rel) and line == patched[lineno - 1].strip()
        assert line == "return cls[arch.upper()].value" and pristine[lineno - 1].strip() != line
    assert sha256_path(site / rel) == record_hashes(site)[rel]


REGISTER = ("from importlib.metadata import entry_points\n"
            "(ep,) = [e for e in entry_points(group='vllm.general_plugins') if e.name == 'patchq']\n"
            "ep.load()()  # what vllm.plugins.load_general_plugins does in every vLLM process\n"
            "print('registered')\n")


def test_plugin_entry_point_stops_or_passes(site, env):
    """vLLM's way in (the entry point): passes under run, stops a strict unpatched process."""
    ok = patchq("run", "--profile", PROFILE, "--site-packages", site, "--", sys.executable, "-c", REGISTER,
                env=env, extra_env={"PYTHONPATH": str(site)})
    assert ok.returncode == 0 and ok.stdout.strip() == "registered", ok.stderr
    procs = json.loads(patchq("status", "--runtime", "--json", env=env).stdout)
    assert procs["processes"] == []  # the record was removed at exit
    bare = subprocess.run([sys.executable, "-c", REGISTER], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(site), "PATCHQ_EXPECT_PROFILE": PROFILE, "PATCHQ_STRICT": "1"})
    assert bare.returncode != 0 and "registered" not in bare.stdout
    assert "ProfileNotLive: patchq: PATCHQ_EXPECT_PROFILE=full but no patchq profile is live" in bare.stderr
