"""What a change to a definition reads and writes, and where its effects flow.

The three-way verdict (:mod:`patchq.compat.threeway`) decides by data flow, not by
adjacency. Two changes of one definition, the patch's (base -> ours) and upstream's
(base -> theirs), each a list of hunks of flattened elements (:mod:`patchq.plan.astdiff`),
interfere when

* one writes a name the other reads or writes, directly or through the definition's
  other statements (:func:`flows`: a statement reading an affected name affects what
  it writes, and a condition reading one affects what its blocks write);
* both use the same string as a key (:func:`keys`: an environment variable's name, a dict
  entry's key): state shared through ``os.environ`` or a mapping that no name shows;
* one decides whether the other runs: it changes the header of a compound statement
  enclosing the other (control), or inserts a jump (``return``, ``raise``, ``continue``,
  ``break``) whose path skips the other (:func:`skipped`), and what is skipped has an
  effect beyond its own locals (:func:`effect`).

Names are those of :class:`patchq.plan.astdiff.Elem`: ``scope::x`` for a bare name of a
function (``Scheduler._free_request::request``), ``a.b`` for an attribute chain (``self.x``
is the same attribute in every method of a class). Two names *clash* (:func:`clash`) when
they are equal or one is an attribute of the other (``self.x`` and ``self.x.y``). A
changed ``def`` header writes only the parameters whose binding changed
(:func:`param_changes`): a parameter appended with a default, or a decorator, rebinds
nothing the body reads.

Everything here is a pure function of the flattened definitions it is given.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from patchq.plan.astdiff import DEFS, FUNCS, Elem, Hunk, attr_chain, node_key

JUMPS = {ast.Return: "return", ast.Raise: "raise", ast.Continue: "continue", ast.Break: "break"}
LOOPS = (ast.For, ast.AsyncFor, ast.While)
#: calls whose only effect is output (logging, warnings, print): no state another path relies on
_SINKS = frozenset({"print", "logger", "log", "logging", "warnings", "_logger", "LOG"})


#: a string that names an entry: an identifier of 6 or more characters with an inner ``_``
#: (``VLLM_TRITON_FORCE_FIRST_CONFIG``, ``max_model_len``); not a dunder, word or message
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\Z")


def is_key(text: str) -> bool:
    """True when ``text`` looks like the key of shared state (``_KEY``: an environment
    variable, a config or dict entry), not a message or a word."""
    return len(text) >= 6 and bool(_KEY.match(text))


_GETTERS = frozenset({"get", "pop", "setdefault", "getenv", "putenv", "unsetenv"})


def _key_constants(node: ast.AST) -> Iterable[ast.expr]:
    """The expressions of ``node`` used as an entry's key: a subscript (``m["k"]``), the
    first argument of a mapping or environment getter (``.get("k")``, ``os.getenv("k")``,
    ``.pop``, ``.setdefault``), a dict display's key, the left of ``"k" in m``. An
    attribute spelt as a string (``getattr(self, "x")``) is a name: :func:`flows` sees it."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript):
            yield sub.slice
        elif isinstance(sub, ast.Call) and sub.args:
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in _GETTERS:
                yield sub.args[0]
        elif isinstance(sub, ast.Dict):
            yield from (k for k in sub.keys if k is not None)
        elif isinstance(sub, ast.Compare) and isinstance(sub.ops[0], (ast.In, ast.NotIn)):
            yield sub.left


def keys(e: Elem) -> frozenset[str]:
    """The key-like strings (:func:`is_key`) an element's own code uses as keys of a
    mapping or of the environment (:func:`_key_constants`): the whole statement, or a
    compound statement's header; its blocks are elements of their own."""
    nodes = e.names_from[0] if e.names_from else ()
    return frozenset(k.value for n in nodes for k in _key_constants(n)
                     if isinstance(k, ast.Constant) and isinstance(k.value, str) and is_key(k.value))


def bare(name: str) -> str:
    """``x`` of ``scope::x``; a chain as it is."""
    return name.split("::")[-1]


def is_chain(name: str) -> bool:
    """True for an attribute chain (``self.x``), False for a scoped bare name."""
    return "::" not in name


