"""What an edit changed, as normalized AST; whether it survives; whether it is upstream.

Every edit of a plan (:mod:`patchq.plan.engine`) is summarised as an :class:`EditChange`:
the statements it **added** (inserted, or put in place of others) and the ones it
**removed**, found by a block-by-block diff of the definition's :mod:`ast` before and
after the edit (:func:`diff_definition`). Statements are compared by ``ast.dump``:
formatting, comments, quoting and re-wrapping do not matter. A compound statement whose
header (``if`` test, ``for`` target, ``def`` signature...) is unchanged is descended
into, so an insertion inside a branch is the inserted statement, not the branch; a
statement whose header changed is added whole (``if a:`` -> ``if guard and a:``).

Three questions are answered from these summaries:

* **survival** (:func:`missing_items`): every statement a patch added must still be in
  the final text of its definition once the whole profile is planned;
* **upstream, forwards** (:func:`upstream_items`): an added statement already present
  in the release's pristine definition at the same depth (anywhere in it), or an added member
  (``def``/``class`` directly in the edited class or function body) whose name the
  pristine definition already defines, is upstream on that release;
* **duplicate members** (:func:`duplicate_members`): an edit must never give a class or
  function body a second definition of a name.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from patchq.report import clip

_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Item:
    """One statement an edit added (or removed).

    Attributes:
        key: the statement's normalized-AST key (:func:`_key`; equal for statements that
            differ only in formatting, comments, quoting or wrapping; valid within one
            process).
        code: the statement as one line of source (``ast.unparse``, cut to 100 chars).
        member: the name when the statement is a ``def``/``class`` directly in the edited
            definition's body (a method or nested class the edit adds), else None.
        depth: how deep the statement is in the edited definition (1: its own body; None
            when not known): a statement is upstream by identity only at its own depth.
    """

    key: int
    code: str
    member: str | None = None
    #: nesting depth in the edited definition (1: its own body), when known
    depth: int | None = field(default=None, compare=False)


@dataclass
class EditChange:
    """What one edit (one anchor of one patch) did to one definition.

    Attributes:
        patch_id, anchor: the edit. relpath, qualname: the definition.
        added, removed: see :class:`Item`. upstream: the added items already in the
            release's pristine definition, with their ``relpath:line`` there (filled by
            the engine; empty when none is).
    """

    patch_id: str
    anchor: str
    relpath: str
    qualname: str
    added: list[Item] = field(default_factory=list)
    removed: list[Item] = field(default_factory=list)
    upstream: list[tuple[Item, str]] = field(default_factory=list)
    #: member names the edit defines a second time (:func:`duplicate_members`)
    duplicates: list[str] = field(default_factory=list)
    #: the definition's :mod:`ast` before and after the edit (None after a removal)
    before: ast.AST | None = field(default=None, repr=False, compare=False)
    after: ast.AST | None = field(default=None, repr=False, compare=False)
    #: evidence when the added items were found upstream by meaning
    #: (:func:`patchq.plan.forward.by_meaning`); empty when not
    meaning: list[str] = field(default_factory=list, repr=False, compare=False)

    @property
    def is_upstream(self) -> bool:
        """True when the edit adds something and all of it is already in the release."""
        return bool(self.added) and len(self.upstream) == len(self.added)


def one_line(node: ast.AST, limit: int = 100) -> str:
    """A statement as one line of source (``ast.unparse``; a block shown as `` ...``)."""
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed node
        text = type(node).__name__
    first = text.splitlines()[0] if text else ""
    if isinstance(node, (*_DEFS, ast.If, ast.For, ast.While, ast.With, ast.Try)) and "\n" in text:
        first += " ..."
    flat = " ".join(first.split())
    return clip(flat, limit)


_SKIP = frozenset({"type_comment"})


def _value_key(value: object) -> object:
    if isinstance(value, ast.AST):
        return _key(value)
    if isinstance(value, list):
        return tuple(_value_key(v) for v in value)
    return (type(value).__name__, repr(value))


def _key(node: ast.AST) -> int:
    """The normalized-AST key of a node: a hash over its type and fields, positions and
    formatting left out (what ``ast.dump`` shows), computed once per node (kept on it)."""
    cached = node.__dict__.get("_patchq_key")
    if cached is not None:
        return cached
    key = hash((type(node).__name__,
                tuple((f, _value_key(getattr(node, f, None))) for f in node._fields if f not in _SKIP)))
    node.__dict__["_patchq_key"] = key
    return key


def _header_key(node: ast.AST) -> int:
    """The key of a statement with its blocks left out (its header)."""
    return hash((type(node).__name__,
                 tuple((f, _value_key(getattr(node, f, None))) for f in node._fields
                       if f not in _SKIP and f not in _BLOCK_FIELDS)))


def _blocks(node: ast.AST) -> list[list]:
    out = []
    for name in _BLOCK_FIELDS:
        value = getattr(node, name, None)
        if isinstance(value, list):
            out.append(value)
    return out


def _item(node: ast.AST, top: bool, depth: int | None = None) -> Item:
    member = node.name if top and isinstance(node, _DEFS) else None
    return Item(_key(node), one_line(node), member, depth)


def _diff_block(old: list, new: list, top: bool, added: list[Item], removed: list[Item], depth: int = 1) -> None:
    if old and isinstance(old[0], ast.ExceptHandler) or new and isinstance(new[0], ast.ExceptHandler):
        ko, kn = [_key(h) for h in old], [_key(h) for h in new]
    else:
        ko, kn = [_key(s) for s in old], [_key(s) for s in new]
    sm = difflib.SequenceMatcher(None, ko, kn, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        olds, news = old[i1:i2], new[j1:j2]
        if tag == "replace" and len(olds) == len(news):
            for o, n in zip(olds, news, strict=False):
                if type(o) is type(n) and _header_key(o) == _header_key(n):
                    for bo, bn in zip(_blocks(o), _blocks(n), strict=False):
                        _diff_block(bo, bn, False, added, removed, depth + 1)
                else:
                    removed.append(_item(o, top, depth))
                    added.append(_item(n, top, depth))
            continue
        removed += [_item(o, top, depth) for o in olds]
        added += [_item(n, top, depth) for n in news]


def diff_definition(before: ast.AST, after: ast.AST) -> tuple[list[Item], list[Item]]:
    """(added, removed) statements between two versions of one definition (module docstring).

    A changed signature, decorator list or base list of the definition itself counts as
    the whole definition added (and removed).
    """
    added: list[Item] = []
    removed: list[Item] = []
    if type(before) is not type(after) or _header_key(before) != _header_key(after):
        return [_item(after, False)], [_item(before, False)]
    for bo, bn in zip(_blocks(before), _blocks(after), strict=False):
        _diff_block(bo, bn, True, added, removed)
    return added, removed


def statement_key(stmt: ast.AST) -> int:
    """The normalized-AST key of one statement (see :class:`Item`)."""
    return _key(stmt)


def statement_keys(defn: ast.AST) -> dict[int, ast.stmt]:
    """key -> statement for every statement in ``defn`` (itself included)."""
    out: dict[int, ast.stmt] = {}
    for node in ast.walk(defn):
        if isinstance(node, ast.stmt):
            out.setdefault(_key(node), node)
    return out


def member_names(defn: ast.AST) -> dict[str, list[ast.stmt]]:
    """name -> ``def``/``class`` statements directly in ``defn``'s body (also under
    ``if``/``try`` there, as :func:`patchq.plan.anchors.ast_index` counts them)."""
    out: dict[str, list[ast.stmt]] = {}

    def walk(body: list) -> None:
        for stmt in body:
            if isinstance(stmt, _DEFS):
                out.setdefault(stmt.name, []).append(stmt)
            elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
                for block in _blocks(stmt):
                    walk([s for s in block if isinstance(s, ast.stmt)])
                for h in getattr(stmt, "handlers", []):
                    walk(h.body)

    walk(getattr(defn, "body", []))
    return out


def upstream_items(change: EditChange, pristine: ast.AST, relpath: str, offset: int = 0) -> list[tuple[Item, str]]:
    """The added items of ``change`` already present in ``pristine`` (the release's own
    definition), each with ``relpath:line`` of where it is. Counts matter: an edit that
    adds the same statement in four places finds it upstream only as often as the
    release has it (each release statement is evidence for one added item). ``offset``:
    added to the node's line numbers (0 when ``pristine`` was parsed from the whole file)."""
    occurrences: dict[int, list[ast.stmt]] = {}
    at_depth: dict[tuple[int, int], list[ast.stmt]] = {}
    for node, depth in _statements_with_depth(pristine):
        occurrences.setdefault(_key(node), []).append(node)
        at_depth.setdefault((_key(node), depth), []).append(node)
    for nodes in [*occurrences.values(), *at_depth.values()]:
        nodes.sort(key=lambda n: n.lineno)
    members = member_names(pristine)
    out = []
    for item in change.added:
        # a statement the edit adds at some depth is upstream where the release has it at that
        # depth: a bare `return` inserted first in a function is not the `return` of a branch
        left = occurrences.get(item.key) if item.depth is None else at_depth.get((item.key, item.depth))
        hit = left.pop(0) if left else None
        if hit is None and item.member is not None and item.member in members:
            hit = members[item.member][0]
        if hit is not None:
            out.append((item, f"{relpath}:{hit.lineno + offset}"))
    return out


