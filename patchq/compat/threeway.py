"""Three-way drift classification: is upstream's change provably apart from the patch's?

A drifted definition (its fingerprint on the target equals none recorded for a reviewed
release) is compared three ways, as a merge would see it:

* **base**: the definition on the patch's nearest *reviewed* release (a release recorded
  in ``anchors/<patch>.toml``; :func:`patchq.compat.drift.nearest_verified`);
* **ours**: base patched (the target's variant planned alone on the base release);
* **theirs**: the definition on the target.

Each definition is flattened into its statements in order (:func:`flatten`: a compound
statement is its header, then its blocks; docstrings left out; each element keyed by
its normalized AST and depth, so formatting and comments never count), and two element
diffs are taken: the patch's hunks (base -> ours) and upstream's hunks (base ->
theirs), both in base positions. The drift stays ``applies-drifted`` (not blocking)
only when none of these holds (:func:`findings`), each rule naming the upstream lines:

``overlap``
    an upstream hunk overlaps or touches (is adjacent to) a patch hunk, as
    ``git merge-file`` would call a conflict;
``signature``
    the header (signature, decorators, bases) of a definition enclosing a patch hunk
    changed upstream;
``names``
    a name the patch's change reads or writes is written by upstream's change, or a name
    the patch writes is read by it (bare names per enclosing function, attribute chains
    like ``self.x`` across the definition; a subscript store or a mutating method call,
    ``x.append(...)``, writes ``x``); a hunk that only renames locals the patch does not
    use (:func:`renamed_locals`) keeps the meaning and is not a finding;
``module-name``
    a module-level name the patch's added code reads (an import, a helper's signature, a
    constant) is bound differently in the target's module than in the base's;
``skipped-path``
    the patch inserts ``return``/``raise`` (``continue``/``break``) and an upstream hunk
    lies after it in the same function (loop): upstream code the patched path now skips.

Any finding gives ``review`` (blocking: "upstream changed what this patch touches"),
or ``possibly-upstreamed`` (blocking) when upstream's change in the touched place is
alike the patch's (:func:`patchq.compat.meaning.similarity` >= :data:`meaning.POSSIBLE`),
with both texts. Nothing here writes; the classification is a pure function of the two
release trees and the patch.
"""

from __future__ import annotations

import ast
import copy
import difflib
import functools
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from packaging.specifiers import SpecifierSet

from patchq.compat import meaning
from patchq.model import Patch, Variant
from patchq.plan import definitions
from patchq.plan.results import Plan
from patchq.vllmdist.sources import CodeSource

DRIFTED = "applies-drifted"
REVIEW = "review"
POSSIBLE = "possibly-upstreamed"

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEFS = (*_FUNCS, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_JUMPS = {ast.Return: "return", ast.Raise: "raise", ast.Continue: "continue", ast.Break: "break"}
_MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "pop", "remove", "clear", "setdefault",
                       "discard", "popitem", "sort", "reverse", "__setitem__", "__delitem__"})
_SKIP = frozenset({"type_comment"})


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
        return _node_key(value)
    if isinstance(value, list):
        return tuple(_value_key(v) for v in value)
    return (type(value).__name__, repr(value))


def _node_key(node: ast.AST, skip: Iterable[str] = ()) -> int:
    skip = set(skip) | _SKIP
    return hash((type(node).__name__, tuple((f, _value_key(getattr(node, f, None))) for f in node._fields
                                            if f not in skip)))


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _is_docstring(stmt: ast.AST) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _chain(node: ast.AST) -> str | None:
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
        chain = _chain(sub)
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
        chain = _chain(sub.value)
        if chain:
            writes.add(_scoped(chain, scope))
    elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in _MUTATORS:
        chain = _chain(sub.func.value)
        if chain:
            writes.add(_scoped(chain, scope))
    elif isinstance(sub, ast.AugAssign):
        chain = _chain(sub.target)
        if chain:
            reads.add(_scoped(chain, scope))


