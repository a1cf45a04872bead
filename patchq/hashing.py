"""Patch hashes and file hashes, with the standard library only.

Kept free of libcst, packaging and typer so that the no-op ``apply`` and ``status``
(run at every server start) can compute them at interpreter-start cost.
"""

from __future__ import annotations

import hashlib
import json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from pathlib import Path


#: What :func:`sha256_file` returns for something that is not a regular file (a FIFO, a
#: device, a socket, a directory): never equal to a sha256, so it reads as "modified".
NOT_REGULAR = "not-a-regular-file"


def sha256_file(path) -> str | None:
    """Hex sha256 of a file's bytes (``path``: str or Path), or None when it does not exist.

    Never blocks: the file is opened ``O_NONBLOCK`` and checked with ``fstat``; a FIFO,
    device, socket or directory in its place gives :data:`NOT_REGULAR` (it is not read).
    """
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        return NOT_REGULAR
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return NOT_REGULAR
        h = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)
    finally:
        os.close(fd)


def parse_count(value: object) -> tuple[int, int | None]:
    """An anchor ``count``: an int N (exactly N) or ``"N+"`` (at least N).

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value, value
    if isinstance(value, str) and value.endswith("+") and value[:-1].isdigit():
        return int(value[:-1]), None
    raise ValueError(f"count must be an int >= 1 or 'N+', not {value!r}")


def anchor_definitions_text(anchors: dict) -> str:
    """Canonical JSON of anchor definitions (``anchors/<patch>.toml`` tables), fingerprints excluded."""
    rows = {}
    for anchor_id, t in anchors.items():
        lo, hi = parse_count(t.get("count", 1))
        rows[anchor_id] = [t.get("module"), t.get("qualname"), t.get("node"), lo, hi]
    return json.dumps(rows, sort_keys=True)


def toml_module():
    """``tomllib`` or ``tomli`` (:func:`patchq.tomlsafe.toml_module`, the one place that
    chooses); patchq itself parses TOML only through :mod:`patchq.tomlsafe`'s bounds."""
    from patchq import tomlsafe

    return tomlsafe.toml_module()


def read_toml(path) -> dict:
    """Parse a series TOML file (``profiles.toml``, ``anchors/<patch>.toml``), bounded in
    size, depth and kind, and held to the trust rule of a walked-up series
    (:func:`patchq.tomlsafe.read_file`).

    Raises:
        SeriesError: unreadable, not a regular file, too large, not UTF-8, not TOML or
            nested too deep; the message starts with the file (TOML errors name the line
            and column). UnsafeConfig: refused by the trust rule.
    """
    from patchq import tomlsafe

    return tomlsafe.read_file(path)


#: A patch id: it names ``series/<id with _>.py`` and ``anchors/<id>.toml``, so it may not
#: hold a path separator or start with a dot (``../x`` would load a module outside ``series/``).
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
#: An anchor's module hint: a dotted module path inside the vllm package.
MODULE_PATTERN = r"vllm(\.[A-Za-z_][A-Za-z0-9_]*)*"


def id_problem(patch_id: object) -> str | None:
    """Why ``patch_id`` cannot be a patch id (:data:`ID_PATTERN`), or None."""
    import re

    if not isinstance(patch_id, str) or re.fullmatch(ID_PATTERN, patch_id) is None or ".." in patch_id:
        return f"{patch_id!r} is not a patch id (letters, digits, '-', '_' and '.', no path)"
    return None


