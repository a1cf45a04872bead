"""Which series a command uses: ``--series``, ``$PATCHQ_SERIES``, a project config, or the bundled one.

Standard library only (the fast path, run at every server start, calls it).

Order, first hit wins:

1. ``--series DIR`` (a series directory holding ``profiles.toml``, or a series repo root
   holding ``patchq.toml``);
2. ``$PATCHQ_SERIES`` (the same two forms);
3. a project config found by walking up from the working directory: ``patchq.toml``, or
   ``pyproject.toml`` with a ``[tool.patchq]`` table. Both name ``series`` and ``anchors``
   directories (and optionally ``goldens``), relative to the config file::

       series = "series"      # default "series"
       anchors = "anchors"    # default "anchors"
       goldens = "tests/golden/patches"   # default "<series>/../goldens"

4. the bundled series: the Spark series shipped inside the patchq wheel
   (``patchq/_bundled/``), or the checkout's ``series/`` for an editable install.

The anchors directory is the config's ``anchors``, else ``anchors/`` beside the series
directory; ``$PATCHQ_ANCHORS`` overrides both.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from patchq.errors import SeriesError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAME = "patchq.toml"
_PACKAGE_DIR = Path(__file__).resolve().parent
#: where the wheel carries the Spark series (pyproject.toml maps series/ and anchors/ there)
BUNDLED_ROOT = _PACKAGE_DIR / "_bundled"
#: the source checkout (editable installs read the series from here)
CHECKOUT_ROOT = _PACKAGE_DIR.parent

#: series dir -> anchors dir, for every location found in this process (see :func:`anchors_for`)
_ANCHORS: dict[Path, Path] = {}


@dataclass(frozen=True)
class Location:
    """Where the series came from.

    Attributes:
        series: the directory holding ``profiles.toml`` and the patch modules.
        anchors: the directory holding ``<patch>.toml`` anchor files.
        origin: ``--series``, ``PATCHQ_SERIES``, ``config`` or ``bundled``.
        config: the ``patchq.toml`` / ``pyproject.toml`` it was read from, or None.
        goldens: where ``patchq.testing`` keeps expected verdicts and golden definitions.
    """

    series: Path
    anchors: Path
    origin: str
    config: Path | None = None
    goldens: Path | None = None

    def describe(self) -> str:
        """One line for humans: ``series /x/series (from /x/patchq.toml)``."""
        how = {"--series": "from --series", "PATCHQ_SERIES": "from $PATCHQ_SERIES",
               "bundled": "the bundled Spark series"}.get(self.origin, f"from {self.config}")
        return f"series {self.series} ({how})"

    def as_json(self) -> dict:
        """The ``series`` field of command documents."""
        return {"dir": str(self.series), "anchors": str(self.anchors), "from": self.origin,
                "config": str(self.config) if self.config else None}


def _read_config(path: Path) -> dict | None:
    """The patchq table of ``path`` (``patchq.toml``: the whole file; ``pyproject.toml``:
    ``[tool.patchq]``), or None when a pyproject has no such table. Raises SeriesError."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SeriesError(f"{path}: {exc}") from None
    if path.name == CONFIG_NAME:
        return data.get("patchq", data) if isinstance(data.get("patchq"), dict) else data
    table = data.get("tool", {}).get("patchq")
    return table if isinstance(table, dict) else None


def find_config(start: str | Path | None = None) -> tuple[Path, dict] | None:
    """The nearest project config at or above ``start`` (default: the working directory)."""
    here = Path(start or os.getcwd()).resolve()
    for directory in (here, *here.parents):
        for name in (CONFIG_NAME, "pyproject.toml"):
            path = directory / name
            if path.is_file():
                table = _read_config(path)
                if table is not None:
                    return path, table
    return None


def from_config(path: Path, table: dict) -> Location:
    """The :class:`Location` a config names. Raises SeriesError when its series is missing."""
    base = path.parent
    for key in ("series", "anchors", "goldens"):
        if key in table and not isinstance(table[key], str):
            raise SeriesError(f"{path}: {key} must be a directory path (a string), not {table[key]!r}")
    series = (base / table.get("series", "series")).resolve()
    if not (series / "profiles.toml").is_file():
        raise SeriesError(f"{path} names series directory {series}, which has no profiles.toml")
    anchors = (base / table.get("anchors", "anchors")).resolve()
    goldens = (base / table["goldens"]).resolve() if "goldens" in table else series.parent / "goldens"
    return Location(series, anchors, "config", path, goldens)


def _explicit(value: str, origin: str) -> Location:
    path = Path(value).expanduser()
    if (path / "profiles.toml").is_file():
        series = path.resolve()
        return Location(series, series.parent / "anchors", origin, None, series.parent / "goldens")
    if (path / CONFIG_NAME).is_file():  # a series repo root
        table = _read_config(path / CONFIG_NAME) or {}
        return replace_origin(from_config(path / CONFIG_NAME, table), origin)
    what = "--series" if origin == "--series" else "$PATCHQ_SERIES"
    raise SeriesError(f"{what} {value}: no series there (neither profiles.toml nor {CONFIG_NAME})")


def replace_origin(loc: Location, origin: str) -> Location:
    """``loc`` with another origin (the config it came from is kept)."""
    return Location(loc.series, loc.anchors, origin, loc.config, loc.goldens)


def bundled() -> Location | None:
    """The series shipped with patchq (wheel data, or the checkout's series/), or None."""
    for root in (BUNDLED_ROOT, CHECKOUT_ROOT):
        if (root / "series" / "profiles.toml").is_file():
            return Location((root / "series").resolve(), (root / "anchors").resolve(), "bundled",
                            None, (root / "series").resolve().parent / "goldens")
    return None


def find(explicit: str | Path | None = None, cwd: str | Path | None = None) -> Location:
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
        loc = from_config(*found) if found else bundled()
        if loc is None:
            here = Path(cwd or os.getcwd()).resolve()
            raise SeriesError(
                f"no patch series found: no --series, no $PATCHQ_SERIES, no {CONFIG_NAME} or "
                f"pyproject.toml [tool.patchq] in {here} or its parents, and this patchq install "
                f"has no bundled series ({BUNDLED_ROOT}); run `patchq init DIR` or pass --series DIR")
    if os.environ.get("PATCHQ_ANCHORS"):
        loc = Location(loc.series, Path(os.environ["PATCHQ_ANCHORS"]).resolve(), loc.origin, loc.config, loc.goldens)
    _ANCHORS[loc.series] = loc.anchors
    return loc


def anchors_for(series: str | Path) -> Path:
    """The anchors directory of ``series``: ``$PATCHQ_ANCHORS``, else what :func:`find`
    found for it in this process, else ``anchors/`` beside it."""
    if os.environ.get("PATCHQ_ANCHORS"):
        return Path(os.environ["PATCHQ_ANCHORS"]).resolve()
    series = Path(series).resolve()
    return _ANCHORS.get(series, series.parent / "anchors").resolve()
