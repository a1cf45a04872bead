"""The boot lab cannot rot: what it ships for patchq is derived from patchq's own files.

``lab/deps.py`` reads ``pyproject.toml``'s requirements and the imports of ``patchq/`` and
``patchq_runtime``; ``lab/boot.py run`` checks them before any server starts. The
lab's old hand-kept wheel list missed pyflakes, unidiff, gitpython, rapidfuzz and tomli-w,
and every boot failed at ``patchq apply`` (issue 29). Offline: nothing is downloaded.
"""

from __future__ import annotations

import importlib.metadata as md
import site
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

SPARK = Path(__file__).resolve().parents[1]  # the series repo
sys.path.insert(0, str(SPARK / "lab"))
import deps  # noqa: E402


def _providers(module: str) -> set[str]:
    return {canonicalize_name(d) for d in md.packages_distributions().get(module, [])}


def test_every_module_patchq_imports_comes_from_one_of_its_requirements():
    required = {canonicalize_name(r.name) for r in deps.requirements()}
    modules = deps.imported_modules()
    assert {"libcst", "pyflakes", "unidiff", "git", "rapidfuzz", "tomli_w"} <= set(modules)
    undeclared = {m: files for m, files in modules.items() if not _providers(m) & required}
    assert not undeclared, f"imported by patchq but no requirement in pyproject.toml provides it: {undeclared}"
    # tomli only before 3.11: a requirement with that marker provides it, and the lab (3.12) needs none
    assert set(deps.imported_modules(gated=True)) == {"tomli"}
    assert "tomli" in {canonicalize_name(r.name) for r in deps.requirements(python="3.10")}
    assert "tomli" not in required


def test_the_download_command_resolves_every_requirement_for_the_lab_interpreter():
    cmd = deps.download_command("/tmp/whl")
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"] and "--no-deps" not in cmd  # the closure
    assert cmd[cmd.index("--python-version") + 1] == deps.LAB_PYTHON
    assert [str(r) for r in deps.requirements()] == cmd[-len(deps.requirements()):]


def _lab_site(tmp_path: Path, leave_out: set[str]) -> str:
    """A PYTHONPATH dir of symlinks to this environment's top-level packages but ``leave_out``."""
    lab = tmp_path / "deps-site"
    lab.mkdir(parents=True)
    for sp in map(Path, site.getsitepackages()):
        for entry in sp.iterdir():
            name = entry.name.split(".")[0] if entry.suffix in (".py", ".so") else entry.name
            if entry.name.endswith((".dist-info", ".pth")) or name in leave_out or (lab / entry.name).exists():
                continue
            (lab / entry.name).symlink_to(entry)
    return str(lab)


def test_preflight_names_what_the_lab_would_not_ship(tmp_path):
    modules = list(deps.imported_modules())
    assert deps.missing(modules, _lab_site(tmp_path / "full", set())) == {}
    # the rot of issue 29: pyflakes not shipped; and a requirement's own dependency missing
    got = deps.missing(modules, _lab_site(tmp_path / "stale", {"pyflakes", "gitdb"}))
    assert got == {"pyflakes": "pyflakes", "git": "gitdb"}, got


def test_the_download_command_adds_the_release_own_requirements(tmp_path):
    """vLLM's side of the lab comes from the release's METADATA, not a hand-kept list; what the
    image brings (torch, triton) is left to the image."""
    import zipfile

    whl = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("vllm-9.9.9.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.9\nRequires-Dist: torch==2.11.0\n"
                    "Requires-Dist: triton==3.6.0\nRequires-Dist: xgrammar==0.2.7\n"
                    'Requires-Dist: pandas; extra == "bench"\n\n')
    cmd = deps.download_command("/tmp/whl", release_wheel=whl)
    assert cmd[-1] == "xgrammar==0.2.7" and not any(a.startswith(("torch", "triton", "pandas")) for a in cmd)
    assert cmd[:-1] == deps.download_command("/tmp/whl")
