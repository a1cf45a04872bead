"""Small, formatting-preserving edits of ``series/<patch>.py`` (libcst), for ``rebase --write``.

Two edits exist: widening a variant's applies-range to a release its transform was
shown to carry forward to (:func:`widen_variant`), and ending a variant before a release
with a verdict variant after it (:func:`add_verdict_variant`). Both write through
:mod:`patchq.authoring.repowrite` (atomic, verified; or staged in a transaction). The variant is found by its range
string (the first argument of ``variant(...)``) and only that string literal changes.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst
from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import Version

from patchq.errors import SeriesError

if TYPE_CHECKING:
    from patchq.authoring.repowrite import Transaction


def widened(spec_text: str, version: Version) -> str:
    """``spec_text`` with the clauses that exclude ``version`` replaced by ``<=version``.

    ``">=0.15,<0.26"`` widened to 0.26.0 is ``">=0.15,<=0.26.0"``. Only upper bounds
    (``<``, ``<=``) may be dropped.

    Raises:
        SeriesError: a lower bound or an exclusion excludes ``version``.
    """
    clauses = [c.strip() for c in spec_text.split(",") if c.strip()]
    keep: list[str] = []
    drop: list[str] = []
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


def _read(path: Path, txn: Transaction | None) -> str:
    from patchq.authoring import repowrite

    raw = txn.staged(path) if txn is not None else repowrite.read_regular(path)
    if raw is None:
        raise SeriesError(f"{path}: missing")
    return raw.decode("utf-8")


def _write(path: Path, text: str, txn: Transaction | None) -> None:
    """Atomic and verified (:mod:`patchq.authoring.repowrite`), or staged in ``txn``."""
    from patchq.authoring import repowrite

    if txn is not None:
        txn.write(path, text)
    else:
        repowrite.write_file(path, text)


def widen_variant(path: Path, applies: SpecifierSet, version: Version, *, write: bool = True,
                  txn: Transaction | None = None) -> tuple[str, str]:
    """Widen the variant of ``series/<patch>.py`` whose range equals ``applies`` to ``version``
    (written atomically, or staged in the :class:`~patchq.authoring.repowrite.Transaction` ``txn``).

    Returns:
        (old range text, new range text).
    Raises:
        SeriesError: no such ``variant("...")`` call, or more than one, or it cannot widen.
    """
    text = _read(Path(path), txn)
    tr = _Widen(applies, version)
    new = cst.parse_module(text).visit(tr)
    if len(tr.hits) != 1:
        raise SeriesError(f"{path}: expected one variant(\"{applies}\", ...) call, found {len(tr.hits)}")
    if write and new.code != text:
        _write(Path(path), new.code, txn)
    return tr.hits[0]


class _Verdict(cst.CSTTransformer):
    def __init__(self, applies: SpecifierSet, version: Version, kind: str, reason: str,
                 element: Callable[[str], str] | None = None) -> None:
        self.applies, self.version, self.kind, self.reason = applies, version, kind, reason
        self.element = element  # the new variant's source for its range; default: the verdict variant
        self.hits: list[tuple[str, str]] = []
        self.new_ranges: list[str] = []  # the range of each variant added, beside its hit

    def _matches(self, node: cst.BaseExpression) -> str | None:
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "variant"
                and node.args and isinstance(node.args[0].value, cst.SimpleString)):
            return None
        text = ast.literal_eval(node.args[0].value.value)
        try:
            return text if SpecifierSet(text) == self.applies else None
        except InvalidSpecifier:
            return None

    def leave_List(self, original: cst.List, updated: cst.List) -> cst.BaseExpression:
        out = []
        for el in updated.elements:
            out.append(el)
            text = self._matches(el.value)
            if text is None:
                continue
            call = el.value  # _matches checked its shape: variant("<spec>", ...)
            assert isinstance(call, cst.Call)
            first = call.args[0].value
            assert isinstance(first, cst.SimpleString)
            quote = first.value[0]
            capped, new_range = _split_range(text, self.version)
            # the new element goes on its own line: it takes the separator the list uses
            # between elements, and the matched element's own comma moves after it
            sep = next((e.comma for e in updated.elements if isinstance(e.comma, cst.Comma)
                        and isinstance(e.comma.whitespace_after, cst.ParenthesizedWhitespace)),
                       cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            out[-1] = el.with_changes(value=call.with_changes(
                args=[call.args[0].with_changes(value=cst.SimpleString(f"{quote}{capped}{quote}")), *call.args[1:]]),
                comma=sep)
            new = cst.parse_expression(self.element(new_range) if self.element else
                                       f"variant({json.dumps(new_range)}, {self.kind}={json.dumps(self.reason)})")
            out.append(el.with_changes(value=new))
            self.hits.append((text, capped))
            self.new_ranges.append(new_range)
        return updated.with_changes(elements=out)


def add_verdict_variant(path: Path, applies: SpecifierSet, version: Version, kind: str, reason: str,
                        *, write: bool = True, txn: Transaction | None = None) -> tuple[str, str]:
    """End the variant whose range equals ``applies`` before ``version`` and add a verdict variant.

    ``variant(">=0.26", edits=...)`` becomes ``variant(">=0.26,<0.33.1", edits=...)``, followed
    by ``variant(">=0.33.1", upstreamed="<reason>")`` (``kind``: ``upstreamed`` or ``absent``).

    Returns:
        (old range text, capped range text).
    Raises:
        SeriesError: no such ``variant("...")`` call in a list, or more than one; a bad kind.
    """
    if kind not in ("upstreamed", "absent"):
        raise SeriesError(f"a verdict variant is 'upstreamed' or 'absent', not {kind!r}")
    text = _read(Path(path), txn)
    tr = _Verdict(applies, version, kind, reason)
    new = cst.parse_module(text).visit(tr)
    if len(tr.hits) != 1:
        raise SeriesError(f"{path}: expected one variant(\"{applies}\", ...) call in a list, found {len(tr.hits)}")
    if write and new.code != text:
        _write(Path(path), new.code, txn)
    return tr.hits[0]


def _split_range(text: str, version: Version) -> tuple[str, str]:
    """Split the variant range ``text`` at ``version``: (the old variant capped before it, the
    new variant's range from it). The new one keeps the old one's upper bounds, so it never
    overlaps a later variant (the first matching variant wins: ``Patch.variant_for``); the
    capped one drops upper bounds that ``<version`` already implies.

    ``">=0.23.0,<0.33.0"`` at 0.30.0 -> (``">=0.23.0,<0.30.0"``, ``">=0.30.0,<0.33.0"``).
    """
    cut = Version(str(version))
    kept, later, tighter = [], [], False
    for part in (c.strip() for c in text.split(",")):
        if not part:
            continue
        try:
            spec = Specifier(part)
            bound = Version(spec.version) if spec.operator in ("<", "<=") else None
        except (InvalidSpecifier, ValueError):
            kept.append(part)
            continue
        if bound is None:
            kept.append(part)
        elif bound > cut or (spec.operator == "<=" and bound == cut):
            later.append(part)  # an upper bound past the cut: implied by <version, and the new one's
        else:
            kept.append(part)  # the old range already ends at or before the cut
            tighter = True
    capped = ",".join(kept if tighter else [*kept, f"<{version}"])
    return capped, ",".join([f">={version}", *later])


def add_edit_variant(path: Path, applies: SpecifierSet, version: Version, ops: dict[str, list[dict]],
                     note: str, *, write: bool = True,
                     txn: Transaction | None = None) -> tuple[str, str, str]:
    """End the variant whose range equals ``applies`` before ``version`` and add an edit
    variant from ``version`` on: statement operations (:mod:`patchq.statements`) per
    anchor id, stored as ``OPS_<version>`` above ``PATCH``, the ``statement_edit`` import
    added when missing (written atomically, or staged in the
    :class:`~patchq.authoring.repowrite.Transaction` ``txn``).

    Returns:
        (old range text, capped range text, the new variant's range text: :func:`_split_range`).
    Raises:
        SeriesError: no such ``variant("...")`` call in a list, or more than one; no ``PATCH =``.
    """
    from patchq.authoring.importer import _literal

    text = _read(Path(path), txn)
    name = "OPS_" + str(version).replace(".", "_").replace("-", "_")
    def element(applies_range: str) -> str:
        return (f"variant({json.dumps(applies_range)}, edits={{anchor: statement_edit(ops) "
                f"for anchor, ops in {name}.items()}})")

    tr = _Verdict(applies, version, "upstreamed", "", element)
    new = cst.parse_module(text).visit(tr).code
    if len(tr.hits) != 1:
        raise SeriesError(f"{path}: expected one variant(\"{applies}\", ...) call in a list, found {len(tr.hits)}")
    at = new.find("\nPATCH = ")
    if at < 0:
        raise SeriesError(f"{path}: no `PATCH = patch(...)` to put the new variant's operations above")
    block = f"\n# vllm {version}: {note}\n{name} = {_literal(ops, 0)}\n\n"
    new = new[:at + 1] + block.lstrip("\n") + "\n" + new[at + 1:]
    if "import statement_edit" not in new:
        new = "from patchq.statements import statement_edit\n" + new if not new.startswith('"""') else \
            _after_docstring(new, "from patchq.statements import statement_edit\n")
    if write:
        _write(Path(path), new, txn)
    return (*tr.hits[0], tr.new_ranges[0])


def _after_docstring(text: str, line: str) -> str:
    """``text`` with ``line`` inserted after its module docstring."""
    tree = ast.parse(text)
    end = tree.body[0].end_lineno if tree.body and isinstance(tree.body[0], ast.Expr) else 0
    lines = text.splitlines(keepends=True)
    return "".join(lines[:end]) + "\n" + line + "".join(lines[end:])