def clash(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` are the same name, or one is an attribute of the other
    (chains only: ``self.x`` and ``self.x.y``)."""
    if a == b:
        return True
    if not (is_chain(a) and is_chain(b)):
        return False
    return a.startswith(b + ".") or b.startswith(a + ".")


class _Names:
    """A set of names that answers :func:`clash` against it quickly (exact, prefixes)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names: dict[str, object] = {}
        self._prefixes: set[str] = set()
        for n in names:
            self.add(n, None)

    def add(self, name: str, why: object) -> bool:
        if name in self.names:
            return False
        self.names[name] = why
        if is_chain(name):
            parts = name.split(".")
            self._prefixes.update(".".join(parts[:i]) for i in range(1, len(parts)))
        return True

    def hit(self, name: str) -> str | None:
        """The name of the set that ``name`` clashes with, or None."""
        if name in self.names:
            return name
        if not is_chain(name):
            return None
        if name in self._prefixes:  # a longer chain of the set is an attribute of name
            return next(n for n in self.names if is_chain(n) and n.startswith(name + "."))
        parts = name.split(".")
        for i in range(len(parts) - 1, 0, -1):
            p = ".".join(parts[:i])
            if p in self.names:
                return p
        return None


# ---------------------------------------------------------------------------
# parameters


def params(defn: ast.AST) -> dict[str, tuple]:
    """A function's parameters: name -> (kind, position among the positional ones or None,
    the normalized AST key of its default or None); annotations left out."""
    if not isinstance(defn, FUNCS):
        return {}
    a = defn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out: dict[str, tuple] = {}
    for i, (p, d) in enumerate(zip(positional, defaults, strict=True)):
        out[p.arg] = ("pos" if i >= len(a.posonlyargs) else "posonly", i, node_key(d) if d is not None else None)
    if a.vararg is not None:
        out[a.vararg.arg] = ("*", None, None)
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        out[p.arg] = ("kw", None, node_key(d) if d is not None else None)
    if a.kwarg is not None:
        out[a.kwarg.arg] = ("**", None, None)
    return out


def param_changes(base_def: ast.AST, other_def: ast.AST) -> set[str]:
    """The parameters whose binding differs between two versions of a function's header:
    added, removed, another kind, another position among the positional ones (a
    parameter inserted before shifts those after it) or another default. Decorators,
    annotations and the return annotation are not bindings of the body. For a class,
    ``<bases>`` when its bases or keywords changed."""
    if isinstance(base_def, ast.ClassDef) or isinstance(other_def, ast.ClassDef):
        same = (isinstance(base_def, ast.ClassDef) and isinstance(other_def, ast.ClassDef)
                and [node_key(b) for b in base_def.bases] == [node_key(b) for b in other_def.bases]
                and [node_key(k) for k in base_def.keywords] == [node_key(k) for k in other_def.keywords])
        return set() if same else {"<bases>"}
    a, b = params(base_def), params(other_def)
    return {n for n in a.keys() | b.keys() if a.get(n) != b.get(n)}


def inner_scope(e: Elem) -> str:
    """The scope of the names a ``def`` element's body binds (its qualified name)."""
    name = getattr(e.node, "name", "")
    return f"{e.scope}.{name}" if e.scope else name


# ---------------------------------------------------------------------------
# one side's change


@dataclass
class Change:
    """What one hunk of a side's change reads and writes.

    Attributes:
        hunk: the hunk (base positions ``[i1, i2)``, the other side's ``[j1, j2)``).
        reads: name -> the first added element (other side) that reads it.
        writes: name -> the first element that writes it (added, else removed: a removed
            write changes the name's value too).
        rebinds: attribute chains assigned anew (``self.x = ...``, not mutated) -> element.
        jumps: jumps the change adds (beyond the jumps of the kind it removes), in the other side.
        added, removed: the elements (other side; base).
    """

    hunk: Hunk
    reads: dict[str, Elem] = field(default_factory=dict)
    writes: dict[str, Elem] = field(default_factory=dict)
    rebinds: dict[str, Elem] = field(default_factory=dict)
    jumps: list[Elem] = field(default_factory=list)
    added: list[Elem] = field(default_factory=list)
    removed: list[Elem] = field(default_factory=list)


def _rebound(e: Elem) -> list[str]:
    """Attribute chains an assignment statement binds directly (``self.x = ...``)."""
    node = e.node
    if e.kind != "stmt" or not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return []
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    out = []
    for t in targets:
        for sub in ast.walk(t):
            if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
                c = attr_chain(sub)
                if c:
                    out.append(c)
    return out


def _jump(e: Elem) -> str | None:
    return JUMPS.get(type(e.node)) if e.kind == "stmt" else None


def change(base: Sequence[Elem], other: Sequence[Elem], h: Hunk) -> Change:
    """The :class:`Change` of hunk ``h`` (base -> other)."""
    ch = Change(h, added=list(other[h.j1:h.j2]), removed=list(base[h.i1:h.i2]))
    old_defs = {(e.depth, getattr(e.node, "name", None)): e for e in ch.removed if e.kind == "def"}
    new_defs = {(e.depth, getattr(e.node, "name", None)) for e in ch.added if e.kind == "def"}
    for e in ch.added:
        old = old_defs.get((e.depth, getattr(e.node, "name", None))) if e.kind == "def" else None
        if old is not None:  # a changed header: only the bindings that changed
            scope = inner_scope(e)
            for n in sorted(param_changes(old.node, e.node)):
                ch.writes.setdefault(n if n == "<bases>" else f"{scope}::{n}", e)
            continue
        for r in sorted(e.reads):
            ch.reads.setdefault(r, e)
        for w in sorted(e.writes):
            ch.writes.setdefault(w, e)
        for c in _rebound(e):
            ch.rebinds.setdefault(c, e)
    for e in ch.removed:
        if e.kind == "def" and (e.depth, getattr(e.node, "name", None)) in new_defs:
            continue
        for w in sorted(e.writes):
            ch.writes.setdefault(w, e)
        for c in _rebound(e):
            ch.rebinds.setdefault(c, e)
    removed_jumps: dict[str, int] = {}
    for e in ch.removed:
        k = _jump(e)
        if k:
            removed_jumps[k] = removed_jumps.get(k, 0) + 1
    for e in ch.added:
        k = _jump(e)
        if k and removed_jumps.get(k, 0) > 0:
            removed_jumps[k] -= 1
        elif k:
            ch.jumps.append(e)
    return ch


# ---------------------------------------------------------------------------
# flow


def flows(elems: Sequence[Elem], start: Iterable[str], skip: Iterable[int] = ()) -> dict[str, Elem | None]:
    """The names affected when ``start`` change, through the statements of ``elems``
    (flow-insensitive, to a fixpoint): a statement that reads an affected name affects
    what it writes; a compound statement's header that reads one affects what its blocks
    write (control). Elements at the indices in ``skip`` (the changes themselves) are
    left out. Returns name -> the element it was affected through (None for ``start``)."""
    out = _Names()
    for n in start:
        out.add(n, None)
    skipped = set(skip)
    todo = True
    while todo:
        todo = False
        for i, e in enumerate(elems):
            if i in skipped or e.kind in ("def", "block"):
                continue
            if not any(out.hit(r) for r in e.reads):
                continue
            for w in e.writes:
                todo |= out.add(w, e)
            if e.kind == "head":  # its blocks run or not by what it reads
                for inner in elems[i + 1:e.stop]:
                    if inner.kind != "def":
                        for w in inner.writes:
                            todo |= out.add(w, e)
    return dict(out.names)  # type: ignore[arg-type]


def first_hit(names: Iterable[str], affected: _Names | Iterable[str]) -> list[tuple[str, str]]:
    """(name, the affected name it clashes with) for each of ``names`` that clashes."""
    pool = affected if isinstance(affected, _Names) else _Names(affected)
    out = []
    for n in names:
        got = pool.hit(n)
        if got is not None:
            out.append((n, got))
    return out


def names_set(names: Iterable[str]) -> _Names:
    """``names`` as a set :func:`first_hit` reads quickly."""
    return _Names(names)


# ---------------------------------------------------------------------------
# control


def enclosing(elems: Sequence[Elem], pos: int, depth: int | None = None,
              kinds: type | tuple[type, ...] | None = None) -> list[int]:
    """Indices of the ``def``/``head`` elements whose extent holds base position ``pos``,
    outermost first. A position at the very end of an extent (an insertion after its
    last descendant) is inside only when the inserted code is deeper (``depth``)."""
    out = []
    for i, e in enumerate(elems[:pos]):
        if e.kind not in ("def", "head") or not i < pos <= e.stop:
            continue
        if pos == e.stop and (depth is None or depth <= e.depth):
            continue
        if kinds is None or isinstance(e.node, kinds):
            out.append(i)
    return out


def _blocks(elems: Sequence[Elem], i: int) -> list[tuple[str, int, int]]:
    """(field, start, stop) of each block of the compound element at ``i`` (``body`` first)."""
    e = elems[i]
    seps = [k for k in range(i + 1, e.stop) if elems[k].kind == "block" and elems[k].node is e.node
            and elems[k].depth == e.depth]
    out = []
    starts = [("body", i + 1), *[(elems[k].block, k) for k in seps]]
    for n, (name, start) in enumerate(starts):
        stop = starts[n + 1][1] if n + 1 < len(starts) else e.stop
        out.append((name, start, stop))
    return out


def skipped(elems: Sequence[Elem], pos: int, depth: int, kind: str) -> list[tuple[int, int]]:
    """Base position ranges ``[a, b)`` a jump of ``kind`` inserted at ``pos`` (its code at
    ``depth``) skips: to the end of the enclosing function (``return``/``raise``) or loop
    body (``continue``/``break``), less the other branches of enclosing ``if``s and the
    handlers and ``finally`` of enclosing ``try``s (they are not on its path, or run
    anyway). [] when no function or loop of ``elems`` encloses it."""
    kinds = FUNCS if kind in ("return", "raise") else LOOPS
    scopes = enclosing(elems, pos, depth, kinds)
    if not scopes:
        return []
    limit = scopes[-1]
    end = elems[limit].stop
    if kind in ("continue", "break"):
        body = _blocks(elems, limit)[0]
        end = body[2] if kind == "continue" else end
    cut: list[tuple[int, int]] = []
    for i in enclosing(elems, pos, depth):
        if i <= limit or elems[i].kind != "head":
            continue
        node = elems[i].node
        blocks = _blocks(elems, i)
        mine = next((b for b in blocks if b[1] <= pos <= b[2]), None)
        for name, a, b in blocks:
            if mine is not None and a > mine[1]:
                if isinstance(node, ast.If) or (isinstance(node, ast.Try) and name in ("handlers", "finalbody")):
                    cut.append((a, b))
    out = [(pos, end)]
    for a, b in sorted(cut):
        nxt = []
        for x, y in out:
            if b <= x or a >= y:
                nxt.append((x, y))
                continue
            if x < a:
                nxt.append((x, a))
            if b < y:
                nxt.append((b, y))
        out = nxt
    return [r for r in out if r[0] < r[1] or r == (pos, pos)]


def in_ranges(pos: int, ranges: Sequence[tuple[int, int]]) -> bool:
    """True when base position ``pos`` lies in one of ``ranges`` (``[a, b)``; a range
    ``[a, a)`` holds ``a``)."""
    return any(a <= pos < b or a == b == pos for a, b in ranges)


def _returns(e: Elem) -> bool:
    node = e.node
    if e.kind != "stmt":
        return False
    if isinstance(node, (ast.Return, ast.Raise)):
        return True
    return isinstance(node, ast.Expr) and isinstance(node.value, (ast.Yield, ast.YieldFrom))


def _call_effect(node: ast.AST, roots: set[str]) -> str | None:
    """A call in ``node`` on (or given) a value rooted at one of ``roots`` (the function's
    parameters): it may change state the caller sees. Output calls are not."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        fn = attr_chain(sub.func) if isinstance(sub.func, ast.Attribute) else \
            (sub.func.id if isinstance(sub.func, ast.Name) else None)
        if fn is None or fn.split(".")[0] in _SINKS:
            continue
        if "." in fn and fn.split(".")[0] in roots:
            return fn
        for arg in [*sub.args, *(k.value for k in sub.keywords)]:
            root = arg
            while isinstance(root, (ast.Attribute, ast.Subscript, ast.Starred)):
                root = root.value
            if isinstance(root, ast.Name) and root.id in roots:
                return fn
    return None


def effect(ch: Change, elems: Sequence[Elem], roots: set[str]) -> str | None:
    """What a change does beyond its own locals, on the path it runs, as a phrase; None
    when it only touches locals that reach no result, output calls or asserts.

    Effects: it changes or adds a ``return``/``raise``/``yield``, or the condition of a
    block holding one; it writes an attribute or a parameter (state the caller sees);
    it calls a method of a parameter or passes one to a call; or a local it writes flows
    (:func:`flows`, through ``elems``, the side the change is in) into one of these."""
    mine = {id(e) for e in ch.added}
    for e in ch.added:
        if _returns(e):
            return f"changes a `{type(e.node).__name__.lower()}`" if not isinstance(e.node, ast.Expr) else \
                "changes a `yield`"
        if e.kind == "head":
            idx = next((k for k, x in enumerate(elems) if x is e), None)
            if idx is not None and any(_returns(x) for x in elems[idx + 1:e.stop]):
                return "changes the condition of a return"
    for w, e in ch.writes.items():
        if is_chain(w):
            return f"writes {w}"
        if bare(w) in roots and id(e) in mine:
            return f"rebinds or changes parameter {bare(w)}"
    for e in ch.added:
        if e.kind == "stmt":
            fn = _call_effect(e.node, roots)
            if fn:
                return f"calls {fn}"
    local = [w for w in ch.writes if not is_chain(w)]
    if not local:
        return None
    affected = names_set(flows(elems, local))
    for x in elems:
        if id(x) in mine or x.kind in ("def", "block"):
            continue
        if (_returns(x) or any(is_chain(w) for w in x.writes)) and any(affected.hit(r) for r in x.reads):
            return f"changes what flows into `{x.code}`"
    return None


def roots_of(elems: Sequence[Elem]) -> set[str]:
    """The parameters of the functions of a flattened definition (bare names), and ``self``/``cls``."""
    out = {"self", "cls"}
    for e in elems:
        if e.kind == "def" and isinstance(e.node, FUNCS):
            out |= set(params(e.node))
    return out


def is_def(e: Elem) -> bool:
    """True for a ``def``/``class`` header element."""
    return e.kind == "def" and isinstance(e.node, DEFS)
