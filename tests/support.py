"""Plain helpers shared by the tests (fixtures live in ``conftest.py``).

Everything here works on real files: a site-packages directory holding a real vLLM
wheel's install, its RECORD, and the ``patchq`` CLI run as a subprocess.

Two rules every test must keep, because a test site-packages is a hard-linked copy of
a cached pristine install (exactly uv's layout):

* never write into a file of a test site in place: use :func:`replace_file`, which
  breaks the link first (writing in place would change the cached pristine install);
* never ``chmod``/``chattr`` a *file* of a test site (the inode is shared): only the
  directories, which are the copy's own.
"""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Environment variables of patchq that a test must set explicitly or not at all.
PATCHQ_ENV = ("PATCHQ_FAULT_AFTER_WRITES", "PATCHQ_STATE_DIR", "PATCHQ_SERIES", "PATCHQ_ANCHORS")


# -- files and hashes ----------------------------------------------------------


def own_vllm() -> str | None:
    """The dist-info name of a vLLM installed in this interpreter's own site-packages (README
    command 1 run before command 2), or None: some scenarios read differently there."""
    from patchq.vllmdist.sources import current_site_packages

    found = sorted(current_site_packages().glob("vllm-*.dist-info"))
    return found[0].name if found else None


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_path(path: Path) -> str | None:
    """Hex sha256 of a file, or None when it does not exist."""
    try:
        return sha256_bytes(Path(path).read_bytes())
    except FileNotFoundError:
        return None


def dist_info(site: Path, package: str = "vllm") -> Path:
    """The single ``<package>-*.dist-info`` directory of ``site`` (AssertionError otherwise)."""
    found = sorted(Path(site).glob(f"{package}-*.dist-info"))
    assert len(found) == 1, f"expected one {package} dist-info in {site}, found {found}"
    return found[0]


