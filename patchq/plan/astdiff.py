"""The element diff of two versions of a definition: flattened statements, hunks, names.

A definition is flattened into its statements in source order (:func:`flatten`): a
compound statement is its header, then its blocks; docstrings are left out; each element
is keyed by its kind, its depth and the normalized AST of the statement (or of its
header), so formatting and comments never count. Two flattened versions give an element
diff (:func:`hunks`, base positions). Each element knows the names it reads and writes
(:attr:`Elem.reads`, :attr:`Elem.writes`): scoped bare names ``scope::x``, attribute
chains ``a.b``; a subscript store or a mutating method call (``x.append(...)``,
``x.set_dtype(...)``, ``x.copy_(...)``: :func:`mutates`) writes ``x``.

The three-way verdict (:mod:`patchq.compat.threeway`) and the backward upstream detection
(:mod:`patchq.plan.backward`) compare with it. Everything here is a pure function of the
:mod:`ast` nodes it is given.
"""

from __future__ import annotations

import ast
import difflib
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
DEFS = (*FUNCS, ast.ClassDef)
_MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "pop", "remove", "clear", "setdefault",
                       "discard", "popitem", "sort", "reverse", "__setitem__", "__delitem__"})
#: method names that change their object by their name's shape: setters and registrations
#: (``set_out_dtype``, ``register_hook``), and torch's in-place methods (``copy_``, ``fill_``)
_MUTATOR_PREFIXES = ("set_", "update_", "reset", "register", "add_", "remove_", "clear_", "append_", "extend_",
                     "insert_", "push", "put", "mark_", "resize", "zero_", "fill_", "copy_")
_SKIP = frozenset({"type_comment"})


def mutates(method: str) -> bool:
    """True when calling ``method`` on an object is taken to change it (a list or dict
    method, a setter or registration by its name, a torch in-place method ``x_``)."""
    return method in _MUTATORS or method.startswith(_MUTATOR_PREFIXES) or \
        (method.endswith("_") and not method.startswith("_"))


# ---------------------------------------------------------------------------
# flattening


@dataclass
class Elem:
    """One element of a flattened definition.

    Attributes:
        key: hash of (kind, depth, normalized AST of the statement, or of its header).
        kind: ``stmt`` | ``head`` (a compound statement's header) | ``block`` (``else:``,
            ``finally:``, ...) | ``def`` (a function's or class's header).
        depth: nesting depth under the anchored definition. node: the statement.
        line, end: 1-based lines in its file. scope: names of the enclosing definitions.
        stop: index after the element's last descendant (its extent in the list).
        block: a ``block`` element's field (``orelse``, ``finalbody``, ``handlers``, ...).
        reads, writes: names (scoped bare names ``scope::x``, attribute chains ``a.b``).
    """

    key: int
    kind: str
    depth: int
    node: ast.AST
    line: int
    end: int
    scope: str
    stop: int = 0
    #: a ``block`` element's field of its compound statement (``orelse``, ``finalbody``, ``handlers``...)
    block: str = ""
    #: (nodes the names come from, their scope): reads/writes are computed on first use
    names_from: tuple = ()
    _names: tuple | None = None

    @property
    def reads(self) -> frozenset:
        return self._rw()[0]

    @property
    def writes(self) -> frozenset:
        return self._rw()[1]

    def _rw(self) -> tuple:
        if self._names is None:
            self._names = _names(*self.names_from) if self.names_from else (frozenset(), frozenset())
        return self._names

    @property
    def code(self) -> str:
        """The element as one line of source."""
        from patchq.plan.survival import one_line

        if self.kind == "block":
            return f"{self.node}:" if isinstance(self.node, str) else "block:"
        return one_line(self.node)


def _value_key(value: object) -> object:
    if isinstance(value, ast.AST):
        return node_key(value)
    if isinstance(value, list):
        return tuple(_value_key(v) for v in value)
    return (type(value).__name__, repr(value))


