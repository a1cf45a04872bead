"""Compile-cache coherence (``docs/compile-cache.md``) on every release 0.15.1-0.33.0.

For each release tree (the real wheel's files; skipped when not available):

* the release's own ``VLLM_CACHE_ROOT`` getter (``vllm/envs.py``, loaded on its own: it
  imports only the standard library at module level) gives a different root with the
  environment ``patchq run`` / the plugin set than without, and different roots for two
  profiles; so the compile cache directories differ;
* the facts the design rests on still hold in that release's source: both compile
  caches live under ``envs.VLLM_CACHE_ROOT`` (``backends.py`` and ``decorators.py``),
  ``VLLM_CACHE_ROOT`` is an ignored factor of ``envs.compile_factors()``, and the code
  factor reads the traced files from disk (pristine under ``patchq run``), so vLLM's own
  key cannot tell a patched run from an unpatched one.

``compile_factors()`` itself is not called: it imports ``vllm.config.utils`` (torch,
pydantic). The key is computed as ``backends.py`` does, from fixed factors.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os

import pytest

from patchq.runtime.cachefold import fold, folded_root, parse_fold, profile_digest, vllm_cache_root

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

VERSIONS = ("0.15.1", "0.17.1", "0.18.1", "0.19.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0",
            "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0",
            "0.31.0", "0.32.0", "0.33.0")


def release_root(version: str):
    from patchq.errors import PatchqError
    from patchq.vllmdist import sources

    try:
        return sources.release_source(version).root
    except PatchqError as exc:
        pytest.skip(f"vllm {version} not available: {exc}")


def load_envs(root, version: str):
    """The release's ``vllm/envs.py`` as a standalone module (not ``vllm.envs``)."""
    spec = importlib.util.spec_from_file_location(f"_vllm_envs_{version.replace('.', '_')}", root / "vllm" / "envs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digests() -> dict[str, str]:
    from patchq import series
    from patchq.hashing import series_summary

    s = series.series_dir()
    summary = series_summary(s, series.anchors_dir(s))
    return {p: profile_digest({pid: summary["hashes"][pid] for pid in ids}) for p, ids in summary["profiles"].items()}


def joins_under_cache_root(tree: ast.AST) -> list[list[str]]:
    """The string parts of every ``os.path.join(envs.VLLM_CACHE_ROOT, ...)`` call."""
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and ast.unparse(node.func) == "os.path.join" and node.args
                and ast.unparse(node.args[0]) == "envs.VLLM_CACHE_ROOT"):
            out.append([a.value if isinstance(a, ast.Constant) else f"<{ast.unparse(a)}>" for a in node.args[1:]])
    return out


def backend_key(root: str, factors: list[str]) -> str:
    """``VllmBackend.__call__``'s cache dir: ``<root>/torch_compile_cache/<sha256(str(factors))[:10]>``."""
    return os.path.join(root, "torch_compile_cache", hashlib.sha256(str(factors).encode()).hexdigest()[:10])


@pytest.mark.parametrize("version", VERSIONS)
def test_profile_changes_the_compile_cache_dir(version, monkeypatch, tmp_path):
    root = release_root(version)
    envs = load_envs(root, version)
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    get_root = envs.environment_variables["VLLM_CACHE_ROOT"]
    plain = get_root()
    assert plain == vllm_cache_root() == str(tmp_path / "xdg" / "vllm")

    d = digests()
    assert d["kv"] != d["full"]
    roots = {}
    for profile in ("kv", "full"):
        value, missing = fold(profile, d[profile])
        assert missing
        monkeypatch.setenv("VLLM_CACHE_ROOT", value)
        roots[profile] = get_root()
        assert roots[profile] == os.path.join(plain, "patchq", f"{profile}-{d[profile]}")
        assert fold(profile, d[profile]) == (value, False)  # idempotent: already folded
    assert len({plain, *roots.values()}) == 3
    # the same factors (vLLM cannot tell the patch sets apart): the dirs still differ
    factors = ["env", "config", "code-of-the-pristine-files-on-disk", "compiler"]
    assert len({backend_key(r, factors) for r in (plain, *roots.values())}) == 3


@pytest.mark.parametrize("version", VERSIONS)
def test_compile_caches_live_under_the_cache_root(version):
    root = release_root(version)
    comp = root / "vllm" / "compilation"
    backends = ast.parse((comp / "backends.py").read_text())
    decorators = ast.parse((comp / "decorators.py").read_text())
    assert ["torch_compile_cache", "<hash_key>"] in joins_under_cache_root(backends)
    aot = (["torch_aot_compile", "<hash_key>"] if version == "0.15.1"
           else ["torch_compile_cache", "torch_aot_compile", "<hash_key>"])
    assert aot in joins_under_cache_root(decorators)

    envs_tree = ast.parse((root / "vllm" / "envs.py").read_text())
    fn = next(n for n in envs_tree.body if isinstance(n, ast.FunctionDef) and n.name == "compile_factors")
    ignored = next(n for n in ast.walk(fn)
                   if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "ignored_factors")
    assert "VLLM_CACHE_ROOT" in ast.literal_eval(ignored.value)

    # the code factor hashes the traced files as read from disk
    call = next(n for n in ast.walk(backends) if isinstance(n, ast.FunctionDef) and n.name == "__call__"
                and "code_hash" in ast.unparse(n))
    text = ast.unparse(call)
    assert "factors = [env_hash, config_hash, code_hash, compiler_hash]" in text
    assert "open(filepath)" in text and "traced_files" in text


def test_fold_rules():
    assert folded_root("/c/vllm", "kv", "0123456789ab") == "/c/vllm/patchq/kv-0123456789ab"
    # an inherited fold of another profile is replaced, not nested
    assert folded_root("/c/vllm/patchq/full-aaaaaaaaaaaa", "kv", "0123456789ab") == \
        "/c/vllm/patchq/kv-0123456789ab"
    assert parse_fold("/c/vllm/patchq/kv-0123456789ab") == ("kv", "0123456789ab")
    assert parse_fold("/c/vllm") is None
    assert vllm_cache_root({"HOME": "/h", "VLLM_CACHE_ROOT": "~/x"}) == os.path.expanduser("~/x")
    assert profile_digest({"a": "1", "b": "2"}) == profile_digest({"b": "2", "a": "1"})
    assert profile_digest({"a": "1"}) != profile_digest({"a": "2"})
