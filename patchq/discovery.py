"""Which series a command uses: ``--series``, ``$PATCHQ_SERIES``, a project config, or an installed one.

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

4. the series an installed distribution provides through the entry-point group
   ``patchq.series`` (:data:`ENTRY_POINT_GROUP`; origin ``bundled``, as the series the
   patchq wheel itself once carried). The entry point names an attribute holding a
   directory, a series directory (``profiles.toml``, anchors beside it) or a series repo
   root (``patchq.toml``)::

       [project.entry-points."patchq.series"]
       stack = "my_stack:SERIES"      # my_stack/__init__.py: SERIES = ".../series"

   Exactly one such distribution is used; several are an error that names them (pass
   ``--series``). patchq ships no series of its own. The entry points are read from the
   ``.dist-info`` (and ``.egg-info``) directories on ``sys.path`` with the standard
   library's ``os`` and file reads (``importlib.metadata`` costs a fast start several
   times over), the first distribution of a name on ``sys.path`` winning, as
   ``importlib.metadata`` does; only the provider's module is imported.

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
#: the entry-point group through which an installed distribution provides a series (step 4)
ENTRY_POINT_GROUP = "patchq.series"

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
        origin: ``--series``, ``PATCHQ_SERIES``, ``config`` or ``bundled`` (an installed
            distribution provides it: :func:`installed`).
        config: the ``patchq.toml`` / ``pyproject.toml`` it was read from, or None.
        goldens: where ``patchq.testing`` keeps expected verdicts and golden definitions.
        distribution: for ``bundled``, the distribution that provides it (``name version``),
            else None.
    """

    __slots__ = ("series_str", "anchors_str", "origin", "config_str", "goldens_str", "distribution")

    def __init__(self, series, anchors, origin: str, config=None, goldens=None,
                 distribution: str | None = None) -> None:
        self.series_str, self.anchors_str = str(series), str(anchors)
        self.origin = origin
        self.config_str = None if config is None else str(config)
        self.goldens_str = None if goldens is None else str(goldens)
        self.distribution = distribution

    series = property(lambda self: _path(self.series_str))
    anchors = property(lambda self: _path(self.anchors_str))
    config = property(lambda self: _path(self.config_str))
    goldens = property(lambda self: _path(self.goldens_str))

    def __repr__(self) -> str:
        return (f"Location({self.series_str!r}, {self.anchors_str!r}, {self.origin!r}, "
                f"{self.config_str!r}, {self.goldens_str!r}, {self.distribution!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def describe(self) -> str:
        """One line for humans: ``series /x/series (from /x/patchq.toml)``
        (:func:`patchq.report.series_text`)."""
        from patchq.report import series_text

        return series_text(self.as_json())

    def as_json(self) -> SeriesRef:
        """The ``series`` field of command documents; ``distribution`` (added) only for a
        series an installed distribution provides."""
        ref: SeriesRef = {"dir": self.series_str, "anchors": self.anchors_str, "from": self.origin,
                          "config": self.config_str}
        if self.distribution is not None:
            ref["distribution"] = self.distribution
        return ref


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
    return Location(loc.series_str, loc.anchors_str, origin, loc.config_str, loc.goldens_str, loc.distribution)


class Provider:
    """One entry point of :data:`ENTRY_POINT_GROUP`: a distribution that provides a series.

    Attributes (str): ``name`` (the entry point's), ``value`` (``module:attribute``),
    ``dist`` and ``version`` (from its ``.dist-info`` directory's name), ``site`` (the
    ``sys.path`` entry holding that directory).
    """

    __slots__ = ("name", "value", "dist", "version", "site")

    def __init__(self, name: str, value: str, dist: str, version: str, site: str) -> None:
        self.name, self.value, self.dist, self.version, self.site = name, value, dist, version, site

    def __repr__(self) -> str:
        return f"Provider({self.name!r}, {self.value!r}, {self.dist!r}, {self.version!r}, {self.site!r})"

    def describe(self) -> str:
        """``patchq-spark 0.1.0`` (the distribution's name as its directory spells it, ``_`` as ``-``)."""
        return f"{self.dist} {self.version}".strip()

    def where(self) -> str:
        """``patchq-spark 0.1.0 (entry point spark = patchq_spark:SERIES)``, for messages."""
        return f"{self.describe()} (entry point {self.name} = {self.value} of group {ENTRY_POINT_GROUP})"


def _group_entries(text: str, group: str) -> list[tuple[str, str]]:
    """``(name, value)`` of every entry of ``[group]`` in an ``entry_points.txt`` (INI, as
    the packaging spec writes it; comments and blank lines skipped)."""
    out: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
        elif inside and "=" in line:
            name, _, value = line.partition("=")
            out.append((name.strip(), value.strip()))
    return out


def _egg_version(info: str) -> str:
    """``Version:`` of an ``.egg-info`` directory's PKG-INFO (a develop install's name has
    none), else ``""``."""
    try:
        with open(os.path.join(info, "PKG-INFO"), encoding="utf-8") as fh:
            for line in fh.read(1 << 16).splitlines():
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip()
    except (OSError, UnicodeDecodeError):
        pass
    return ""


def providers(path: list[str] | None = None) -> list[Provider]:
    """Every entry point of :data:`ENTRY_POINT_GROUP` of the distributions on ``path``
    (default ``sys.path``), in ``sys.path`` order. A distribution found again further on
    (another version shadowed by the first) is skipped, as ``importlib.metadata`` skips it.
    Unreadable directories and files are skipped (never an error)."""
    import sys

    out: list[Provider] = []
    seen: set[str] = set()
    for entry in (sys.path if path is None else path):
        site = entry or "."
        try:
            names = sorted(os.listdir(site))
        except OSError:  # a zip file, a missing directory
            continue
        for dirname in names:
            stem, dot, kind = dirname.rpartition(".")
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            dist, _, rest = stem.partition("-")
            key = dist.lower().replace("-", "_").replace(".", "_")
            if key in seen:
                continue
            seen.add(key)
            try:
                with open(os.path.join(site, dirname, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read(1 << 20)
            except (OSError, UnicodeDecodeError):
                continue
            if f"[{ENTRY_POINT_GROUP}]" not in text:
                continue
            version = rest.split("-")[0] if rest else _egg_version(os.path.join(site, dirname))
            for name, value in _group_entries(text, ENTRY_POINT_GROUP):
                out.append(Provider(name, value, dist.replace("_", "-"), version, os.path.realpath(site)))
    return out


def resolve(provider: Provider) -> Location:
    """The :class:`Location` a provider names: its entry point's attribute (imported) holds a
    series directory (``profiles.toml``; anchors beside it) or a series repo root
    (``patchq.toml``). Origin ``bundled``, ``distribution`` set.

    Raises:
        SeriesError: the module or attribute cannot be had, the attribute is not a path, or
            the path holds no series (the message names the distribution and its entry point).
    """
    import importlib

    module, _, attr = provider.value.split("[")[0].strip().partition(":")
    try:
        obj = importlib.import_module(module.strip())
        for part in attr.strip().split(".") if attr.strip() else ():
            obj = getattr(obj, part)
    except Exception as exc:  # noqa: BLE001 - whatever the provider's import raises is named, not a traceback
        raise SeriesError(f"the series of the installed distribution {provider.where()} cannot be loaded: "
                          f"{type(exc).__name__}: {exc}") from None
    if not isinstance(obj, (str, os.PathLike)):
        raise SeriesError(f"the installed distribution {provider.where()} names {type(obj).__name__} "
                          f"{obj!r}, not a directory path")
    path = os.path.realpath(os.fspath(obj))
    who = provider.describe()
    if os.path.isfile(os.path.join(path, "profiles.toml")):
        parent = os.path.dirname(path)
        return Location(path, os.path.join(parent, "anchors"), "bundled", None, os.path.join(parent, "goldens"), who)
    if os.path.isfile(os.path.join(path, CONFIG_NAME)):
        config = os.path.join(path, CONFIG_NAME)
        loc = from_config(config, _read_config(config) or {})
        return Location(loc.series_str, loc.anchors_str, "bundled", config, loc.goldens_str, who)
    raise SeriesError(f"the installed distribution {provider.where()} names {path}, which holds neither "
                      f"profiles.toml nor {CONFIG_NAME}")


def installed(path: list[str] | None = None) -> Location | None:
    """The series an installed distribution provides (step 4 of the module docstring), or
    None when none does.

    Raises:
        SeriesError: several distributions provide one (each named; pass ``--series``), or
            the one there is cannot be loaded (:func:`resolve`).
    """
    found = providers(path)
    if not found:
        return None
    if len(found) > 1:
        names = "; ".join(p.where() for p in found)
        raise SeriesError(f"{len(found)} installed distributions provide a patch series ({names}): "
                          f"pass --series DIR or set $PATCHQ_SERIES to choose one")
    return resolve(found[0])


#: real path of each installed series repo -> its distribution, for :func:`installed_roots`
_INSTALLED: dict[str, str] | None = None


def installed_roots() -> dict[str, str]:
    """Directories of the series that installed distributions carry inside their install
    (a wheel's files, which the next install replaces; an editable install's series lives
    in its checkout and is not one): real path of the series repo (the series directory's
    parent) -> ``name version``. Providers that cannot be loaded are left out. Read once
    per process."""
    global _INSTALLED
    if _INSTALLED is None:
        roots: dict[str, str] = {}
        for provider in providers():
            try:
                loc = resolve(provider)
            except SeriesError:
                continue
            repo = os.path.dirname(loc.series_str)
            if _inside(repo, provider.site):
                roots[repo] = provider.describe()
        _INSTALLED = roots
    return _INSTALLED


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
        shipped = None if found else installed()
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
                f"pyproject.toml [tool.patchq] in {here} or its parents, and no installed distribution "
                f"provides one (entry-point group {ENTRY_POINT_GROUP}); run `patchq init DIR` or pass --series DIR")
    if os.environ.get("PATCHQ_ANCHORS"):
        loc = Location(loc.series_str, os.path.realpath(os.environ["PATCHQ_ANCHORS"]), loc.origin,
                       loc.config_str, loc.goldens_str, loc.distribution)
    _ANCHORS[loc.series_str] = loc.anchors_str
    repo = os.path.dirname(loc.series_str)
    if os.path.lexists(os.path.join(repo, ".patchq-txn")) and (loc.origin != "bundled"
                                                               or repo not in installed_roots()):
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