def _header_nodes(node: ast.AST) -> list[ast.AST]:
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
        if isinstance(stmt, _DEFS):
            inner = f"{scope}.{stmt.name}" if scope else stmt.name
            # parameters and decorators belong to the header; the name binds in the outer scope
            idx = add("def", depth, stmt, _node_key(stmt, ("body",)), scope, _header_nodes(stmt), inner)
            body = stmt.body[1:] if stmt.body and _is_docstring(stmt.body[0]) else stmt.body
            walk_block(body, depth + 1, inner)
            out[idx].stop = len(out)
            return
        blocks = [f for f in _BLOCKS if isinstance(getattr(stmt, f, None), list) and getattr(stmt, f)]
        if isinstance(stmt, ast.stmt) and not blocks:
            idx = add("stmt", depth, stmt, _node_key(stmt), scope, [stmt], scope)
            out[idx].stop = idx + 1
            return
        idx = add("head", depth, stmt, _node_key(stmt, _BLOCKS), scope, _header_nodes(stmt), scope)
        for f in _BLOCKS:
            value = getattr(stmt, f, None)
            if not isinstance(value, list) or not value:
                continue
            if f != "body":
                m = add("block", depth, stmt, hash(f), scope, [], scope)
                out[m].stop = m + 1
                out[m].node = stmt  # for line numbers
            for item in value:
                if isinstance(item, (ast.ExceptHandler, ast.match_case)):
                    h = add("head", depth + 1, item, _node_key(item, ("body",)), scope,
                            _header_nodes(item), scope)
                    walk_block(item.body, depth + 2, scope)
                    out[h].stop = len(out)
                else:
                    walk_stmt(item, depth + 1, scope)
        out[idx].stop = len(out)

    if isinstance(defn, _DEFS):
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


# ---------------------------------------------------------------------------
# findings


@dataclass
class Side:
    """One side of the comparison: a definition in a file of a release."""

    version: str
    relpath: str
    node: ast.AST
    text: str  # the definition's lines, indentation kept
    elems: list[Elem] = field(default_factory=list)

    @property
    def line(self) -> int:
        return min([getattr(self.node, "lineno", 0)] + [d.lineno for d in getattr(self.node, "decorator_list", [])])


def _span(elems: Sequence[Elem], j1: int, j2: int, relpath: str) -> str:
    """``path:a-b`` of elements ``[j1, j2)``, or of the element before when empty."""
    if j2 > j1:
        a = elems[j1].line
        b = max(e.end for e in elems[j1:j2])
        return f"{relpath}:{a}" if a == b else f"{relpath}:{a}-{b}"
    near = elems[j1 - 1] if j1 > 0 else elems[0]
    return f"{relpath}:{near.end}"


def _hunk_code(elems: Sequence[Elem], j1: int, j2: int) -> str:
    return "; ".join(e.code for e in elems[j1:j2][:3]) + (" ..." if j2 - j1 > 3 else "")


def _upstream_where(base: Side, theirs: Side, u: Hunk) -> tuple[str, str]:
    """(target lines, what they say) of an upstream hunk; a deletion names the base lines."""
    if u.j2 > u.j1:
        return _span(theirs.elems, u.j1, u.j2, theirs.relpath), "`" + _hunk_code(theirs.elems, u.j1, u.j2) + "`"
    return (_span(theirs.elems, u.j1, u.j2, theirs.relpath),
            f"removed `{_hunk_code(base.elems, u.i1, u.i2)}` "
            f"({base.version} {_span(base.elems, u.i1, u.i2, base.relpath)})")


def _names_of(elems: Sequence[Elem], lo: int, hi: int) -> tuple[set, set]:
    reads: set[str] = set()
    writes: set[str] = set()
    for e in elems[lo:hi]:
        reads |= e.reads
        writes |= e.writes
    return reads, writes


def _clash(reads: set, writes: set) -> set:
    """Names in ``reads`` that ``writes`` rebinds (a chain under a rebound chain counts)."""
    out = set()
    for r in reads:
        for w in writes:
            if r == w or r.startswith(w + "."):
                out.add(r)
    return out


class _Blank(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id="_", ctx=node.ctx)