def read_regular(path) -> bytes:
    """The bytes of a series file that must be a regular file: a directory, FIFO, device
    or socket in its place is a SeriesError (never blocks: ``O_NONBLOCK``).

    Raises:
        SeriesError: not a regular file, or unreadable.
    """
    import os
    import stat

    from patchq.errors import SeriesError

    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SeriesError(f"{path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SeriesError(f"{path}: not a regular file (a directory, FIFO or device is in its place)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    except OSError as exc:
        raise SeriesError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _kind(value: object) -> str:
    names: dict[type, str] = {dict: "a table", list: "an array", str: "a string"}
    return names.get(type(value), type(value).__name__)


def profile_tables(path) -> dict[str, dict]:
    """``[profiles.<name>]`` of ``profiles.toml``, checked: name -> {``patches``: [ids],
    ``description``: str}. Unknown patch ids are not checked here: only the profile a
    command uses must resolve (:func:`profile_hashes`, :meth:`patchq.series.Series.patches_of`).

    Raises:
        SeriesError: unreadable file, or a field of the wrong type (the message names it).
    """
    from patchq.errors import SeriesError

    profiles = read_toml(path).get("profiles", {})
    if not isinstance(profiles, dict):
        raise SeriesError(f"{path}: `profiles` must be a table of [profiles.<name>] tables, not {_kind(profiles)}")
    out = {}
    for name, table in profiles.items():
        if not isinstance(table, dict):
            raise SeriesError(f"{path}: profiles.{name} must be a table, not {_kind(table)}")
        patches, description = table.get("patches", []), table.get("description", "")
        if not isinstance(patches, list) or not all(isinstance(p, str) for p in patches):
            raise SeriesError(f"{path}: profiles.{name}.patches must be an array of patch ids")
        bad = next((id_problem(p) for p in patches if id_problem(p)), None)
        if bad:
            raise SeriesError(f"{path}: profiles.{name}.patches: {bad}")
        if not isinstance(description, str):
            raise SeriesError(f"{path}: profiles.{name}.description must be a string, not {_kind(description)}")
        out[name] = {"patches": list(patches), "description": description}
    return out


#: The newest anchors-file format this patchq reads. 1: every anchor names a definition
#: (files without a ``format`` key). 2: an anchor may be module-level (``qualname =
#: "<module>"``, :data:`patchq.model.MODULE_QUALNAME`); such a file says ``format = 2``.
ANCHORS_FORMAT = 2
MODULE_QUALNAME = "<module>"  # patchq.model.MODULE_QUALNAME (stdlib only here)


def anchor_tables(path) -> dict[str, dict]:
    """``[anchors.<id>]`` of ``anchors/<patch>.toml``, checked (:func:`anchor_document`).

    Raises:
        SeriesError: as :func:`anchor_document`.
    """
    return anchor_document(path)["anchors"]


def anchor_document(path) -> dict:
    """The whole of ``anchors/<patch>.toml`` (``anchors`` always present), its anchors
    checked: ``module`` and ``qualname``
    strings, ``node`` a string when present, ``count`` (:func:`parse_count`),
    ``fingerprints`` a table of fingerprints (16 hex digits); the file's ``format`` (default 1) at most
    :data:`ANCHORS_FORMAT`, and 2 or more when an anchor is module-level; ``reviews`` a
    table of tables of strings (:func:`_check_reviews`).

    Raises:
        SeriesError: unreadable file, a missing key or a field of the wrong type, a newer
            format, a module-level anchor in a format-1 file.
    """

    from patchq.errors import SeriesError

    data = read_toml(path)
    fmt = data.get("format", 1)
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < 1:
        raise SeriesError(f"{path}: `format` must be a positive integer, not {_kind(fmt)}")
    if fmt > ANCHORS_FORMAT:
        raise SeriesError(f"{path}: anchors format {fmt} is newer than this patchq reads ({ANCHORS_FORMAT}); "
                          f"upgrade patchq")
    anchors = data.get("anchors", {})
    if not isinstance(anchors, dict):
        raise SeriesError(f"{path}: `anchors` must be a table of [anchors.<id>] tables, not {_kind(anchors)}")
    for anchor_id, t in anchors.items():
        _check_anchor(f"{path}: anchors.{anchor_id}", t, fmt)
    _check_reviews(path, data.get("reviews", {}))
    return dict(data, anchors=anchors)


#: the fields of a ``[reviews."<version>"]`` entry (patchq.authoring.fingerprints.REVIEWS), all strings
REVIEW_FIELDS = ("by", "at", "how", "status", "note")


def _check_reviews(path, reviews: object) -> None:
    """``[reviews]``: a table of ``"<version>" = {by, at, how, status, note}`` tables of
    strings (the version keys are checked by :func:`patchq.series.load_anchor_file`).

    Raises:
        SeriesError: naming the file and the entry.
    """
    from patchq.errors import SeriesError

    if not isinstance(reviews, dict):
        raise SeriesError(f"{path}: `reviews` must be a table of [reviews.\"<version>\"] tables, not {_kind(reviews)}")
    for version, entry in reviews.items():
        where = f"{path}: reviews.\"{version}\""
        if not isinstance(entry, dict):
            raise SeriesError(f"{where} must be a table ({', '.join(REVIEW_FIELDS)}), not {_kind(entry)}")
        for key in REVIEW_FIELDS:
            if key in entry and not isinstance(entry[key], str):
                raise SeriesError(f"{where}.{key} must be a string, not {_kind(entry[key])}")


def _check_anchor(where: str, t: object, fmt: int) -> None:
    """One ``[anchors.<id>]`` table of an anchors file of format ``fmt`` (:func:`anchor_tables`).

    Raises:
        SeriesError: the message starts with ``where``.
    """
    import re

    from patchq.errors import SeriesError

    if not isinstance(t, dict):
        raise SeriesError(f"{where} must be a table, not {_kind(t)}")
    for key in ("module", "qualname"):
        if key not in t:
            raise SeriesError(f"{where}: missing key {key!r}")
        if not isinstance(t[key], str) or not t[key]:
            raise SeriesError(f"{where}.{key} must be a non-empty string, not {_kind(t[key])}")
    if t["qualname"] == MODULE_QUALNAME and fmt < 2:
        raise SeriesError(f"{where}: a module-level anchor (qualname \"{MODULE_QUALNAME}\") needs `format = 2` "
                          f"at the top of the file")
    if not re.fullmatch(MODULE_PATTERN, t["module"]):
        raise SeriesError(f"{where}.module {t['module']!r} is not a module of the vllm package "
                          f"(a dotted name such as vllm.v1.core.kv_cache_utils)")
    if "node" in t and not isinstance(t["node"], str):
        raise SeriesError(f"{where}.node must be a string (a statement pattern), not {_kind(t['node'])}")
    try:
        parse_count(t.get("count", 1))
    except ValueError as exc:
        raise SeriesError(f"{where}: {exc}") from None
    fps = t.get("fingerprints", {})
    if not isinstance(fps, dict) or not all(isinstance(v, str) for v in fps.values()):
        raise SeriesError(f"{where}.fingerprints must be a table of version = \"fingerprint\" strings")
    for version, fp in fps.items():  # a mistyped one would never match: the release unverified without a word
        if not re.fullmatch(r"[0-9a-f]{16}", fp):
            raise SeriesError(f"{where}.fingerprints.\"{version}\" = {fp!r} is not a fingerprint (16 hex digits, "
                              f"as `patchq fingerprint` writes them)")


def patch_hash_from_files(source: Path, anchor_file: Path) -> str:  # noqa: F821
    """12 hex chars of sha256 over ``series/<patch>.py`` and its anchor definitions.

    Raises:
        SeriesError: either is not a regular file (a directory, FIFO, ...) or is malformed.
    """
    import os

    h = hashlib.sha256(read_regular(source))
    anchors = anchor_tables(anchor_file) if os.path.lexists(anchor_file) else {}
    h.update(anchor_definitions_text(anchors).encode())
    return h.hexdigest()[:12]


def anchor_modules(anchor_file: Path) -> list[str]:
    """The module hints of a patch's anchors, as relpaths ``a/b.py`` (stdlib only)."""
    import os
    from pathlib import Path

    anchor_file = Path(anchor_file)
    if not os.path.lexists(anchor_file):
        return []
    anchors = anchor_tables(anchor_file)
    out = []
    for t in anchors.values():
        base = str(t.get("module", "")).replace(".", "/")
        for rel in (base + ".py", base + "/__init__.py"):
            if rel not in out:
                out.append(rel)
    return out


def series_inputs(series_root: str, anchors_root: str) -> dict[str, str]:
    """sha256 of every input file of the series (profiles, patch modules, anchor files).

    Keyed ``series/<name>`` and ``anchors/<name>``. When these equal what the journal
    recorded, everything derived from the series (ids, patch hashes, module hints) can be
    taken from the journal without parsing TOML: the no-op fast path relies on it.
    """
    import os

    out = {}
    for tag, root, suffixes in (("series", series_root, (".py", ".toml")), ("anchors", anchors_root, (".toml",))):
        try:
            names = sorted(os.listdir(root))
        except FileNotFoundError:
            continue
        for name in names:
            if name.endswith(suffixes) and not name.startswith("."):
                out[f"{tag}/{name}"] = hashlib.sha256(read_regular(os.path.join(root, name))).hexdigest()
    return out


def series_summary(series_root: str | Path, anchors_root: str | Path, syntax: bool = False) -> dict:
    """What status and the no-op check need from the series, parsed once.

    Returns ``{"inputs": {...}, "profiles": {name: [ids]}, "ids": [...],
    "hashes": {id: hash}, "modules": {id: [relpath, ...]}, "anchor_errors": {id: message},
    "syntax_errors": {id: message}}``. ``anchor_errors``: the anchors files that do not parse
    (their patch's ``modules`` is empty); like a series file that does not compile, such a
    file breaks only the profiles holding its patch (loading that patch raises).
    ``ids`` (and ``hashes``, ``modules``) hold the patches that have a series file: a
    profile naming an unknown patch breaks only that profile (:func:`profile_hashes`), not
    the others. ``syntax_errors`` (only with ``syntax``: it compiles every series file, which
    a warm ``patchq run`` must not pay): the series files that do not compile
    (``FILE:LINE: SyntaxError: msg``, as :func:`patchq.errors.series_error` words it); they
    break only the profiles holding them, and ``status`` reports them (exit 2).

    Raises:
        SeriesError: a malformed ``profiles.toml`` (see :func:`read_toml`).
    """
    from pathlib import Path

    from patchq.errors import SeriesError

    series_root, anchors_root = Path(series_root), Path(anchors_root)
    profiles = {name: t["patches"] for name, t in profile_tables(series_root / "profiles.toml").items()}
    ids: list[str] = []
    for plist in profiles.values():  # an id without its series file is left out: see profile_hashes
        ids += [pid for pid in plist if pid not in ids and (series_root / (pid.replace("-", "_") + ".py")).is_file()]
    for path in sorted(series_root.glob("*.py")):
        pid = path.stem.replace("_", "-")
        if pid not in ids and not path.stem.startswith("_"):
            ids.append(pid)
    summary = {
        "inputs": series_inputs(str(series_root), str(anchors_root)),
        "profiles": profiles,
        "ids": ids,
    }
    hashes: dict[str, str] = {}
    modules: dict[str, list[str]] = {}
    anchor_errors: dict[str, str] = {}
    for pid in ids:  # a malformed anchors file breaks only the profiles holding its patch
        module, anchor_file = series_root / (pid.replace("-", "_") + ".py"), anchors_root / f"{pid}.toml"
        try:
            hashes[pid] = patch_hash_from_files(module, anchor_file)
            modules[pid] = anchor_modules(anchor_file)
        except SeriesError as exc:  # a hash no patch has: nothing journalled matches it
            hashes[pid] = "!" + hashlib.sha256(str(exc).encode()).hexdigest()[:15]
            modules[pid], anchor_errors[pid] = [], str(exc)
    summary.update(hashes=hashes, modules=modules, anchor_errors=anchor_errors)
    if syntax:
        summary["syntax_errors"] = syntax_errors(series_root, ids)
    return summary


def syntax_errors(series_root: Path, ids: list[str]) -> dict[str, str]:  # noqa: F821
    """patch id -> ``FILE:LINE: SyntaxError: msg`` for each series file of ``ids`` that does
    not compile (no series code runs: the file is compiled, not imported)."""
    out = {}
    for pid in ids:
        path = series_root / (pid.replace("-", "_") + ".py")
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:  # also IndentationError, TabError
            line = f":{exc.lineno}" if exc.lineno else ""
            out[pid] = f"{path}{line}: {type(exc).__name__}: {exc.msg}"
        except ValueError as exc:  # a null byte
            out[pid] = f"{path}: {exc}"
    return out


def profile_hashes(summary: dict, profile: str) -> dict[str, str]:
    """patch id -> hash of ``profile``'s patches, from a :func:`series_summary`.

    Raises:
        UsageError: unknown profile, or the profile names a patch with no series file.
    """
    from patchq.errors import UsageError, did_you_mean, known_names

    if profile not in summary["profiles"]:
        raise UsageError(f"unknown profile {profile!r}; known: {known_names(summary['profiles'])}"
                         f"{did_you_mean(profile, summary['profiles'])}")
    ids = summary["profiles"][profile]
    unknown = [pid for pid in ids if pid not in summary["hashes"]]
    if unknown:
        raise UsageError(f"profile {profile!r} names unknown patch(es) {', '.join(unknown)} "
                         f"(no series file for them)")
    return {pid: summary["hashes"][pid] for pid in ids}
