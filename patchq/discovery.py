"""Which series a command uses: ``--series``, ``$PATCHQ_SERIES``, a project config, or the bundled one.

Standard library only, and ``os.path`` on the way (the fast path, run at every server
start, calls it; ``pathlib`` and ``tomllib`` load only when a Path is asked for or a
config file is read).

Order, first hit wins:

1. ``--series DIR`` (a series directory holding ``profiles.toml``, or a series repo root
   holding ``patchq.toml``);
2. ``$PATCHQ_SERIES`` (the same two forms);
3. a project config found by walking up from the working directory: ``patchq.toml``, or
   ``pyproject.toml`` with a ``[tool.patchq]`` table. Both name ``series`` and ``anchors``
   directories (and optionally ``goldens``), relative to the config file::

       series = "series"      # default "series"
       anchors = "anchors"    # default "anchors"
       goldens = "tests/goldens"   # layout-1 goldens of an earlier patchq; default "<series>/../goldens"

4. the bundled series: the Spark series shipped inside the patchq wheel
   (``patchq/_bundled/``), or the checkout's ``series/`` for an editable install.

The anchors directory is the config's ``anchors``, else ``anchors/`` beside the series
directory; ``$PATCHQ_ANCHORS`` overrides both.

A config found by walking up (3.) runs code: its series' patch modules are imported. So,
as git's ``safe.directory`` since CVE-2022-24765, it is used only when the config file,
its directory and the ``series``/``anchors``/``goldens`` directories it names are owned
by the current user or root and not writable by others (``o+w``); otherwise the command
stops with a one-line :class:`~patchq.errors.UnsafeConfig` (exit 2) that names the
owner and says how to opt in: ``--series DIR`` or ``$PATCHQ_SERIES`` (an explicit
choice), or ``PATCHQ_SAFE_DIRECTORIES`` (directories, ``os.pathsep``-separated, or ``*``)
listing the config's directory. Whatever the origin, the paths a config names must
resolve inside the config's directory (``series = "../x"`` or a symlink out of it is a
:class:`~patchq.errors.SeriesError`); the ``--series``/``$PATCHQ_SERIES``/``$PATCHQ_ANCHORS``
paths themselves are the user's choice.

An interrupted multi-file change of the series (``<repo>/.patchq-txn/``, see
:mod:`patchq.authoring.repowrite`) is rolled back here, before anything reads the series.
"""

from __future__ import annotations

import os

from patchq import trust
from patchq.errors import SeriesError, UnsafeConfig
from patchq.tomlsafe import file_problem  # noqa: F401 - the trust rule's check of a series file

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from patchq.documents import SeriesRef

CONFIG_NAME = "patchq.toml"
#: Directories whose walked-up config is trusted whoever owns it (``os.pathsep`` list, or ``*``).
SAFE_ENV = trust.SAFE_ENV
#: The rule, kept in :mod:`patchq.trust` (patchq's cache uses it too); named here for callers.
opted_in, stat_problem, ownership_problem = trust.opted_in, trust.stat_problem, trust.ownership_problem
_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
#: where the wheel carries the Spark series (pyproject.toml maps series/ and anchors/ there)
BUNDLED_ROOT = os.path.join(_PACKAGE_DIR, "_bundled")
#: the source checkout (editable installs read the series from here)
CHECKOUT_ROOT = os.path.dirname(_PACKAGE_DIR)

#: series dir -> anchors dir (strings), for every location found in this process (see :func:`anchors_for`)
_ANCHORS: dict[str, str] = {}


def _path(value):
    if value is None:
        return None
    from pathlib import Path

    return Path(value)


def _real(*parts: str) -> str:
    return os.path.realpath(os.path.join(*parts))


