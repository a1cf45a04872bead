"""Regenerate the golden files: the exact patched source of every anchored definition.

    python tests/golden/regen.py [VERSION ...]      (default: 0.23.0)

For each patch of the series and each VERSION, plans that patch ALONE on the release's
files (:func:`patchq.vllmdist.sources.release_source`: the wheel's files, cached) and writes, for
every qualname its anchors resolved to, the definition's source as it is after the
patch (sentinel comment included with its patch hash masked as ``<hash>``, own
indentation removed) to
``tests/golden/<VERSION>/<patch>/<qualname>.py``. Stale golden files of that version
are removed. Patches that do not edit VERSION (not applicable, upstreamed) get none.

Review every changed golden file against ``docs/patches.md`` before
committing it: the tests take these files as the truth.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: support.py

from support import definition_source, golden_path, mask_sentinel_hashes  # noqa: E402


def regen(version: str) -> list[Path]:
    """Write the golden files of ``version``; returns the paths written (sorted)."""
    from patchq import series
    from patchq.vllmdist import sources
    from patchq.plan import engine

    src = sources.release_source(version)
    s = series.load()
    written: list[Path] = []
    for pid in s.all_patch_ids():
        plan = engine.plan(src, [s.patch(pid)])
        (result,) = plan.results
        if result.status == engine.FAILED:
            raise SystemExit(f"{pid} fails on {version}: {result.reason}")
        if result.status != engine.OK:
            continue
        for qualname, relpath in sorted({(a.qualname, a.relpath) for a in result.anchors}):
            path = golden_path(version, pid, qualname)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(mask_sentinel_hashes(definition_source(plan.patched[relpath], qualname)),
                            encoding="utf-8")
            written.append(path)
    root = HERE / version
    for old in root.rglob("*.py"):
        if old not in written:
            old.unlink()
            print(f"removed {old.relative_to(HERE)}")
    return sorted(written)


def main(argv: list[str]) -> None:
    for version in argv or ["0.23.0"]:
        for path in regen(version):
            print(path.relative_to(HERE))


if __name__ == "__main__":
    main(sys.argv[1:])
