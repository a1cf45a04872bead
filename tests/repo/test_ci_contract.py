"""`.ci/run` runs exactly the README's contributor test command (the front door stays true)."""

from support import REPO


def test_ci_runs_the_readme_test_command():
    command = (REPO / ".ci/run").read_text().strip().splitlines()[-1]
    assert command.startswith("python3 -m venv .venv && ")
    assert f"\n{command}\n" in (REPO / "README.md").read_text()


def test_the_fast_layer_runs_on_an_empty_cache():
    command = (REPO / ".ci/run").read_text().strip().splitlines()[-1]
    assert 'PATCHQ_CACHE_DIR="$(mktemp -d)" .venv/bin/python -m pytest -q -n auto --maxprocesses 4 -m "not wheel"' \
        in command


def test_both_readme_commands_set_up_both_wings():
    """Command 1 applies the Spark series' `dense` profile (the series and the package its
    patched vLLM imports come from `spark/`), command 2 runs both wings' tests: each installs
    the tool and the Spark series, so either runs first on a fresh machine."""
    readme = (REPO / "README.md").read_text()
    apply_cmd = next(line for line in readme.splitlines() if line.startswith("python3 -m venv .venv && ")
                     and "--profile dense" in line)
    assert ".venv/bin/pip install -e . -e ./spark && " in apply_cmd
    test_cmd = (REPO / ".ci/run").read_text().strip().splitlines()[-1]
    assert ".venv/bin/pip install -e '.[test]' -e './spark[test]' && " in test_cmd
    import tomllib

    assert tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"] == [
        "tests", "spark/tests"]
