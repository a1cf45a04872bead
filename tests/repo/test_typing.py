"""patchq/ type-checks and lints clean, and its tests lint clean: ``mypy`` (configured by
pyproject.toml's ``[tool.mypy]``: patchq/ at Python 3.10), ``ruff check patchq`` and
``ruff check tests`` (pyproject.toml's ``[tool.ruff]``; test data excluded there) report nothing.

Both run from the test interpreter (``python -m``), as CI installs them with the ``test``
extra; offline (the fast layer).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from support import REPO


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed in {sys.executable} (pip install -e '.[test]' installs it)")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def test_mypy_reports_nothing():
    proc = _run("mypy")  # no arguments: [tool.mypy] packages = ["patchq"]
    findings = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Success: no issues found" in proc.stdout, f"mypy:\n{findings}"


# spark/ (the Spark series repo) is not yet held to it: its benchmarks, lab and runtime still have findings
@pytest.mark.parametrize("path", ["patchq", "tests"])
def test_ruff_reports_nothing(path):
    proc = _run("ruff", "check", path)
    findings = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "All checks passed!" in proc.stdout, f"ruff check {path}:\n{findings}"
