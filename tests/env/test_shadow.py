"""Which vllm this interpreter would import (patchq.env.shadow): another one earlier on
sys.path shadows the site-packages patchq patches."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchq.env.shadow import shadowing


def _vllm(root: Path) -> Path:
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    return root


def test_a_site_not_on_sys_path_is_never_shadowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(_vllm(tmp_path / "other"))])
    assert shadowing(str(_vllm(tmp_path / "site"))) is None


def test_an_earlier_vllm_shadows_the_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, other = _vllm(tmp_path / "site"), _vllm(tmp_path / "other")
    monkeypatch.setattr(sys, "path", [str(other), str(site)])
    assert shadowing(str(site)) == str((other / "vllm").resolve())
    monkeypatch.setattr(sys, "path", [str(site), str(other)])
    assert shadowing(str(site)) is None
