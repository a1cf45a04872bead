"""Three-way drift classification: is upstream's change provably apart from the patch's?

A drifted definition (its fingerprint on the target equals none recorded for a reviewed
release) is compared three ways, as a merge would see it:

* **base**: the definition on the patch's nearest *reviewed* release (a release recorded
  in ``anchors/<patch>.toml``; :func:`patchq.compat.drift.nearest_verified`);
* **ours**: base patched (the target's variant planned alone on the base release);
* **theirs**: the definition on the target.

Each definition is flattened into its statements in order (:func:`patchq.plan.astdiff.flatten`: a compound
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

A result wrapper of the patch (``{"op": "result"}``, :class:`Exit`) is compared as code
at every exit of the definition, not as the ``return`` statements it rewrites: an
``overlap`` is an upstream hunk next to a way out (a ``return`` or the end), except a
returned call that only got other keyword arguments; ``signature``, ``module-name`` and
``names`` as for any change (its result name and own locals aside), and ``names`` when
upstream's hunk changes what the value returned is made of where the wrapper reads it
(such a keyword argument included).

Any finding gives ``review`` (blocking: "upstream changed what this patch touches"),
or ``possibly-upstreamed`` (blocking) when upstream's change in the touched place is
alike the patch's (:func:`patchq.plan.meaning.similarity` >= :data:`meaning.POSSIBLE`),
with both texts. Nothing here writes; the classification is a pure function of the two
release trees and the patch.
"""

from __future__ import annotations

import ast
import copy
import difflib
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from packaging.specifiers import SpecifierSet

from patchq.model import MODULE_QUALNAME, Patch, Variant
from patchq.plan import astdiff, definitions, meaning
from patchq.plan.astdiff import Elem, Hunk, flatten, hunks
from patchq.plan.results import Plan
from patchq.report import definition_label
from patchq.vllmdist.sources import CodeSource

DRIFTED = "applies-drifted"
REVIEW = "review"
POSSIBLE = "possibly-upstreamed"

_FUNCS = astdiff.FUNCS
_DEFS = astdiff.DEFS
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_JUMPS = {ast.Return: "return", ast.Raise: "raise", ast.Continue: "continue", ast.Break: "break"}


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
        """The definition's first line (decorators included); 1 for a module."""
        return min([getattr(self.node, "lineno", 1)] + [d.lineno for d in getattr(self.node, "decorator_list", [])])


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
    return [e.node] if e.kind == "stmt" else astdiff.header_nodes(e.node) if e.kind in ("head", "def") else []


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


@dataclass
class Exit:
    """A result wrapper of the patch (``{"op": "result"}``): code run on the value the
    definition returns, on every way out of it, anchored on the definition and not on the
    text of a ``return``. ``elems``: the code flattened in the definition's scope."""

    name: str
    code: str
    elems: list[Elem]

    @classmethod
    def of(cls, op: Mapping, defn: ast.AST) -> Exit | None:
        """The exit of one result operation on ``defn`` (an :mod:`ast` function), or None."""
        name = getattr(defn, "name", None)
        if not isinstance(name, str) or not op.get("new"):
            return None
        try:
            fn = ast.parse(f"def {name}():\n" + textwrap.indent(str(op["new"]), "    ")).body[0]
        except SyntaxError:
            return None
        return cls(str(op.get("name") or ""), str(op["new"]), flatten(fn)[1:])

    def names(self) -> tuple[set[str], set[str]]:
        """(reads, writes) of the code that upstream's code can affect or be affected by: the
        result's own name and the locals the code binds itself left out (it runs on the way
        out, after everything upstream's code does; its locals die with the return)."""
        reads: set[str] = set()
        writes: set[str] = set()
        for e in self.elems:
            reads |= e.reads
            writes |= e.writes
        local = {w for w in writes if "::" in w}

        def mine(n: str) -> bool:
            return bool(self.name) and (n.split("::")[-1] == self.name if "::" in n else n.split(".")[0] == self.name)

        return ({n for n in reads if not mine(n) and n not in local},
                {n for n in writes if not mine(n) and "::" not in n})

    def result_uses(self) -> tuple[set[str], bool]:
        """(the attributes of the result the code reads or writes, ``result.x`` -> ``x``;
        whether it uses the result whole: passes it on, not only returns it)."""
        attrs: set[str] = set()
        whole = False
        if not self.name:
            return attrs, whole
        for e in self.elems:
            for n in e.reads | e.writes:
                parts = n.split(".")
                if "::" not in n and parts[0] == self.name and len(parts) > 1:
                    attrs.add(parts[1])
            node = e.node if e.kind == "stmt" else None
            if node is None:
                continue
            returned = node.value if isinstance(node, ast.Return) else None
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and sub.id == self.name and sub is not returned \
                        and not _under_attribute(node, sub):
                    whole = True
        return attrs, whole


