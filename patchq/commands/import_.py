"""``patchq import FILE.patch --id NAME [--release VERSION]``: a diff becomes an anchored patch;
``--replacement FILE.py:NAME --replaces vllm.mod:Qualname``: a monkeypatch does
(:mod:`patchq.authoring.monkeypatch`).

:func:`patchq.authoring.importer.build` parses and attributes the diff, :func:`~patchq.authoring.importer.write`
writes ``series/<id>.py`` and ``anchors/<id>.toml``, and :func:`~patchq.authoring.importer.verify`
plans the new patch on the release: when its result is not exactly the diff's, both files
are removed again and the import fails (exit 1), so a written patch always reproduces
its diff.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from patchq.authoring import importer, monkeypatch
from patchq.errors import EXIT_OK, UsageError
from patchq.series import Series

if TYPE_CHECKING:
    from patchq.documents import ImportDoc

SCHEMA = "patchq.import/1"
MAX_ENV = importer.MAX_ENV  # re-exported: the name docs/commands.md gives


def installed_release(text: str) -> str | None:
    """The installed vLLM's version when every hunk of the diff applies exactly to its
    pristine release (the user's own vLLM comes first); else None (no vLLM installed, or
    the diff does not apply there)."""
    from patchq.errors import PatchqError
    from patchq.vllmdist.sources import installed, release_source

    try:
        target = installed(None, None)
        source = release_source(str(target.version))
        files = importer.parse(text, source.exists)
        for fp in files:
            pristine = source.read_text(fp.relpath)
            if pristine is None:
                return None
            importer.apply_exact(pristine, fp)
    except PatchqError:
        return None
    return str(target.version)


def run(series: Series, file: str | None, patch_id: str, release: str | None = None,
        summary: str | None = None, force: bool = False, profile: str = "default",
        replacement: str | None = None, replaces: str | None = None,
        runtime_names: Iterable[str] = ()) -> tuple[ImportDoc, int]:
    """Import ``file`` as patch ``patch_id`` and add it to ``profile``. Returns
    (``patchq.import/1`` document, exit code).

    The release is ``release``, else the installed vLLM's when the diff applies to it
    exactly, else the newest cached release it applies to (``release_from``: ``given`` |
    ``installed`` | ``guessed``). A monkeypatch (``replacement`` rebinding ``replaces``)
    becomes the change it means (:mod:`patchq.authoring.monkeypatch`). ``runtime_names``:
    names the caller declares as provided at run time; any other name the patched code
    reads and its module lacks is refused.

    Raises:
        UsageError: unreadable file, bad id, existing patch without --force.
        ImportRefused: the diff cannot become an anchored patch, or the written patch does
            not reproduce it (nothing is left written).
    """
    from patchq.authoring import scaffold

    if replacement or replaces:  # a monkeypatch: its replacing definition against vLLM's
        if not (replacement and replaces) or file:
            raise UsageError("a monkeypatch import takes --replacement FILE.py:NAME (or module:NAME) and --replaces "
                             "vllm.module:Qualname, and no diff FILE")
        if release is None:
            from patchq.errors import PatchqError
            from patchq.vllmdist.sources import installed

            try:
                release = str(installed(None, None).version)
            except PatchqError:
                raise UsageError("a monkeypatch import needs --release VERSION (no vLLM installed)") from None
        path = Path(replacement.rpartition(":")[0])
        scaffold.check_profile(profile)
        plan, _ = monkeypatch.build(replacement, replaces, release, patch_id, runtime_names)
        return _finish(plan, series, path, summary, force, profile, replacement, replaces, "given")
    if not file:
        raise UsageError("give a diff FILE, or --replacement and --replaces for a monkeypatch")
    path = Path(file)
    text = importer.read_input(path)

    scaffold.check_profile(profile)
    release_from = "given" if release else None
    if release is None:
        release = installed_release(text)
        release_from = "installed" if release else "guessed"
    plan = importer.build(text, patch_id, release, source_name=path.name, runtime_names=runtime_names)
    return _finish(plan, series, path, summary, force, profile, replacement, replaces, release_from)


def _finish(plan: importer.ImportPlan, series: Series, path: Path, summary: str | None, force: bool, profile: str,
            replacement: str | None, replaces: str | None, release_from: str | None) -> tuple[ImportDoc, int]:
    """Write the plan verified, add it to the profile; the ``patchq.import/1`` document."""
    from patchq.authoring import scaffold

    patch_id = plan.patch_id
    written = importer.write_verified(plan, series, summary, force, path.name)
    added = scaffold.add_to_profile(series.root / "profiles.toml", profile, patch_id)
    doc: ImportDoc = {
        "schema": SCHEMA, "patch": patch_id, "file": str(path), "release": plan.release,
        "monkeypatch": {"replacement": replacement, "replaces": replaces} if replacement else None,
        "release_guessed": release_from == "guessed", "release_from": release_from,
        "profile": profile, "added_to_profile": added, "written": written, "verified": True,
        "summary": importer.summary_line(plan), "levels": importer.level_counts(plan),
        "hunks": [{"path": h.relpath, "header": h.header, "definitions": h.qualnames,
                   "module_level": h.module_level, "level": h.level} for h in plan.hunks],
        "anchors": [{"id": a.anchor_id, "path": a.relpath, "qualname": a.qualname,
                     "fingerprint": a.fingerprint, "ops": [o["op"] for o in a.ops]} for a in plan.anchors],
        "notes": plan.notes,
    }
    return doc, EXIT_OK