class Location:
    """Where the series came from. Attributes are :class:`pathlib.Path` (``*_str``: the same as str).

    Attributes:
        series: the directory holding ``profiles.toml`` and the patch modules.
        anchors: the directory holding ``<patch>.toml`` anchor files.
        origin: ``--series``, ``PATCHQ_SERIES``, ``config`` or ``bundled``.
        config: the ``patchq.toml`` / ``pyproject.toml`` it was read from, or None.
        goldens: where ``patchq.testing`` keeps expected verdicts and golden definitions.
    """

    __slots__ = ("series_str", "anchors_str", "origin", "config_str", "goldens_str")

    def __init__(self, series, anchors, origin: str, config=None, goldens=None) -> None:
        self.series_str, self.anchors_str = str(series), str(anchors)
        self.origin = origin
        self.config_str = None if config is None else str(config)
        self.goldens_str = None if goldens is None else str(goldens)

    series = property(lambda self: _path(self.series_str))
    anchors = property(lambda self: _path(self.anchors_str))
    config = property(lambda self: _path(self.config_str))
    goldens = property(lambda self: _path(self.goldens_str))

    def __repr__(self) -> str:
        return (f"Location({self.series_str!r}, {self.anchors_str!r}, {self.origin!r}, "
                f"{self.config_str!r}, {self.goldens_str!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def describe(self) -> str:
        """One line for humans: ``series /x/series (from /x/patchq.toml)``
        (:func:`patchq.report.series_text`)."""
        from patchq.report import series_text

        return series_text(self.as_json())

    def as_json(self) -> SeriesRef:
        """The ``series`` field of command documents."""
        return {"dir": self.series_str, "anchors": self.anchors_str, "from": self.origin,
                "config": self.config_str}


def _read_config(path: str) -> dict | None:
    """The patchq table of ``path`` (``patchq.toml``: the whole file; ``pyproject.toml``:
    ``[tool.patchq]``), or None when a pyproject has no such table.

    Raises:
        SeriesError: not a regular file, too large, not UTF-8 or TOML, nested too deep
            (:mod:`patchq.tomlsafe`; the message names the file).
    """
    from patchq import tomlsafe  # imported here: most starts find no config file at all

    data = tomlsafe.read_file(path)
    if os.path.basename(path) == CONFIG_NAME:
        return data["patchq"] if isinstance(data.get("patchq"), dict) else data
    tool = data.get("tool", {})
    table = tool.get("patchq") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


def find_config(start=None) -> tuple | None:
    """The nearest project config at or above ``start`` (default: the working directory):
    (its Path, its patchq table), or None."""
    here = os.path.realpath(str(start) if start is not None else os.getcwd())
    while True:
        for name in (CONFIG_NAME, "pyproject.toml"):
            path = os.path.join(here, name)
            if os.path.isfile(path):
                table = _read_config(path)
                if table is not None:
                    return _path(path), table
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _inside(path: str, base: str) -> bool:
    """True when the real ``path`` is ``base`` or below it (both real paths)."""
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def from_config(path, table: dict) -> Location:
    """The :class:`Location` a config names. Raises SeriesError when its series is missing
    or a directory it names resolves outside the config's directory."""
    path = str(path)
    base = os.path.realpath(os.path.dirname(path))
    for key in ("series", "anchors", "goldens"):
        if key in table and not isinstance(table[key], str):
            raise SeriesError(f"{path}: {key} must be a directory path (a string), not {table[key]!r}")
    named = {key: _real(base, table.get(key, key)) for key in ("series", "anchors")}
    if "goldens" in table:
        named["goldens"] = _real(base, table["goldens"])
    for key, real in named.items():
        if not _inside(real, base):
            raise SeriesError(f"{path}: {key} = {table.get(key, key)!r} resolves to {real}, outside {base}; "
                              f"a series repo's directories stay inside it")
    series = named["series"]
    profiles = os.path.join(series, "profiles.toml")
    if os.path.lexists(profiles) and not os.path.isfile(profiles):
        raise SeriesError(f"{profiles}: not a regular file (a directory, FIFO or device is in its place)")
    if not os.path.isfile(profiles):
        raise SeriesError(f"{path} names series directory {series}, which has no profiles.toml")
    goldens = named.get("goldens") or os.path.join(os.path.dirname(series), "goldens")
    return Location(series, named["anchors"], "config", path, goldens)


def check_trusted(loc: Location, cwd=None) -> None:
    """Refuse a walked-up config that another user could have planted or can change
    (module docstring). ``cwd``: where the walk started (default: the working directory),
    for the message. Raises UnsafeConfig (exit 2) with the way to opt in."""
    config = loc.config_str
    if config is None:
        return
    directory = os.path.realpath(os.path.dirname(config))
    if opted_in(directory):
        return
    here = os.path.realpath(str(cwd) if cwd is not None else os.getcwd())
    where = "in the working directory" if directory == here else f"above the working directory {here}"
    for path in (config, directory, loc.series_str, loc.anchors_str, loc.goldens_str):
        problem = ownership_problem(path) if path else None
        if problem:
            raise UnsafeConfig(
                f"refusing the project config {config} found {where}: {problem}. "
                f"patchq would import that series' code (as git's safe.directory, CVE-2022-24765). If you trust "
                f"it, pass --series {directory}, or set {SAFE_ENV}={directory}")


def module_problem(loc: Location | None, path: str) -> str | None:
    """Why the patch module ``path`` of a walked-up series may not be imported, or None
    (:func:`ownership_problem`; only for ``config`` locations not opted in)."""
    if loc is None or loc.origin != "config" or loc.config_str is None:
        return None
    if opted_in(os.path.realpath(os.path.dirname(loc.config_str))):
        return None
    return ownership_problem(path)


def guard(loc: Location) -> None:
    """Hold every file of ``loc``'s repo to the trust rule from now on in this process
    (:func:`patchq.tomlsafe.file_problem`), when ``loc`` was found by walking up and is
    not opted in."""
    if loc.origin != "config" or loc.config_str is None:
        return
    directory = os.path.realpath(os.path.dirname(loc.config_str))
    if not opted_in(directory):
        from patchq import tomlsafe

        tomlsafe.GUARDED[directory] = loc.config_str


def _explicit(value: str, origin: str) -> Location:
    path = os.path.expanduser(value)
    profiles = os.path.join(path, "profiles.toml")
    if os.path.lexists(profiles) and not os.path.isfile(profiles):
        raise SeriesError(f"{profiles}: not a regular file (a directory, FIFO or device is in its place)")
    if os.path.isfile(os.path.join(path, "profiles.toml")):
        series = os.path.realpath(path)
        parent = os.path.dirname(series)
        return Location(series, os.path.join(parent, "anchors"), origin, None, os.path.join(parent, "goldens"))
    if os.path.isfile(os.path.join(path, CONFIG_NAME)):  # a series repo root
        config = os.path.join(os.path.realpath(path), CONFIG_NAME)
        return replace_origin(from_config(config, _read_config(config) or {}), origin)
    what = "--series" if origin == "--series" else "$PATCHQ_SERIES"
    raise SeriesError(f"{what} {value}: no series there (neither profiles.toml nor {CONFIG_NAME})")


def replace_origin(loc: Location, origin: str) -> Location:
    """``loc`` with another origin (the config it came from is kept)."""
    return Location(loc.series_str, loc.anchors_str, origin, loc.config_str, loc.goldens_str)


def bundled() -> Location | None:
    """The series shipped with patchq (wheel data, or the checkout's series/), or None."""
    for root in (BUNDLED_ROOT, CHECKOUT_ROOT):
        root = str(root)
        if os.path.isfile(os.path.join(root, "series", "profiles.toml")):
            series = _real(root, "series")
            return Location(series, _real(root, "anchors"), "bundled", None,
                            os.path.join(os.path.dirname(series), "goldens"))
    return None


def find(explicit=None, cwd=None) -> Location:
    """The series to use (see module docstring).

    Raises:
        SeriesError: the named series does not exist, a config is broken, or nothing was
            found (the message lists what was searched).
    """
    if explicit:
        loc = _explicit(str(explicit), "--series")
    elif os.environ.get("PATCHQ_SERIES"):
        loc = _explicit(os.environ["PATCHQ_SERIES"], "PATCHQ_SERIES")
    else:
        found = find_config(cwd)
        shipped = None if found else bundled()
        if found:
            loc = from_config(*found)
            check_trusted(loc, cwd)
            guard(loc)
        elif shipped is not None:
            loc = shipped
        else:
            here = os.path.realpath(str(cwd) if cwd is not None else os.getcwd())
            raise SeriesError(
                f"no patch series found: no --series, no $PATCHQ_SERIES, no {CONFIG_NAME} or "
                f"pyproject.toml [tool.patchq] in {here} or its parents, and this patchq install "
                f"has no bundled series ({BUNDLED_ROOT}); run `patchq init DIR` or pass --series DIR")
    if os.environ.get("PATCHQ_ANCHORS"):
        loc = Location(loc.series_str, os.path.realpath(os.environ["PATCHQ_ANCHORS"]), loc.origin,
                       loc.config_str, loc.goldens_str)
    _ANCHORS[loc.series_str] = loc.anchors_str
    repo = os.path.dirname(loc.series_str)
    if loc.origin != "bundled" and os.path.lexists(os.path.join(repo, ".patchq-txn")):
        from patchq.authoring import repowrite  # stdlib only; loaded when a change was interrupted

        repowrite.recover(repo, [repo, loc.series_str, loc.anchors_str] + ([loc.goldens_str] if loc.goldens_str
                                                                              else []))
    return loc


def anchors_for(series):
    """The anchors directory (a Path) of ``series``: ``$PATCHQ_ANCHORS``, else what
    :func:`find` found for it in this process, else ``anchors/`` beside it."""
    if os.environ.get("PATCHQ_ANCHORS"):
        return _path(os.path.realpath(os.environ["PATCHQ_ANCHORS"]))
    series = os.path.realpath(str(series))
    return _path(os.path.realpath(_ANCHORS.get(series, os.path.join(os.path.dirname(series), "anchors"))))
