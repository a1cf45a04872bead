"""patchq's exceptions, and the one table that maps them to exit codes.

Every command catches :class:`PatchqError` at the CLI edge and prints its one-line
message; the exit codes are part of the CLI contract (README, "Exit codes").
"""

from __future__ import annotations

# Exit codes (documented in README.md; stable: CI and scripts read them).
EXIT_OK = 0
EXIT_PATCH_FAILED = 1  # a patch did not resolve, apply or compile; nothing was written
EXIT_USAGE = 2  # bad option, unknown profile or patch id
EXIT_NOT_FOUND = 3  # vLLM (or the given environment / release / tree) not found
EXIT_FOREIGN = 4  # a file was modified by someone else; refused to overwrite it
EXIT_READ_ONLY = 5  # the target is not writable; nothing written
EXIT_STATE = 6  # the state journal is damaged or disagrees with the files
EXIT_DRIFT = 7  # status/check found stale or foreign patches (non-fatal report)


class PatchqError(Exception):
    """Base class: ``str(err)`` is the one-line message, ``exit_code`` the code."""

    exit_code = EXIT_PATCH_FAILED


class UsageError(PatchqError):
    """A bad option value, unknown profile or patch id."""

    exit_code = EXIT_USAGE


class SeriesError(PatchqError):
    """The series or anchors data is malformed (a bug in series/ or anchors/)."""

    exit_code = EXIT_USAGE


class TargetNotFound(PatchqError):
    """No vLLM distribution (or release, or source tree) where one was asked for."""

    exit_code = EXIT_NOT_FOUND


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


class ForeignEditError(PatchqError):
    """A target file differs from both its RECORD hash and patchq's journal."""

    exit_code = EXIT_FOREIGN


class ReadOnlyError(PatchqError):
    """The target site-packages (or a file in it) cannot be written."""

    exit_code = EXIT_READ_ONLY


class StateError(PatchqError):
    """The journal is unreadable, or a recovery could not be completed."""

    exit_code = EXIT_STATE