def _under_attribute(root: ast.AST, name: ast.Name) -> bool:
    """Whether ``name`` is the object of an attribute access in ``root`` (``name.x``)."""
    return any(isinstance(n, ast.Attribute) and n.value is name for n in ast.walk(root))


def findings(base: Side, ours: Side, theirs: Side, module_changes: dict[str, str] | None = None,
             exits: Sequence[Exit] = ()) -> list[dict]:
    """The reasons the patch's change and upstream's are not provably apart (module
    docstring), each ``{"rule", "message", "upstream": "path:line[-line]"}``; [] when apart.

    ``module_changes``: module-level name -> ``path:line`` where the target binds it
    differently from the base (:func:`module_changes`). ``exits``: the patch's result
    wrappers on this definition (``ours`` then leaves them out): no upstream hunk is
    next to them (they are at every ``return``, whatever it returns), but the header and
    names rules hold."""
    found = _Findings(base, ours, theirs, hunks(base.elems, theirs.elems))
    for p in hunks(base.elems, ours.elems):
        p_where = _span(base.elems, p.i1, p.i2, base.relpath) if p.i2 > p.i1 else \
            f"after {_span(base.elems, p.i1, p.i1, base.relpath)}"
        found.overlap(p, p_where)
        found.signature(p, p_where)
        o_reads = found.names(p, p_where)
        found.skipped_path(p)
        found.module_names(o_reads, module_changes or {})
    for x in exits:
        where = f"every exit of {base.elems[0].code if base.elems else 'the definition'} (result wrapper)"
        found.signature(Hunk(1, 1, 1, 1), where)
        reads, writes = x.names()
        found.exit_overlap(x, where)
        found.exit_names(reads, writes, where)
        found.exit_result(x, where)
        found.module_names(reads, module_changes or {})
    return found.out


def _changed_names(base: Sequence[Elem], theirs: Sequence[Elem], u: Hunk) -> set[str]:
    """The names whose use an upstream hunk changed: per statement replaced one for one, the
    names one side uses and the other does not; every name of what was added or removed."""
    if u.i2 - u.i1 == u.j2 - u.j1:
        out: set[str] = set()
        for a, b in zip(base[u.i1:u.i2], theirs[u.j1:u.j2], strict=False):
            out |= (a.reads | a.writes) ^ (b.reads | b.writes)
        return out
    r1, w1 = _names_of(base, u.i1, u.i2)
    r2, w2 = _names_of(theirs, u.j1, u.j2)
    return r1 | w1 | r2 | w2


def _last(name: str) -> str:
    return name.split("::")[-1].split(".")[-1]


def _own_scope(side: Side) -> str:
    """The scope name of a side's own body (as :func:`patchq.plan.astdiff.flatten` names it)."""
    head = side.elems[0]
    name = str(getattr(head.node, "name", ""))
    return f"{head.scope}.{name}" if head.scope else name