def _shape_nodes(e: Elem) -> list[ast.AST]:
    return [e.node] if e.kind == "stmt" else _header_nodes(e.node) if e.kind in ("head", "def") else []


def renamed_locals(base: Sequence[Elem], theirs: Sequence[Elem], u: Hunk) -> dict[str, str] | None:
    """old -> new names when upstream's hunk only renames plain names (same statements with
    every name blanked, one new name per old one), else None."""
    if u.i2 - u.i1 != u.j2 - u.j1 or u.i2 == u.i1:
        return None
    out: dict[str, str] = {}
    for a, b in zip(base[u.i1:u.i2], theirs[u.j1:u.j2], strict=False):
        if a.kind != b.kind:
            return None
        na, nb = _shape_nodes(a), _shape_nodes(b)
        blank = _Blank()
        dump = [ast.dump(blank.visit(copy.deepcopy(n)), include_attributes=False) for n in na]
        if dump != [ast.dump(blank.visit(copy.deepcopy(n)), include_attributes=False) for n in nb]:
            return None
        for x, y in zip(na, nb, strict=False):
            for m, n in zip(ast.walk(x), ast.walk(y), strict=False):
                if isinstance(m, ast.Name) and isinstance(n, ast.Name) and m.id != n.id:
                    if out.setdefault(m.id, n.id) != n.id:
                        return None
    return out or None


def _enclosing(elems: Sequence[Elem], pos: int, kinds: type | tuple[type, ...]) -> list[int]:
    """Indices of elements of ``kinds`` whose extent holds base position ``pos``."""
    return [i for i, e in enumerate(elems) if isinstance(e.node, kinds) and e.kind in ("def", "head")
            and i < pos <= e.stop]


def findings(base: Side, ours: Side, theirs: Side, module_changes: dict[str, str] | None = None) -> list[dict]:
    """The reasons the patch's change and upstream's are not provably apart (module
    docstring), each ``{"rule", "message", "upstream": "path:line[-line]"}``; [] when apart.

    ``module_changes``: module-level name -> ``path:line`` where the target binds it
    differently from the base (:func:`module_changes`)."""
    found = _Findings(base, ours, theirs, hunks(base.elems, theirs.elems))
    for p in hunks(base.elems, ours.elems):
        p_where = _span(base.elems, p.i1, p.i2, base.relpath) if p.i2 > p.i1 else \
            f"after {_span(base.elems, p.i1, p.i1, base.relpath)}"
        found.overlap(p, p_where)
        found.signature(p, p_where)
        o_reads = found.names(p, p_where)
        found.skipped_path(p)
        found.module_names(o_reads, module_changes or {})
    return found.out