def node_key(node: ast.AST, skip: Iterable[str] = ()) -> int:
    skip = set(skip) | _SKIP
    return hash((type(node).__name__, tuple((f, _value_key(getattr(node, f, None))) for f in node._fields
                                            if f not in skip)))


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def is_docstring(stmt: ast.AST) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def attr_chain(node: ast.AST) -> str | None:
    """``a.b.c`` for an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _names(nodes: Iterable[ast.AST], scope: str) -> tuple[frozenset, frozenset]:
    """(reads, writes) of ``nodes`` (see :class:`Elem`)."""
    reads: set[str] = set()
    writes: set[str] = set()
    nodes = list(nodes)
    inner, lambda_args = _inner_names(nodes)
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in inner:
                continue
            if isinstance(sub, ast.arg) and id(sub) in lambda_args:
                continue
            _note_names(sub, scope, reads, writes)
    return frozenset(reads), frozenset(writes)


def _inner_names(nodes: list[ast.AST]) -> tuple[set[str], set[int]]:
    """Names bound inside a comprehension or lambda of ``nodes`` (not the function's
    names), and the ids of the lambdas' ``ast.arg`` nodes."""
    inner: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.comprehension):
                inner |= {n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name)}
            elif isinstance(sub, ast.Lambda):
                inner |= {a.arg for a in ast.walk(sub.args) if isinstance(a, ast.arg)}
    lambda_args = {id(a) for node in nodes for sub in ast.walk(node) if isinstance(sub, ast.Lambda)
                   for a in ast.walk(sub.args) if isinstance(a, ast.arg)}
    return inner, lambda_args


def _scoped(chain: str, scope: str) -> str:
    """A dotted chain as is; a bare name qualified by its scope (``scope::name``)."""
    return chain if "." in chain else f"{scope}::{chain}"


def _stores(node: ast.AST) -> bool:
    return isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del))


def _note_names(sub: ast.AST, scope: str, reads: set[str], writes: set[str]) -> None:
    """Add what the one node ``sub`` reads and writes (not its children)."""
    if isinstance(sub, ast.Name):
        (writes if _stores(sub) else reads).add(f"{scope}::{sub.id}")
    elif isinstance(sub, ast.Attribute):
        chain = attr_chain(sub)
        if chain is None:
            return
        if _stores(sub):
            writes.add(chain)
        else:
            parts = chain.split(".")
            reads.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    elif isinstance(sub, ast.arg):
        writes.add(f"{scope}::{sub.arg}")
    elif isinstance(sub, ast.ExceptHandler) and sub.name:
        writes.add(f"{scope}::{sub.name}")
    elif isinstance(sub, (ast.Import, ast.ImportFrom)):
        writes.update(f"{scope}::{(a.asname or a.name).split('.')[0]}" for a in sub.names)
    else:
        _note_changed(sub, scope, reads, writes)


def _note_changed(sub: ast.AST, scope: str, reads: set[str], writes: set[str]) -> None:
    """An item or slice stored or deleted, a mutating method called (a write of the
    container), an augmented assignment (a read of its target)."""
    if isinstance(sub, ast.Subscript) and _stores(sub):
        chain = attr_chain(sub.value)
        if chain:
            writes.add(_scoped(chain, scope))
    elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
        chain = attr_chain(sub.func.value)
        # a setter by its name's shape changes an attribute's object (self.gate.set_dtype(...)); on a
        # bare name only a container method counts (x.append), and never on self/cls themselves
        if chain and ("." in chain and mutates(sub.func.attr)
                      or chain not in ("self", "cls") and sub.func.attr in _MUTATORS):
            writes.add(_scoped(chain, scope))
    elif isinstance(sub, ast.AugAssign):
        chain = attr_chain(sub.target)
        if chain:
            reads.add(_scoped(chain, scope))


def header_nodes(node: ast.AST) -> list[ast.AST]:
    """The parts of a compound statement outside its blocks."""
    out: list[ast.AST] = []
    for f in node._fields:
        if f in _BLOCKS or f in _SKIP:
            continue
        value = getattr(node, f, None)
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out += [v for v in value if isinstance(v, ast.AST)]
    return out


