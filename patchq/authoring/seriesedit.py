"""Small, formatting-preserving edits of ``series/<patch>.py`` (libcst), for ``rebase --write``.

Only one edit exists: widening a variant's applies-range to a release its transform was
shown to carry forward to (:func:`widen_variant`). The variant is found by its range
string (the first argument of ``variant(...)``) and only that string literal changes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import Version

from patchq.errors import SeriesError


def widened(spec_text: str, version: Version) -> str:
    """``spec_text`` with the clauses that exclude ``version`` replaced by ``<=version``.

    ``">=0.15,<0.26"`` widened to 0.26.0 is ``">=0.15,<=0.26.0"``. Only upper bounds
    (``<``, ``<=``) may be dropped.

    Raises:
        SeriesError: a lower bound or an exclusion excludes ``version``.
    """
    clauses = [c.strip() for c in spec_text.split(",") if c.strip()]
    keep, drop = [], []
    for c in clauses:
        (keep if Specifier(c).contains(version, prereleases=True) else drop).append(c)
    if not drop:
        return spec_text
    bad = [c for c in drop if Specifier(c).operator not in ("<", "<=")]
    if bad:
        raise SeriesError(f"cannot widen {spec_text!r} to {version}: {', '.join(bad)} excludes it")
    return ",".join(keep + [f"<={version}"])


class _Widen(cst.CSTTransformer):
    def __init__(self, applies: SpecifierSet, version: Version) -> None:
        self.applies, self.version = applies, version
        self.hits: list[tuple[str, str]] = []

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not (isinstance(updated.func, cst.Name) and updated.func.value == "variant" and updated.args):
            return updated
        first = updated.args[0].value
        if not isinstance(first, cst.SimpleString):
            return updated
        text = ast.literal_eval(first.value)
        try:
            if SpecifierSet(text) != self.applies:
                return updated
        except InvalidSpecifier:
            return updated
        new_text = widened(text, self.version)
        quote = first.value[0]
        self.hits.append((text, new_text))
        new = cst.SimpleString(f"{quote}{new_text}{quote}")
        return updated.with_changes(args=[updated.args[0].with_changes(value=new), *updated.args[1:]])


def widen_variant(path: Path, applies: SpecifierSet, version: Version, *, write: bool = True) -> tuple[str, str]:
    """Widen the variant of ``series/<patch>.py`` whose range equals ``applies`` to ``version``.

    Returns:
        (old range text, new range text).
    Raises:
        SeriesError: no such ``variant("...")`` call, or more than one, or it cannot widen.
    """
    text = Path(path).read_text(encoding="utf-8")
    tr = _Widen(applies, version)
    new = cst.parse_module(text).visit(tr)
    if len(tr.hits) != 1:
        raise SeriesError(f"{path}: expected one variant(\"{applies}\", ...) call, found {len(tr.hits)}")
    if write and new.code != text:
        Path(path).write_text(new.code, encoding="utf-8")
    return tr.hits[0]
