"""Patch hashes and file hashes, with the standard library only.

Kept free of libcst, packaging and typer so that the no-op ``apply`` and ``status``
(run at every server start) can compute them at interpreter-start cost.
"""

from __future__ import annotations

import hashlib
import json
import sys


def sha256_file(path) -> str | None:
    """Hex sha256 of a file's bytes (``path``: str or Path), or None when it does not exist."""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


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


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


def patch_hash_from_files(source: Path, anchor_file: Path) -> str:  # noqa: F821
    """12 hex chars of sha256 over ``series/<patch>.py`` and its anchor definitions."""
    from pathlib import Path

    h = hashlib.sha256(Path(source).read_bytes())
    anchors = {}
    if anchor_file.is_file():
        anchors = _toml().loads(anchor_file.read_text(encoding="utf-8")).get("anchors", {})
    h.update(anchor_definitions_text(anchors).encode())
    return h.hexdigest()[:12]


def anchor_modules(anchor_file: Path) -> list[str]:
    """The module hints of a patch's anchors, as relpaths ``a/b.py`` (stdlib only)."""
    from pathlib import Path

    anchor_file = Path(anchor_file)
    if not anchor_file.is_file():
        return []
    anchors = _toml().loads(anchor_file.read_text(encoding="utf-8")).get("anchors", {})
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
                with open(os.path.join(root, name), "rb") as fh:
                    out[f"{tag}/{name}"] = hashlib.sha256(fh.read()).hexdigest()
    return out


def series_summary(series_root: Path, anchors_root: Path) -> dict:
    """What status and the no-op check need from the series, parsed once.

    Returns ``{"inputs": {...}, "profiles": {name: [ids]}, "ids": [...],
    "hashes": {id: hash}, "modules": {id: [relpath, ...]}}``.
    """
    from pathlib import Path

    series_root, anchors_root = Path(series_root), Path(anchors_root)
    data = _toml().loads((series_root / "profiles.toml").read_text(encoding="utf-8"))
    profiles = {name: list(t.get("patches", [])) for name, t in data.get("profiles", {}).items()}
    ids: list[str] = []
    for plist in profiles.values():
        ids += [pid for pid in plist if pid not in ids]
    for path in sorted(series_root.glob("*.py")):
        pid = path.stem.replace("_", "-")
        if pid not in ids and not path.stem.startswith("_"):
            ids.append(pid)
    return {
        "inputs": series_inputs(str(series_root), str(anchors_root)),
        "profiles": profiles,
        "ids": ids,
        "hashes": {pid: patch_hash_from_files(series_root / (pid.replace("-", "_") + ".py"),
                                              anchors_root / f"{pid}.toml") for pid in ids},
        "modules": {pid: anchor_modules(anchors_root / f"{pid}.toml") for pid in ids},
    }