def _kwargs_only(old: Sequence[Elem], new: Sequence[Elem]) -> set[str] | None:
    """The keyword arguments whose value changed, when ``old`` and ``new`` are ``return``s of
    the same call (the same callee, the same positional arguments) one for one; else None."""
    if not old or len(old) != len(new):
        return None
    out: set[str] = set()
    for a, b in zip(old, new, strict=False):
        ra, rb = a.node, b.node
        if not (isinstance(ra, ast.Return) and isinstance(rb, ast.Return) and isinstance(ra.value, ast.Call)
                and isinstance(rb.value, ast.Call)):
            return None
        ca, cb = ra.value, rb.value
        if ast.dump(ca.func) != ast.dump(cb.func) or [ast.dump(x) for x in ca.args] != [ast.dump(x) for x in cb.args]:
            return None
        ka = {k.arg: ast.dump(k.value) for k in ca.keywords}
        kb = {k.arg: ast.dump(k.value) for k in cb.keywords}
        if None in ka or None in kb:  # **kwargs: anything may change
            return None
        out |= {str(k) for k in set(ka) | set(kb) if ka.get(k) != kb.get(k)}
    return out


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

    def exit_names(self, reads: set[str], writes: set[str], where: str) -> None:
        """The names rule for a result wrapper: every upstream hunk is elsewhere."""
        base, theirs = self.base, self.theirs
        for u in self.u_hunks:
            renamed = renamed_locals(base.elems, theirs.elems, u)
            if renamed and not ({r.split("::")[-1] for r in reads | writes} & set(renamed)):
                continue
            u_reads, u_writes = _names_of(base.elems, u.i1, u.i2)
            t_reads, t_writes = _names_of(theirs.elems, u.j1, u.j2)
            hit = _clash(reads | writes, u_writes | t_writes) | _clash(u_reads | t_reads, writes)
            if hit:
                u_where, what = _upstream_where(base, theirs, u)
                shown = ", ".join(sorted(n.split("::")[-1] for n in hit))
                self.note("names", f"upstream's change at {u_where} ({what}) reads or rebinds {shown}, which the "
                                   f"patch's code at {base.version} {where} uses", u_where)

    def exit_overlap(self, x: Exit, where: str) -> None:
        """The overlap rule for a result wrapper: an upstream hunk next to a way out of the
        definition (a ``return`` of its own, or its end) is next to the code the wrapper
        runs there, except a ``return`` whose returned call only got other keyword
        arguments (:func:`_kwargs_only`: the result rule judges those)."""
        base, theirs = self.base, self.theirs
        if not base.elems:
            return
        scope = _own_scope(base)
        exits = [i for i, e in enumerate(base.elems) if isinstance(e.node, ast.Return) and e.scope == scope]
        ends = [Hunk(i, i + 1, 0, 0) for i in exits] + [Hunk(len(base.elems), len(base.elems), 0, 0)]
        for u in self.u_hunks:
            if _kwargs_only(base.elems[u.i1:u.i2], theirs.elems[u.j1:u.j2]) is not None:
                continue
            if any(u.touches(e) for e in ends):
                u_where, what = _upstream_where(base, theirs, u)
                self.note("overlap", f"upstream changed {u_where} ({what}), next to a way out of "
                                     f"{base.elems[0].code}, where the patch's result wrapper runs "
                                     f"({base.version} {where})", u_where)

    def exit_result(self, x: Exit, where: str) -> None:
        """The result rule: upstream's change alters what the value returned is made of
        where the patch's result wrapper reads it (an attribute of the result it uses;
        anything about a return when it passes the result on whole)."""
        attrs, whole = x.result_uses()
        if not attrs and not whole:
            return
        base, theirs = self.base, self.theirs
        for u in self.u_hunks:
            kwargs = _kwargs_only(base.elems[u.i1:u.i2], theirs.elems[u.j1:u.j2])
            changed = _changed_names(base.elems, theirs.elems, u) | (kwargs or set())
            hit = sorted(a for a in attrs if any(_last(n) == a for n in changed))
            returns = any(isinstance(e.node, ast.Return) for e in [*base.elems[u.i1:u.i2], *theirs.elems[u.j1:u.j2]])
            if hit or (whole and returns):
                u_where, what = _upstream_where(base, theirs, u)
                shown = ", ".join(f"{x.name}.{a}" for a in hit) if hit else f"{x.name} (passed on whole)"
                fn = base.elems[0].code if base.elems else "the definition"
                self.note("names", f"upstream's change at {u_where} ({what}) changes what {fn} returns where the "
                                   f"patch's result wrapper reads it ({shown})", u_where)

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
        return astdiff.node_key(node.args)  # what a caller relies on: the signature
    if isinstance(node, ast.ClassDef):
        return astdiff.node_key(node, ("body", "decorator_list"))
    return astdiff.node_key(node)


