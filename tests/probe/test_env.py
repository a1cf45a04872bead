"""patchq.probe.env: a release's CPU environment (the torch chosen, METADATA read, modules
mapped to distributions, the links a child needs); the wheel layer builds a real one."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from patchq.errors import NotProbeable
from patchq.probe import env as env_mod

CPU = [Version(v) for v in ("2.13.0+cpu", "2.11.0+cpu", "2.9.1+cpu")]


def test_the_pins_own_cpu_build_is_exact():
    t = env_mod.choose_torch(Requirement("torch==2.11.0"), CPU)
    assert (t.version, t.exact, t.pin) == ("2.11.0+cpu", True, "torch==2.11.0")


def test_no_cpu_build_of_the_pin_takes_the_nearest_and_says_so():
    t = env_mod.choose_torch(Requirement("torch==2.12.0"), CPU)  # 2.11 and 2.13 are one minor away: the newer
    assert (t.version, t.exact) == ("2.13.0+cpu", False)
    assert "nearest CPU torch" in t.note and "torch==2.12.0" in t.note
    assert env_mod.choose_torch(Requirement("torch==2.14.0"), CPU).version == "2.13.0+cpu"
    assert env_mod.choose_torch(Requirement("torch==2.8.0"), CPU).version == "2.9.1+cpu"


def test_no_cpu_torch_at_all_is_not_probeable_naming_the_index():
    with pytest.raises(NotProbeable, match="download.pytorch.org/whl/cpu"):
        env_mod.choose_torch(Requirement("torch==2.13.0"), [])


def test_patchq_probe_torch_names_one(monkeypatch):
    monkeypatch.setenv("PATCHQ_PROBE_TORCH", "2.13.0+cpu")
    t = env_mod.torch_for(Requirement("torch==2.11.0"))
    assert (t.version, t.exact) == ("2.13.0+cpu", False) and "PATCHQ_PROBE_TORCH" in t.note


def test_release_requirements_come_from_metadata_with_the_cuda_builds_left_out(tmp_path):
    info = tmp_path / "vllm-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.9\n"
                                   "Requires-Dist: regex\nRequires-Dist: torch==2.11.0\n"
                                   "Requires-Dist: torchvision==0.26.0\n"
                                   "Requires-Dist: six; python_version < '3'\n"
                                   "Requires-Dist: pytest; extra == 'test'\n")
    reqs, torch, left = env_mod.release_requirements(info)
    assert [str(r) for r in reqs] == ["regex"] and str(torch) == "torch==2.11.0"
    assert set(left) == {"torch==2.11.0", "torchvision==0.26.0"} and "CUDA" in left["torchvision==0.26.0"]


@pytest.mark.parametrize(("module", "dist", "match"), [
    ("numpy", "numpy", True), ("zmq", "pyzmq", True), ("yaml", "PyYAML", True), ("cpuinfo", "py-cpuinfo", True),
    ("pythonjsonlogger", "python-json-logger", True), ("lmformatenforcer", "lm-format-enforcer", True),
    ("PIL", "pillow", False), ("cv2", "opencv-python-headless", False), ("regex", "pyregex-extra", False),
])
def test_name_matches(module, dist, match):
    assert env_mod.name_matches(module, dist) is match


def test_wheel_top_levels_reads_a_local_wheel(tmp_path):
    wheel = tmp_path / "pillow-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in ("PIL/__init__.py", "pillow.libs/x.so", "pillow-1.0.dist-info/METADATA", "cv.py",
                     "pillow-1.0.data/purelib/extra/__init__.py"):
            zf.writestr(name, "")
    assert env_mod.wheel_top_levels(wheel.as_uri()) == {"PIL", "pillow.libs", "cv", "extra"}


def test_bare_drops_the_marker_keeps_extras():
    assert env_mod.bare(Requirement('fastapi[standard]<0.137,>=0.115; python_version > "3.8"')) == \
        "fastapi[standard]<0.137,>=0.115"


def test_offline_pip_is_not_probeable(monkeypatch):
    monkeypatch.setenv("PATCHQ_OFFLINE", "1")
    with pytest.raises(NotProbeable, match="PATCHQ_OFFLINE"):
        env_mod.cpu_torch_versions()


def test_patchq_paths_link_patchq_and_its_requirements(tmp_path):
    links = env_mod.patchq_paths(tmp_path / "links")
    names = {p.name for p in links.iterdir()}
    assert {"patchq", "patchq_runtime", "libcst", "packaging"} <= names
    assert (links / "patchq").resolve() == Path(env_mod.__file__).resolve().parents[1]


def test_the_key_names_interpreter_and_platform():
    assert env_mod.platform_key().startswith("cp3") and env_mod.env_key("0.34.0", "vllm") == "vllm-0.34.0"


@pytest.mark.wheel
def test_a_real_environment_imports_the_release_and_is_reused():
    """vLLM 0.34.0 (the newest; pins torch 2.14.0): a CPU torch, the distributions its patched
    modules reach, each from its METADATA; loaded again it is the same environment."""
    env = env_mod.load("0.34.0")
    assert env.torch.version.endswith("+cpu") and env.doc["torch"]["pin"] == "torch==2.14.0"
    again = env_mod.load("0.34.0")
    assert again.dir == env.dir and (env.dir / "env.json").is_file()
    doc = json.loads((env.dir / "env.json").read_text())
    assert doc["schema"] == env_mod.ENV_SCHEMA and any(k.startswith("torch-") for k in doc["dists"])


def _fake_index(monkeypatch, dists):
    """``dry_run`` answered from ``dists`` ({name: {version: [requires]}}): the newest version
    each requirement admits, as pip without dependencies answers."""
    from packaging.specifiers import SpecifierSet

    def dry_run(reqs, *, no_deps, constraints=(), max_drops=16):
        items = {}
        for text in reqs:
            req = Requirement(text)
            name = env_mod.canonicalize_name(req.name)
            ok = [v for v in dists[name] if SpecifierSet(str(req.specifier)).contains(v, prereleases=True)]
            v = max(ok, key=Version)
            items[name] = {"name": name, "version": v, "url": "", "requires": dists[name][v], "extras": [],
                           "requested": True}
        return env_mod.Resolution(items)

    monkeypatch.setattr(env_mod, "dry_run", dry_run)


def test_a_version_meets_every_requirement_on_it(tmp_path, monkeypatch):
    """vLLM asks tokenizers>=0.21 (newest: 0.23.3); transformers caps it at 0.23.0: the cap
    wins, and a version the environment holds that the cap excludes is replaced."""
    _fake_index(monkeypatch, {
        "transformers": {"4.57.0": ["tokenizers<=0.23.0,>=0.22.0", "regex"]},
        "tokenizers": {"0.22.1": [], "0.23.0": [], "0.23.3": []},
        "regex": {"2026.1": []},
    })
    env = env_mod.ProbeEnv("9.9.9", "vllm", tmp_path, tmp_path / "env", {
        "dists": {"regex-2026.1": "x", "tokenizers-0.23.3": "y"}, "conflicts": {}, "unresolved": {},
        "seconds": {}})
    (tmp_path / "env").mkdir()
    new = env.closure({"tokenizers": "tokenizers>=0.21.1", "transformers": "transformers>=4.56"})
    assert {n: i["version"] for n, i in new.items()} == {"transformers": "4.57.0", "tokenizers": "0.23.0"}
    assert env.doc["conflicts"] == {}
