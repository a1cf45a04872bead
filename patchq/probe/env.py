"""The CPU environment of one vLLM release that ``patchq probe`` imports (built once, cached).

What it is
    The release's Python files (its cached release tree, :func:`patchq.vllmdist.releases.release_tree`:
    the wheel's ``vllm/**/*.py`` and dist-info; compiled extensions are left out, they are
    GPU kernels a CPU cannot load), a CPU build of torch, and the distributions the
    imported modules need, each chosen from the release's own METADATA (``Requires-Dist``)
    and the versions pip resolves for it. Nothing is listed by hand but what a CPU cannot
    use (:data:`LEFT_OUT`, each with its reason).

Which distributions
    Only those an import reaches, found by importing (:meth:`ProbeEnv.ensure`): a scan
    imports the patched modules with a stand-in for every module nothing provides
    (:mod:`patchq.probe.child`); each missing top-level module is mapped to the distribution
    that provides it (:meth:`ProbeEnv.providers`: the release's METADATA requirements, then
    what they require, level by level; by name, else by the top-level names inside the
    wheel, read with HTTP range requests); it and what it requires (:meth:`ProbeEnv.closure`)
    are installed, and the scan runs again until nothing required is missing. Versions are
    pip's answer for each requirement alone (``pip install --dry-run --no-deps``, eight at a
    time): pip's resolver asks the index one package after another, 101 s for the 106
    distributions of a typical closure here, which is most of a cold build; a requirement
    that a chosen version does not meet is recorded under ``conflicts``, never hidden. An import inside
    ``try/except ImportError`` is optional and never installed for. A probe that later
    meets a missing module (a case importing more) grows the environment the same way.

Where it lives (``<cache>/probe/<python>-<platform>/``, :func:`patchq.vllmdist.cache.probe`)
    ``dists/<name>-<version>/``: one distribution installed by ``pip install --no-deps
    --target``, shared by every release that resolves to that version (torch once for
    all); ``envs/<dist>-<version>/env.json`` (:data:`ENV_SCHEMA`): the distributions of
    that release's environment and why each is there, the torch chosen and its pin, what
    was left out, the bytes and seconds the build took; ``index.json`` beside it (what pip
    said of the requirements looked at: versions, wheel URLs, their own requirements);
    ``answers.json`` and ``toplevel.json`` (pip's answer per requirement text, the
    top-level names per wheel), shared by all releases. The environment's ``sys.path`` is
    the run's vLLM copy, then its distributions, then patchq and its own requirements
    (links to this patchq's files).

Torch
    The release's pin when a CPU build of it is installable (``pip index versions torch``
    lists it with a ``+cpu`` local version), else the *nearest* CPU build (closest
    minor version, the newer on a tie), recorded as such; ``$PATCHQ_PROBE_TORCH`` names
    one instead. PyPI's own Linux torch is a CUDA build (with GBs of nvidia-* wheels): it
    is never installed. With no CPU torch on the configured indexes the release is
    :class:`patchq.errors.NotProbeable` (configure the PyTorch CPU index:
    ``PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu``).

Environments are keyed by release, distribution and the interpreter's ``cpXY-platform``
(binary wheels are per interpreter), built under a file lock, and written last
(``env.json``): an interrupted build leaves no environment, and installed distributions
are renamed into place whole.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from patchq.errors import NotProbeable

log = logging.getLogger(__name__)

#: ``env.json``'s schema
ENV_SCHEMA = "patchq.probe-env/1"
#: requirements of a vLLM release a CPU environment never installs, and why
LEFT_OUT = {
    "torch": "provided by the environment's CPU build of torch (PyPI's Linux torch is a CUDA build)",
    "torchvision": "PyPI's build is CUDA-only: its ops fail to register beside a CPU torch",
    "torchaudio": "PyPI's build is CUDA-only (as torchvision)",
    "torchcodec": "built against CUDA torch",
}
#: how many scan rounds an environment build takes at most
MAX_ROUNDS = 8
#: ``pip install --dry-run --no-deps`` processes at a time (each waits on the index, one package after another)
QUERY_WORKERS = 8
#: ``pip install --target`` processes at a time (each mostly unzips)
INSTALL_WORKERS = 4
#: seconds one child interpreter may run
CHILD_TIMEOUT = 900.0
#: the environment variables a child gets besides PATH, HOME, TMPDIR and the locale
CHILD_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
             "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "2",
             "PYTHONHASHSEED": "0"}
CHILD = Path(__file__).with_name("child.py")


def platform_key() -> str:
    """``cpXY-<platform>`` of this interpreter (``cp311-linux_x86_64``): binary wheels are per key."""
    return f"cp{sys.version_info[0]}{sys.version_info[1]}-{sysconfig.get_platform().replace('-', '_')}"


def root() -> Path:
    """``<cache>/probe/<platform_key>``."""
    from patchq.vllmdist import cache

    return cache.probe() / platform_key()


def _marker_env() -> dict[str, str]:
    from packaging.markers import default_environment

    return {**{k: str(v) for k, v in default_environment().items()}, "extra": ""}


# --------------------------------------------------------------------------- pip


def _pip(args: list[str], timeout: float = 1800.0) -> subprocess.CompletedProcess:
    """``<this python> -m pip ARGS`` (pip's own configuration applies: indexes, find-links,
    constraints). Raises NotProbeable when pip is missing, or when it would reach an index
    while ``PATCHQ_OFFLINE=1`` forbids the network."""
    if os.environ.get("PATCHQ_OFFLINE", "") not in ("", "0") and "--no-index" not in args:
        raise NotProbeable(f"PATCHQ_OFFLINE=1 forbids the network, and pip {args[0]} must ask the index "
                           f"(the release's CPU environment is not built yet)")
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                              capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotProbeable(f"pip failed to run: {exc}") from None
    if proc.returncode and "No module named pip" in proc.stderr:
        raise NotProbeable(f"pip is not installed for {sys.executable} (python -m ensurepip, or install pip)")
    return proc


def _tail(proc: subprocess.CompletedProcess, n: int = 3) -> str:
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()
             and not ln.lstrip().startswith("WARNING:")]
    return " | ".join(lines[-n:]) or f"pip exited {proc.returncode}"


# --------------------------------------------------------------------------- torch


@dataclass(frozen=True)
class Torch:
    """The CPU torch of an environment: ``version`` (``2.13.0+cpu``), ``pin`` (the release's
    requirement, e.g. ``torch==2.11.0``, or None), ``exact`` (the pin itself), ``note``."""

    version: str
    pin: str | None
    exact: bool
    note: str

    def as_json(self) -> dict[str, Any]:
        """The ``torch`` field of ``env.json`` and of ``patchq.probe/1``."""
        return {"version": self.version, "pin": self.pin, "exact": self.exact, "note": self.note}


def cpu_torch_versions() -> list[Version]:
    """The CPU builds of torch the configured indexes offer (``pip index versions torch``:
    versions with a ``cpu`` local label), newest first.

    Raises:
        NotProbeable: pip is missing or cannot list torch.
    """
    proc = _pip(["index", "versions", "torch"], timeout=300)
    found = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode or not found:
        raise NotProbeable(f"cannot list torch's versions with pip ({_tail(proc)})")
    out = []
    for text in found.group(1).split(","):
        try:
            v = Version(text.strip())
        except InvalidVersion:
            continue
        if v.local and v.local.startswith("cpu"):
            out.append(v)
    return sorted(out, reverse=True)


def choose_torch(pin: Requirement | None, available: Iterable[Version]) -> Torch:
    """The CPU torch for a release whose METADATA pins ``pin`` (pure: ``available`` are the
    CPU builds offered, :func:`cpu_torch_versions`).

    The newest available build the pin admits (PEP 440: ``==2.13.0`` admits ``2.13.0+cpu``);
    else the nearest: the smallest distance between (major, minor) and the pin's, the newer
    on a tie, the highest patch.

    Raises:
        NotProbeable: no CPU build at all.
    """
    cpu = sorted(set(available), reverse=True)
    if not cpu:
        raise NotProbeable("no CPU build of torch is installable here (pip index versions torch lists no '+cpu' "
                           "version; configure the PyTorch CPU index: PIP_EXTRA_INDEX_URL="
                           "https://download.pytorch.org/whl/cpu, or set PATCHQ_PROBE_TORCH)")
    pin_text = str(pin) if pin is not None else None
    if pin is None or not pin.specifier:
        return Torch(str(cpu[0]), pin_text, True, "the newest CPU torch (the release does not pin torch)")
    admitted = [v for v in cpu if pin.specifier.contains(v, prereleases=True)]
    if admitted:
        return Torch(str(admitted[0]), pin_text, True, "the release's pin, CPU build")
    want = next((Version(s.version.replace(".*", "")) for s in pin.specifier
                 if s.operator in ("==", "===", "~=", ">=")), cpu[0])
    target = want.release[0] * 1000 + (want.release[1] if len(want.release) > 1 else 0)

    def key(v: Version) -> tuple:
        minor = v.release[0] * 1000 + (v.release[1] if len(v.release) > 1 else 0)
        return (abs(minor - target), minor < target, -minor, [-x for x in v.release])

    best = min(cpu, key=key)
    return Torch(str(best), pin_text, False, f"nearest CPU torch: {best} for the pin {pin_text} (no CPU build of "
                 f"the pin is installable here)")


def torch_for(pin: Requirement | None) -> Torch:
    """:func:`choose_torch` over what pip offers, or ``$PATCHQ_PROBE_TORCH`` when set."""
    forced = os.environ.get("PATCHQ_PROBE_TORCH", "").strip()
    if forced:
        try:
            v = Version(forced)
        except InvalidVersion:
            from patchq.errors import UsageError

            raise UsageError(f"PATCHQ_PROBE_TORCH={forced!r} is not a version (e.g. 2.13.0+cpu)") from None
        exact = pin is not None and pin.specifier.contains(v, prereleases=True)
        return Torch(str(v), str(pin) if pin else None, exact,
                     f"torch {v} named by PATCHQ_PROBE_TORCH" + ("" if exact else f" (the release pins {pin})"))
    return choose_torch(pin, cpu_torch_versions())


# --------------------------------------------------------------------------- METADATA


def release_requirements(dist_info: Path) -> tuple[list[Requirement], Requirement | None, dict[str, str]]:
    """The release's run-time requirements from its ``METADATA`` (``Requires-Dist``, markers
    evaluated for this interpreter, no extras), without :data:`LEFT_OUT`.

    Returns:
        (requirements, torch's requirement or None, {requirement left out: why}).
    Raises:
        NotProbeable: METADATA is unreadable or malformed.
    """
    from email.parser import Parser

    try:
        meta = Parser().parsestr((dist_info / "METADATA").read_text(encoding="utf-8"), headersonly=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise NotProbeable(f"cannot read {dist_info / 'METADATA'}: {exc}") from None
    env = _marker_env()
    reqs, torch, left = [], None, {}
    for text in meta.get_all("Requires-Dist") or []:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise NotProbeable(f"{dist_info / 'METADATA'}: {exc}") from None
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        if name == "torch":
            torch = req
        if name in LEFT_OUT:
            left[str(req)] = LEFT_OUT[name]
            continue
        reqs.append(req)
    return reqs, torch, left


# --------------------------------------------------------------------------- resolution


@dataclass
class Resolution:
    """pip's answer for a set of requirements (``pip install --dry-run --report``): each
    distribution with its version, wheel URL, requirements and the extras asked of it, and
    the requirements pip could not have."""

    items: dict[str, dict[str, Any]]  # canonical name -> {"name", "version", "url", "requires", "extras"}
    dropped: dict[str, str] = field(default_factory=dict)  # requirement -> why pip could not have it


def dry_run(reqs: Iterable[str], *, no_deps: bool, constraints: Iterable[str] = (), max_drops: int = 16) -> Resolution:
    """pip's resolution of ``reqs`` for this interpreter, metadata only, nothing installed
    (``pip install --dry-run --ignore-installed --only-binary=:all: --report``; with
    ``no_deps`` each requirement alone). ``constraints`` are pinned (``-c``). A requirement
    the index cannot satisfy (``No matching distribution found for X``) is dropped, with
    pip's line, and the rest asked again.

    Raises:
        NotProbeable: pip fails otherwise (a conflict, no network), naming pip's last lines.
    """
    todo = list(dict.fromkeys(reqs))
    dropped: dict[str, str] = {}
    if not todo:
        return Resolution({}, dropped)
    with tempfile.TemporaryDirectory(prefix="patchq-resolve-") as tmp:
        report, pins = Path(tmp) / "report.json", Path(tmp) / "constraints.txt"
        pins.write_text("".join(f"{c}\n" for c in constraints), encoding="utf-8")
        for _ in range(max_drops + 1):
            proc = _pip(["install", "--dry-run", "--ignore-installed", "--only-binary=:all:", "--quiet",
                         *(["--no-deps"] if no_deps else []), "-c", str(pins), "--report", str(report), *todo])
            if proc.returncode == 0:
                return _resolution(json.loads(report.read_text(encoding="utf-8")), dropped)
            gone = re.search(r"No matching distribution found for (\S+)", proc.stderr)
            name = canonicalize_name(Requirement(gone.group(1)).name) if gone else None
            culprit = next((r for r in todo if canonicalize_name(Requirement(r).name) == name), None)
            if culprit is None:
                raise NotProbeable(f"pip cannot resolve {', '.join(todo)[:300]}: {_tail(proc)}")
            dropped[culprit] = f"not installable here: {_tail(proc, 1)}"
            todo.remove(culprit)
            if not todo:
                return Resolution({}, dropped)
    raise NotProbeable(f"pip cannot resolve: {len(dropped)} requirements dropped ({', '.join(dropped)})")


def _resolution(report: Mapping[str, Any], dropped: dict[str, str]) -> Resolution:
    items: dict[str, dict[str, Any]] = {}
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        name = canonicalize_name(meta.get("name", ""))
        items[name] = {"name": meta.get("name"), "version": meta.get("version"),
                       "url": (item.get("download_info") or {}).get("url"),
                       "requires": list(meta.get("requires_dist") or []),
                       "extras": list(item.get("requested_extras") or []), "requested": bool(item.get("requested"))}
    return Resolution(items, dropped)


def bare(req: Requirement) -> str:
    """``req`` without its marker (``name[extras]specifier``): asked of pip as is."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


# --------------------------------------------------------------------------- which distribution


def name_matches(module: str, dist: str) -> bool:
    """Whether a top-level ``module`` is likely ``dist``'s by name alone: equal once
    canonicalized, or equal without separators (``python-json-logger`` ->
    ``pythonjsonlogger``), or ``py``/``python`` in front (``pyzmq`` -> ``zmq``)."""
    m = canonicalize_name(module)
    d = canonicalize_name(dist)
    flat_m, flat_d = m.replace("-", ""), d.replace("-", "")
    return m == d or flat_m == flat_d or flat_d in ("py" + flat_m, "python" + flat_m)


def wheel_top_levels(url: str) -> set[str]:
    """The top-level importable names inside the wheel at ``url`` (``file:`` or ``http(s):``;
    over HTTP only the zip's central directory is read, with range requests).

    Raises:
        NotProbeable: the wheel cannot be read.
    """
    import urllib.parse
    import zipfile

    from patchq.vllmdist import lazywheel

    try:
        if url.startswith("file:"):
            zf = zipfile.ZipFile(urllib.parse.unquote(urllib.parse.urlparse(url).path))
        else:
            size = lazywheel._content_length(url)
            zf = zipfile.ZipFile(lazywheel.HttpRangeFile(url, size))  # type: ignore[arg-type]
        with zf:
            names = zf.namelist()
    except (OSError, zipfile.BadZipFile, lazywheel.RangeUnsupported, ValueError) as exc:
        raise NotProbeable(f"cannot read the wheel {url}: {exc}") from None
    tops = set()
    for n in names:
        parts = n.split("/")
        if parts[0].endswith(".data") and len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            parts = parts[2:]
        if parts[0].endswith((".dist-info", ".data")) or not parts[0]:
            continue
        tops.add(parts[0].split(".")[0] if len(parts) == 1 else parts[0])
    return tops


# --------------------------------------------------------------------------- the pool


def dists_dir() -> Path:
    """``<root>/dists``: installed distributions, one directory each."""
    return root() / "dists"


def dist_key(name: str, version: str) -> str:
    """The pool directory's name of a distribution: ``<canonical name>-<version>``."""
    return f"{canonicalize_name(name)}-{version}"


def install(items: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Install each distribution (``{"name", "version", "url"}``) not in the pool yet:
    ``pip download --no-deps`` of exactly that version, then ``pip install --no-deps
    --no-compile --target`` into a temporary directory renamed into place.

    Returns:
        ``{"wheel_bytes": n, "local_bytes": n, "installed": n}``: bytes of the wheels fetched
        from an index (or pip's cache: with a cold pip cache, downloaded) and from local
        files (``file:`` URLs), and how many were installed.
    Raises:
        NotProbeable: pip failed (its last lines).
    """
    pool = dists_dir()
    todo = [i for i in items if not (pool / dist_key(i["name"], i["version"])).is_dir()]
    out = {"wheel_bytes": 0, "local_bytes": 0, "installed": 0}
    if not todo:
        return out
    pool.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".dl-", dir=pool) as tmp:
        dl = Path(tmp) / "wheels"
        proc = _pip(["download", "--no-deps", "--only-binary=:all:", "--quiet", "-d", str(dl),
                     *[f"{i['name']}=={i['version']}" for i in todo]])
        if proc.returncode:
            raise NotProbeable(f"pip download failed: {_tail(proc)}")
        local = {canonicalize_name(i["name"]) for i in todo if str(i.get("url") or "").startswith("file:")}
        for wheel in sorted(dl.glob("*.whl")):
            name = canonicalize_name(wheel.name.split("-")[0])
            out["local_bytes" if name in local else "wheel_bytes"] += wheel.stat().st_size
        wheels = {canonicalize_name(w.name.split("-")[0]): w for w in dl.glob("*.whl")}

        def one(item: Mapping[str, Any]) -> int:
            wheel = wheels.get(canonicalize_name(item["name"]))
            if wheel is None:
                raise NotProbeable(f"pip download gave no wheel of {item['name']}=={item['version']}")
            final = pool / dist_key(item["name"], item["version"])
            staging = Path(tmp) / final.name
            proc = _pip(["install", "--no-deps", "--no-compile", "--no-index", "--quiet", "--target", str(staging),
                         str(wheel)])
            if proc.returncode:
                raise NotProbeable(f"installing {wheel.name} failed: {_tail(proc)}")
            try:
                os.replace(staging, final)
            except OSError:  # another build put it there meanwhile: theirs is the same
                if not final.is_dir():
                    raise
                return 0
            return 1

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=INSTALL_WORKERS) as pool_:
            out["installed"] = sum(pool_.map(one, todo))
    return out


# --------------------------------------------------------------------------- the environment


@dataclass
class ProbeEnv:
    """One release's environment (module docstring). ``doc`` is its ``env.json``."""

    release: str
    dist: str
    tree: Path
    dir: Path
    doc: dict[str, Any]

    @property
    def dist_info(self) -> Path:
        """The release's ``*.dist-info`` in its tree."""
        return next(self.tree.glob("*.dist-info"))

    @property
    def torch(self) -> Torch:
        """The environment's CPU torch."""
        t = self.doc["torch"]
        return Torch(t["version"], t["pin"], t["exact"], t["note"])

    def dist_paths(self) -> list[Path]:
        """The pool directories of its distributions (torch's included), in a stable order."""
        return [dists_dir() / key for key in sorted(self.doc["dists"])]

    def save(self) -> None:
        """Write ``env.json`` (whole or not at all)."""
        from patchq.vllmdist import cache

        cache.write_entry(self.dir / "env.json", (json.dumps(self.doc, indent=1, sort_keys=True) + "\n").encode())

    # ------------------------------------------------------------- which distribution

    def _index(self) -> dict[str, dict[str, Any]]:
        """What is known of the release's requirements, kept in ``index.json``: canonical
        name -> {"name", "version", "url", "requires", "req" (the requirement that asked for
        it, no marker), "depth" (0: in METADATA)}."""
        path = self.dir / "index.json"
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}

    def _save_index(self, idx: Mapping[str, Any]) -> None:
        from patchq.vllmdist import cache

        cache.write_entry(self.dir / "index.json", (json.dumps(dict(idx), indent=1, sort_keys=True) + "\n").encode())

    def _query(self, idx: dict[str, dict[str, Any]], level: Mapping[str, str], depth: int) -> None:
        """Ask pip for each requirement of ``level`` (name -> requirement) not in ``idx`` yet,
        without dependencies, :data:`QUERY_WORKERS` pip processes at a time; the answers go
        into ``idx``, what pip cannot have into ``unresolved``. pip's answer for a
        requirement text is kept for every release (``<root>/answers.json``): most releases
        name most requirements alike."""
        answers = _answers()
        todo = {n: t for n, t in level.items() if n not in idx and n not in LEFT_OUT}
        ask = [t for t in todo.values() if t not in answers]
        if ask:
            from concurrent.futures import ThreadPoolExecutor

            t0 = time.perf_counter()
            chunks = [ask[i::QUERY_WORKERS] for i in range(min(QUERY_WORKERS, len(ask)))]
            with ThreadPoolExecutor(max_workers=len(chunks)) as ex:
                got = list(ex.map(lambda c: dry_run(c, no_deps=True), chunks))
            self.doc["seconds"]["resolve"] = round(self.doc["seconds"].get("resolve", 0) + time.perf_counter() - t0,
                                                   1)
            for chunk, res in zip(chunks, got, strict=True):
                for text in chunk:
                    name = canonicalize_name(Requirement(text).name)
                    answers[text] = res.items.get(name) or {"dropped": res.dropped.get(text, "pip gave nothing")}
            _save_answers(answers)
        for n, text in todo.items():
            item = answers.get(text, {})
            if "dropped" in item:
                self.doc["unresolved"][text] = item["dropped"]
            elif item:
                idx[n] = {**item, "req": text, "depth": depth}

    @staticmethod
    def _requires(item: Mapping[str, Any], req_text: str) -> dict[str, str]:
        """{name: requirement (no marker)} that ``item`` requires, markers evaluated with the
        extras ``req_text`` asked of it."""
        env = _marker_env()
        extras = [""] + sorted(Requirement(req_text).extras)
        out: dict[str, str] = {}
        for text in item.get("requires", []):
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e}) for e in extras):
                continue
            key = canonicalize_name(req.name)
            if key in out:  # asked twice (two extras): both ranges
                merged = Requirement(out[key])
                req.specifier &= merged.specifier
                req.extras |= merged.extras
            out[key] = bare(req)
        return out

    def providers(self, modules: Iterable[str], max_depth: int = 3) -> dict[str, tuple[str, str]]:
        """{top-level module: (canonical name of the distribution that provides it, the
        requirement that named it, no marker)}.

        The release's METADATA requirements first, then what they require, level by level
        (each level asked of pip without dependencies: metadata only, in parallel): a module
        matches a distribution by name (:func:`name_matches`), else by the top-level names
        inside its wheel (:func:`wheel_top_levels`, read once per wheel). A module none
        provides is left out of the answer."""
        idx = self._index()
        direct, _torch, _left = release_requirements(self.dist_info)
        level: dict[str, str] = {canonicalize_name(r.name): bare(r) for r in direct}
        remaining = sorted(set(modules))
        found: dict[str, tuple[str, str]] = {}
        known = _toplevels()
        seen: set[str] = set()
        for depth in range(max_depth):
            seen |= set(level)
            for m in list(remaining):
                hit = next((n for n in level if name_matches(m, n)), None)
                if hit:
                    found[m] = (hit, level[hit])
                    remaining.remove(m)
            if not remaining or not level:
                break
            self._query(idx, level, depth)
            for n in level:
                url = idx.get(n, {}).get("url") or ""
                if not url or not remaining:
                    continue
                if url not in known:
                    try:
                        known[url] = sorted(wheel_top_levels(url))
                    except NotProbeable:
                        known[url] = []
                    _save_toplevels(known)
                for m in [m for m in remaining if m in known[url]]:
                    found[m] = (n, level[n])
                    remaining.remove(m)
            nxt: dict[str, str] = {}
            for n in level:
                if n in idx:
                    for key, text in self._requires(idx[n], level[n]).items():
                        if key not in LEFT_OUT and key not in seen:
                            nxt.setdefault(key, text)
            level = nxt
        self._save_index(idx)
        return found

    def installed(self) -> dict[str, str]:
        """{canonical name: version} of the environment's distributions."""
        return dict(k.rsplit("-", 1) for k in self.doc["dists"])

    def closure(self, wanted: Mapping[str, str], passes: int = 4) -> dict[str, dict[str, Any]]:
        """The distributions to install for ``wanted`` ({canonical name: requirement}): each
        with what it requires (markers and extras evaluated), level by level, minus
        :data:`LEFT_OUT`. Each version is pip's newest for every requirement met so far on
        that name (their ranges intersected); a version a later requirement excludes is asked
        again with all of them, pass after pass (``passes``), so ``transformers``' cap on
        ``tokenizers`` wins over vLLM's looser ``tokenizers>=...``; one the environment holds
        already is replaced the same way. What no pass settles is recorded under
        ``conflicts``. Returns the distributions to add or replace."""
        idx = self._index()
        have = self.installed()
        specs: dict[str, Requirement] = {}

        def merge(text: str) -> str:
            req = Requirement(text)
            key = canonicalize_name(req.name)
            old = specs.get(key)
            if old is not None:
                req.specifier &= old.specifier
                req.extras |= old.extras
            specs[key] = req
            return key

        def ok(name: str, version: str) -> bool:
            req = specs.get(name)
            return req is None or not req.specifier or req.specifier.contains(version, prereleases=True)

        want: dict[str, dict[str, Any]] = {}
        for _ in range(passes):
            want = {}
            level = {merge(t): bare(specs[canonicalize_name(Requirement(t).name)]) for t in wanted.values()}
            depth = 0
            while level:
                self._query(idx, level, 10 + depth)
                nxt: dict[str, str] = {}
                for n, text in level.items():
                    item = idx.get(n)
                    if item is None:
                        continue
                    want[n] = item
                    for key, req in self._requires(item, text).items():
                        if key in LEFT_OUT:
                            continue
                        merge(req)
                        if key not in want and key not in level and (key not in have or key in specs):
                            nxt.setdefault(key, bare(specs[key]))
                level = nxt
                depth += 1
            stale = [n for n in want if not ok(n, have[n] if n in have and ok(n, have[n]) else want[n]["version"])]
            if not stale:
                break
            for n in stale:  # asked again with every range met on it
                idx.pop(n, None)
        self.doc["conflicts"] = {f"{n}: {specs[n]}": f"pip's answer {want[n]['version']} is outside it"
                                 for n in want if not ok(n, want[n]["version"]) and not (n in have and ok(n, have[n]))}
        self._save_index(idx)
        return {n: item for n, item in want.items() if not (n in have and ok(n, have[n]))}

    def grow(self, modules: Iterable[str], why: str) -> list[str]:
        """Install the distributions that provide ``modules`` (:meth:`providers`) and their
        closure (:meth:`closure`), recording ``why``. Returns the distributions added
        (canonical names); a module no requirement provides is recorded under ``unprovided``."""
        modules = sorted(set(modules) - set(self.doc["unprovided"]))
        if not modules:
            return []
        found = self.providers(modules)
        log.info("grow %s: %s", self.release, {m: found.get(m, ("?", ""))[0] for m in modules})
        for m in modules:
            if m not in found:
                self.doc["unprovided"][m] = f"no requirement of vllm {self.release} provides it ({why})"
        new = self.closure(dict(sorted(found.values())))
        have = self.installed()
        for n in new:  # another version of one the environment holds: replaced
            if n in have:
                self.doc["dists"].pop(f"{n}-{have[n]}", None)
        t0 = time.perf_counter()
        got = install(new.values())
        self.doc["seconds"]["install"] = round(self.doc["seconds"].get("install", 0) + time.perf_counter() - t0, 1)
        for k in ("wheel_bytes", "local_bytes"):
            self.doc["bytes"][k] = self.doc["bytes"].get(k, 0) + got[k]
        for n, item in sorted(new.items()):
            mods = [m for m, (d, _req) in found.items() if d == n]
            self.doc["dists"][dist_key(item["name"], item["version"])] = (
                f"provides {', '.join(mods)} ({why})" if mods else f"required (as {item['req']})")
        self.save()
        return sorted(new)

    # ------------------------------------------------------------- import-driven build

    def ensure(self, modules: Iterable[str], site: Path, extra_paths: list[Path]) -> None:
        """Make ``modules`` importable from ``site`` (a copy of the release's vLLM): scan
        rounds (module docstring) until no required module is missing or nothing more can
        be installed. The modules scanned are recorded; asking again for them is free."""
        modules = sorted(set(modules) - set(self.doc["scanned"]))
        if not modules:
            return
        t0 = time.perf_counter()
        for _ in range(MAX_ROUNDS):
            self.doc["rounds"] += 1
            out = run_child(self, {"mode": "scan", "modules": modules, "site": str(site)}, site, extra_paths)
            # what vLLM's own files import unguarded; a dependency's own imports are its
            # requirements' business (installed with it) or its optional paths
            required = {m["name"] for m in out["missing"] if not m["guarded"] and m["file"].startswith(str(site))}
            for m in out["missing"]:
                if m["guarded"]:
                    self.doc["optional"].setdefault(m["name"], f"{m['file']}:{m['line']}")
            todo = required - set(self.doc["unprovided"])
            if not todo or not self.grow(todo, "imported by " + ", ".join(
                    f"vllm/{m['file'].rsplit('/vllm/', 1)[-1]}:{m['line']}" for m in out["missing"]
                    if m["name"] in todo)[:300]):
                break
        self.doc["scanned"] = sorted(set(self.doc["scanned"]) | set(modules))
        self.doc["seconds"]["scan"] = round(self.doc["seconds"].get("scan", 0) + time.perf_counter() - t0, 1)
        self.save()


