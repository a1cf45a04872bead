"""Small, formatting-preserving edits of ``series/<patch>.py`` (libcst), for ``rebase --write`` and ``record``.

The edits: widening a variant's applies-range to a release its transform was shown to
carry forward to (:func:`widen_variant`), ending a variant before a release with a
verdict variant (:func:`add_verdict_variant`) or an edit variant (:func:`add_edit_variant`,
also for ``record`` of an edit made inside a variant's range) after it, and giving a variant
new edits (:func:`replace_variant_edits`, ``record`` of an edit made where a variant
starts). Each writes through :mod:`patchq.authoring.repowrite` (atomic, verified; or staged
in a transaction). The variant is found by its range string (the first argument of
``variant(...)``); what else changes is that string, the ``edits=`` argument and the
operations dicts (``OPS_<version>``) these edits add or leave unread.
"""

from __future__ import annotations

import ast
import json
import re
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
            # (a one-element list spread over lines: the newline and indent after its "[")
            sep = next((e.comma for e in updated.elements if isinstance(e.comma, cst.Comma)
                        and isinstance(e.comma.whitespace_after, cst.ParenthesizedWhitespace)),
                       cst.Comma(whitespace_after=updated.lbracket.whitespace_after)
                       if isinstance(updated.lbracket.whitespace_after, cst.ParenthesizedWhitespace)
                       else cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
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
    text = _read(Path(path), txn)
    name = "OPS_" + str(version).replace(".", "_").replace("-", "_")
    def element(applies_range: str) -> str:
        return (f"variant({json.dumps(applies_range)}, edits={{anchor: statement_edit(ops) "
                f"for anchor, ops in {name}.items()}})")

    tr = _Verdict(applies, version, "upstreamed", "", element)
    new = cst.parse_module(text).visit(tr).code
    if len(tr.hits) != 1:
        raise SeriesError(f"{path}: expected one variant(\"{applies}\", ...) call in a list, found {len(tr.hits)}")
    new = _with_ops_block(new, path, name, version, note, ops)
    if write:
        _write(Path(path), new, txn)
    return (*tr.hits[0], tr.new_ranges[0])


def _with_ops_block(text: str, path: Path, name: str, version: Version, note: str,
                    ops: dict[str, list[dict]]) -> str:
    """``text`` with ``name = <ops>`` (and a comment naming ``version`` and ``note``) above
    ``PATCH = ``, and the ``statement_edit`` import added when missing.

    Raises:
        SeriesError: no ``PATCH =``.
    """
    from patchq.authoring.importer import _literal

    at = text.find("\nPATCH = ")
    if at < 0:
        raise SeriesError(f"{path}: no `PATCH = patch(...)` to put the new variant's operations above")
    block = f"\n# vllm {version}: {note}\n{name} = {_literal(ops, 0)}\n\n"
    text = text[:at + 1] + block.lstrip("\n") + "\n" + text[at + 1:]
    if "import statement_edit" not in text:
        text = "from patchq.statements import statement_edit\n" + text if not text.startswith('"""') else \
            _after_docstring(text, "from patchq.statements import statement_edit\n")
    return text


#: the ``edits=`` of an edit variant written by ``import``/``record``/``rebase --write``
_OPS_EDITS = re.compile(r"\{anchor: statement_edit\(ops\) for anchor, ops in (?P<name>\w+)\.items\(\)\}")
_PLACEHOLDER = "PATCHQ_NEW_OPS_"


class _SwapEdits(cst.CSTTransformer):
    """Set the ``edits=`` argument of the ``variant(...)`` call whose range equals ``applies``."""

    def __init__(self, applies: SpecifierSet, edits: cst.BaseExpression) -> None:
        self.applies, self.edits = applies, edits
        self.hits: list[str] = []
        self.old: list[str] = []  # the source of each replaced edits= expression

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not (isinstance(updated.func, cst.Name) and updated.func.value == "variant" and updated.args
                and isinstance(updated.args[0].value, cst.SimpleString)):
            return updated
        text = ast.literal_eval(updated.args[0].value.value)
        try:
            if SpecifierSet(text) != self.applies:
                return updated
        except InvalidSpecifier:
            return updated
        args = list(updated.args)
        at = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == "edits"), None)
        if at is None:
            return updated  # a verdict variant: no edits to set
        self.hits.append(text)
        self.old.append(cst.Module([]).code_for_node(args[at].value))
        args[at] = args[at].with_changes(value=self.edits)
        return updated.with_changes(args=args)


def _dict_assignment(st: cst.CSTNode, names: set[str]) -> bool:
    """True for a top-level ``NAME = {...}`` (a dict literal) of one of ``names``."""
    return (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)
            and len(st.body[0].targets) == 1 and isinstance(st.body[0].targets[0].target, cst.Name)
            and st.body[0].targets[0].target.value in names and isinstance(st.body[0].value, cst.Dict))


def _reads(text: str) -> dict[str, int]:
    """How often each name is read in ``text``."""
    out: dict[str, int] = {}
    for n in ast.walk(ast.parse(text)):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out[n.id] = out.get(n.id, 0) + 1
    return out


def _set_dict(text: str, name: str, ops: dict[str, list[dict]]) -> str:
    """``text`` with the value of its top-level ``name = {...}`` set to ``ops`` (comments kept)."""
    from patchq.authoring.importer import _literal

    value = cst.parse_expression(_literal(ops, 0))
    module = cst.parse_module(text)
    body: list[cst.CSTNode] = []
    for st in module.body:
        if _dict_assignment(st, {name}):
            assert isinstance(st, cst.SimpleStatementLine)  # _dict_assignment checked its shape
            st = st.with_changes(body=[st.body[0].with_changes(value=value)])
        body.append(st)
    return module.with_changes(body=body).code


