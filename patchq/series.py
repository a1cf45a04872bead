"""Loading the series: ``series/profiles.toml``, ``series/<patch>.py``, ``anchors/<patch>.toml``.

Layout (plain files, readable with ``cat``, reviewable in diffs):

``series/profiles.toml``
    ``[profiles.<name>]`` with ``patches = [...]`` (ordered) and ``description``.
``series/<module>.py``
    one module per patch defining ``PATCH = patch(...)`` (:func:`patch`): metadata,
    variants and their libcst transforms (module name = patch id with ``_``).
``anchors/<patch-id>.toml``
    ``[anchors.<anchor-id>]`` with ``module``, ``qualname``, ``node`` (pattern),
    ``count`` (an int, or ``"N+"`` for at least N) and a ``fingerprints`` table
    (vLLM version -> fingerprint) of the releases it was verified on.

The series directory is ``--series DIR``, else ``$PATCHQ_SERIES``, else the one a
project config (``patchq.toml`` or ``[tool.patchq]``) names, else the one an installed
distribution provides (entry-point group ``patchq.series``); the
anchors directory comes with it (``$PATCHQ_ANCHORS`` overrides). See :mod:`patchq.discovery`.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from patchq import discovery, hashing
from patchq.errors import SeriesError, UnsafeConfig, UsageError, did_you_mean, known_names
from patchq.model import AnchorSpec, Case, Patch, Profile, Variant

if TYPE_CHECKING:
    from types import FrameType

    from patchq.model import EditFn


PROJECT_ROOT = Path(__file__).resolve().parents[1]


def series_dir(explicit: str | Path | None = None) -> Path:
    """The series directory (see :func:`patchq.discovery.find`). Raises SeriesError when missing."""
    return discovery.find(explicit).series


def anchors_dir(series: Path) -> Path:
    """The anchors directory that goes with ``series``."""
    return discovery.anchors_for(series)


def spec(text: str, what: str = "applies-range") -> SpecifierSet:
    """A packaging SpecifierSet from ``text`` ('' = all versions); ``what`` names the
    argument in the message (``applies=``, ``variant``).

    Raises:
        SeriesError: ``bad applies-range '<text>'`` (the caller names the file and patch:
            :func:`in_series_file`).
    """
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise SeriesError(f"bad applies-range {text!r} ({what}; a PEP 440 version specifier such as "
                          f"'>=0.23,<0.30')") from None


def in_series_file(path: Path, line: int | None, patch_id: str, exc: SeriesError) -> SeriesError:
    """``exc`` with the series file, the line and the patch in front (``FILE:LINE: patch
    ID: ...``), as the edge names any other error a series file raises."""
    where = f"{path}:{line}" if line else str(path)
    message = str(exc)
    if not message.startswith(f"patch {patch_id}"):
        message = f"patch {patch_id}: {message}"
    return SeriesError(f"{where}: {message}")


def patch(
    *,
    id: str,
    summary: str,
    why: str,
    applies: str,
    variants: Iterable[Variant],
    upstream: Iterable[str] = (),
    upstream_check: Callable | None = None,
    probe: Callable | None = None,
    requires: Iterable[str] = (),
    conflicts: Iterable[str] = (),
    supersedes: Iterable[str] = (),
    runtime_names: Iterable[str] = (),
    removes: Iterable[str] = (),
    cases: Iterable[Case | Callable[[], object]] = (),
) -> Patch:
    """Declare a patch in ``series/<module>.py`` (anchors and hash are filled at load).

    ``requires``, ``conflicts`` and ``supersedes`` (patch ids) declare how the patch
    relates to others; a profile is checked against them when loaded
    (:func:`patchq.plan.relations.validate_profile`). ``runtime_names`` and ``removes``
    relax the edit validation (:class:`patchq.model.Patch`). ``cases`` are the patch's
    behavioural cases (:func:`case`; a plain function is taken as ``case()(fn)``), run by
    ``patchq probe``; a ``probe`` callable (the first form) becomes the case ``probe``.
    All are optional: a series file written without them loads and behaves as before.

    Raises:
        SeriesError: a relation or name list is not a list of strings, or names the
            patch itself; a case is not callable, or two cases share a name.
    """
    rel = {}
    for key, value in (("requires", requires), ("conflicts", conflicts), ("supersedes", supersedes),
                       ("runtime_names", runtime_names), ("removes", removes)):
        items = [value] if isinstance(value, str) else list(value)
        if not all(isinstance(x, str) and x for x in items):
            raise SeriesError(f"patch {id}: {key}= must be a list of non-empty strings, got {value!r}")
        if key in ("requires", "conflicts", "supersedes") and id in items:
            raise SeriesError(f"patch {id}: {key}= names the patch itself")
        rel[key] = tuple(dict.fromkeys(items))
    declared = [c if isinstance(c, Case) else case()(c) for c in ([cases] if callable(cases) else cases)]
    if probe is not None:
        declared.append(Case(name="probe", fn=probe, doc=_first_line(probe)))
    names = [c.name for c in declared]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SeriesError(f"patch {id}: two cases are named {twice[0]!r} (case names are unique in a patch)")
    return Patch(
        id=id, summary=summary, why=" ".join(why.split()), applies=spec(applies, "applies="),
        variants=tuple(variants), upstream=tuple(upstream),
        upstream_check=upstream_check, probe=probe, requires=rel["requires"], conflicts=rel["conflicts"],
        supersedes=rel["supersedes"], runtime_names=rel["runtime_names"], removes=rel["removes"],
        cases=tuple(declared),
    )


#: the values of ``case(pristine=...)``
PRISTINE_CLAIMS = ("fails", "passes")


def case(*, name: str | None = None, releases: str = "", pristine: str | None = None) -> Callable:
    """Decorate a behavioural case of a patch (:class:`patchq.model.Case`)::

        @case(releases=">=0.26", pristine="fails")
        def padded_attention():
            \"\"\"An attention page already padded is scaled and padded, never asserted on.\"\"\"
            ...  # build CPU inputs, call the patched vLLM code, assert

        PATCH = patch(..., cases=[padded_attention])

    ``name`` defaults to the function's name with ``-`` for ``_``; ``releases`` is a PEP 440
    range ('' = every release); ``pristine``: ``"fails"`` or ``"passes"`` on the unpatched
    release, when known.

    Raises:
        SeriesError: a bad range or ``pristine`` value, or the decorated object is not callable.
    """
    if pristine is not None and pristine not in PRISTINE_CLAIMS:
        raise SeriesError(f"case(pristine={pristine!r}): use one of {', '.join(PRISTINE_CLAIMS)} (or leave it out)")
    allowed = spec(releases, "case(releases=)")

    def wrap(fn: Callable[[], object]) -> Case:
        if not callable(fn):
            raise SeriesError(f"case(): {fn!r} is not callable")
        label = name or getattr(fn, "__name__", "case").replace("_", "-")
        return Case(name=label, fn=fn, releases=allowed, pristine=pristine, doc=_first_line(fn))

    return wrap


def patched_definition(module: str, qualname: str, patch_id: str) -> object:
    """For a case: the definition ``qualname`` of the imported vLLM module ``module``, after
    checking that the module's file carries ``patch_id``'s sentinel (the case runs on the
    patched copy). ``qualname``: ``Class.method`` or a top-level name; ``<module>`` gives
    the module itself.

    Raises:
        ImportError: the module does not import. AssertionError: its file lacks the
            sentinel, or it has no such definition.
    """
    import importlib

    mod = importlib.import_module(module)
    with open(str(mod.__file__), encoding="utf-8") as fh:
        assert f"patchq:{patch_id}:" in fh.read(), f"{mod.__file__} does not carry patch {patch_id}"
    found: object = mod
    if qualname != "<module>":
        for part in qualname.split("."):
            assert hasattr(found, part), f"{module} has no {qualname}"
            found = getattr(found, part)
    return found


def _first_line(fn: object) -> str:
    """The first line of ``fn``'s docstring ('' when it has none)."""
    doc = (getattr(fn, "__doc__", None) or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


def variant(applies: str, *, edits: Mapping[str, EditFn] | None = None, upstreamed: str | None = None,
            absent: str | None = None, note: str = "") -> Variant:
    """Declare a variant (see :class:`patchq.model.Variant`)."""
    if sum(x is not None for x in (edits, upstreamed, absent)) != 1:
        raise SeriesError("a variant has exactly one of edits=, upstreamed=, absent=")
    return Variant(applies=spec(applies, "variant"), edits=dict(edits or {}),
                   upstreamed=upstreamed, absent=absent, note=note)


def _parse_count(value: object, where: str) -> tuple[int, int | None]:
    try:
        return hashing.parse_count(value)
    except ValueError as exc:
        raise SeriesError(f"{where}: {exc}") from None


def _check_versions(path: Path, data: Mapping) -> None:
    """Every key of each anchor's ``fingerprints`` table and of ``[reviews]`` is a vLLM
    version (PEP 440, :class:`packaging.version.Version`): they are compared as versions.

    Raises:
        SeriesError: naming the file, the table and the key.
    """
    from packaging.version import InvalidVersion, Version

    tables = [(f"anchors.{aid}.fingerprints", t.get("fingerprints", {})) for aid, t in data["anchors"].items()]
    for where, table in [*tables, ("reviews", data.get("reviews", {}))]:
        for key in table:
            try:
                Version(key)
            except InvalidVersion:
                raise SeriesError(f"{path}: {where}: key {key!r} is not a vLLM version (such as \"0.23.0\")") \
                    from None


#: the keys of an anchors file, of each ``[anchors.<id>]`` table (docs/how-it-works.md)
ANCHORS_FILE_KEYS = ("format", "anchors", "reviews")
ANCHOR_KEYS = ("module", "qualname", "node", "count", "fingerprints")


def _check_keys(path: Path, data: Mapping) -> None:
    """No key an anchors file does not define: a misspelt ``node``, ``count`` or
    ``fingerprints`` would change what the anchor means without a word.

    Raises:
        SeriesError: naming the file, the table and the key (and the nearest known one).
    """
    tables: list[tuple[str, Mapping, tuple[str, ...]]] = [("the top level", data, ANCHORS_FILE_KEYS)]
    tables += [(f"anchors.{aid}", t, ANCHOR_KEYS) for aid, t in data["anchors"].items()]
    for where, table, known in tables:
        for key in table:
            if key not in known:
                raise SeriesError(f"{path}: {where}: unknown key {key!r}{did_you_mean(key, known)} "
                                  f"(known: {', '.join(known)})")


def load_anchor_file(path: Path) -> dict[str, AnchorSpec]:
    """Parse ``anchors/<patch>.toml`` into anchor id -> AnchorSpec.

    Raises:
        SeriesError: a malformed file (:func:`patchq.hashing.anchor_document`), an
            unknown key, a fingerprint or review keyed by something that is not a version.
    """
    out: dict[str, AnchorSpec] = {}
    data = hashing.anchor_document(path)  # types checked there
    _check_keys(path, data)
    _check_versions(path, data)
    for anchor_id, table in data["anchors"].items():
        where = f"{path.name}: anchors.{anchor_id}"
        try:
            lo, hi = _parse_count(table.get("count", 1), where)
            out[anchor_id] = AnchorSpec(
                id=anchor_id, module=table["module"], qualname=table["qualname"],
                node=table.get("node"), min_count=lo, max_count=hi,
                fingerprints=dict(table.get("fingerprints", {})),
            )
        except KeyError as exc:
            raise SeriesError(f"{where}: missing key {exc}") from None
    return out


def module_file(series: Path, patch_id: str) -> Path:
    """``series/<patch_id with _>.py``.

    Raises:
        UsageError: ``patch_id`` holds a path (``../x``, ``a/b``) or starts with a dot: a
            patch module always lies in the series directory itself.
    """
    if not patch_id or any(c in patch_id for c in "/\\\0") or patch_id.startswith(".") or ".." in patch_id:
        raise UsageError(f"patch id {patch_id!r} is not a patch id (it holds a path); a patch's module lies "
                         f"in the series directory itself")
    return series / (patch_id.replace("-", "_") + ".py")


def _exec_patch_module(path: Path, patch_id: str) -> Patch:
    """Import the series module ``path`` (as ``patchq_series_<stem>``) and return its ``PATCH``.

    Raises:
        SeriesError: a NUL byte, bytes that do not decode (UTF-8, or the coding line's
            encoding), a syntax error without a file name, or no ``PATCH`` of that id.
            Whatever the module raises on import goes up (the edge names it).
    """
    name = "patchq_series_" + path.stem
    raw = hashing.read_regular(path)
    if b"\0" in raw:
        raise SeriesError(f"{path}: holds a NUL byte: not a Python source")
    try:
        importlib.util.decode_source(raw)  # as the import will (a coding line, else UTF-8)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        why = f"{exc.reason} at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise SeriesError(f"{path}: not a Python source in its encoding ({why})") from None
    mod_spec = importlib.util.spec_from_file_location(name, path)
    assert mod_spec and mod_spec.loader
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module
    try:
        _exec_module(mod_spec.loader, module, path, name)
    except SyntaxError as exc:
        if exc.filename:
            raise  # the edge names the file and line
        raise SeriesError(f"{path}: SyntaxError: {exc.msg}") from None
    except _RaisedOnImport:
        raise  # named already (file and line)
    except SeriesError as exc:  # patch()/variant() refused an argument: name the file, line and patch
        raise in_series_file(path, _line_in(exc, name), patch_id, exc) from None
    declared = getattr(module, "PATCH", None)
    if not isinstance(declared, Patch) or declared.id != patch_id:
        raise SeriesError(f"{path} must define PATCH = patch(id={patch_id!r}, ...)")
    return declared


class _RaisedOnImport(SeriesError):
    """A series module raised KeyboardInterrupt or SystemExit itself (:func:`_exec_module`)."""


def _exec_module(loader, module, path: Path, name: str) -> None:
    """Run a series module's code. A ``KeyboardInterrupt`` or ``SystemExit`` the module
    raises itself is a series error naming the file and line (it was exit 130
    "interrupted", or the exit status the module chose); a real Ctrl-C (SIGINT arriving
    meanwhile) still interrupts (exit 130).

    Raises:
        SeriesError: the module raised KeyboardInterrupt or SystemExit.
    """
    import signal
    import threading

    signalled: list[int] = []
    old = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGINT)
        if callable(previous):  # Python's own handler (or one installed above us): note a real Ctrl-C, then call it

            def note(signum: int, frame: FrameType | None) -> None:
                signalled.append(signum)
                previous(signum, frame)

            old = signal.signal(signal.SIGINT, note)
    try:
        loader.exec_module(module)
    except (KeyboardInterrupt, SystemExit) as exc:
        if isinstance(exc, KeyboardInterrupt) and signalled:
            raise
        line = _line_in(exc, name)
        what = type(exc).__name__ + (f"({exc})" if str(exc) else "")
        raise _RaisedOnImport(f"{path}{f':{line}' if line else ''}: raises {what} when imported; a series file "
                              f"only declares its patch") from None
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def _line_in(exc: BaseException, module_name: str) -> int | None:
    """The line of the innermost frame of module ``module_name`` in ``exc``'s traceback."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == module_name:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


@dataclass
class Series:
    """The loaded series: profiles and patches (loaded lazily, each once)."""

    root: Path
    anchors_root: Path
    profiles: dict[str, Profile]
    _patches: dict[str, Patch]
    location: discovery.Location | None = None

    def patch(self, patch_id: str) -> Patch:
        """Load one patch. Raises UsageError for an unknown id, SeriesError when broken."""
        if patch_id not in self._patches:
            path = self._module_path(patch_id)
            declared = _exec_patch_module(path, patch_id)
            anchor_file = self.anchors_root / f"{patch_id}.toml"
            anchors = load_anchor_file(anchor_file) if anchor_file.is_file() else {}
            self._check_names(declared, anchors, anchor_file)
            self._patches[patch_id] = replace(
                declared, anchors=anchors, source_file=str(path),
                hash=hashing.patch_hash_from_files(path, anchor_file),
            )
        return self._patches[patch_id]

    def _module_path(self, patch_id: str) -> Path:
        """The patch's module, checked before it is imported.

        Raises:
            UsageError: no such module. SeriesError: not a regular file of the series
                directory. UnsafeConfig: the series is not trusted (:mod:`patchq.discovery`).
        """
        path = module_file(self.root, patch_id)
        if not path.exists():
            raise UsageError(f"unknown patch {patch_id!r} (no {path.name} in {self.root})")
        if not path.is_file() or path.is_symlink() and not path.resolve().is_relative_to(self.root.resolve()):
            raise SeriesError(f"{path}: not a regular file in the series directory (a directory, FIFO, "
                              f"device or a symlink out of it)")
        unsafe = discovery.module_problem(self.location, str(path))
        if unsafe:
            raise UnsafeConfig(f"refusing to import {path}: {unsafe} (add its repo to "
                               f"{discovery.SAFE_ENV}, or pass --series, if you trust it)")
        return path

    def _check_names(self, declared: Patch, anchors: dict[str, AnchorSpec], anchor_file: Path) -> None:
        """Every patch and anchor ``declared`` names exists (requires, conflicts, supersedes;
        removes and each variant's edits).

        Raises:
            SeriesError: naming the first unknown one.
        """
        patch_id = declared.id
        for key in ("requires", "conflicts", "supersedes"):
            for dep in getattr(declared, key):
                if not module_file(self.root, dep).is_file():
                    raise SeriesError(f"patch {patch_id}: {key}= names unknown patch {dep} "
                                      f"(no {module_file(self.root, dep).name} in {self.root})")
        unknown = [a for a in declared.removes if a not in anchors]
        if unknown:
            raise SeriesError(f"{patch_id}: removes= names unknown anchors {unknown} "
                              f"(define them in {anchor_file})")
        for v in declared.variants:
            missing = [a for a in v.edits if a not in anchors]
            if missing:
                raise SeriesError(f"{patch_id}: variant {v.applies} edits unknown anchors {missing} "
                                  f"(define them in {anchor_file})")

    def all_patch_ids(self) -> list[str]:
        """Every patch id in the series directory, in profile order then by name."""
        seen: list[str] = []
        for prof in self.profiles.values():
            for pid in prof.patches:
                if pid not in seen:
                    seen.append(pid)
        for path in sorted(self.root.glob("*.py")):
            pid = path.stem.replace("_", "-")
            if pid not in seen and not path.stem.startswith("_"):
                seen.append(pid)
        return seen

    def profile(self, name: str) -> Profile:
        """A profile by name. Raises UsageError listing the known ones."""
        try:
            return self.profiles[name]
        except KeyError:
            raise UsageError(f"unknown profile {name!r}; known: {known_names(self.profiles)}"
                             f"{did_you_mean(name, self.profiles)}") from None

    def patches_of(self, profile: str) -> list[Patch]:
        """The profile's patches, in order, validated against their declared relations.

        Raises:
            UsageError: unknown profile or patch. SeriesError: a relation is broken
                (:func:`patchq.plan.relations.validate_profile`).
        """
        from patchq.plan.relations import validate_profile

        patches = [self.patch(pid) for pid in self.profile_ids(profile)]
        validate_profile(profile, patches)
        return patches

    def profile_ids(self, profile: str) -> list[str]:
        """The profile's patch ids, each checked to have its series file (a stat each,
        nothing imported).

        Raises:
            UsageError: unknown profile, or it lists a patch with no series file (naming
                ``profiles.toml``, the file the mistake is in, as status does).
        """
        pids = list(self.profile(profile).patches)
        for pid in pids:
            path = module_file(self.root, pid)
            if not path.exists():
                raise UsageError(f"{self.root / 'profiles.toml'}: profile {profile} lists {pid!r}, which has no "
                                 f"series file (no {path.name} in {self.root})")
        return pids


def load_profiles(path: Path) -> dict[str, Profile]:
    """Parse ``profiles.toml``. Raises SeriesError."""
    out = {}
    for name, t in hashing.profile_tables(path).items():  # types checked there
        ids = list(t["patches"])
        twice = sorted({pid for pid in ids if ids.count(pid) > 1})
        if twice:
            raise SeriesError(f"{path.name}: profile {name} lists patch {twice[0]} twice "
                              f"(a profile holds each patch once)")
        out[name] = Profile(name=name, patches=tuple(ids), description=t["description"])
    return out


def load(explicit: str | Path | None = None) -> Series:
    """Load the series (profiles now, patches on first use)."""
    loc = discovery.find(explicit)
    return Series(root=loc.series, anchors_root=loc.anchors,
                  profiles=load_profiles(loc.series / "profiles.toml"), _patches={}, location=loc)