def record_hashes(site: Path, package: str = "vllm") -> dict[str, str]:
    """RECORD of the installed ``package`` as relpath -> hex sha256 (unhashed rows left out).

    RECORD hashes are ``sha256=<urlsafe base64 without padding>`` (wheel spec, PEP 376).
    """
    out = {}
    with open(dist_info(site, package) / "RECORD", newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            if len(row) >= 2 and row[1].startswith("sha256="):
                b64 = row[1][len("sha256="):]
                out[row[0]] = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
    return out


def replace_file(path: Path, data: bytes | str) -> None:
    """Give ``path`` new content WITHOUT writing through a hard link (unlink, then create).

    The mode of the old file is kept.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    tmp = path.with_name(f".{path.name}.test-tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


@dataclass(frozen=True)
class FileStat:
    """What a write would change: inode, size, mtime (ns) and permission bits."""

    ino: int
    size: int
    mtime_ns: int
    mode: int


def snapshot(root: Path, skip: Sequence[str] = ()) -> dict[str, FileStat]:
    """relpath -> :class:`FileStat` of every regular file under ``root``.

    ``skip``: relpath prefixes left out (e.g. ``.patchq/lock``). Symlinks are not followed.
    """
    root = Path(root)
    out: dict[str, FileStat] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if any(rel.startswith(s) for s in skip):
                continue
            st = os.lstat(full)
            out[rel] = FileStat(st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode & 0o7777)
    return out


def link_copy(src: Path, dst: Path) -> bool:
    """Copy the tree ``src`` to ``dst`` as hard links (like ``cp -al``).

    Returns True when linked; falls back to real copies across filesystems (False).
    """
    linked = True

    def link(s, d):
        nonlocal linked
        try:
            os.link(s, d)
        except OSError:
            linked = False
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link, symlinks=True)
    return linked


def contents(root: Path, relpaths: Iterable[str]) -> dict[str, bytes | None]:
    """relpath -> bytes (None when missing)."""
    out = {}
    for rel in relpaths:
        try:
            out[rel] = (Path(root) / rel).read_bytes()
        except FileNotFoundError:
            out[rel] = None
    return out


# -- definitions -----------------------------------------------------------------


def _find(body: list[ast.stmt], parts: list[str]) -> list[ast.AST]:
    """Definitions named ``parts`` (a qualname split on dots) in ``body``, also inside
    ``if``/``try``/``with`` blocks at each level (conditional definitions)."""
    hits: list[ast.AST] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == parts[0]:
                if len(parts) == 1:
                    hits.append(stmt)
                elif isinstance(stmt, ast.ClassDef):
                    hits += _find(stmt.body, parts[1:])
        elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
            for block in (getattr(stmt, "body", []), getattr(stmt, "orelse", []),
                          getattr(stmt, "finalbody", []),
                          *[h.body for h in getattr(stmt, "handlers", [])]):
                hits += _find(block, parts)
    return hits


def definition_source(text: str, qualname: str) -> str:
    """The exact source of the one definition ``qualname`` in module ``text``.

    From the first comment line directly above it (where patchq's sentinel sits) or its
    first decorator, to its last line; the definition's own indentation is removed from
    every line that has it, so a method's source is valid Python on its own.

    Raises:
        AssertionError: zero or several definitions of that name.
    """
    tree = ast.parse(text)
    hits = _find(tree.body, qualname.split("."))
    assert len(hits) == 1, f"{qualname}: {len(hits)} definitions"
    node = hits[0]
    lines = text.splitlines(keepends=True)
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])  # type: ignore[attr-defined]
    while start > 1 and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    indent = " " * node.col_offset  # type: ignore[attr-defined]
    out = []
    for line in lines[start - 1: node.end_lineno]:  # type: ignore[attr-defined]
        out.append(line[len(indent):] if line.startswith(indent) else line)
    return "".join(out)


_SENTINEL_HASH = re.compile(r"(# patchq:[a-z0-9][a-z0-9-]*:)[0-9a-f]{12}\b")


def mask_sentinel_hashes(text: str) -> str:
    """``# patchq:<id>:<12 hex>`` -> ``# patchq:<id>:<hash>``.

    Golden files store definitions with the patch hash masked: the hash covers the whole
    ``series/<patch>.py`` file, so any edit of it (a docstring) changes every sentinel
    although the patched code is the same. Tests check the hash separately.
    """
    return _SENTINEL_HASH.sub(r"\1<hash>", text)


# -- the CLI ----------------------------------------------------------------------


@dataclass
class CliResult:
    """One CLI run: exit code, output, and the parsed JSON document (None when stdout is
    not JSON)."""

    args: list[str]
    rc: int
    stdout: str
    stderr: str
    json: dict | None

    def __iter__(self):  # rc, out, err, doc = run_cli(...)
        return iter((self.rc, self.stdout, self.stderr, self.json))

    def __repr__(self) -> str:
        return (f"CliResult(args={self.args!r}, rc={self.rc}, stderr={self.stderr[-2000:]!r}, "
                f"stdout={self.stdout[-2000:]!r})")


#: Runs the typer app directly, skipping the stdlib fast path of ``python -m patchq``.
_FULL_PATH = "import sys; sys.argv[0] = 'patchq'; from patchq.cli import main; main()"


def run_cli(*args: str, env: dict | None = None, fast: bool = True, wrap: Sequence[str] = (),
            timeout: float = 300, cwd: Path | str | None = None) -> CliResult:
    """Run ``python -m patchq ARGS`` in a subprocess (cwd: the repository, or ``cwd``).

    Its series is the stack fixture (``$PATCHQ_SERIES``, :mod:`testing.stack`) unless the
    test names one: ``--series`` wins over it, ``env={"PATCHQ_SERIES": ...}`` replaces it
    (``""``: none, to walk up from ``cwd``). So no run reads the series an installed
    distribution provides (this checkout's venv has the Spark stack's).

    Args:
        args: CLI arguments.
        env: extra environment variables (patchq's own variables are cleared first).
        fast: False runs the typer app directly, bypassing :mod:`patchq.fastpath`.
        wrap: a command prefix (e.g. ``setpriv ... --``).
        cwd: the working directory (default: the repository).
    """
    from testing import stack

    full_env = {k: v for k, v in os.environ.items() if k not in PATCHQ_ENV}
    full_env.update({"COLUMNS": "200", "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1",
                     "PATCHQ_SERIES": str(stack.SERIES)})
    full_env.update(env or {})
    entry = ["-m", "patchq"] if fast else ["-c", _FULL_PATH]
    cmd = [*wrap, sys.executable, *entry, *[str(a) for a in args]]
    proc = subprocess.run(cmd, cwd=cwd or REPO, env=full_env, capture_output=True, text=True, timeout=timeout)
    doc = None
    if proc.stdout.lstrip().startswith("{"):
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = None
    return CliResult([str(a) for a in args], proc.returncode, proc.stdout, proc.stderr, doc)
