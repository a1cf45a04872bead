"""patchq's exceptions, and the one table that maps them to exit codes.

Every exception patchq raises on purpose is a :class:`PatchqError` defined here; its
``exit_code`` is part of the CLI contract (docs/exit-codes.md). The one place that
turns them into a line on stderr (or the JSON error document) and an exit status is
:func:`patchq.edge.guard`. Standard library only: the fast path imports this module.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path imports this)
if TYPE_CHECKING:  # the planner imports libcst; this module stays stdlib-only
    from patchq.documents import ApplyDoc
    from patchq.plan.engine import Plan

# Exit codes (documented in docs/exit-codes.md; stable: CI and scripts read them).
EXIT_OK = 0
EXIT_PATCH_FAILED = 1  # a patch did not resolve, apply or compile; nothing was written
EXIT_USAGE = 2  # bad option, unknown profile or patch id, malformed series data
EXIT_NOT_FOUND = 3  # vLLM (or the given environment / release / tree) not found
EXIT_FOREIGN = 4  # a file was modified by someone else; refused to overwrite it
EXIT_READ_ONLY = 5  # the target is not writable; nothing written
EXIT_STATE = 6  # the state journal is damaged or disagrees with the files
EXIT_DRIFT = 7  # status found stale or foreign patches, modified files (a report, not a failure)
EXIT_INTERNAL = 70  # a bug in patchq (sysexits EX_SOFTWARE); the traceback is in a log file
EXIT_CANNOT_RUN = 126  # `patchq run`: the command was found but cannot be executed (shell convention)
EXIT_COMMAND_NOT_FOUND = 127  # `patchq run`: the command was not found (shell convention)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, shell convention)
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (128 + SIGPIPE, as `yes | head -1`)


class PatchqError(Exception):
    """Base class: ``str(err)`` is the one-line message, ``exit_code`` the code."""

    exit_code = EXIT_PATCH_FAILED


class UsageError(PatchqError):
    """A bad option value, unknown profile or patch id."""

    exit_code = EXIT_USAGE


def known_names(known) -> str:
    """``a, b`` of ``known`` (names), or what an empty list means for a profile list:
    ``none, profiles.toml defines no profile``."""
    return ", ".join(known) or "none, profiles.toml defines no profile"


def did_you_mean(name: str, known) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``known`` (difflib's ratio >= 0.6, the
    stdlib rule, cheap enough for the fast path), else ``""``."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class SeriesError(PatchqError):
    """The series or anchors data is malformed (a bug in series/ or anchors/).

    The message starts with the file (and ``:line`` where known)."""

    exit_code = EXIT_USAGE


class TargetNotFound(PatchqError):
    """No vLLM distribution (or release, or source tree) where one was asked for."""

    exit_code = EXIT_NOT_FOUND


class ReleaseError(TargetNotFound):
    """A release list, wheel or tree could not be produced (:mod:`patchq.vllmdist.releases`;
    importable from there too)."""


class NotProbeable(TargetNotFound):
    """No CPU environment that imports the release can be had here (``patchq probe``): no pip,
    no CPU build of torch on the configured indexes, the release's requirements do not
    resolve. The message says why; a cell it leaves is *not probeable*, never passed."""


class AnchorError(PatchqError):
    """An anchor resolved to zero definitions/nodes, or to more than expected.

    The message names what was searched and what was found instead: never a guess.
    ``kind`` says which step failed (``patchq check`` reports it as the status):
    ``"gone"`` when the definition is not found anywhere; ``"conflict"`` when it is found
    but the pattern count is wrong, it is ambiguous, or the transform fails.
    ``anchor`` is the anchor id when known.
    """

    def __init__(self, message: str, kind: str = "conflict", anchor: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.anchor = anchor


class TransformError(PatchqError):
    """A patch's transform raised, or its result does not compile."""


class PlanFailed(PatchqError):
    """One or more patches failed in the plan; nothing was written (``plan`` holds the
    :class:`patchq.plan.engine.Plan`; importable from :mod:`patchq.env.converge` too)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        names = ", ".join(f"{r.patch_id} ({r.reason})" for r in plan.failures())
        super().__init__(f"{len(plan.failures())} patch(es) failed, nothing written: {names}")


class RunPlanFailed(PatchqError):
    """``patchq run``: a patch did not apply; nothing was run. ``doc`` is the
    ``patchq.apply/1`` report and ``text`` its rendering (importable from
    :mod:`patchq.commands.run` too)."""

    def __init__(self, exc: PatchqError, doc: ApplyDoc, text: str) -> None:
        super().__init__(str(exc))
        self.exit_code = exc.exit_code
        self.doc, self.text = doc, text


class DiffInvalid(PatchqError):
    """A rendered diff failed validation (unidiff or ``git apply --check``; importable
    from :mod:`patchq.authoring.diffstore` too)."""


class ImportRefused(PatchqError):
    """The diff cannot become an anchored patch (the message says which hunk and why;
    importable from :mod:`patchq.authoring.importer` too)."""


class SourceError(PatchqError):
    """A target file is not a source patchq can patch byte-exactly: not UTF-8 (a latin-1
    coding line), a UTF-8 BOM, or CR-only line ends (:meth:`patchq.vllmdist.sources.CodeSource.read_text`).
    Exit 1: the patch cannot apply there; nothing is written."""


class ForeignEditError(PatchqError):
    """A target file differs from both its RECORD hash and patchq's journal."""

    exit_code = EXIT_FOREIGN


