"""Patches as diffs: the series' one store of expected output, under ``series/diffs/``.

::

    series/diffs/<version>/<patch>.diff     the patch alone rendered on that pristine release
    series/diffs/<patch>.expect.toml        [verdicts] "<version>" = "<check status>"

Each diff is one patch alone, rendered against the pristine release (not stacked on the
patches before it, as quilt would): every file is reviewable and appliable by itself, and
the patches of the series are node-scoped, so they rarely touch the same lines. A diff
is stored only when it is valid twice over: :mod:`unidiff` parses it, and
``git apply --check`` accepts it in the pristine release tree (the extracted wheel, see
:func:`patchq.vllmdist.releases.release_tree`). Paths are relative to site-packages
(``a/vllm/...``), as :mod:`patchq.plan.diffs` renders them.

The expected ``patchq check`` status of the patch alone on each release it was recorded on
sits beside the diffs, one file per patch (so adding a patch adds files and edits none).
:mod:`patchq.testing` reads both; ``patchq test --regen`` writes both, ``patchq diff
--release X --write`` and ``rebase --write`` the diffs.
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
from patchq.sentinels import SENTINEL_RE
from patchq.vllmdist.sources import CodeSource

#: the name of a patch's expected-verdicts file: ``series/diffs/<patch>.expect.toml``
EXPECT_SUFFIX = ".expect.toml"


def store_root(series_root: Path | str) -> Path:
    """``series/diffs/``: the store of a series directory."""
    return Path(series_root) / "diffs"


def diffs_dir(series_root: Path | str, version: str) -> Path:
    """``series/diffs/<version>/``."""
    return store_root(series_root) / version


def diff_path(series_root: Path | str, version: str, patch_id: str) -> Path:
    """``series/diffs/<version>/<patch>.diff``."""
    return diffs_dir(series_root, version) / f"{patch_id}.diff"


def expect_path(series_root: Path | str, patch_id: str) -> Path:
    """``series/diffs/<patch>.expect.toml``: the patch's expected check status per release."""
    return store_root(series_root) / f"{patch_id}{EXPECT_SUFFIX}"


def parse_verdicts(data: bytes | None, where: Path | str = "expect file") -> dict[str, str] | None:
    """The ``[verdicts]`` table (release -> check status) of an expect file's bytes
    (``where``: its path, for messages); None when there is no file.

    Raises:
        SeriesError: the file is not UTF-8 TOML, too large or nested too deep
            (:mod:`patchq.tomlsafe`), or ``[verdicts]`` is not a table of strings; the
            message starts with ``where``.
    """
    from patchq import tomlsafe
    from patchq.errors import SeriesError

    if data is None:
        return None
    table = tomlsafe.parse(data, where).get("verdicts", {})
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise SeriesError(f"{where}: [verdicts] must map release strings to check statuses")
    return dict(table)


def read_verdicts(series_root: Path | str, patch_id: str) -> dict[str, str] | None:
    """The patch's expected verdicts (release -> status), or None when it has no expect file.

    Raises:
        SeriesError: the file is malformed, or not a regular file (named with the problem).
        UnsafeConfig: a walked-up series' file refused by the trust rule.
    """
    from patchq import tomlsafe

    path = expect_path(series_root, patch_id)
    if not os.path.lexists(path):
        return None
    return parse_verdicts(tomlsafe.read_bytes(path), path)


def render_verdicts(patch_id: str, verdicts: dict[str, str]) -> str:
    """The text of ``<patch>.expect.toml`` (releases in version order)."""
    from packaging.version import Version

    lines = [f"# Expected `patchq check` status of patch {patch_id} alone on each pristine vLLM release;",
             f"# where it applies, <release>/{patch_id}.diff beside this file is its rendered diff.",
             f"# Regenerate: patchq test --regen --patch {patch_id}   (or: pytest --patchq-regen)",
             "", "[verdicts]"]
    lines += [f'"{v}" = "{verdicts[v]}"' for v in sorted(verdicts, key=Version)]
    return "\n".join(lines) + "\n"


def stored_releases(series_root: Path | str, patch_id: str) -> list[str]:
    """The releases holding a stored diff of ``patch_id`` (directory names, unsorted)."""
    root = store_root(series_root)
    if not root.is_dir():
        return []
    return [d.name for d in root.iterdir() if d.is_dir() and (d / f"{patch_id}.diff").is_file()]


def mask_hashes(text: str) -> str:
    """``# patchq:<id>:<12 hex>`` -> ``# patchq:<id>:<hash>``: the patch hash covers the
    whole ``series/<patch>.py`` file, so any edit of it (a docstring) changes every
    sentinel although the patched code is the same; stored diffs are compared without it
    (``patchq status`` is what checks hashes)."""
    return SENTINEL_RE.sub(lambda m: f"# patchq:{m.group(1)}:<hash>", text)


def apply_diff(texts: dict[str, str], text: str) -> dict[str, str]:
    """Apply a stored diff to pristine file texts (relpath -> text), exactly (no fuzz, no
    offset): relpath -> patched text for every file the diff names.

    Raises:
        DiffInvalid: the diff does not parse, names a file not in ``texts``, or a hunk's
            context does not match at its line.
    """
    try:
        ps = PatchSet(text)
    except UnidiffParseError as exc:
        raise DiffInvalid(f"not a unified diff: {exc}") from None
    out = {}
    for pf in ps:
        rel = pf.path
        if rel not in texts:
            raise DiffInvalid(f"{rel}: no such file to patch")
        out[rel] = _apply_file(rel, texts[rel], pf)
    return out


def _apply_file(rel: str, text: str, pf) -> str:
    old = text.splitlines(keepends=True)
    new: list[str] = []
    at = 0  # lines of ``old`` consumed
    for hunk in pf:
        start = max(hunk.source_start - 1, 0) if hunk.source_length else hunk.source_start
        if start < at:
            raise DiffInvalid(f"{rel}: hunk at line {hunk.source_start} overlaps the one before")
        new += old[at:start]
        at = start
        last = None
        for line in hunk:
            if line.line_type == "\\":  # "\\ No newline at end of file": the line before ends the file
                if last is not None and last.is_added:
                    new[-1] = new[-1].rstrip("\n")
                continue
            last = line
            if line.is_context or line.is_removed:
                if at >= len(old) or old[at].rstrip("\n") != line.value.rstrip("\n"):
                    raise DiffInvalid(f"{rel}: hunk at line {hunk.source_start} does not match line {at + 1}")
                if line.is_context:
                    new.append(old[at])
                at += 1
            elif line.is_added:
                new.append(line.value)
    return "".join(new + old[at:])


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