def _statements_with_depth(defn: ast.AST) -> list[tuple[ast.stmt, int]]:
    """Every statement in ``defn`` with its depth (1: ``defn``'s own body; a handler's or a
    case's body two deeper than its ``try``/``match``, as :func:`diff_definition` counts it)."""
    out: list[tuple[ast.stmt, int]] = []

    def walk(stmts: list, depth: int) -> None:
        for st in stmts:
            if isinstance(st, (ast.ExceptHandler, ast.match_case)):  # its body: one deeper than the list
                walk(st.body, depth + 1)
                continue
            if not isinstance(st, ast.stmt):
                continue
            out.append((st, depth))
            for block in _blocks(st):
                walk(block, depth + 1)

    for block in _blocks(defn):
        walk(block, 1)
    return out


def missing_items(items: Iterable[Item], final: ast.AST | None) -> list[Item]:
    """The items whose statement is not in ``final`` (the definition at the end of the
    plan; None when it no longer exists)."""
    keys = statement_keys(final) if final is not None else {}
    return [i for i in items if i.key not in keys]


def duplicate_members(before: ast.AST, after: ast.AST) -> list[str]:
    """Names that ``after`` defines more often than ``before`` and more than once
    (an edit that adds a method the class already has)."""
    was, now = member_names(before), member_names(after)
    return sorted(n for n, defs in now.items() if len(defs) > 1 and len(defs) > len(was.get(n, [])))