class ReadOnlyError(PatchqError):
    """The target site-packages (or a file in it) cannot be written."""

    exit_code = EXIT_READ_ONLY


class StateError(PatchqError):
    """The journal is unreadable, or a recovery could not be completed."""

    exit_code = EXIT_STATE


class OtherSeriesError(PatchqError):
    """``apply`` would revert patches another series applied (the journal names that series):
    refused unless ``--replace``. Exit 7, the code ``status`` gives the same environment seen
    from this series (patches not in the series)."""

    exit_code = EXIT_DRIFT


class RepoWriteError(ReadOnlyError):
    """A write into the series repo (or the cache) was refused by the environment: a full
    disk or quota (ENOSPC, EDQUOT), a read-only filesystem (EROFS), a permission (EACCES,
    EPERM), or something other than a regular file in the way. The file keeps its old
    bytes (:mod:`patchq.authoring.repowrite`). Exit 5, as for site-packages."""


class CacheError(TargetNotFound):
    """A file in patchq's cache does not match the hash it must have (a release file
    against the wheel's RECORD, a whole wheel against the index's sha256, a cache
    marker or index entry against its checksum) and the release could not be fetched
    again. The message names the file and ``patchq cache clean``. Exit 3, as for a
    release that cannot be had."""


class UnsafeConfig(SeriesError):
    """A project config found by walking up from the working directory is not safe to
    use: it, its directory or a directory it names is owned by another user or writable
    by others (:mod:`patchq.discovery`, after git's ``safe.directory``). Exit 2."""


#: The errno classes of an ``OSError`` the environment caused, with what each says: patchq
#: reports such an error as one line naming the file and the errno, exit 5
#: (:data:`EXIT_READ_ONLY`), wherever it surfaces (:func:`patchq.edge.environment_error`,
#: :func:`patchq.authoring.repowrite.env_error`). The one table; docs/exit-codes.md lists it.
ENV_ERRNOS: dict[str, str] = {
    **dict.fromkeys(("ENOSPC", "EDQUOT", "EFBIG"), "the disk, a quota or a file size limit is full"),
    **dict.fromkeys(("EROFS", "EACCES", "EPERM"), "a read-only filesystem or a permission refused it"),
    **dict.fromkeys(("ENOENT", "ENOTDIR", "EISDIR", "ELOOP", "ENAMETOOLONG", "EEXIST", "ENOTEMPTY", "EMLINK",
                     "EXDEV"), "the path is missing, of another kind, too long, or in the way"),
    "EIO": "the device failed",
}


def errno_name(exc: BaseException) -> str:
    """The errno name of an ``OSError`` (``"ENOSPC"``), or ``""``."""
    import errno

    code = getattr(exc, "errno", None)
    return errno.errorcode.get(code, "") if isinstance(code, int) else ""


def exec_failure(program: str, exc: OSError) -> tuple[str, int]:
    """(one-line message, exit code) of an ``exec`` of ``program`` that failed with ``exc``
    (``patchq run``'s COMMAND, ``patchq serve``'s vllm), as a shell answers: 127 when it is
    not found (ENOENT, ENOTDIR), else 126 with the true reason: not executable (EACCES,
    ENOEXEC), or an argument list and environment too long for the kernel (E2BIG: a 10 MB
    argument was reported as "not found")."""
    import errno

    name = errno.errorcode.get(exc.errno or 0, "")
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return f"cannot run {program}: {exc.strerror}", EXIT_COMMAND_NOT_FOUND
    if exc.errno == errno.E2BIG:
        return (f"cannot run {program}: {exc.strerror} ({name}): its arguments and environment exceed what the "
                f"kernel passes to a program (one argument at most 128 KiB on Linux)"), EXIT_CANNOT_RUN
    return f"cannot run {program}: {exc.strerror or exc}" + (f" ({name})" if name else ""), EXIT_CANNOT_RUN


class CacheRefused(UsageError):
    """patchq's cache directory cannot be used (:func:`patchq.vllmdist.cache.check_root`): it
    is not a directory (``$PATCHQ_CACHE_DIR`` naming a regular file), it is owned by another
    user or writable by others, it holds entries patchq does not make and no marker of
    patchq's (``PATCHQ_CACHE_DIR=.`` in a repo), or ``cache clean``/``prune`` found something
    foreign where they would remove. The message names the directory and what is wrong. Exit 2."""


#: Module-name prefix of loaded series files (:meth:`patchq.series.Series.patch`).
_SERIES_MODULE = "patchq_series_"


def series_error(exc: BaseException) -> SeriesError | None:
    """A :class:`SeriesError` naming the series file (and line) ``exc`` came from, or None
    when it did not come from a series file.

    A series file runs as module ``patchq_series_<name>``: an exception whose innermost
    series frame is there is the series' fault (it raised on import, or a transform
    raised). A syntax error carries its file; it is the series' when the import was
    made by the series loader (:mod:`patchq.series`).
    """
    tb = exc.__traceback__
    hit = None
    loader = False
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__", "").startswith(_SERIES_MODULE):
            hit = (frame.f_code.co_filename, tb.tb_lineno)
        elif frame.f_globals.get("__name__") == "patchq.series":
            loader = True
        tb = tb.tb_next
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename and (loader or hit):
        line = f":{exc.lineno}" if exc.lineno else ""
        return SeriesError(f"{exc.filename}{line}: {type(exc).__name__}: {exc.msg}")
    if hit is not None:
        return SeriesError(f"{hit[0]}:{hit[1]}: {what}")
    return None