@dataclass
class _Findings:
    """The findings of :func:`findings` so far, one per (rule, upstream place); one
    method per rule, each given one of the patch's hunks ``p`` (and where it is)."""

    base: Side
    ours: Side
    theirs: Side
    u_hunks: list[Hunk]
    out: list[dict] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)

    def note(self, rule: str, message: str, where: str) -> None:
        if (rule, where) not in self.seen:
            self.seen.add((rule, where))
            self.out.append({"rule": rule, "message": message, "upstream": where})

    def overlap(self, p: Hunk, p_where: str) -> None:
        """Upstream changed the elements next to the patch's change."""
        for u in self.u_hunks:
            if u.touches(p):
                where, what = _upstream_where(self.base, self.theirs, u)
                self.note("overlap", f"upstream changed {where} ({what}), next to the patch's change at "
                                     f"{self.base.version} {p_where}", where)

    def signature(self, p: Hunk, p_where: str) -> None:
        """Upstream changed the header of a definition enclosing the patch's change."""
        base = self.base
        for d in _enclosing(base.elems, p.i1, _DEFS):
            for u in self.u_hunks:
                if u.i1 <= d < u.i2:
                    where, what = _upstream_where(base, self.theirs, u)
                    self.note("signature", f"the header of {base.elems[d].code} changed upstream at {where} "
                                           f"({what}); the patch's code at {base.version} {p_where} relies on it",
                              where)

    def names(self, p: Hunk, p_where: str) -> set[str]:
        """Upstream's change elsewhere reads or rebinds a name the patch's change uses (a
        rename of locals the patch does not use is the same meaning). Returns the names
        the patch's added code reads."""
        base, theirs = self.base, self.theirs
        p_reads, p_writes = _names_of(base.elems, p.i1, p.i2)
        o_reads, o_writes = _names_of(self.ours.elems, p.j1, p.j2)
        p_reads |= o_reads
        p_writes |= o_writes
        for u in self.u_hunks:
            if u.touches(p):
                continue  # already an overlap
            renamed = renamed_locals(base.elems, theirs.elems, u)
            if renamed and not ({r.split("::")[-1] for r in p_reads | p_writes} & set(renamed)):
                continue  # upstream only renamed locals the patch does not use: same meaning
            u_reads, u_writes = _names_of(base.elems, u.i1, u.i2)
            t_reads, t_writes = _names_of(theirs.elems, u.j1, u.j2)
            u_reads |= t_reads
            u_writes |= t_writes
            hit = _clash(p_reads | p_writes, u_writes) | _clash(u_reads, p_writes)
            if hit:
                where, what = _upstream_where(base, theirs, u)
                shown = ", ".join(sorted(n.split("::")[-1] for n in hit))
                self.note("names", f"upstream's change at {where} ({what}) reads or rebinds {shown}, which the "
                                   f"patch's change at {base.version} {p_where} uses", where)
        return o_reads

    def skipped_path(self, p: Hunk) -> None:
        """An inserted jump (return, raise, break, continue) skips what upstream added after it."""
        base, ours = self.base, self.ours
        for j in range(p.j1, p.j2):
            kind = _JUMPS.get(type(ours.elems[j].node))
            if kind is None:
                continue
            scopes = _enclosing(base.elems, p.i1, _FUNCS if kind in ("return", "raise") else _LOOPS)
            if not scopes:
                continue
            stop = base.elems[scopes[-1]].stop
            for u in self.u_hunks:
                lands = u.i1 <= stop and (u.i2 > p.i2 or (u.i1 == u.i2 and u.i1 >= p.i2))
                if lands and not u.touches(p):
                    where, what = _upstream_where(base, self.theirs, u)
                    self.note("skipped-path", f"the patch's inserted `{ours.elems[j].code}` now skips upstream's "
                                              f"change at {where} ({what})", where)

    def module_names(self, o_reads: set[str], module_changes: dict[str, str]) -> None:
        """A module-level name the added code reads is bound differently in the target."""
        for name, where in module_changes.items():
            if any(r.split("::")[-1] == name or r.split(".")[0] == name for r in o_reads):
                self.note("module-name", f"{name}, which the patch's added code reads, is bound differently in "
                                         f"the target's module ({where})", where)


# ---------------------------------------------------------------------------
# module-level names


