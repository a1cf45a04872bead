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