def flatten(defn: ast.AST) -> list[Elem]:
    """The elements of a definition (module docstring), in source order.

    The first element is the definition's own header (kind ``def``)."""
    out: list[Elem] = []

    def add(kind: str, depth: int, node: ast.AST, key: int, scope: str, names_of: list[ast.AST], inner: str) -> int:
        line = getattr(node, "lineno", 0) if isinstance(node, ast.AST) else 0
        end = getattr(node, "end_lineno", line) if isinstance(node, ast.AST) else line
        if kind in ("def", "head"):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body:
                end = line  # a header's own lines: up to its first body statement
                first = body[0]
                end = max(line, getattr(first, "lineno", line) - 1)
        out.append(Elem(hash((kind, depth, key)), kind, depth, node, line, end, scope,
                        names_from=(tuple(names_of), inner) if names_of else ()))
        return len(out) - 1

    def walk_block(stmts: list, depth: int, scope: str) -> None:
        for stmt in stmts:
            walk_stmt(stmt, depth, scope)

    def walk_stmt(stmt: ast.AST, depth: int, scope: str) -> None:
        if isinstance(stmt, DEFS):
            inner = f"{scope}.{stmt.name}" if scope else stmt.name
            # parameters and decorators belong to the header; the name binds in the outer scope
            idx = add("def", depth, stmt, node_key(stmt, ("body",)), scope, header_nodes(stmt), inner)
            body = stmt.body[1:] if stmt.body and is_docstring(stmt.body[0]) else stmt.body
            walk_block(body, depth + 1, inner)
            out[idx].stop = len(out)
            return
        blocks = [f for f in _BLOCKS if isinstance(getattr(stmt, f, None), list) and getattr(stmt, f)]
        if isinstance(stmt, ast.stmt) and not blocks:
            idx = add("stmt", depth, stmt, node_key(stmt), scope, [stmt], scope)
            out[idx].stop = idx + 1
            return
        idx = add("head", depth, stmt, node_key(stmt, _BLOCKS), scope, header_nodes(stmt), scope)
        for f in _BLOCKS:
            value = getattr(stmt, f, None)
            if not isinstance(value, list) or not value:
                continue
            if f != "body":
                m = add("block", depth, stmt, hash(f), scope, [], scope)
                out[m].stop = m + 1
                out[m].node = stmt  # for line numbers
                out[m].block = f
            for item in value:
                if isinstance(item, (ast.ExceptHandler, ast.match_case)):
                    h = add("head", depth + 1, item, node_key(item, ("body",)), scope,
                            header_nodes(item), scope)
                    walk_block(item.body, depth + 2, scope)
                    out[h].stop = len(out)
                else:
                    walk_stmt(item, depth + 1, scope)
        out[idx].stop = len(out)

    if isinstance(defn, DEFS):
        walk_stmt(defn, 0, "")
    else:
        walk_stmt(defn, 0, "")
    return out


@dataclass(frozen=True)
class Hunk:
    """One change between two flattened definitions: base elements ``[i1, i2)`` became
    other elements ``[j1, j2)``."""

    i1: int
    i2: int
    j1: int
    j2: int

    def touches(self, other: Hunk) -> bool:
        """True when the two hunks overlap or are adjacent in base positions."""
        return self.i1 <= other.i2 and other.i1 <= self.i2


def hunks(base: Sequence[Elem], other: Sequence[Elem]) -> list[Hunk]:
    """The element diff base -> other (:class:`difflib.SequenceMatcher`, no junk heuristic)."""
    sm = difflib.SequenceMatcher(None, [e.key for e in base], [e.key for e in other], autojunk=False)
    return [Hunk(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]


def tops(elems: Sequence[Elem], lo: int, hi: int) -> list[ast.AST]:
    """The outermost statements among elements ``[lo, hi)`` (an element's extent, ``stop``,
    skips its descendants: linear, no tree walks)."""
    nodes: list[ast.AST] = []
    i = lo
    while i < hi:
        e = elems[i]
        if e.kind in ("stmt", "head", "def"):
            nodes.append(e.node)
            i = max(e.stop, i + 1)
        else:
            i += 1
    return nodes


def added(other: Sequence[Elem], hs: Iterable[Hunk]) -> list[ast.AST]:
    """Statements ``other`` has in place of the base's elements in the hunks ``hs`` (base ->
    other; outermost ones, each once, in ``other``'s order)."""
    nodes: list[ast.AST] = []
    for h in sorted(hs, key=lambda h: h.j1):
        nodes += [n for n in tops(other, h.j1, h.j2) if not any(n is m for m in nodes)]
    return nodes


def replaced(base: Sequence[Elem], hs: Iterable[Hunk]) -> list[ast.AST]:
    """The base statements the hunks ``hs`` replace (outermost first, each once)."""
    nodes: list[ast.AST] = []
    for h in sorted(hs, key=lambda h: h.i1):
        nodes += [n for n in tops(base, h.i1, h.i2) if not any(n is m for m in nodes)]
    return nodes


@functools.lru_cache(maxsize=64)
def module_tree(text: str) -> ast.Module | None:
    """The :mod:`ast` of a module's text (kept for the last 64 texts), or None when it does
    not parse."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None