def replace_variant_edits(path: Path, applies: SpecifierSet, version: Version, ops: dict[str, list[dict]],
                          note: str, *, write: bool = True, txn: Transaction | None = None) -> str:
    """Give the edit variant whose range equals ``applies`` (it starts at ``version``) new
    edits: statement operations (:mod:`patchq.statements`) per anchor id. Its range and
    other arguments stay. When its ``edits=`` reads an operations dict nothing else reads
    (``OPS_<version>`` as ``import``, ``record`` and ``rebase --write`` write it), that
    dict's value is replaced in place; otherwise the operations go into a new
    ``OPS_<version>`` (``_2``, ... while taken) above ``PATCH``, and an operations dict the
    old ``edits=`` read that nothing reads any more is removed. Written atomically, or
    staged in the :class:`~patchq.authoring.repowrite.Transaction` ``txn``.

    Returns:
        The variant's range text.
    Raises:
        SeriesError: no such ``variant("...", edits=...)`` call, or more than one; no ``PATCH =``.
    """
    text = _read(Path(path), txn)
    tr = _SwapEdits(applies, cst.parse_expression(
        f"{{anchor: statement_edit(ops) for anchor, ops in {_PLACEHOLDER}.items()}}"))
    swapped = cst.parse_module(text).visit(tr).code
    if len(tr.hits) != 1 or _PLACEHOLDER in text:
        raise SeriesError(f"{path}: expected one variant(\"{applies}\", edits=...) call, found {len(tr.hits)}")
    own = _OPS_EDITS.fullmatch(" ".join(tr.old[0].split()))
    module = cst.parse_module(text)
    if own and _reads(text).get(own["name"]) == 1 and any(_dict_assignment(st, {own["name"]}) for st in module.body):
        new = _set_dict(text, own["name"], ops)
    else:
        old_names = {n.id for n in ast.walk(ast.parse(tr.old[0].strip(), mode="eval")) if isinstance(n, ast.Name)}
        dead = old_names - set(_reads(swapped))
        module = cst.parse_module(swapped)
        swapped = module.with_changes(body=[st for st in module.body if not _dict_assignment(st, dead)]).code
        taken = set(_reads(swapped)) | {n.id for n in ast.walk(ast.parse(swapped)) if isinstance(n, ast.Name)}
        base = "OPS_" + str(version).replace(".", "_").replace("-", "_")
        name = next(n for n in (base, *(f"{base}_{i}" for i in range(2, 1000))) if n not in taken)
        new = _with_ops_block(swapped.replace(_PLACEHOLDER, name), path, name, version, note, ops)
    if write:
        _write(Path(path), new, txn)
    return tr.hits[0]


def _after_docstring(text: str, line: str) -> str:
    """``text`` with ``line`` inserted after its module docstring."""
    tree = ast.parse(text)
    end = tree.body[0].end_lineno if tree.body and isinstance(tree.body[0], ast.Expr) else 0
    lines = text.splitlines(keepends=True)
    return "".join(lines[:end]) + "\n" + line + "".join(lines[end:])


class _PatchArguments(cst.CSTTransformer):
    """Set keyword arguments of the ``patch(...)`` call that ``PATCH = `` assigns."""

    def __init__(self, values: dict[str, cst.BaseExpression]) -> None:
        self.values = values
        self.hits = 0

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        call = updated.value
        if not (len(updated.targets) == 1 and isinstance(updated.targets[0].target, cst.Name)
                and updated.targets[0].target.value == "PATCH" and isinstance(call, cst.Call)
                and isinstance(call.func, cst.Name) and call.func.value == "patch"):
            return updated
        self.hits += 1
        args = list(call.args)
        for name, value in self.values.items():
            at = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == name), None)
            if at is not None:
                args[at] = args[at].with_changes(value=value)
                continue
            where = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == "variants"),
                         len(args))
            like = args[where - 1] if where else (args[0] if args else None)
            new = cst.Arg(keyword=cst.Name(name), value=value, equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            if like is not None and like.comma is not cst.MaybeSentinel.DEFAULT:
                new = new.with_changes(comma=like.comma)
            elif where == len(args) and args:  # the last argument gets a comma before the new one
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.insert(where, new)
        return updated.with_changes(value=call.with_changes(args=args))


def set_patch_arguments(path: Path, values: dict[str, str | list[str]], *, write: bool = True,
                        txn: Transaction | None = None) -> str:
    """Set keyword arguments of ``PATCH = patch(...)`` in ``series/<patch>.py`` (a string or
    a list of strings each: ``summary``, ``runtime_names``...), the rest of the file as it
    is (written atomically, or staged in the :class:`~patchq.authoring.repowrite.Transaction`
    ``txn``). An argument the call lacks is added before ``variants=``.

    Returns:
        The new text.
    Raises:
        SeriesError: no ``PATCH = patch(...)``, or more than one.
    """
    text = _read(Path(path), txn)
    tr = _PatchArguments({k: cst.parse_expression(repr(v)) for k, v in values.items()})
    new = cst.parse_module(text).visit(tr).code
    if tr.hits != 1:
        raise SeriesError(f"{path}: expected one `PATCH = patch(...)`, found {tr.hits}")
    if write and new != text:
        _write(Path(path), new, txn)
    return new