def module_changes(base_text: str, theirs_text: str, relpath: str, names: Iterable[str]) -> dict[str, str]:
    """Module-level ``names`` bound differently in two versions of a module: a ``def``'s
    signature, a class header, an import or an assignment changed, or the binding is
    gone. Returns name -> ``path:line`` in the target (``path`` alone when gone)."""
    a, b = astdiff.module_tree(base_text), astdiff.module_tree(theirs_text)
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
        if len(_BASE_PLANS) > 1024:  # a matrix of a long series asks for one per drifted patch
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


def view(base: Side, ours: Side, theirs: Side, qualname: str, exits: Sequence[Exit] = ()) -> str:
    """The three-way view: the patch's change (base -> ours) and upstream's (base ->
    theirs) as unified diffs of the definition, headers with ``path:line``; a result
    wrapper is shown as such (the code run on the value returned), not as the ``return``
    statements it rewrites."""
    b, o, t = (textwrap.dedent(s.text).splitlines(keepends=True) for s in (base, ours, theirs))
    head = (f"three-way view of {_shown(qualname, theirs.relpath)}: base = reviewed vllm {base.version} "
            f"({base.relpath}:{base.line}), "
            f"ours = base patched, theirs = vllm {theirs.version} ({theirs.relpath}:{theirs.line})\n")
    patch = "".join(difflib.unified_diff(b, o, f"base {base.version}/{base.relpath}:{base.line}",
                                         f"ours {base.version}+patch"))
    for x in exits:
        patch += (f"== the patch wraps the result of {qualname}: on every exit, `{x.name or '_'} = <the value "
                  f"returned>`, then:\n" + textwrap.indent(x.code, "    "))
    upstream = "".join(difflib.unified_diff(b, t, f"base {base.version}/{base.relpath}:{base.line}",
                                            f"theirs {theirs.version}/{theirs.relpath}:{theirs.line}"))
    return (head + "== the patch's change (base -> ours)\n" + patch
            + "== upstream's change (base -> theirs)\n" + upstream)


def compare(qualname: str, base: Side, ours: Side, theirs: Side, base_module: str, theirs_module: str,
            exits: Sequence[Exit] = ()) -> dict:
    """The ``threeway`` entry of one drifted definition: findings, a possible upstream
    match (score and both texts), the view. ``exits``: the patch's result wrappers
    (:func:`findings`)."""
    p_hunks = hunks(base.elems, ours.elems)
    reads = set()
    for h in p_hunks:
        for e in ours.elems[h.j1:h.j2]:
            reads |= {r.split("::")[-1].split(".")[0] for r in e.reads}
    for x in exits:
        reads |= {r.split("::")[-1].split(".")[0] for r in x.names()[0]}
    changed = module_changes(base_module, theirs_module, theirs.relpath, sorted(reads)) if reads else {}
    found = findings(base, ours, theirs, changed, exits)
    entry = {"qualname": qualname, "base": base.version, "base_path": base.relpath, "base_line": base.line,
             "path": theirs.relpath, "line": theirs.line, "findings": found, "score": None,
             "patch_text": "", "upstream_text": "", "view": view(base, ours, theirs, qualname, exits)}
    if found:
        u_hunks = hunks(base.elems, theirs.elems)
        near = [u for u in u_hunks if any(u.touches(p) for p in p_hunks)] or u_hunks
        mine = astdiff.added(ours.elems, p_hunks) + [n for x in exits for n in astdiff.tops(x.elems, 0,
                                                                                          len(x.elems))]
        theirs_added = astdiff.added(theirs.elems, near)
        replaced = astdiff.replaced(base.elems, [*p_hunks, *near])
        score = meaning.similarity(mine, theirs_added, base=replaced)
        entry["score"] = score
        entry["patch_text"] = meaning.canonical_text(mine)
        entry["upstream_text"] = meaning.canonical_text(theirs_added)
    return entry


