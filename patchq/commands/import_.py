"""``patchq import FILE.patch --id NAME [--release VERSION]``: a diff becomes an anchored patch.

:func:`patchq.authoring.importer.build` parses and attributes the diff, :func:`~patchq.authoring.importer.write`
writes ``series/<id>.py`` and ``anchors/<id>.toml``, and :func:`~patchq.authoring.importer.verify`
plans the new patch on the release: when its result is not exactly the diff's, both files
are removed again and the import fails (exit 1), so a written patch always reproduces
its diff.
"""

from __future__ import annotations

from pathlib import Path

from patchq.authoring import importer
from patchq.errors import EXIT_OK, UsageError
from patchq.series import Series

SCHEMA = "patchq.import/1"


def run(series: Series, file: str, patch_id: str, release: str | None = None,
        summary: str | None = None, force: bool = False) -> tuple[dict, int]:
    """Import ``file`` as patch ``patch_id``. Returns (``patchq.import/1`` document, exit code).

    Raises:
        UsageError: unreadable file, bad id, existing patch without --force.
        ImportRefused: the diff cannot become an anchored patch, or the written patch does
            not reproduce it (nothing is left written).
    """
    path = Path(file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc}") from None
    plan = importer.build(text, patch_id, release, source_name=path.name)
    written = importer.write_verified(plan, series, summary, force, path.name)
    doc = {
        "schema": SCHEMA, "patch": patch_id, "file": str(path), "release": plan.release,
        "release_guessed": plan.release_guessed, "written": written, "verified": True,
        "summary": importer.summary_line(plan), "levels": importer.level_counts(plan),
        "hunks": [{"path": h.relpath, "header": h.header, "definitions": h.qualnames,
                   "module_level": h.module_level, "level": h.level} for h in plan.hunks],
        "anchors": [{"id": a.anchor_id, "path": a.relpath, "qualname": a.qualname,
                     "fingerprint": a.fingerprint, "ops": [o["op"] for o in a.ops]} for a in plan.anchors],
        "notes": plan.notes,
    }
    return doc, EXIT_OK