_TOPLEVELS = "toplevel.json"
_ANSWERS = "answers.json"


def _answers() -> dict[str, dict[str, Any]]:
    """pip's answers kept across releases: {requirement text: item, or {"dropped": why}}."""
    try:
        return dict(json.loads((root() / _ANSWERS).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _save_answers(answers: Mapping[str, Any]) -> None:
    from patchq.vllmdist import cache

    try:
        cache.write_entry(root() / _ANSWERS, (json.dumps(dict(answers), indent=0, sort_keys=True) + "\n").encode())
    except OSError:  # a cache that cannot be written only costs asking pip again
        pass


def _toplevels() -> dict[str, list[str]]:
    try:
        return dict(json.loads((root() / _TOPLEVELS).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _save_toplevels(known: Mapping[str, list[str]]) -> None:
    from patchq.vllmdist import cache

    try:
        cache.write_entry(root() / _TOPLEVELS, (json.dumps(dict(known), indent=0, sort_keys=True) + "\n").encode())
    except OSError:  # a cache that cannot be written only costs a later read of the wheel again
        pass


def env_key(release: str, dist: str) -> str:
    """``<dist>-<version>``: the environment's directory name."""
    from patchq.vllmdist import releases

    return f"{canonicalize_name(dist)}-{releases.version_key(release)}"


def load(release: str, dist: str = "vllm", *, rebuild: bool = False) -> ProbeEnv:
    """The release's environment: the cached one, else a new one with its CPU torch (the
    distributions come as imports ask for them: :meth:`ProbeEnv.ensure`).

    Raises:
        NotProbeable: no CPU torch, no pip (module docstring). TargetNotFound: the release
            cannot be had.
    """
    from patchq.vllmdist import releases
    from patchq.vllmdist.sources import release_source

    source = release_source(release, dist)  # TargetNotFound when the release cannot be had
    tree = Path(source.root)
    edir = root() / "envs" / env_key(release, dist)
    path = edir / "env.json"
    if rebuild and edir.is_dir():
        shutil.rmtree(edir)
    if path.is_file():
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("schema") == ENV_SCHEMA:
            return ProbeEnv(str(source.version), dist, tree, edir, doc)
    edir.mkdir(parents=True, exist_ok=True)
    info = releases.tree_info(release, package=dist) or {}
    env = ProbeEnv(str(source.version), dist, tree, edir, {
        "schema": ENV_SCHEMA, "release": str(source.version), "dist": dist, "platform": platform_key(),
        "python": ".".join(map(str, sys.version_info[:3])), "torch": None, "dists": {}, "left_out": {},
        "optional": {}, "unprovided": {}, "unresolved": {}, "conflicts": {}, "scanned": [], "rounds": 0,
        "bytes": {"vllm_tree": int(info.get("bytes") or 0) if info.get("source") == "range" else 0},
        "seconds": {}, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    _reqs, pin, left = release_requirements(env.dist_info)
    env.doc["left_out"] = left
    t0 = time.perf_counter()
    torch = torch_for(pin)
    env.doc["torch"] = torch.as_json()
    tres = dry_run([f"torch=={torch.version}"], no_deps=False)
    got = install(tres.items.values())
    for item in tres.items.values():
        env.doc["dists"][dist_key(item["name"], item["version"])] = (
            "the CPU torch" if canonicalize_name(item["name"]) == "torch" else "required by the CPU torch")
    env.doc["bytes"].update(wheel_bytes=got["wheel_bytes"], local_bytes=got["local_bytes"])
    env.doc["seconds"]["torch"] = round(time.perf_counter() - t0, 1)
    env.save()
    return env


# --------------------------------------------------------------------------- the child


def patchq_paths(dest: Path) -> Path:
    """A directory of links to this patchq's packages (``patchq``, ``patchq_runtime``) and to
    the top-level names of its own requirements (their closure, from the installed
    distributions' metadata): what a child needs to load the series, and no more of the
    environment patchq runs in. Made anew in ``dest``; returns it."""
    import importlib.metadata as md
    import importlib.util

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for pkg in ("patchq", "patchq_runtime"):
        spec = importlib.util.find_spec(pkg)
        where = list(spec.submodule_search_locations or []) if spec else []
        if where:
            os.symlink(where[0], dest / pkg)
    env = _marker_env()
    todo, seen = ["patchq"], set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            d = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for text in d.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
        if name == "patchq":
            continue
        tops = (d.read_text("top_level.txt") or "").split()
        tops = tops or sorted({str(f).split("/")[0] for f in d.files or [] if "/" in str(f)
                               and not str(f).split("/")[0].endswith((".dist-info", ".data")) and ".." not in str(f)})
        for top in tops:
            for cand in (top, f"{top}.py"):
                src = Path(str(d.locate_file(cand)))
                if src.exists() and not (dest / cand).exists():
                    os.symlink(src, dest / cand)
            for so in Path(str(d.locate_file(""))).glob(f"{top}.*.so"):
                if not (dest / so.name).exists():
                    os.symlink(so, dest / so.name)
    return dest


def child_env() -> dict[str, str]:
    """The environment of a child interpreter: PATH, HOME, TMPDIR, the locale and :data:`CHILD_ENV`."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG") or k.startswith("LC_")}
    return {**keep, **CHILD_ENV}


def run_child(env: ProbeEnv, job: dict[str, Any], site: Path, extra_paths: list[Path],
              timeout: float = CHILD_TIMEOUT) -> dict[str, Any]:
    """Run :mod:`patchq.probe.child` in a fresh ``-I -S`` interpreter with the paths ``site``
    (vLLM), the environment's distributions, then ``extra_paths`` (patchq's links), byte
    code under ``<root>/pycache``.

    Returns:
        the child's output document, or ``{"error": why}`` when it died without one.
    """
    paths = [str(site), *map(str, env.dist_paths()), *map(str, extra_paths)]
    with tempfile.TemporaryDirectory(prefix="patchq-child-") as tmp:
        jin, jout = Path(tmp) / "in.json", Path(tmp) / "out.json"
        jin.write_text(json.dumps({**job, "paths": paths}), encoding="utf-8")
        argv = [sys.executable, "-I", "-S", "-X", f"pycache_prefix={root() / 'pycache'}", str(CHILD), str(jin),
                str(jout)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env(), cwd=tmp)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if jout.is_file():
            return dict(json.loads(jout.read_text(encoding="utf-8")))
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
        return {"error": f"the probe interpreter exited {proc.returncode}: " + (lines[-1] if lines else "no output")}