def classify(patch: Patch, drifted: Sequence[tuple[str, str]], target: CodeSource,
             target_text: Callable[[str], str | None], known: Mapping[tuple[str, str], Iterable[str]],
             target_node: Callable[[str, str], ast.AST | None] | None = None) -> Verdict:
    """The three-way verdict for ``patch``'s drifted definitions on ``target``.

    Args:
        drifted: (relpath, qualname) of each drifted definition on the target.
        target_text: relpath -> the target's pristine text.
        target_node: (relpath, qualname) -> the target's pristine :mod:`ast` definition
            (file line numbers) or None; default: the text is indexed here.
        known: (relpath, qualname) -> releases recorded as reviewed for that definition
            (:func:`patchq.compat.drift.recorded_fingerprints` with its file: two
            module-level anchors of one patch are two definitions).
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
        shown = _shown(qualname, relpath)
        base_v = nearest_verified(known.get((relpath, qualname), ()), target.version)
        if base_v is None:
            problems.append(f"{shown} has no reviewed release recorded: no base to compare with")
            continue
        plan = _base_plan(patch, label, base_v) if variant is not None else None
        if plan is None:
            why = "no edit variant" if variant is None else "not cached, and not fetched"
            problems.append(f"reviewed vllm {base_v} is not available ({why}): no three-way view of {shown}")
            continue
        entry = _entry(plan, base_v, relpath, qualname, target, target_text, target_node, patch, variant)
        if isinstance(entry, str):
            problems.append(entry)
            continue
        entries.append(entry)
        if entry["findings"] and entry["score"] is not None and entry["score"] >= meaning.POSSIBLE:
            possible.append(entry)
    return _verdict(patch, target, entries, problems, possible)


def _base_anchor(patch: Patch | None, anchors: Sequence, relpath: str, qualname: str):
    """The anchor result of the base plan that stands for the target's ``(relpath,
    qualname)``: by qualname and file, else by qualname and the anchor's module hint (a
    definition that moved to the hinted module, a module between ``a.py`` and
    ``a/__init__.py``), else the first definition with that qualname; None when none. Two
    module-level anchors of one patch (two files) never stand for each other."""
    same = [x for x in anchors if x.qualname == qualname]
    hit = next((x for x in same if x.relpath == relpath), None)
    if hit is None and patch is not None:
        hit = next((x for x in same if x.anchor in patch.anchors
                    and relpath in patch.anchors[x.anchor].module_paths), None)
    if hit is None and same and qualname != MODULE_QUALNAME:  # a definition is its qualname (it may move)
        hit = same[0]
    return hit


def _module_side(version: str, relpath: str, text: str) -> Side | None:
    """A module-level anchor's side: the module's own statements
    (:func:`patchq.plan.moduleview.flatten`), shown as its outline; None when the text
    does not parse."""
    from patchq.plan import moduleview
    from patchq.sentinels import SENTINEL_RE

    tree = astdiff.module_tree(text)
    if tree is None:
        return None
    shown = "".join(ln for ln in moduleview.outline(text, tree).splitlines(keepends=True)
                    if not (ln.lstrip().startswith("#") and SENTINEL_RE.search(ln)))  # as a definition's view
    return Side(version, relpath, tree, shown, moduleview.flatten(tree))


def _result_ops(variant: Variant | None, anchor: str) -> tuple[list[Mapping], list[Mapping]]:
    """(the result operations, all operations) of one anchor's statement edit in ``variant``
    (([], []) for a hand-written transform)."""
    fn = variant.edits.get(anchor) if variant is not None else None
    ops = [o for o in getattr(fn, "statement_ops", ()) if isinstance(o, Mapping)]
    return [o for o in ops if o.get("op") == "result"], ops


def _without_results(text: str, relpath: str, qualname: str, ops: Sequence[Mapping]) -> str | None:
    """``text`` with the definition ``qualname`` changed by ``ops`` but its result
    wrappers; None when that does not plan (the plan's own text is used then)."""
    import libcst as cst

    from patchq.errors import AnchorError
    from patchq.plan import stmtpatch
    from patchq.plan.anchors import ast_index, cut_segment, splice

    try:
        found = ast_index(text).get(qualname) or []
        if len(found) != 1:
            return None
        seg = cut_segment(text, relpath, qualname, found[0])
        new = stmtpatch.apply_ops(seg.node, [dict(o) for o in ops if o.get("op") != "result"])
        return splice(text, seg, seg.render(new))
    except (AnchorError, SyntaxError, cst.ParserSyntaxError):
        return None


def _entry(plan: Plan, base_v: str, relpath: str, qualname: str, target: CodeSource,
           target_text: Callable[[str], str | None],
           target_node: Callable[[str, str], ast.AST | None] | None, patch: Patch | None = None,
           variant: Variant | None = None) -> dict | str:
    """The three-way entry (:func:`compare`) of one drifted definition, its base the
    patch's plan on reviewed release ``base_v``; or why there is none (a problem line).
    A result wrapper of the anchor's operations is compared as such (:class:`Exit`)."""
    result = plan.results[0]
    a = _base_anchor(patch, result.anchors, relpath, qualname)
    shown = _shown(qualname, relpath)
    if result.status != "ok" or a is None:
        why = result.reason or f"{shown} is not edited there"
        return f"the patch does not plan on reviewed vllm {base_v} ({why}): no three-way view"
    base_text = plan.pristine.get(a.relpath) or plan.source.read_text(a.relpath) or ""
    ours_text = plan.patched.get(a.relpath, base_text)
    theirs_text = target_text(relpath) or ""
    target_label = str(target.version) if target.kind in ("release", "installed") else \
        f"{target.version} {target.kind}"
    if qualname == MODULE_QUALNAME:  # the module's own statements: plan/moduleview.py
        base, ours, theirs = (_module_side(base_v, a.relpath, base_text), _module_side(base_v, a.relpath, ours_text),
                              _module_side(target_label, relpath, theirs_text))
    else:
        ws = plan.workspace
        base = _side(base_v, a.relpath, base_text, qualname,
                     ws.pristine_node(a.relpath, qualname) if ws is not None else None)
        ours = _side(base_v, a.relpath, ours_text, qualname,
                     ws.current_node(a.relpath, qualname) if ws is not None else None)
        theirs = _side(target_label, relpath, theirs_text, qualname,
                       target_node(relpath, qualname) if target_node is not None else None)
    if base is None or ours is None or theirs is None:
        return (f"{shown} is not defined exactly once in reviewed vllm {base_v}, in the patched result and in "
                f"vllm {target_label}: no three-way view")
    wraps, ops = _result_ops(variant, a.anchor)
    exits: list[Exit] = []
    if wraps:
        plain = _without_results(base_text, a.relpath, qualname, ops)
        side = _side(base_v, a.relpath, plain, qualname) if plain is not None else None
        if side is not None:
            ours = side
            exits = [x for x in (Exit.of(o, base.node) for o in wraps) if x is not None]
    return compare(qualname, base, ours, theirs, base_text, theirs_text, exits)


def _verdict(patch: Patch, target: CodeSource, entries: list[dict], problems: list[str],
             possible: list[dict]) -> Verdict:
    """:func:`classify`'s verdict from its entries: possibly upstreamed, review (findings or
    problems, four shown) or drifted apart from the patch."""
    blocking = [e for e in entries if e["findings"]]
    if possible:
        e = possible[0]
        return Verdict(POSSIBLE, (f"possibly upstreamed: upstream's change to "
                                  f"{_shown(e['qualname'], e['path'])} at "
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
    where = ", ".join(definition_label(e["qualname"], e["path"], e["line"]) for e in entries)
    bases = ", ".join(sorted({e["base"] for e in entries}))
    return Verdict(DRIFTED, f"{where} changed since reviewed vllm {bases}, apart from the patch's change "
                            f"(three-way: no upstream hunk touches it, no signature or name it relies on "
                            f"changed, nothing lands on a path it skips); the transform applies and the "
                            f"result compiles", entries)


def _shown(qualname: str, relpath: str) -> str:
    """A definition as the messages name it: its qualname; a module-level anchor's, the
    module-level statements of its file (:func:`patchq.model.definition_label`)."""
    return definition_label(qualname, relpath) if qualname == MODULE_QUALNAME else qualname


def _clip(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."
