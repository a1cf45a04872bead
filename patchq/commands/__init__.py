"""One module per CLI verb; each returns a typed document (:mod:`patchq.documents`) and an exit code."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path imports this package)
if TYPE_CHECKING:
    from packaging.version import Version


def version_arg(text: str, option: str) -> Version:
    """``text`` as a PEP 440 version, for an option such as ``--to``.

    Raises:
        UsageError: it is not a version (exit 2: the user's input, not a missing release).
    """
    from packaging.version import InvalidVersion, Version

    from patchq.errors import UsageError

    try:
        return Version(text.strip())
    except InvalidVersion:
        raise UsageError(f"{option} {text!r}: not a valid version (e.g. 0.23.0)") from None
