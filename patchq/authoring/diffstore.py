"""Patches as diffs: ``series/diffs/<version>/<patch>.diff``, rendered, validated, committed.

Each file is one patch alone, rendered against the pristine release (not stacked on the
patches before it, as quilt would): every file is reviewable and appliable by itself, and
the patches of the series are node-scoped, so they rarely touch the same lines. A diff
is stored only when it is valid twice over: :mod:`unidiff` parses it, and
``git apply --check`` accepts it in the pristine release tree (the extracted wheel, see
:func:`patchq.vllmdist.releases.release_tree`). Paths are relative to site-packages
(``a/vllm/...``), as :mod:`patchq.plan.diffs` renders them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from patchq.errors import DiffInvalid, PatchqError  # noqa: F401 (DiffInvalid: importable here)
from patchq.model import Patch
from patchq.plan import diffs, engine
from patchq.vllmdist.sources import CodeSource


def diffs_dir(series_root: Path, version: str) -> Path:
    """``series/diffs/<version>/``."""
    return Path(series_root) / "diffs" / version


def validate(text: str, tree: Path) -> dict:
    """Check a diff with unidiff and with ``git apply --check`` in ``tree``.

    Returns:
        ``{"files": n, "hunks": n, "added": n, "removed": n}``.
    Raises:
        DiffInvalid: unidiff cannot parse it, or git apply refuses it (git's message).
    """
    try:
        ps = PatchSet(text)
    except UnidiffParseError as exc:
        raise DiffInvalid(f"not a unified diff: {exc}") from None
    ok, message = apply_check(text, tree)
    if not ok:
        raise DiffInvalid(f"git apply --check in {tree}: {message}")
    return {"files": len(ps), "hunks": sum(len(f) for f in ps),
            "added": ps.added, "removed": ps.removed}


def apply_check(text: str, tree: Path) -> tuple[bool, str]:
    """``git apply --check`` of ``text`` in ``tree``: (ok, git's message).

    ``GIT_CEILING_DIRECTORIES`` keeps git from finding a repository above ``tree``: inside
    one, git apply would silently skip paths outside the current directory.
    """
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(Path(tree).resolve().parent)}
    proc = subprocess.run(["git", "apply", "--check", "-p1", "-"], input=text.encode(),
                          cwd=tree, capture_output=True, env=env)
    return proc.returncode == 0, proc.stderr.decode().strip()


@dataclass
class Rendered:
    """One patch rendered on one release.

    ``status`` is the plan's (``ok``, ``failed``, ``not-applicable``, ``upstreamed``,
    ``absent``); ``text`` is the diff ('' unless ok); ``stats`` from :func:`validate`;
    ``path`` the file written or removed; ``action``: ``wrote``, ``unchanged``,
    ``removed`` or ``""``.
    """

    patch_id: str
    status: str
    reason: str = ""
    text: str = ""
    stats: dict = field(default_factory=dict)
    path: str = ""
    action: str = ""


def render(source: CodeSource, patches: Iterable[Patch]) -> list[Rendered]:
    """Each patch planned alone on ``source`` and rendered as a diff (nothing written)."""
    out = []
    for p in patches:
        plan = engine.plan(source, [p])
        r = plan.results[0]
        text = diffs.unified_all(plan.pristine, plan.patched) if r.status == engine.OK else ""
        out.append(Rendered(p.id, r.status, r.reason, text))
    return out


def write(rendered: list[Rendered], source: CodeSource, dest: Path, txn=None) -> list[Rendered]:
    """Validate and store each ok diff as ``dest/<patch>.diff``; remove the file of a patch
    that has no diff on this release (not-applicable, upstreamed, absent). A failed
    patch's file is left as it is. Every file lands atomically and verified
    (:mod:`patchq.authoring.repowrite`), all of them together when ``txn`` is given.

    Raises:
        DiffInvalid: a diff fails validation (nothing more is written after it; with
            ``txn``, nothing at all).
        RepoWriteError: the environment refused a write.
    """
    from patchq.authoring import repowrite

    for r in rendered:
        path = Path(dest) / f"{r.patch_id}.diff"
        r.path = str(path)
        if r.status == engine.OK and r.text:
            r.stats = validate(r.text, source.root)
            raw = txn.staged(path) if txn is not None else repowrite.read_regular(path)
            if raw is not None and raw == r.text.encode("utf-8"):
                r.action = "unchanged"
                continue
            if txn is not None:
                txn.write(path, r.text)
            else:
                repowrite.write_file(path, r.text)
            r.action = "wrote"
        elif r.status != engine.FAILED and os.path.lexists(path):
            if txn is not None:
                txn.remove(path)
            else:
                repowrite.remove_file(path)
            r.action = "removed"
    return rendered
