"""patchq in the ecosystem's own forms: the reusable GitHub Action (action.yml), the
pre-commit hooks (.pre-commit-hooks.yaml), the workflow and pre-commit config `patchq init`
writes, and the packages (sdist and wheel) an index would take.

The static checks (zizmor, check-jsonschema, pre-commit's own validators) are in the fast
layer. Running the action's steps (tests/testing/action_runner.py: act is not available here),
pre-commit on a throwaway series repo, and building and installing the wheel fetch
releases or packages: they are in the wheel layer, marked slow.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support import REPO, run_cli
from testing import tools

HEAD = "0123456789abcdef0123456789abcdef01234567"


def _init(tmp_path: Path, *args: str) -> Path:
    repo = tmp_path / "series-repo"
    out = run_cli("init", str(repo), *args)
    assert out.rc == 0, out
    return repo


# -- static: the action, the workflows init writes, the hooks ----------------------------------


def test_action_matches_the_schema_and_passes_zizmor():
    schema = subprocess.run([tools.tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions",
                             str(REPO / "action.yml")], capture_output=True, text=True)
    assert schema.returncode == 0, schema.stdout + schema.stderr
    audit = subprocess.run([tools.tool("zizmor"), "--offline", "--no-progress", "--persona", "pedantic",
                            str(REPO / "action.yml")], capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout + audit.stderr


@pytest.mark.parametrize("action", [None, f"someone/patchq@{HEAD}"])
def test_the_workflow_init_writes_uses_the_action_pinned(tmp_path, action):
    """Schema-valid, zizmor-clean (pedantic; the one ignore names why), every action pinned to
    a full commit hash, and the reusable action used."""
    repo = _init(tmp_path, *(["--action", action] if action else []))
    wf = repo / ".github/workflows/patchq.yml"
    schema = subprocess.run([tools.tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(wf)],
                            capture_output=True, text=True)
    assert schema.returncode == 0, schema.stdout + schema.stderr
    audit = subprocess.run([tools.tool("zizmor"), "--offline", "--no-progress", "--persona", "pedantic", str(wf)],
                           capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    uses = re.findall(r"uses:\s*(\S+)", wf.read_text())
    assert all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses if not u.startswith("./")), uses
    assert uses[-1] == (action or "./.patchq-action")
    assert "pypi.org" not in (repo / "README.md").read_text()


def test_init_refuses_an_action_that_is_not_pinned(tmp_path):
    out = run_cli("init", str(tmp_path / "r"), "--action", "someone/patchq@v1")
    assert out.rc == 2 and "full 40-hex hash" in out.stderr and not (tmp_path / "r").exists(), out


def test_the_pre_commit_files_are_valid(tmp_path):
    tool = tools.tool("pre-commit")
    manifest = subprocess.run([tool, "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")],
                              capture_output=True, text=True)
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
    repo = _init(tmp_path)
    config = subprocess.run([tool, "validate-config", str(repo / ".pre-commit-config.yaml")],
                            capture_output=True, text=True)
    assert config.returncode == 0, config.stdout + config.stderr
    import yaml

    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"patchq-test", "patchq-check"}
    assert hooks["patchq-test"]["entry"] == "patchq test" and hooks["patchq-check"]["entry"].startswith("patchq check")


# -- live: the action's steps, pre-commit, the wheel ------------------------------------------------


def _series_repo_with_goldens(tmp_path: Path) -> Path:
    repo = _init(tmp_path)
    regen = run_cli("test", "--regen", "--releases", "0.23.0,0.33.0", "--series", str(repo))
    assert regen.rc == 0, regen
    for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "series"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


@pytest.mark.wheel
@pytest.mark.slow
def test_the_action_runs_tests_and_matrix_on_a_series_repo(tmp_path):
    """action.yml's steps in a shell (tests/testing/action_runner.py), in a fresh venv as setup-python
    gives: it installs patchq from its own checkout, `patchq test` passes, the matrix is
    written and summarised; a broken patch fails the test step and skips the matrix."""
    from testing import action_runner

    repo = _series_repo_with_goldens(tmp_path)
    env = action_runner.fresh_python(tmp_path / "venv")
    res = action_runner.run(REPO / "action.yml", repo, {"releases": "0.23.0,0.33.0"}, env)
    assert res.failed is None, res.failed
    ran = {s.name: s for s in res.steps if s.ran}
    assert list(ran) == ["install patchq", "patchq test", "patchq matrix"], res.steps
    tested = ran["patchq test"].output
    # the releases named, and the patch's authoring release that test --regen records too
    assert "case(s), 0 failed" in tested and all(f"ok   example-quiet-logger@{v}" in tested
                                                  for v in ("0.23.0", "0.33.0")), tested
    assert "matrix: 2 releases x 2 profiles" in ran["patchq matrix"].output
    assert res.outputs["matrix"]["dir"] == str(repo / "matrix") and (repo / "matrix" / "matrix.html").is_file()
    assert res.summary.startswith("# patchq compatibility matrix")
    module = repo / "series" / "example_quiet_logger.py"
    module.write_text(module.read_text().replace("logger.disabled = True", "logger.disabled = False"))
    broken = action_runner.run(REPO / "action.yml", repo, {"releases": "0.23.0,0.33.0"}, env)
    assert broken.failed is not None and broken.failed.name == "patchq test" and broken.failed.rc == 1
    assert [s.why for s in broken.steps if s.name == "patchq matrix"] == ["if"]


@pytest.mark.wheel
@pytest.mark.slow
def test_pre_commit_runs_the_hooks_on_a_series_repo(tmp_path):
    """pre-commit installs patchq from this repository (`language: python`) and runs both
    hooks; a changed patch fails patchq-test."""
    if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".pre-commit-hooks.yaml"],
                      cwd=REPO, capture_output=True, text=True).stdout.strip():
        pytest.skip(".pre-commit-hooks.yaml has uncommitted changes (pre-commit installs from a commit)")
    repo = _series_repo_with_goldens(tmp_path)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {REPO}\n    rev: {rev}\n    hooks:\n      - id: patchq-test\n"
        f"      - id: patchq-check\n        args: [--all, --vllm, \"0.23.0\"]\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PATCHQ_SERIES"},  # the hooks find the repo's series
           "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    tool = tools.tool("pre-commit")
    ok = subprocess.run([tool, "run", "--all-files"], cwd=repo, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"patchq test\.+Passed", ok.stdout) and re.search(r"patchq check\.+Passed", ok.stdout)
    module = repo / "series" / "example_quiet_logger.py"
    module.write_text(module.read_text().replace("logger.disabled = True", "logger.disabled = False"))
    bad = subprocess.run([tool, "run", "--all-files"], cwd=repo, env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and re.search(r"patchq test\.+Failed", bad.stdout), bad.stdout
    assert "the diff differs from the stored" in bad.stdout


#: a distribution that ships the stack fixture as its series (entry point group patchq.series),
#: with the run-time package its patched vLLM imports, laid out as spark/pyproject.toml lays out Spark's
STACK_PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "stack-series"
version = "1.0"
description = "the stack fixture as an installed series"

[project.entry-points."patchq.series"]
stack = "stack_series:SERIES"

[tool.setuptools]
packages = ["stack_series", "stack_series.series", "stack_series.series.diffs", "stack_series.anchors",
            "stack_runtime"]

[tool.setuptools.package-data]
"stack_series.series" = ["*.toml"]
"stack_series.series.diffs" = ["*/*.diff", "*.expect.toml"]
"stack_series.anchors" = ["*.toml"]
"""


