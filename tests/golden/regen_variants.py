"""Regenerate the golden files of the per-release variants (every version but 0.23.0).

    python tests/golden/regen_variants.py [VERSION ...]   (default: GOLDEN_VERSIONS)

For each patch of the series and each VERSION, plans that patch ALONE on the release's
files (:func:`patchq.vllmdist.sources.release_source`) and writes, for every qualname its
anchors resolved to, the definition's source after the patch (sentinel hash masked as
``<hash>``, own indentation removed) to ``tests/golden/<VERSION>/<patch>/<qualname>.py``
-- the layout of ``tests/golden/regen.py``, which owns ``tests/golden/0.23.0/``. Stale
golden files of VERSION are removed. Patches that do not edit VERSION (absent,
upstreamed, not applicable) get none.

GOLDEN_VERSIONS holds the first and last verified release of every variant range of the
series (0.23.0, the last release of the ``<0.24`` variants, is covered by regen.py).
Review every changed file against ``docs/drift.md`` before committing
it: ``tests/test_variants.py`` takes these files as the truth.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: support.py

from support import definition_source, golden_path, mask_sentinel_hashes  # noqa: E402

#: First/last verified release of each variant range (see each series/<patch>.py):
#: 0.15.1 / 0.16.0 first/last 1-call int8 and first of every old-shape variant; 0.17.0
#: first 2-call int8; 0.19.1 last without prefix-align and with the 1-arg base hook;
#: 0.20.0 first prefix-align edit, 4 INC backends; 0.24.0 / 0.25.1 first/last re-indented
#: unify, first inc/ package, last 2-call int8 and old FLA path; 0.26.0 first moved FLA,
#: Mamba branch, _apply_head; 0.27.1 last prefix-align edit; 0.32.0 last unify in
#: kv_cache_utils; 0.33.0 first kv_cache_planning and last of all.
GOLDEN_VERSIONS = ("0.15.1", "0.16.0", "0.17.0", "0.19.1", "0.20.0", "0.24.0", "0.25.1",
                   "0.26.0", "0.27.1", "0.32.0", "0.33.0")


def expected(version: str) -> dict[Path, str]:
    """golden path -> expected text for every definition the series edits on ``version``.

    Raises:
        SystemExit: a patch fails on ``version``.
    """
    from patchq import series
    from patchq.vllmdist import sources
    from patchq.plan import engine

    src = sources.release_source(version)
    s = series.load()
    out: dict[Path, str] = {}
    for pid in s.all_patch_ids():
        plan = engine.plan(src, [s.patch(pid)])
        (result,) = plan.results
        if result.status == engine.FAILED:
            raise SystemExit(f"{pid} fails on {version}: {result.reason}")
        if result.status != engine.OK:
            continue
        for qualname, relpath in sorted({(a.qualname, a.relpath) for a in result.anchors}):
            out[golden_path(version, pid, qualname)] = mask_sentinel_hashes(
                definition_source(plan.patched[relpath], qualname))
    return out


def regen(version: str) -> list[Path]:
    """Write the golden files of ``version``; returns the paths written (sorted)."""
    if version == "0.23.0":
        raise SystemExit("tests/golden/0.23.0 belongs to tests/golden/regen.py")
    files = expected(version)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for old in (HERE / version).rglob("*.py"):
        if old not in files:
            old.unlink()
            print(f"removed {old.relative_to(HERE)}")
    return sorted(files)


def main(argv: list[str]) -> None:
    for version in argv or GOLDEN_VERSIONS:
        for path in regen(version):
            print(path.relative_to(HERE))


if __name__ == "__main__":
    main(sys.argv[1:])
