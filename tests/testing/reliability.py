"""The reliability harness: damage a patched vLLM's state, run patchq, check the rules.

Shared by ``tests/e2e/test_reliability.py`` (a few hundred cases, CI-sized) and
``bench/reliability.py`` (thousands, prints counts). A case is: a real vLLM 0.23.0
site-packages with the stack fixture's ``full`` profile applied (:mod:`testing.stack`: every
run here names that series), one to three :data:`MUTATIONS` of its
state or files, a short random command sequence, then ``revert --all --force``. Every
command of a case is checked against the project's rules:

* ``traceback``: an exception other than the CLI's exit reached the top (in-process) or
  ``Traceback`` on stderr (subprocess);
* ``wrong_exit``: an exit code outside the documented table for that command;
* ``lie``: exit 0 while the environment disagrees with the report (status rows vs the
  files, apply's profile not live afterwards, a revert that leaves sentinels or non-RECORD
  bytes);
* ``bytes_lost``: after ``revert --all --force`` a target module differs from RECORD;
* ``outside``: a file outside site-packages (beside it, where hostile paths point) changed.

Runs commands in-process (:func:`run_inprocess`: the real entry point, stdout/stderr
captured, ``SystemExit`` is the exit code) for speed, or as subprocesses for kill -9 and
concurrency (:func:`run_subprocess`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from testing import stack

REPO = Path(__file__).resolve().parents[2]
UTILS, KV, INC, LOGITS = stack.UTILS, stack.KV_UTILS, stack.INC, stack.LOGITS
TARGETS = stack.FULL_FILES
DENSE = stack.FULL
DFLASH = stack.KV
#: the series of every run (in-process and children): the stack fixture, never an installed one
SERIES_ENV = {"PATCHQ_SERIES": str(stack.SERIES)}
#: documented exit codes per command (docs/exit-codes.md)
ALLOWED = {"status": {0, 3, 6, 7}, "apply": {0, 1, 3, 4, 5, 6}, "revert": {0, 3, 4, 5, 6}}
HOSTILE_PATHS = ["../outside/escape.py", "/tmp/patchq-reliability-abs.py", "vllm/../../outside/escape.py",
                 "vllm/not_in_record.py", ".patchq/journal.json", "vllm//v1/core/x.py", "vllm/./x.py", "",
                 "vllm\\v1\\x.py", "vllm/v1/core/kv_cache_utils.py\x00"]
WRONG_VALUES = [None, 0, -1, 1.5, True, "", "x", [], {}, [1], {"a": 1}, "0" * 64, "g" * 64]


def sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str | None:
    """sha256 of a regular file; None when missing, "not-a-regular-file" for a FIFO or
    device (never opened blocking: a case may leave a FIFO where a module belongs)."""
    from patchq.hashing import sha256_file

    try:
        return sha256_file(path)
    except OSError:
        return None


def record_of(site: Path) -> dict[str, str]:
    from patchq.vllmdist import record

    di = next(Path(site).glob("vllm-0.23.0.dist-info"))
    return record.read_record(str(di))


# -- the site -----------------------------------------------------------------------------


@dataclass
class Bed:
    """A reusable test bed: a site-packages with ``dense`` applied, and how to reset it.

    ``outside`` is a directory beside site-packages (where hostile paths point); a case
    may put its own things there (a symlinked state directory's target), so
    :meth:`mark_outside` records it after the mutations and :meth:`outside_ok` compares."""

    site: Path
    record: dict[str, str] = field(repr=False)
    patched: dict[str, bytes] = field(repr=False)  # relpath -> the dense bytes
    state: dict[str, bytes] = field(repr=False)  # relpath under .patchq -> bytes
    outside: Path = field(repr=False)
    outside_marked: dict = field(default_factory=dict, repr=False)

    @property
    def state_dir(self) -> Path:
        return self.site / ".patchq"

    def reset(self) -> None:
        """Back to "dense applied" (cheap: only what a case may have changed)."""
        sd = self.state_dir
        if sd.is_symlink() or sd.is_file():
            sd.unlink()
        elif sd.exists():
            shutil.rmtree(sd)
        for rel, data in self.state.items():
            p = sd / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        for rel, data in self.patched.items():
            p = self.site / rel
            if p.is_symlink() or not p.is_file() or p.read_bytes() != data:  # a FIFO is never read
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif p.exists() or p.is_symlink():
                    p.unlink()
                tmp = p.with_name(f".{p.name}.reset")
                tmp.write_bytes(data)
                os.replace(tmp, p)
        for d in {(self.site / rel).parent for rel in TARGETS}:
            for name in os.listdir(d):
                if name.endswith(".patchq-tmp"):
                    os.unlink(d / name)
        for extra in self.site.glob("vllm-*.dist-info"):
            if extra.name != "vllm-0.23.0.dist-info":
                shutil.rmtree(extra)
        rec = self.site / "vllm-0.23.0.dist-info" / "RECORD"
        if rec.is_symlink() or not rec.is_file():
            raise RuntimeError("a case damaged RECORD without restoring it")
        for p in self.outside.iterdir():
            if p.name != "escape.py":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        (self.outside / "escape.py").write_text("outside: never written\n")
        self.mark_outside()

    def _outside_now(self) -> dict:
        out = {}
        for dirpath, dirnames, files in os.walk(self.outside):
            for name in files + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                p = os.path.join(dirpath, name)
                out[os.path.relpath(p, self.outside)] = file_sha(Path(p)) if not os.path.islink(p) else "link"
        for name in os.listdir(self.site.parent):
            if name not in ("site-packages", "outside"):
                out["../" + name] = "present"
        return out

    def mark_outside(self) -> None:
        """Record what is outside site-packages now (after a case's own mutations)."""
        self.outside_marked = self._outside_now()

    def outside_ok(self) -> bool:
        return self._outside_now() == self.outside_marked and not os.path.exists("/tmp/patchq-reliability-abs.py")

    def at_record(self) -> list[str]:
        """Target modules that differ from RECORD (empty: nothing lost)."""
        return [rel for rel in TARGETS
                if file_sha(self.site / rel) != self.record[rel] or (self.site / rel).is_symlink()]


def make_bed(site: Path) -> Bed:
    """Apply the stack's full profile to ``site`` (a writable copy with stack_runtime importable) and keep
    its bytes as the reset point."""
    res = run_inprocess("apply", "--profile", "full", "--site-packages", str(site), "--json")
    assert res.rc == 0, res
    sd = site / ".patchq"
    state = {str(p.relative_to(sd)): p.read_bytes() for p in sd.rglob("*") if p.is_file()}
    outside = site.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "escape.py").write_text("outside: never written\n")
    return Bed(site, record_of(site), {rel: (site / rel).read_bytes() for rel in TARGETS}, state, outside)


# -- running patchq --------------------------------------------------------------------------


@dataclass
class Run:
    args: tuple
    rc: int
    stdout: str
    stderr: str
    traceback: str = ""

    @property
    def json(self):
        try:
            return json.loads(self.stdout) if self.stdout.lstrip().startswith("{") else None
        except ValueError:
            return None


def run_inprocess(*args: str, env: dict | None = None) -> Run:
    """``patchq ARGS`` through its real entry point, in this process."""
    from patchq.__main__ import main

    saved_argv, saved_env = sys.argv, dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["patchq", *args]
    for k in ("PATCHQ_FAULT_AFTER_WRITES", "PATCHQ_STATE_DIR"):
        os.environ.pop(k, None)
    os.environ.update(SERIES_ENV, **(env or {}))
    rc, tb = 0, ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - this is what the harness counts
        rc, tb = 1, traceback.format_exc()
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    return Run(args, rc, out.getvalue(), err.getvalue(), tb)


def run_subprocess(*args: str, env: dict | None = None, kill_after: float | None = None) -> Run:
    """``python -m patchq ARGS`` as a child; ``kill_after`` seconds: SIGKILL it then."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_")}
    full.update({"PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1", **SERIES_ENV}, **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "patchq", *args], cwd=REPO, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if kill_after is not None:
        try:
            out, err = proc.communicate(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate()
            return Run(args, -9, out, err)
    else:
        out, err = proc.communicate(timeout=600)
    tb = err if "Traceback" in err else ""
    return Run(args, proc.returncode, out, err, tb)


# -- checks -------------------------------------------------------------------------------


@dataclass
class Tally:
    """Counts over cases (what the bench prints)."""

    cases: int = 0
    commands: int = 0
    tracebacks: int = 0
    wrong_exit: int = 0
    lies: int = 0
    bytes_lost: int = 0
    outside: int = 0
    failures: list = field(default_factory=list)

    def bad(self, kind: str, case: str, detail: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.failures) < 50:
            self.failures.append(f"{kind}: {case}: {detail[:1500]}")

    def merge(self, other: Tally) -> None:
        for k in ("cases", "commands", "tracebacks", "wrong_exit", "lies", "bytes_lost", "outside"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.failures += other.failures[: max(0, 50 - len(self.failures))]

    @property
    def clean(self) -> bool:
        return not (self.tracebacks or self.wrong_exit or self.lies or self.bytes_lost or self.outside)

    def line(self) -> str:
        return (f"cases {self.cases}  commands {self.commands}  tracebacks {self.tracebacks}  "
                f"wrong exit codes {self.wrong_exit}  exit 0 with a wrong report {self.lies}  "
                f"bytes lost {self.bytes_lost}  writes outside {self.outside}")


def _sentinel_ids(site: Path) -> set[str]:
    from patchq.sentinels import find_sentinels

    ids = set()
    for rel in TARGETS:
        try:
            if (site / rel).is_file():  # not a FIFO
                ids |= {pid for pid, _ in find_sentinels((site / rel).read_bytes().decode("utf-8", "replace"))}
        except OSError:
            pass
    return ids


def check_run(bed: Bed, run: Run, tally: Tally, case: str, verb: str) -> None:
    """Apply the rules to one command's result."""
    tally.commands += 1
    if run.traceback or "Traceback" in run.stderr:
        tally.bad("tracebacks", case, f"{run.args}: {run.traceback or run.stderr}")
        return
    if run.rc == -9:
        return
    if run.rc not in ALLOWED[verb]:
        tally.bad("wrong_exit", case, f"{run.args} -> {run.rc}: {run.stderr or run.stdout}")
        return
    if run.rc != 0:
        return
    site = bed.site
    if verb == "status":
        doc = run.json
        if doc is None:
            return
        for row in doc["files"]:
            now = file_sha(site / row["path"])
            if now != row["sha256"] or (row["state"] == "pristine" and now != bed.record.get(row["path"])):
                tally.bad("lies", case, f"status row {row} disagrees with the file ({now})")
        if any(p["status"] not in ("applied", "not-applied") for p in doc["patches"]):
            tally.bad("lies", case, "status exit 0 with a stale/foreign patch")
    elif verb == "apply":
        profile = run.args[run.args.index("--profile") + 1]
        want = set(DENSE if profile == "full" else DFLASH)
        st = run_inprocess("status", "--site-packages", str(site), "--json")
        doc = st.json or {}
        live = {p["id"] for p in doc.get("patches", []) if p["status"] == "applied"}
        if st.rc != 0 or doc.get("profile") != profile or live != want or _sentinel_ids(site) != want:
            tally.bad("lies", case, f"apply {profile} exit 0 but status rc {st.rc}, profile {doc.get('profile')}, "
                                    f"live {sorted(live)}, sentinels {sorted(_sentinel_ids(site))}")
    elif verb == "revert":
        if "--all" in run.args:
            lost = bed.at_record()
            if lost:
                tally.bad("lies", case, f"{run.args} exit 0 but not at RECORD: {lost}")
        elif _sentinel_ids(site) & set(DENSE):
            tally.bad("lies", case, f"{run.args} exit 0 but sentinels left: {_sentinel_ids(site)}")


def finish(bed: Bed, tally: Tally, case: str, runner=run_inprocess) -> None:
    """``revert --all --force`` (after removing a symlinked state directory, which patchq
    refuses by design), then: nothing lost, nothing written outside."""
    site = str(bed.site)
    res = runner("revert", "--all", "--force", "--site-packages", site, "--json")
    check_run(bed, res, tally, case, "revert")
    if res.rc != 0 and bed.state_dir.is_symlink():
        bed.state_dir.unlink()
        res = runner("revert", "--all", "--force", "--site-packages", site, "--json")
        check_run(bed, res, tally, case, "revert")
    lost = bed.at_record()
    if res.rc != 0 or lost:
        tally.bad("bytes_lost", case, f"revert --all --force rc {res.rc} ({res.stderr or res.stdout}); lost {lost}")
    if not bed.outside_ok():
        tally.bad("outside", case, f"outside changed: {bed._outside_now()} (was {bed.outside_marked})")


# -- mutations of the state -------------------------------------------------------------------


def _state_files(bed: Bed) -> list[Path]:
    sd = bed.state_dir
    if sd.is_symlink() or not sd.is_dir():
        return []
    return sorted(p for p in sd.rglob("*") if p.is_file() and not p.is_symlink())


def _journal(bed: Bed):
    try:
        path = bed.state_dir / "journal.json"
        return json.loads(path.read_text()) if path.is_file() else None  # never a FIFO
    except (OSError, ValueError, RecursionError):
        return None


def _put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    path.write_bytes(data)


def m_bitflip(bed, rng):
    files = _state_files(bed)
    if not files:
        return "bitflip: no state"
    p = rng.choice(files)
    data = bytearray(p.read_bytes() or b"\0")
    i = rng.randrange(len(data))
    data[i] ^= 1 << rng.randrange(8)
    _put(p, bytes(data))
    return f"bitflip {p.relative_to(bed.site)}@{i}"


def m_truncate(bed, rng):
    files = _state_files(bed)
    if not files:
        return "truncate: no state"
    p = rng.choice(files)
    data = p.read_bytes()
    n = rng.randrange(len(data) + 1)
    _put(p, data[:n])
    return f"truncate {p.relative_to(bed.site)} to {n}"


def m_wrong_type(bed, rng):
    j = _journal(bed)
    if not isinstance(j, dict):
        return "wrong_type: no journal"
    value = rng.choice(WRONG_VALUES)
    where = rng.choice(["top", "file", "patch"])
    if where == "top":
        key = rng.choice(["schema", "vllm", "profile", "files", "patches", "profile_hashes", "series", "results"])
        j[key] = value
    elif where == "file" and j.get("files"):
        rel = rng.choice(sorted(j["files"]))
        key = rng.choice(["record_sha256", "pristine_sha256", "patched_sha256", "patches"])
        j["files"][rel][key] = value
    elif j.get("patches"):
        pid = rng.choice(sorted(j["patches"]))
        key = rng.choice(["hash", "variant", "files"])
        j["patches"][pid][key] = value
    _put(bed.state_dir / "journal.json", json.dumps(j).encode())
    return f"wrong_type {where} -> {value!r}"


def m_escape(bed, rng):
    j = _journal(bed)
    if not isinstance(j, dict) or not j.get("files"):
        return "escape: no journal"
    hostile = rng.choice(HOSTILE_PATHS)
    rel = rng.choice(sorted(j["files"]))
    j["files"][hostile] = j["files"].pop(rel)
    for e in j.get("patches", {}).values():
        e["files"] = [hostile if f == rel else f for f in e.get("files", [])]
    _put(bed.state_dir / "journal.json", json.dumps(j).encode())
    if rng.random() < 0.5:  # and a pristine copy waiting there
        p = bed.state_dir / "pristine" / hostile.lstrip("/") if hostile else None
        if p is not None and ".." not in hostile and "\x00" not in hostile:
            _put(p, b"# hostile\n")
    return f"escape {rel} -> {hostile!r}"


def m_other_version(bed, rng):
    j = _journal(bed)
    if not isinstance(j, dict):
        return "other_version: no journal"
    j["vllm"] = rng.choice(["0.22.0", "0.23", "0.23.0.post1", "0.9.0", "v0.23.0", "not-a-version", "0.24.0"])
    _put(bed.state_dir / "journal.json", json.dumps(j).encode())
    return f"other_version {j['vllm']}"


def m_symlink_state(bed, rng):
    sd = bed.state_dir
    if sd.is_symlink() or not sd.is_dir():
        return "symlink: no state"
    target = bed.outside / "linked-state"
    shutil.move(sd, target)
    os.symlink(target, sd)
    return "symlink state dir"


def m_symlink_entry(bed, rng):
    sd = bed.state_dir
    if sd.is_symlink() or not sd.is_dir():
        return "symlink entry: no state"
    name = rng.choice(["journal.json", "pristine"])
    p = sd / name
    if not p.exists():
        return "symlink entry: missing"
    target = bed.outside / f"linked-{name}"
    shutil.move(p, target)
    os.symlink(target, p)
    return f"symlink {name}"


def m_delete(bed, rng):
    files = _state_files(bed)
    if not files:
        return "delete: no state"
    p = rng.choice(files)
    p.unlink()
    return f"delete {p.relative_to(bed.site)}"


def m_directory(bed, rng):
    name = rng.choice(["journal.json", "lock", "txn/manifest.json", "pristine/" + KV])
    p = bed.state_dir / name
    if bed.state_dir.is_symlink():
        return "directory: symlinked state"
    _put(p, b"")
    p.unlink()
    p.mkdir(parents=True)
    return f"directory {name}"


def m_foreign_edit(bed, rng):
    rel = rng.choice(TARGETS)
    p = bed.site / rel
    if not p.is_file():
        return "foreign: missing"
    _put(p, p.read_bytes() + b"\n# someone else\n")
    return f"foreign edit {rel}"


def m_stray_tmp(bed, rng):
    rel = rng.choice(TARGETS)
    p = (bed.site / rel).parent / f".{Path(rel).name}.{rng.randrange(10**7, 10**8)}.patchq-tmp"
    p.write_bytes(b"half")
    return f"stray tmp {p.name}"


def m_fake_txn(bed, rng):
    """A plausible-looking pending transaction, with hostile or wrong content."""
    sd = bed.state_dir
    if sd.is_symlink() or not sd.is_dir():
        return "txn: no state"
    j = _journal(bed) or {}
    rel = rng.choice(TARGETS + HOSTILE_PATHS[:4])
    to = rng.choice([bed.record.get(KV, "0" * 64), "1" * 64, sha256(b"")])
    manifest = {"files": {rel: {"from": rng.choice([None, "2" * 64, to]), "to": to}}, "journal": j}
    _put(sd / "txn" / "manifest.json", json.dumps(manifest).encode())
    if ".." not in rel and not rel.startswith("/"):
        _put(sd / "txn" / "files" / rel,
             rng.choice([b"", b"# staged\n", (bed.site / KV).read_bytes() if (bed.site / KV).is_file() else b""]))
    return f"fake txn {rel!r}"


def m_reinstall(bed, rng):
    from patchq.vllmdist import releases

    tree = releases.release_tree("0.23.0")
    for rel in TARGETS:
        _put(bed.site / rel, (tree / rel).read_bytes())
    return "force-reinstall (pristine files, old journal)"


def m_fifo(bed, rng):
    """A FIFO where a state file or a target module belongs (a reader must not block)."""
    sd = bed.state_dir
    choices = [bed.site / rng.choice(TARGETS)]
    if sd.is_dir() and not sd.is_symlink():
        choices += [sd / "journal.json", sd / "owner.json", sd / "txn" / "manifest.json"] + _state_files(bed)
    p = rng.choice(choices)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif p.exists() or p.is_symlink():
        p.unlink()
    os.mkfifo(p)
    return f"fifo {p.relative_to(bed.site)}"


def m_deep(bed, rng):
    """A journal (or transaction manifest) nested far deeper than any parser's stack."""
    sd = bed.state_dir
    if sd.is_symlink() or not sd.is_dir():
        return "deep: no state"
    name = rng.choice(["journal.json", "txn/manifest.json"])
    depth = rng.choice([100, 5000, 200000])
    _put(sd / name, b"[" * depth + b"]" * depth)
    return f"deep {name} ({depth})"


def m_txn_file(bed, rng):
    """``txn`` as a plain file."""
    sd = bed.state_dir
    if sd.is_symlink() or not sd.is_dir():
        return "txn file: no state"
    _put(sd / "txn", b"not a directory\n")
    return "txn as a file"


def m_symlink_subdir(bed, rng):
    """A directory inside the state (``pristine/vllm``) or a target's ``__pycache__``
    symlinked out of site-packages: never written or deleted through."""
    sd = bed.state_dir
    if rng.random() < 0.5 and sd.is_dir() and not sd.is_symlink() and (sd / "pristine" / "vllm").is_dir():
        target = bed.outside / "linked-pristine-vllm"
        shutil.move(sd / "pristine" / "vllm", target)
        os.symlink(target, sd / "pristine" / "vllm")
        return "symlink pristine/vllm"
    cache = (bed.site / rng.choice(TARGETS)).parent / "__pycache__"
    target = bed.outside / "linked-pycache"
    target.mkdir(exist_ok=True)
    (target / "kv_cache_utils.cpython-311.pyc").write_text("not patchq's\n")
    if cache.is_dir() and not cache.is_symlink():
        shutil.rmtree(cache)
    elif cache.exists() or cache.is_symlink():
        cache.unlink()
    os.symlink(target, cache)
    return "symlink __pycache__"


MUTATIONS = [m_bitflip, m_truncate, m_wrong_type, m_escape, m_other_version, m_symlink_state, m_symlink_entry,
             m_delete, m_directory, m_foreign_edit, m_stray_tmp, m_fake_txn, m_reinstall, m_fifo, m_deep,
             m_txn_file, m_symlink_subdir]

COMMANDS = [("status",), ("apply", "--profile", "full"), ("apply", "--profile", "kv"), ("revert", "--all"),
            ("revert", "--profile", "full")]


def mutate(bed: Bed, rng: random.Random, mutations) -> str:
    """Apply ``mutations`` in order (one that a previous one made inapplicable is skipped)."""
    done = []
    for m in mutations:
        try:
            done.append(m(bed, rng))
        except (KeyError, TypeError, AttributeError, IndexError, ValueError, OSError) as exc:
            done.append(f"{m.__name__}: not applicable ({exc.__class__.__name__})")
    bed.mark_outside()
    return "; ".join(done)


def state_case(bed: Bed, rng: random.Random, tally: Tally, runner=run_inprocess) -> str:
    """One damaged-state case (see module docstring); returns its description."""
    bed.reset()
    muts = [rng.choice(MUTATIONS) for _ in range(rng.randint(1, 3))]
    desc = mutate(bed, rng, muts)
    tally.cases += 1
    for cmd in rng.sample(COMMANDS, rng.randint(1, 3)):
        res = runner(*cmd, "--site-packages", str(bed.site), "--json")
        check_run(bed, res, tally, desc, cmd[0])
    finish(bed, tally, desc, runner)
    return desc


def status_case(bed: Bed, rng: random.Random, tally: Tally) -> str:
    """A cheap case: damaged state, then ``status`` only (it never writes, so no revert is
    needed): no traceback, a documented code, exit 0 only when every row matches the files."""
    bed.reset()
    desc = mutate(bed, rng, [rng.choice(MUTATIONS) for _ in range(rng.randint(1, 3))])
    tally.cases += 1
    res = run_inprocess("status", "--site-packages", str(bed.site), "--json")
    check_run(bed, res, tally, desc, "status")
    if not bed.outside_ok():
        tally.bad("outside", desc, "status wrote outside site-packages")
    return desc


def kill_case(bed: Bed, rng: random.Random, tally: Tally) -> str:
    """kill -9 during apply / revert / a profile switch (a random instant, or after the
    n-th file write), then the next command completes or refuses cleanly."""
    bed.reset()
    site = str(bed.site)
    start = rng.choice(["full", "pristine"])
    if start == "pristine":
        run_inprocess("revert", "--all", "--site-packages", site, "--json")
    verb = rng.choice([("apply", "--profile", "full"), ("apply", "--profile", "kv"), ("revert", "--all")])
    how = rng.choice(["fault", "sigkill"])
    if how == "fault":
        n = rng.randint(1, 4)
        res = run_subprocess(*verb, "--site-packages", site, "--json", env={"PATCHQ_FAULT_AFTER_WRITES": str(n)})
        desc = f"{start}: {' '.join(verb)} killed after {n} write(s)"
    else:
        delay = rng.uniform(0.05, 2.5)
        res = run_subprocess(*verb, "--site-packages", site, "--json", kill_after=delay)
        desc = f"{start}: {' '.join(verb)} SIGKILL at {delay:.2f}s"
    tally.cases += 1
    if res.rc not in (99, -9):
        check_run(bed, res, tally, desc, verb[0])
    nxt = rng.choice(COMMANDS[1:])
    after = run_inprocess(*nxt, "--site-packages", site, "--json")
    check_run(bed, after, tally, desc, nxt[0])
    if after.rc == 0 and (bed.state_dir / "txn" / "manifest.json").exists():
        tally.bad("lies", desc, f"{nxt} exit 0 with a pending transaction left")
    finish(bed, tally, desc)
    return desc


def concurrent_case(bed: Bed, rng: random.Random, tally: Tally, n: int = 3) -> str:
    """2-3 patchq processes at once on one environment: each exits 0 (the lock orders
    them) and the environment ends as the last writer left it."""
    bed.reset()
    site = str(bed.site)
    cmds = [rng.choice(COMMANDS[1:]) for _ in range(n)]
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_")}
    full.update({"PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1", **SERIES_ENV})
    procs = [subprocess.Popen([sys.executable, "-m", "patchq", *c, "--site-packages", site, "--json"], cwd=REPO,
                              env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    desc = f"concurrent: {[' '.join(c) for c in cmds]}"
    tally.cases += 1
    for c, p in zip(cmds, procs, strict=True):
        out, err = p.communicate(timeout=600)
        run = Run(tuple(c), p.returncode, out, err, err if "Traceback" in err else "")
        tally.commands += 1
        if run.traceback:
            tally.bad("tracebacks", desc, run.traceback)
        elif run.rc != 0:
            tally.bad("wrong_exit", desc, f"{c} -> {run.rc}: {err or out}")
    st = run_inprocess("status", "--site-packages", site, "--json")
    check_run(bed, st, tally, desc, "status")
    if st.rc != 0:
        tally.bad("lies", desc, f"after concurrent writers status is {st.rc}: {st.stdout[:500]}")
    finish(bed, tally, desc)
    return desc
