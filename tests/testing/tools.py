"""Command-line tools a test needs from this interpreter's environment (installed once when missing)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def tool(name: str) -> str:
    """The path of ``name`` beside this interpreter (pip-installed there when missing); skips when it cannot be had."""
    exe = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if exe is None:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", name], capture_output=True, text=True)
        exe = shutil.which(name, path=str(Path(sys.executable).parent))
        if exe is None:
            pytest.skip(f"{name} is not installed and cannot be installed: {proc.stderr.strip()[-200:]}")
    return exe
