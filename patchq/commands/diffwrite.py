"""``patchq diff --release VERSION --write``: store each patch's diff under ``series/diffs/VERSION/``.

Every patch of the profile (or of the whole series) is planned alone on the pristine
release and its diff validated and written by :mod:`patchq.authoring.diffstore`. Exit 1 when a
patch fails on that release (its file is left as it was).
"""

from __future__ import annotations

from dataclasses import asdict

from patchq.authoring import diffstore
from patchq.errors import EXIT_OK, EXIT_PATCH_FAILED
from patchq.plan import engine
from patchq.series import Series
from patchq.vllmdist import releases
from patchq.vllmdist.sources import release_source

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from patchq.documents import DiffWriteDoc

SCHEMA = "patchq.diff-write/1"


def run(series: Series, version: str, profile: str | None = None) -> tuple[DiffWriteDoc, int]:
    """Render, validate and store the diffs. Returns (document, exit code).

    Raises:
        TargetNotFound: the release cannot be had.
        DiffInvalid: a rendered diff fails validation.
    """
    source = release_source(version)
    ids = list(series.profile(profile).patches) if profile else series.all_patch_ids()
    dest = diffstore.diffs_dir(series.root, releases.version_key(version))
    from patchq.authoring import repowrite

    todo = diffstore.render(source, [series.patch(i) for i in ids])
    with repowrite.series_transaction(series, f"patchq diff --release {version} --write") as txn:  # all or none
        rendered = diffstore.write(todo, source, dest, txn)
    failed = [r for r in rendered if r.status == engine.FAILED]
    doc: DiffWriteDoc = {"schema": SCHEMA, "vllm": str(source.version), "dir": str(dest), "profile": profile,
           "ok": not failed, "patches": [asdict(r) for r in rendered]}
    return doc, (EXIT_PATCH_FAILED if failed else EXIT_OK)