def _stack_distribution(tmp_path: Path) -> Path:
    """The project of :data:`STACK_PYPROJECT`, its store recorded on 0.23.0 (``patchq test --regen``)."""
    import shutil

    from testing import stack

    proj = tmp_path / "stack-dist"
    series_dir = stack.copy(proj / "stack_series")
    (proj / "stack_series" / "__init__.py").write_text(
        "import os\n\nSERIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'series')\n")
    shutil.copytree(stack.RUNTIME / "stack_runtime", proj / "stack_runtime")
    (proj / "pyproject.toml").write_text(STACK_PYPROJECT)
    regen = run_cli("test", "--regen", "--releases", "0.23.0", "--series", series_dir)
    assert regen.rc == 0, regen
    return proj


@pytest.mark.wheel
@pytest.mark.slow
def test_sdist_and_wheel_build_pass_twine_and_the_wheel_serves_a_new_user(tmp_path):
    """`python -m build`, `twine check --strict`; the metadata an index shows; the wheel in a
    fresh venv outside the checkout, with a series installed as a distribution of its own
    (entry point patchq.series): that series, `patchq serve`, the refusal to write into it,
    and an install hint that names the wheel patchq came from (patchq is not on PyPI)."""
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)], capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    checked = subprocess.run([tools.tool("twine"), "check", "--strict", str(wheel), str(sdist)], capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    meta = zipfile.ZipFile(wheel).read("patchq-0.1.0.dist-info/METADATA").decode()
    for field in ("License-Expression: MIT", "Requires-Python: >=3.10",
                  "Classifier: Operating System :: POSIX :: Linux",
                  "Project-URL: vLLM (the patched project), https://github.com/vllm-project/vllm"):
        assert field in meta, field
    assert "pypi.org/project/patchq" not in meta
    proj = _stack_distribution(tmp_path)
    stack_built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "sdist"),
                                  str(proj)], capture_output=True, text=True)
    assert stack_built.returncode == 0, stack_built.stdout[-3000:] + stack_built.stderr[-3000:]
    (stack_wheel,) = (tmp_path / "sdist").glob("stack_series-*.whl")
    venv = tmp_path / "user-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", str(wheel), str(stack_wheel)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-3000:]
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHQ_SERIES", "PATCHQ_ANCHORS", "VIRTUAL_ENV"))}
    patchq = str(venv / "bin/patchq")

    def user(*args):
        return subprocess.run([patchq, *args], cwd=away, env=env, capture_output=True, text=True)

    listed = user("list")
    (installed,) = venv.glob("lib/python*/site-packages/stack_series")
    assert listed.returncode == 0, listed
    assert listed.stdout.splitlines()[0] == (
        f"series {installed / 'series'} (from the installed distribution stack-series 1.0)"), listed
    dry = user("serve", "--profile", "full", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.splitlines()[-1].startswith("exec vllm serve /model "), dry
    served = user("serve", "--profile", "full")
    assert served.returncode == 127 and "vllm not found" in served.stderr, served
    # authoring outside a series repo never writes into the installed series
    before = sorted((str(p), p.read_bytes()) for p in installed.rglob("*") if p.is_file())
    for verb in (("new", "my-fix", "--at", "vllm.logger:_DATE_FORMAT", "--vllm", "0.23.0"),
                 ("test", "--regen", "--releases", "0.23.0")):
        refused = user(*verb)
        assert refused.returncode == 2 and "inside the installed series of stack-series 1.0" in refused.stderr, (
            verb, refused)
        assert "Traceback" not in refused.stderr
    assert sorted((str(p), p.read_bytes()) for p in installed.rglob("*") if p.is_file()) == before
    tested = user("test", "--patch", "align-backoff")  # the store ships in the wheel: the series tests there
    assert tested.returncode == 0 and "1 case(s), 0 failed" in tested.stdout, tested
    # `pip install --no-deps vllm` (enough to patch, not to serve): named before anything is written
    fake = tmp_path / "nodeps-site"
    (fake / "vllm").mkdir(parents=True)
    (fake / "vllm" / "__init__.py").write_text("")
    (fake / "vllm-0.23.0.dist-info").mkdir()
    (fake / "vllm-0.23.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.23.0\n")
    env = {**env, "PYTHONPATH": str(fake), "VLLM": "/bin/true"}
    no_torch = user("serve", "--profile", "full")
    assert no_torch.returncode == 126 and "has no torch beside it" in no_torch.stderr, no_torch
    assert not (fake / ".patchq").exists()
    hint_code = "from patchq.origin import install_hint; print(install_hint())"
    hint = subprocess.run([str(venv / "bin/python"), "-c", hint_code],
                          cwd=away, env=env, capture_output=True, text=True)
    assert str(wheel) in hint.stdout, hint
    doc = json.loads(user("--json", "list").stdout)
    assert doc["series"]["from"] == "bundled" and doc["series"]["distribution"] == "stack-series 1.0"
