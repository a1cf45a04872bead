"""The committed diffs under series/diffs/<version>/ are what the series renders now.

Regenerate a stale release with ``patchq diff --release X --write``.
"""

from __future__ import annotations

import pytest

from patchq import series as series_mod
from patchq.authoring import diffstore
from patchq.vllmdist.sources import release_source
from patchq.plan import engine
from support import REPO

VERSIONS = sorted(p.name for p in (REPO / "series" / "diffs").iterdir() if p.is_dir())


def test_the_cached_releases_are_committed():
    assert {"0.15.1", "0.17.1", "0.19.1", "0.23.0", "0.24.0", "0.26.0", "0.28.0", "0.33.0"} <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_committed_diffs_are_current(version):
    loaded = series_mod.load(REPO / "series")
    patches = [loaded.patch(pid) for pid in loaded.all_patch_ids()]
    rendered = diffstore.render(release_source(version), patches)
    dest = diffstore.diffs_dir(loaded.root, version)
    stale = []
    for r in rendered:
        path = dest / f"{r.patch_id}.diff"
        have = path.read_text(encoding="utf-8") if path.is_file() else None
        want = r.text if r.status == engine.OK else None
        if have != want:
            stale.append(f"{r.patch_id} ({'missing' if have is None else 'differs' if want else 'should not exist'})")
    extra = sorted(p.name for p in dest.glob("*.diff") if p.stem not in {r.patch_id for r in rendered})
    stale += [f"{name} (no such patch)" for name in extra]
    assert not stale, f"series/diffs/{version} is stale: {', '.join(stale)}; run `patchq diff --release {version} --write`"
