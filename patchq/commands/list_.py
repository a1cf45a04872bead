"""``patchq list``: the profiles and patches of the series (``patchq.list/1``).

Fields: ``profiles`` [{``name``, ``description``, ``patches``}], ``patches`` [{``id``,
``hash``, ``summary``, ``applies``, ``upstream``, ``variants`` [{``applies``, ``kind``,
``anchors``, ``reason``}]}].

A patch's declaration is read from its file's syntax tree when it is written as plain
literals (``PATCH = patch(id="...", ..., variants=[variant("...", edits={...}), ...])``,
as every patch of the project is): the series file is not run, so ``list`` imports
neither libcst nor the patch's transforms. A declaration that is not plain literals
(a computed range, an unknown keyword) is loaded the ordinary way
(:meth:`patchq.series.Series.patch`), which also reports any error in it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from patchq import hashing
from patchq import series as series_mod
from patchq.errors import EXIT_OK, SeriesError

if TYPE_CHECKING:
    from patchq.documents import ListDoc

SCHEMA = "patchq.list/1"

_PATCH_KEYS = {"id", "summary", "why", "applies", "variants", "upstream", "upstream_check", "probe",
               "requires", "conflicts", "supersedes", "runtime_names", "removes"}
_RELATIONS = ("requires", "conflicts", "supersedes")
_VARIANT_KEYS = {"edits", "upstreamed", "absent", "note"}


def run(series_dir: str | None = None) -> tuple[ListDoc, int]:
    """The ``patchq.list/1`` document of the series at ``series_dir`` (None: the default
    series, :func:`patchq.series.series_dir`). Returns (document, 0).

    Raises:
        SeriesError: malformed series data, or a profile naming an unknown patch.
    """
    s = series_mod.load(series_dir)
    for pr in s.profiles.values():  # list shows every profile: each must resolve
        unknown = [pid for pid in pr.patches if not series_mod.module_file(s.root, pid).is_file()]
        if unknown:
            raise SeriesError(f"{s.root / 'profiles.toml'}: profile {pr.name!r} names unknown patch(es) "
                              f"{', '.join(unknown)} (no series file for them)")
    patches = [_row(s, pid) for pid in s.all_patch_ids()]
    if any(row[k] for row in patches for k in _RELATIONS):  # relations are checked on the loaded patches
        for name in s.profiles:
            s.patches_of(name)
    doc: ListDoc = {"schema": SCHEMA,
                    "series": s.location.as_json() if s.location else None,
                    "profiles": [{"name": pr.name, "description": pr.description, "patches": list(pr.patches)}
                                 for pr in s.profiles.values()],
                    "patches": patches}
    return doc, EXIT_OK


def _row(s: series_mod.Series, pid: str) -> dict:
    path = series_mod.module_file(s.root, pid)
    declared = _declared(path, pid) if path.is_file() else None
    if declared is not None:
        anchor_file = s.anchors_root / f"{pid}.toml"
        known = set(series_mod.load_anchor_file(anchor_file)) if anchor_file.is_file() else set()
        for v in declared["variants"]:
            missing = [a for a in v["anchors"] if a not in known]
            if missing:
                raise SeriesError(f"{pid}: variant {v['applies']} edits unknown anchors {missing} "
                                  f"(define them in {anchor_file})")
        return {"id": pid, "hash": hashing.patch_hash_from_files(path, anchor_file), **declared}
    p = s.patch(pid)  # not plain literals (or no file: the loader says why)
    return {"id": p.id, "hash": p.hash, "summary": p.summary, "applies": str(p.applies),
            "upstream": list(p.upstream), **p.relations(),
            "variants": [{"applies": str(v.applies), "kind": v.kind, "anchors": list(v.edits),
                          "reason": v.upstreamed or v.absent or ""} for v in p.variants]}


def _literal(node: ast.AST, kind: type | tuple[type, ...]) -> Any:
    value = ast.literal_eval(node)
    if not isinstance(value, kind):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ValueError(f"not a {name}")
    return value


def _declared(path: Path, pid: str) -> dict | None:
    """The list fields of ``PATCH = patch(...)`` in ``path`` when every one of them is a
    plain literal, else None (the caller loads the module instead).

    Raises:
        SeriesError: the file is not UTF-8 or not valid Python (``FILE:LINE``); a bad
            applies-range.
    """
    try:
        tree = ast.parse(path.read_bytes().decode("utf-8"), filename=str(path))
    except UnicodeDecodeError as exc:
        raise SeriesError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except SyntaxError as exc:
        raise SeriesError(f"{path}:{exc.lineno}: SyntaxError: {exc.msg}") from None
    kw = _patch_keywords(tree)
    if kw is None:
        return None
    try:
        if _literal(kw["id"], str) != pid or not isinstance(kw["variants"], (ast.List, ast.Tuple)):
            return None
        variants = [_variant(v, path, pid) for v in kw["variants"].elts]
        if any(v is None for v in variants):
            return None
        return {"summary": _literal(kw["summary"], str),
                "applies": _range(kw["applies"], "applies=", path, pid),
                "upstream": list(_literal(kw["upstream"], (list, tuple))) if "upstream" in kw else [],
                **{k: list(_literal(kw[k], (list, tuple))) if k in kw else [] for k in _RELATIONS},
                "variants": variants}
    except (ValueError, TypeError, SyntaxError):
        return None


def _patch_keywords(tree: ast.Module) -> dict[str, ast.expr] | None:
    """The keyword arguments of the module's one ``PATCH = patch(...)`` when it has only
    keywords, known ones, and the required ones; else None."""
    calls = [n.value for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == "PATCH"]
    if len(calls) != 1 or not _is_call(calls[0], "patch") or calls[0].args:
        return None
    kw = {k.arg: k.value for k in calls[0].keywords}
    if None in kw or not set(kw) <= _PATCH_KEYS or not {"id", "summary", "applies", "variants"} <= set(kw):
        return None
    return {k: v for k, v in kw.items() if k is not None}


def _is_call(node: ast.AST, name: str) -> TypeGuard[ast.Call]:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name)


def _range(node: ast.expr, what: str, path: Path, pid: str) -> str:
    """The applies-range literal ``node``, normalized.

    Raises:
        SeriesError: a bad range, naming the file, line and patch.
        ValueError: not a string literal (the caller loads the module instead).
    """
    try:
        return str(series_mod.spec(_literal(node, str), what))
    except SeriesError as exc:
        raise series_mod.in_series_file(path, node.lineno, pid, exc) from None


def _variant(node: ast.AST, path: Path, pid: str) -> dict | None:
    if not _is_call(node, "variant") or len(node.args) != 1:
        return None
    kw = {k.arg: k.value for k in node.keywords}
    if None in kw or not set(kw) <= _VARIANT_KEYS:
        return None
    applies = _range(node.args[0], "variant", path, pid)
    set_ = [k for k in ("edits", "upstreamed", "absent") if k in kw]
    if len(set_) != 1:
        return None  # the loader raises the precise error
    if "edits" in kw:
        if not isinstance(kw["edits"], ast.Dict) or None in kw["edits"].keys:
            return None
        anchors = [_literal(k, str) for k in kw["edits"].keys if k is not None]  # None: refused above
        return {"applies": applies, "kind": "edit", "anchors": anchors, "reason": ""}
    reason = _literal(kw[set_[0]], str)
    return {"applies": applies, "kind": set_[0], "anchors": [], "reason": reason}