def _top_bindings(tree: ast.Module) -> dict[str, list[ast.AST]]:
    out: dict[str, list[ast.AST]] = {}
    for stmt in tree.body:
        if isinstance(stmt, _DEFS):
            out.setdefault(stmt.name, []).append(stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                one = ast.Import(names=[a]) if isinstance(stmt, ast.Import) else \
                    ast.ImportFrom(module=stmt.module, names=[a], level=stmt.level)
                out.setdefault((a.asname or a.name).split(".")[0], []).append(one)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out.setdefault(n.id, []).append(stmt)
    return out


def _binding_key(node: ast.AST) -> int:
    if isinstance(node, _FUNCS):
        return _node_key(node.args)  # what a caller relies on: the signature
    if isinstance(node, ast.ClassDef):
        return _node_key(node, ("body", "decorator_list"))
    return _node_key(node)


@functools.lru_cache(maxsize=64)
def _module_tree(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def module_changes(base_text: str, theirs_text: str, relpath: str, names: Iterable[str]) -> dict[str, str]:
    """Module-level ``names`` bound differently in two versions of a module: a ``def``'s
    signature, a class header, an import or an assignment changed, or the binding is
    gone. Returns name -> ``path:line`` in the target (``path`` alone when gone)."""
    a, b = _module_tree(base_text), _module_tree(theirs_text)
    if a is None or b is None:
        return {}
    ba, bb = _top_bindings(a), _top_bindings(b)
    out = {}
    for name in names:
        old, new = ba.get(name), bb.get(name)
        if not old:
            continue
        if not new:
            out[name] = f"{relpath} (no module-level {name} any more)"
        elif [_binding_key(n) for n in old] != [_binding_key(n) for n in new]:
            line = getattr(new[0], "lineno", None)
            out[name] = f"{relpath}:{line}" if line else relpath
    return out


# ---------------------------------------------------------------------------
# the verdict for one patch


@dataclass
class Verdict:
    """The three-way verdict of one patch's drifted definitions.

    Attributes:
        status: ``applies-drifted`` (apart), ``review`` or ``possibly-upstreamed``.
        reason: one line naming the upstream lines. entries: one ``threeway`` row per
            drifted definition (``patchq.check/1``).
    """

    status: str
    reason: str
    entries: list[dict] = field(default_factory=list)

    @property
    def blocking(self) -> bool:
        return self.status != DRIFTED


def _as_edit(patch: Patch, variant: Variant) -> Patch:
    """``patch`` with ``variant`` (an edit variant) covering every version."""
    return replace(patch, variants=(replace(variant, applies=SpecifierSet()),))


_BASE_PLANS: dict[tuple, Plan] = {}


def _base_plan(patch: Patch, variant_label: str, version: str) -> Plan | None:
    """The patch (the target's variant, forced) planned alone on the release ``version``,
    or None when that release cannot be read. Kept per process (a matrix asks for the
    same base on many targets)."""
    from patchq.compat.drift import base_release
    from patchq.plan import engine

    key = (patch.id, patch.hash, patch.source_file, variant_label, version,
           tuple(sorted((a, tuple(sorted(s.fingerprints.items()))) for a, s in patch.anchors.items())))
    if key not in _BASE_PLANS:
        src = base_release(version)
        if src is None:
            return None
        variant = next(v for v in patch.variants if str(v.applies) == variant_label)
        if len(_BASE_PLANS) > 64:
            _BASE_PLANS.clear()
        _BASE_PLANS[key] = engine.plan(src, [_as_edit(patch, variant)], backward=False)
    return _BASE_PLANS[key]


def _side(version: str, relpath: str, text: str, qualname: str, node: ast.AST | None = None) -> Side | None:
    """One side: the definition ``qualname`` of ``text`` (``node``: its :mod:`ast` with the
    file's line numbers when the caller has it; else the text is indexed here)."""
    if node is None:
        found = (definitions.text_index(text) or {}).get(qualname) or []
        if len(found) != 1:
            return None
        d = definitions.definition_from(text, relpath, found[0])
        return Side(version, relpath, d.node, d.text, flatten(d.node))
    first = min([getattr(node, "lineno", 1)] + [x.lineno for x in getattr(node, "decorator_list", [])])
    lines = definitions.split_lines(text)
    return Side(version, relpath, node, "".join(lines[first - 1:getattr(node, "end_lineno", first)]), flatten(node))


def view(base: Side, ours: Side, theirs: Side, qualname: str) -> str:
    """The three-way view: the patch's change (base -> ours) and upstream's (base ->
    theirs) as unified diffs of the definition, headers with ``path:line``."""
    b, o, t = (textwrap.dedent(s.text).splitlines(keepends=True) for s in (base, ours, theirs))
    head = (f"three-way view of {qualname}: base = reviewed vllm {base.version} ({base.relpath}:{base.line}), "
            f"ours = base patched, theirs = vllm {theirs.version} ({theirs.relpath}:{theirs.line})\n")
    patch = "".join(difflib.unified_diff(b, o, f"base {base.version}/{base.relpath}:{base.line}",
                                         f"ours {base.version}+patch"))
    upstream = "".join(difflib.unified_diff(b, t, f"base {base.version}/{base.relpath}:{base.line}",
                                            f"theirs {theirs.version}/{theirs.relpath}:{theirs.line}"))
    return (head + "== the patch's change (base -> ours)\n" + patch
            + "== upstream's change (base -> theirs)\n" + upstream)


def _tops(elems: Sequence[Elem], lo: int, hi: int) -> list[ast.AST]:
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


def _added(side: Side, hs: Iterable[Hunk], other: Side) -> list[ast.AST]:
    """Statements ``other`` has in place of ``side``'s elements in the hunks (outermost ones)."""
    nodes: list[ast.AST] = []
    for h in sorted(hs, key=lambda h: h.j1):
        nodes += [n for n in _tops(other.elems, h.j1, h.j2) if not any(n is m for m in nodes)]
    return nodes


def _replaced(base: Side, hs: Iterable[Hunk]) -> list[ast.AST]:
    """The base statements the hunks replace (outermost first, each once)."""
    nodes: list[ast.AST] = []
    for h in sorted(hs, key=lambda h: h.i1):
        nodes += [n for n in _tops(base.elems, h.i1, h.i2) if not any(n is m for m in nodes)]
    return nodes


def compare(qualname: str, base: Side, ours: Side, theirs: Side, base_module: str, theirs_module: str) -> dict:
    """The ``threeway`` entry of one drifted definition: findings, a possible upstream
    match (score and both texts), the view."""
    p_hunks = hunks(base.elems, ours.elems)
    reads = set()
    for h in p_hunks:
        for e in ours.elems[h.j1:h.j2]:
            reads |= {r.split("::")[-1].split(".")[0] for r in e.reads}
    changed = module_changes(base_module, theirs_module, theirs.relpath, sorted(reads)) if reads else {}
    found = findings(base, ours, theirs, changed)
    entry = {"qualname": qualname, "base": base.version, "base_path": base.relpath, "base_line": base.line,
             "path": theirs.relpath, "line": theirs.line, "findings": found, "score": None,
             "patch_text": "", "upstream_text": "", "view": view(base, ours, theirs, qualname)}
    if found:
        u_hunks = hunks(base.elems, theirs.elems)
        near = [u for u in u_hunks if any(u.touches(p) for p in p_hunks)] or u_hunks
        mine = _added(base, p_hunks, ours)
        theirs_added = _added(base, near, theirs)
        replaced = _replaced(base, [*p_hunks, *near])
        score = meaning.similarity(mine, theirs_added, base=replaced)
        entry["score"] = score
        entry["patch_text"] = meaning.canonical_text(mine)
        entry["upstream_text"] = meaning.canonical_text(theirs_added)
    return entry


def classify(patch: Patch, drifted: Sequence[tuple[str, str]], target: CodeSource,
             target_text: Callable[[str], str | None], known: Mapping[str, Iterable[str]],
             target_node: Callable[[str, str], ast.AST | None] | None = None) -> Verdict:
    """The three-way verdict for ``patch``'s drifted definitions on ``target``.

    Args:
        drifted: (relpath, qualname) of each drifted definition on the target.
        target_text: relpath -> the target's pristine text.
        target_node: (relpath, qualname) -> the target's pristine :mod:`ast` definition
            (file line numbers) or None; default: the text is indexed here.
        known: qualname -> releases recorded as reviewed for it.
    Returns:
        A :class:`Verdict`; ``review`` (with the reason) when any definition has no
        reviewed release, the base release cannot be read, or the patch does not plan
        there.
    """
    from patchq.compat.drift import nearest_verified

    variant = patch.variant_for(target.version)
    if variant is None or variant.kind != "edit":  # no variant covers the target: the nearest one is tried
        from patchq.compat.variants import nearest_edit_variant

        variant = nearest_edit_variant(patch, target.version)
    label = str(variant.applies) if variant is not None else ""
    entries, problems, possible = [], [], []
    for relpath, qualname in drifted:
        base_v = nearest_verified(known.get(qualname, ()), target.version)
        if base_v is None:
            problems.append(f"{qualname} has no reviewed release recorded: no base to compare with")
            continue
        plan = _base_plan(patch, label, base_v) if variant is not None else None
        if plan is None:
            why = "no edit variant" if variant is None else "not cached, and not fetched"
            problems.append(f"reviewed vllm {base_v} is not available ({why}): no three-way view of {qualname}")
            continue
        entry = _entry(plan, base_v, relpath, qualname, target, target_text, target_node)
        if isinstance(entry, str):
            problems.append(entry)
            continue
        entries.append(entry)
        if entry["findings"] and entry["score"] is not None and entry["score"] >= meaning.POSSIBLE:
            possible.append(entry)
    return _verdict(patch, target, entries, problems, possible)


def _entry(plan: Plan, base_v: str, relpath: str, qualname: str, target: CodeSource,
           target_text: Callable[[str], str | None],
           target_node: Callable[[str, str], ast.AST | None] | None) -> dict | str:
    """The three-way entry (:func:`compare`) of one drifted definition, its base the
    patch's plan on reviewed release ``base_v``; or why there is none (a problem line)."""
    result = plan.results[0]
    a = next((x for x in result.anchors if x.qualname == qualname), None)
    if result.status != "ok" or a is None:
        why = result.reason or f"{qualname} is not edited there"
        return f"the patch does not plan on reviewed vllm {base_v} ({why}): no three-way view"
    base_text = plan.pristine.get(a.relpath) or plan.source.read_text(a.relpath) or ""
    ours_text = plan.patched.get(a.relpath, base_text)
    theirs_text = target_text(relpath) or ""
    ws = plan.workspace
    base = _side(base_v, a.relpath, base_text, qualname,
                 ws.pristine_node(a.relpath, qualname) if ws is not None else None)
    ours = _side(base_v, a.relpath, ours_text, qualname,
                 ws.current_node(a.relpath, qualname) if ws is not None else None)
    target_label = str(target.version) if target.kind in ("release", "installed") else \
        f"{target.version} {target.kind}"
    theirs = _side(target_label, relpath, theirs_text, qualname,
                   target_node(relpath, qualname) if target_node is not None else None)
    if base is None or ours is None or theirs is None:
        return f"{qualname} is not defined once on both sides: no three-way view"
    return compare(qualname, base, ours, theirs, base_text, theirs_text)


def _verdict(patch: Patch, target: CodeSource, entries: list[dict], problems: list[str],
             possible: list[dict]) -> Verdict:
    """:func:`classify`'s verdict from its entries: possibly upstreamed, review (findings or
    problems, four shown) or drifted apart from the patch."""
    blocking = [e for e in entries if e["findings"]]
    if possible:
        e = possible[0]
        return Verdict(POSSIBLE, (f"possibly upstreamed: upstream's change to {e['qualname']} at "
                                  f"{e['findings'][0]['upstream']} is alike the patch's (similarity "
                                  f"{e['score']:.2f}): `{_clip(e['upstream_text'])}` vs the patch's "
                                  f"`{_clip(e['patch_text'])}`; review it (patchq review {patch.id} "
                                  f"--vllm {target.version})"), entries)
    if blocking or problems:
        parts = [f"{f['message']}" for e in blocking for f in e["findings"]][:4] + problems
        more = sum(len(e["findings"]) for e in blocking) - min(4, sum(len(e["findings"]) for e in blocking))
        if more > 0:
            parts.append(f"+{more} more (see threeway)")
        return Verdict(REVIEW, "upstream changed what this patch touches: " + "; ".join(parts)
                       + f"; review it (patchq review {patch.id} --vllm {target.version})", entries)
    where = ", ".join(f"{e['qualname']} ({e['path']}:{e['line']})" for e in entries)
    bases = ", ".join(sorted({e["base"] for e in entries}))
    return Verdict(DRIFTED, f"{where} changed since reviewed vllm {bases}, apart from the patch's change "
                            f"(three-way: no upstream hunk touches it, no signature or name it relies on "
                            f"changed, nothing lands on a path it skips); the transform applies and the "
                            f"result compiles", entries)


def _clip(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."
