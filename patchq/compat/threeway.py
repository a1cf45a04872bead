"""Three-way drift classification: is upstream's change provably apart from the patch's?

A drifted definition (its fingerprint on the target equals none recorded for a reviewed
release) is compared three ways, as a merge would see it:

* **base**: the definition on the patch's nearest *reviewed* release (a release recorded
  in ``anchors/<patch>.toml``; :func:`patchq.compat.drift.nearest_verified`);
* **ours**: base patched (the target's variant planned alone on the base release);
* **theirs**: the definition on the target.

Each definition is flattened into its statements in order
(:func:`patchq.plan.astdiff.flatten`: a compound statement is its header, then its
blocks; docstrings left out; each element keyed by its normalized AST and depth, so
formatting and comments never count), and two element diffs are taken: the patch's hunks
(base -> ours) and upstream's hunks (base -> theirs), both in base positions. The verdict
is decided by data flow, not adjacency (:mod:`patchq.plan.dataflow`: what each change
reads and writes, and whether one decides if the other runs). The drift stays
``applies-drifted`` (not blocking) only when none of these holds (:func:`findings`), each
rule naming the upstream lines:

``same-statement``
    upstream changed a statement the patch edits or removes, or inserted code inside what
    the patch replaces (or the patch inserts inside what upstream rewrote);
``names``
    a name both changes share: upstream's change writes one the patch's reads or writes,
    or reads one the patch's writes, directly or through the definition's other
    statements (:func:`patchq.plan.dataflow.flows`); a hunk that only renames locals the
    patch does not use (:func:`renamed_locals`) keeps the meaning;
``keys``
    both changes use the same string key (:func:`patchq.plan.dataflow.keys`: an
    environment variable's name, a config or dict entry's key, ``VLLM_X_Y`` or
    ``max_model_len``): state shared through ``os.environ`` or a mapping, which no name
    shows (upstream reading the environment variable the patch's vendored fix reads: the
    fix merged upstream by other code); or a key the patch's added code uses is new in the
    target's package, absent from the whole base release (:func:`new_key_sites`: upstream
    took up the patch's environment variable or entry somewhere else, e.g. ``vllm/envs.py``);
``coupled``
    upstream changed another method of the class (:func:`siblings`) so that it reads or
    writes an attribute the patch's change writes, or assigns anew one it reads;
``signature``
    upstream changed a parameter the patch's code reads or binds in a function enclosing
    its change (:func:`patchq.plan.dataflow.param_changes`), or a class's bases; a
    parameter appended that the patch never reads, or a decorator, is no finding;
``control``
    one side changed the header of a compound statement enclosing the other's change;
``module-name``
    a module-level name the patch's added code reads (an import, a helper's signature, a
    constant) is bound differently in the target's module than in the base's;
``skipped-path``
    a jump the patch inserts skips upstream's change and that change has an effect beyond
    its own locals (:func:`patchq.plan.dataflow.effect`), or a ``return``/``continue``/
    ``break`` upstream inserts skips the patch's change.

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
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from packaging.specifiers import SpecifierSet

from patchq.model import MODULE_QUALNAME, Patch, Variant
from patchq.plan import astdiff, dataflow, definitions, meaning
from patchq.plan.astdiff import Elem, Hunk, flatten, hunks
from patchq.plan.results import Plan
from patchq.report import definition_label
from patchq.vllmdist.sources import CodeSource

DRIFTED = "applies-drifted"
REVIEW = "review"
POSSIBLE = "possibly-upstreamed"

_FUNCS = astdiff.FUNCS
_DEFS = astdiff.DEFS


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


def _at(side: Side, e: Elem) -> str:
    return f"{side.relpath}:{e.line}"


class _Blank(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id="_", ctx=node.ctx)


def _shape_nodes(e: Elem) -> list[ast.AST]:
    return [e.node] if e.kind == "stmt" else astdiff.header_nodes(e.node) if e.kind in ("head", "def") else []


def _names_of(elems: Sequence[Elem], lo: int, hi: int) -> tuple[set, set]:
    """(reads, writes) of the elements ``elems[lo:hi]``."""
    reads: set[str] = set()
    writes: set[str] = set()
    for e in elems[lo:hi]:
        reads |= e.reads
        writes |= e.writes
    return reads, writes


def _clash(reads: set, writes: set) -> set:
    """Names in ``reads`` that ``writes`` rebinds (a chain under a rebound chain counts)."""
    return {r for r in reads for w in writes if r == w or r.startswith(w + ".")}


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


@dataclass
class Sibling:
    """Upstream's change to another definition of the anchored one's class (a method or the
    class body's own statements), as :func:`patchq.plan.dataflow.change` sees it: its
    qualified name, the change, and the target's relpath for lines."""

    qualname: str
    change: dataflow.Change
    relpath: str


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
             siblings: Sequence[Sibling] = (), exits: Sequence[Exit] = (),
             new_keys: Mapping[str, str] | None = None) -> list[dict]:
    """The reasons the patch's change and upstream's are not provably apart (module
    docstring), each ``{"rule", "message", "upstream": "path:line[-line]"}``; [] when apart.

    ``module_changes``: module-level name -> ``path:line`` where the target binds it
    differently from the base (:func:`module_changes`); ``siblings``: upstream's changes
    to the other definitions of the class (:func:`siblings`); ``exits``: the patch's result
    wrappers on this definition (``ours`` then leaves them out): code at every way out of
    the definition, whatever it returns, judged by the rules of its own (``exit_*``);
    ``new_keys``: key -> ``path:line`` of the keys the patch's added code uses that the
    target's package uses and the base release's does not (:func:`new_key_sites`)."""
    p_hunks = hunks(base.elems, ours.elems)
    u_hunks = hunks(base.elems, theirs.elems)
    found = _Findings(base, ours, theirs, u_hunks,
                      [dataflow.change(base.elems, ours.elems, p) for p in p_hunks],
                      [dataflow.change(base.elems, theirs.elems, u) for u in u_hunks])
    for pc in found.p_changes:
        found.same_statement(pc)
        found.control(pc)
        found.signature(pc)
        found.names(pc)
        found.keys(pc)
        found.skipped_path(pc)
        found.coupled(pc, siblings)
    found.skipped_by_upstream()
    found.module_names(module_changes or {})
    found.new_keys(new_keys or {})
    for x in exits:
        where = f"every exit of {base.elems[0].code if base.elems else 'the definition'} (result wrapper)"
        reads, writes = x.names()
        found.exit_signature(reads | writes, where)
        found.exit_overlap(x, where)
        found.exit_names(reads, writes, where)
        found.exit_result(x, where)
        found.exit_module_names(reads, module_changes or {})
    return found.out


def _assigns(e: Elem, name: str) -> bool:
    """True when the statement ``e`` binds the bare ``name`` by assignment (a target, or a
    name of a tuple target), not by mutation (``name.append(...)``)."""
    node = e.node
    if e.kind != "stmt" or not isinstance(node, (ast.Assign, ast.AnnAssign)):
        return False
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(isinstance(t, ast.Name) and t.id == name for target in targets for t in ast.walk(target)
               if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store))


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
    method per rule, each given one of the patch's changes (:class:`dataflow.Change`)."""

    base: Side
    ours: Side
    theirs: Side
    u_hunks: list[Hunk]
    p_changes: list[dataflow.Change]
    u_changes: list[dataflow.Change]
    out: list[dict] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)
    #: (patch change, upstream hunk) pairs a finding already explains (names need not repeat it)
    explained: set[tuple[int, Hunk]] = field(default_factory=set)

    def note(self, rule: str, message: str, where: str) -> None:
        if (rule, where) not in self.seen:
            self.seen.add((rule, where))
            self.out.append({"rule": rule, "message": message, "upstream": where})

    def p_where(self, p: Hunk) -> str:
        """Where the patch's change is, in base lines (``after path:line`` for an insertion)."""
        base = self.base
        if p.i2 > p.i1:
            return f"{base.version} {_span(base.elems, p.i1, p.i2, base.relpath)}"
        return f"{base.version} after {_span(base.elems, p.i1, p.i1, base.relpath)}"

    def p_side(self, e: Elem, pc: dataflow.Change) -> str:
        """``path:line`` of one of the patch's elements: in ours when added, in base when removed."""
        if any(e is a for a in pc.added):
            return f"{self.base.version}+patch {_at(self.ours, e)}"
        return f"{self.base.version} {_at(self.base, e)}"

    def u_side(self, e: Elem, uc: dataflow.Change) -> str:
        """``path:line`` of one of upstream's elements: in theirs when added, in base when removed."""
        if any(e is a for a in uc.added):
            return _at(self.theirs, e)
        return f"{self.base.version} {_at(self.base, e)} (removed)"

    def depth(self, pc: dataflow.Change) -> int:
        """The depth of a change's code (its first added element, else the first it replaces)."""
        elems = pc.added or pc.removed
        return elems[0].depth if elems else 0

    # -- rules -------------------------------------------------------------

    def same_statement(self, pc: dataflow.Change) -> None:
        """Upstream changed a statement the patch edits or removes, or inserted code inside
        what the patch replaces (or the patch inserts inside what upstream rewrote)."""
        p = pc.hunk
        for u in self.u_hunks:
            both = p.i1 < u.i2 and u.i1 < p.i2 and p.i2 > p.i1 and u.i2 > u.i1 and \
                not all(self._kept(u, i) for i in range(max(p.i1, u.i1), min(p.i2, u.i2)))
            # an insertion inside what upstream rewrote, unless a neighbour it is placed by is kept
            inside = (u.i1 == u.i2 and p.i1 < u.i1 < p.i2) or \
                (p.i1 == p.i2 and u.i1 < p.i1 < u.i2 and not self._kept(u, p.i1 - 1) and not self._kept(u, p.i1))
            if both or inside:
                self.explained.add((id(pc), u))
                where, what = _upstream_where(self.base, self.theirs, u)
                self.note("same-statement", f"upstream changed {where} ({what}), code the patch's change at "
                                            f"{self.p_where(p)} also edits", where)

    # -- a result wrapper's rules ----------------------------------------------

    def exit_signature(self, names: set[str], where: str) -> None:
        """Upstream changed a parameter of the definition that the result wrapper's code reads
        or binds (a parameter added that it never reads is no finding)."""
        base, theirs = self.base, self.theirs
        if not base.elems or base.elems[0].kind != "def":
            return
        e = base.elems[0]
        used = {dataflow.bare(n) for n in names if not dataflow.is_chain(n)}
        for u in self.u_hunks:
            if not u.i1 <= 0 < u.i2:
                continue
            new = next((x for x in theirs.elems[u.j1:u.j2] if x.kind == "def" and x.depth == e.depth), None)
            changed = dataflow.param_changes(e.node, new.node) if new is not None else {"<removed>"}
            hit = sorted(changed & (used | {"<removed>"}))
            if hit:
                u_where, what = _upstream_where(base, theirs, u)
                self.note("signature", f"upstream changed the header of {e.code} at {u_where} ({what}): "
                                       f"{', '.join(hit)}, which the patch's code at {base.version} {where} uses",
                          u_where)

    def exit_module_names(self, reads: set[str], module_changes: dict[str, str]) -> None:
        """A module-level name the result wrapper's code reads is bound differently in the target."""
        for name, where in module_changes.items():
            if any(dataflow.bare(r) == name or r.split(".")[0] == name for r in reads):
                self.note("module-name", f"{name}, which the patch's result wrapper reads, is bound differently "
                                         f"in the target's module ({where})", where)

    def exit_names(self, reads: set[str], writes: set[str], where: str) -> None:
        """The names rule for a result wrapper: every upstream hunk is elsewhere."""
        base, theirs = self.base, self.theirs
        for u in self.u_hunks:
            renamed = renamed_locals(base.elems, theirs.elems, u)
            if renamed and not ({r.split("::")[-1] for r in reads | writes} & set(renamed)):
                continue
            u_reads, u_writes = _names_of(base.elems, u.i1, u.i2)
            t_reads, t_writes = _names_of(theirs.elems, u.j1, u.j2)
            if (u.i1, u.i2, u.j2 - u.j1) == (0, 1, 1) and base.elems[0].kind == "def" \
                    and theirs.elems[u.j1].kind == "def":  # the header alone: what it binds anew
                u_reads, u_writes = set(), set()
                t_reads = t_writes = {f"{_own_scope(base)}::{n}" if _own_scope(base) else n
                                      for n in dataflow.param_changes(base.elems[0].node, theirs.elems[u.j1].node)}
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

    def _kept(self, u: Hunk, i: int) -> bool:
        """True when base element ``i``, inside upstream's hunk ``u``, is still there unchanged
        among the elements upstream has in its place (a header whose parameters bind the same,
        annotations aside, counts as unchanged)."""
        e = self.base.elems[i]
        for x in self.theirs.elems[u.j1:u.j2]:
            if x.key == e.key:
                return True
            if e.kind == "def" and x.kind == "def" and x.depth == e.depth \
                    and getattr(x.node, "name", None) == getattr(e.node, "name", None) \
                    and not dataflow.param_changes(e.node, x.node):
                return True
        return False

    def control(self, pc: dataflow.Change) -> None:
        """One side changed the header of a compound statement (``if``, loop, ``with``,
        ``try``) enclosing the other's change: it decides whether that change runs."""
        p, base = pc.hunk, self.base
        for i in dataflow.enclosing(base.elems, p.i1, self.depth(pc)):
            e = base.elems[i]
            if e.kind != "head":
                continue
            for u in self.u_hunks:
                if u.i1 <= i < u.i2:
                    where, what = _upstream_where(base, self.theirs, u)
                    self.note("control", f"upstream changed `{e.code}` ({base.version} {_at(base, e)}) at {where} "
                                         f"({what}); it decides whether the patch's change at {self.p_where(p)} runs",
                              where)
        for u, uc in zip(self.u_hunks, self.u_changes, strict=True):
            if u.i1 < p.i2 and p.i1 < u.i2:
                continue  # the same statement
            for i in dataflow.enclosing(base.elems, u.i1, self.depth(uc)):
                e = base.elems[i]
                if e.kind == "head" and p.i1 <= i < p.i2:
                    where, what = _upstream_where(base, self.theirs, u)
                    self.note("control", f"the patch changes `{e.code}` ({self.p_where(p)}), which decides whether "
                                         f"upstream's change at {where} ({what}) runs", where)

    def signature(self, pc: dataflow.Change) -> None:
        """Upstream changed a parameter of a function enclosing the patch's change that the
        patch's code reads or binds (a parameter added that it never reads, or a decorator,
        is no finding), or a class's bases."""
        p, base, theirs = pc.hunk, self.base, self.theirs
        used = {dataflow.bare(n) for n in (*pc.reads, *pc.writes) if not dataflow.is_chain(n)}
        for d in dataflow.enclosing(base.elems, p.i1, self.depth(pc), astdiff.DEFS):
            e = base.elems[d]
            for u in self.u_hunks:
                if not u.i1 <= d < u.i2:
                    continue
                new = next((x for x in theirs.elems[u.j1:u.j2] if x.kind == "def" and x.depth == e.depth
                            and getattr(x.node, "name", None) == getattr(e.node, "name", None)), None)
                changed = dataflow.param_changes(e.node, new.node) if new is not None else {"<removed>"}
                hit = sorted(changed & (used | {"<bases>", "<removed>"}))
                if hit:
                    self.explained.add((id(pc), u))
                    where, what = _upstream_where(base, theirs, u)
                    shown = ", ".join(hit)
                    self.note("signature", f"upstream changed the header of {e.code} at {where} ({what}): {shown}, "
                                           f"which the patch's change at {self.p_where(p)} relies on", where)

    def names(self, pc: dataflow.Change) -> None:
        """A name both changes share, where one's value reaches the other: upstream's change
        writes one the patch's reads (before it) or overwrites one the patch writes (after
        it), or reads one the patch's writes (after it); in a loop holding both, either
        order reaches. A rename of locals the patch does not use keeps the meaning; a name
        a loop around the patch's code binds itself is not reached from outside the loop.
        Only the names the changes themselves read and write count: following them through
        the definition's other statements (flow-insensitive) made every change of a large
        ``__post_init__`` reach every other (the verdict corpus)."""
        base, theirs = self.base, self.theirs
        p_used = {dataflow.bare(r) for r in (*pc.reads, *pc.writes)}
        p_reads, p_writes = dataflow.names_set(pc.reads), dataflow.names_set(pc.writes)
        for u, uc in zip(self.u_hunks, self.u_changes, strict=True):
            if (id(pc), u) in self.explained:
                continue
            renamed = renamed_locals(base.elems, theirs.elems, u)
            if renamed and not (p_used & set(renamed)):
                continue
            order = self._order(pc, uc)
            hit = None
            for name, e in uc.writes.items():
                got = p_reads.hit(name)
                if got is not None and order in ("before", "same") and not self._shadowed(got, pc, uc) \
                        and not self._bound_first(got, pc):
                    hit = (got, "writes", e, "reads", pc.reads[got])
                    break
                got = p_writes.hit(name)
                if got is not None and (order == "same" or (order == "after" and any(e is x for x in uc.added))):
                    hit = (got, "writes", e, "writes", pc.writes[got])
                    break
            if hit is None and order in ("after", "same"):
                for name, e in uc.reads.items():
                    got = p_writes.hit(name)
                    if got is not None:
                        hit = (got, "reads", e, "writes", pc.writes[got])
                        break
            if hit is not None:
                where, what = _upstream_where(base, theirs, u)
                self._shared(where, what, hit[0], hit[1], hit[2], uc, hit[3], hit[4], pc)

    def keys(self, pc: dataflow.Change) -> None:
        """Upstream's change and the patch's use the same key-like string constant
        (:func:`patchq.plan.dataflow.keys`), in code either adds or removes: state shared
        through ``os.environ``, a config or a dict, which no name shows."""
        p_keys: dict[str, Elem] = {}
        for e in (*pc.added, *pc.removed):
            for k in dataflow.keys(e):
                p_keys.setdefault(k, e)
        if not p_keys:
            return
        for u, uc in zip(self.u_hunks, self.u_changes, strict=True):
            if (id(pc), u) in self.explained:
                continue
            for e in (*uc.added, *uc.removed):
                shared = sorted(dataflow.keys(e) & set(p_keys))
                if not shared:
                    continue
                self.explained.add((id(pc), u))
                where, what = _upstream_where(self.base, self.theirs, u)
                pe = p_keys[shared[0]]
                self.note("keys", f"`{shared[0]}`: upstream's change at {where} ({what}) uses this key at "
                                  f"{self.u_side(e, uc)} (`{e.code}`); the patch's change uses it at "
                                  f"{self.p_side(pe, pc)} (`{pe.code}`): state shared through an environment "
                                  f"variable or a mapping entry, which no name shows", where)
                break

    def new_keys(self, sites: Mapping[str, str]) -> None:
        """A key the patch's added code uses is new in the target's package (``sites``)."""
        for pc in self.p_changes:
            for e in pc.added:
                for k in sorted(dataflow.keys(e) & set(sites)):
                    where = sites[k]
                    self.note("keys", f"`{k}`, which the patch's change uses at {self.p_side(e, pc)} "
                                      f"(`{e.code}`), is new in vllm {self.theirs.version} at {where} and "
                                      f"nowhere in reviewed vllm {self.base.version}: upstream took up this "
                                      f"key elsewhere (the patch's change upstreamed, or the key's meaning "
                                      f"taken)", where)

    def _order(self, pc: dataflow.Change, uc: dataflow.Change) -> str:
        """Where upstream's change runs relative to the patch's, in base positions:
        ``before``, ``after``, or ``same`` (they overlap, insert at one place, or a loop
        holds both)."""
        p, u = pc.hunk, uc.hunk
        loops_p = set(dataflow.enclosing(self.base.elems, p.i1, self.depth(pc), dataflow.LOOPS))
        loops_u = set(dataflow.enclosing(self.base.elems, u.i1, self.depth(uc), dataflow.LOOPS))
        if loops_p & loops_u:
            return "same"
        if u.i2 <= p.i1 and not (u.i1 == u.i2 == p.i1 == p.i2):
            return "before"
        if u.i1 >= p.i2 and not (u.i1 == u.i2 == p.i1 == p.i2):
            return "after"
        return "same"

    @staticmethod
    def _bound_first(name: str, pc: dataflow.Change) -> bool:
        """True when the patch's added code assigns the bare ``name`` before any of its reads
        of it, each read inside the block of that assignment: upstream's value of the name
        never reaches them (a local the patch's code sets up for itself)."""
        if dataflow.is_chain(name):
            return False
        bare = dataflow.bare(name)
        bind: int | None = None
        for i, e in enumerate(pc.added):
            if name in e.reads:
                if bind is None or any(x.depth < pc.added[bind].depth for x in pc.added[bind + 1:i + 1]):
                    return False
            elif bind is None and name in e.writes and _assigns(e, bare):
                bind = i
        return bind is not None

    def _shadowed(self, name: str, pc: dataflow.Change, uc: dataflow.Change) -> bool:
        """True when a loop around the patch's change binds the bare ``name`` in its header
        and upstream's change is outside that loop: upstream's value never reaches the
        patch's read."""
        if dataflow.is_chain(name):
            return False
        base = self.base
        for i in dataflow.enclosing(base.elems, pc.hunk.i1, self.depth(pc), dataflow.LOOPS):
            loop = base.elems[i]
            if name in loop.writes and not (i < uc.hunk.i1 < loop.stop):
                return True
        return False

    def _shared(self, where: str, what: str, name: str, u_verb: str, u_elem: Elem, uc: dataflow.Change,
                p_verb: str, p_elem: Elem, pc: dataflow.Change) -> None:
        u_at = f"at {self.u_side(u_elem, uc)}"
        self.note("names", f"`{dataflow.bare(name)}`: upstream's change at {where} ({what}) {u_verb} it {u_at}; "
                           f"the patch's change {p_verb} it at {self.p_side(p_elem, pc)} (`{p_elem.code}`)", where)

    def skipped_path(self, pc: dataflow.Change) -> None:
        """A jump the patch inserts skips upstream's change, and upstream's change has an
        effect beyond its own locals (:func:`patchq.plan.dataflow.effect`)."""
        base, ours, theirs = self.base, self.ours, self.theirs
        p = pc.hunk
        roots = dataflow.roots_of(theirs.elems)
        for j in pc.jumps:
            kind = dataflow.JUMPS[type(j.node)]
            if kind in ("continue", "break") and self._own_loop(j, pc):
                continue
            region = dataflow.skipped(base.elems, p.i2, self.depth(pc), kind)
            for u, uc in zip(self.u_hunks, self.u_changes, strict=True):
                if u.i1 < p.i2 or not dataflow.in_ranges(u.i1, region) or (u.i1 < p.i2 and p.i1 < u.i2):
                    continue
                why = dataflow.effect(uc, theirs.elems, roots)
                if why is None:
                    continue
                where, what = _upstream_where(base, theirs, u)
                self.note("skipped-path", f"the patch's inserted `{j.code}` ({base.version}+patch {_at(ours, j)}) "
                                          f"now skips upstream's change at {where} ({what}), which {why}", where)

    def _own_loop(self, j: Elem, pc: dataflow.Change) -> bool:
        """True when the loop a ``continue``/``break`` belongs to is code the patch adds."""
        elems = self.ours.elems
        idx = next(k for k, x in enumerate(elems) if x is j)
        loops = dataflow.enclosing(elems, idx, None, dataflow.LOOPS)
        return bool(loops) and pc.hunk.j1 <= loops[-1] < pc.hunk.j2

    def skipped_by_upstream(self) -> None:
        """A ``return``/``continue``/``break`` upstream inserts skips the patch's change on its path."""
        base, theirs = self.base, self.theirs
        for u, uc in zip(self.u_hunks, self.u_changes, strict=True):
            for j in uc.jumps:
                kind = dataflow.JUMPS[type(j.node)]
                if kind == "raise":
                    continue  # the call fails there: the patch's change is moot, not wrong
                region = dataflow.skipped(base.elems, u.i2, self.depth(uc), kind)
                for pc in self.p_changes:
                    p = pc.hunk
                    if p.i1 < u.i2 or not dataflow.in_ranges(p.i1, region):
                        continue
                    where, what = _upstream_where(base, theirs, u)
                    self.note("skipped-path", f"upstream's inserted `{j.code}` ({_at(theirs, j)}) now skips the "
                                              f"patch's change at {self.p_where(p)}", where)

    def coupled(self, pc: dataflow.Change, siblings: Sequence[Sibling]) -> None:
        """Upstream changed another definition of the class so that it reads or writes an
        attribute the patch's change writes, or assigns anew one the patch's change reads
        (state coupled through another method: an attribute initialised, sized or indexed there)."""
        if not siblings:
            return
        p_writes = dataflow.names_set(n for n in pc.writes if dataflow.is_chain(n))
        p_reads = dataflow.names_set(n for n in pc.reads if dataflow.is_chain(n))
        for s in siblings:
            uc = s.change
            for e in (*uc.added, *uc.removed):
                got, verb = None, ""
                for name in e.writes:
                    got = p_writes.hit(name) if dataflow.is_chain(name) else None
                    if got is not None:
                        verb = "writes"
                        break
                if got is None:  # a new reader of the patch's value: code it was not reviewed with
                    for name in e.reads:
                        got = p_writes.hit(name) if dataflow.is_chain(name) else None
                        if got is not None:
                            verb = "reads"
                            break
                if got is None:
                    continue
                where = f"{s.relpath}:{e.line}" if any(e is a for a in uc.added) else \
                    f"{s.relpath} ({self.base.version} {self.base.relpath}:{e.line}, removed)"
                pe = pc.writes[got]
                self.note("coupled", f"`{got}`: the patch's change writes it at {self.p_side(pe, pc)} "
                                     f"(`{pe.code}`); upstream's change to {s.qualname} {verb} it at {where} "
                                     f"(`{e.code}`)", where)
                break
            for name, e in uc.rebinds.items():
                got = p_reads.hit(name)
                if got is None:
                    continue
                added = any(e is a for a in uc.added)
                where = f"{s.relpath}:{e.line}" if added else \
                    f"{s.relpath} ({self.base.version} {self.base.relpath}:{e.line}, removed)"
                if e.kind == "def":
                    what = f"upstream {'defines ' + s.qualname + ' anew' if added else 'removes ' + s.qualname} at " \
                           f"{where} (`{e.code}`)"
                else:
                    what = f"upstream's change to {s.qualname} assigns it anew at {where} (`{e.code}`)"
                pe = pc.reads[got]
                self.note("coupled", f"`{got}`: {what}; the patch's change reads it at {self.p_side(pe, pc)} "
                                     f"(`{pe.code}`)", where)

    def module_names(self, module_changes: dict[str, str]) -> None:
        """A module-level name the patch's added code reads is bound differently in the target."""
        reads = {r for pc in self.p_changes for r in pc.reads}
        for name, where in module_changes.items():
            if any(dataflow.bare(r) == name or r.split(".")[0] == name for r in reads):
                self.note("module-name", f"{name}, which the patch's added code reads, is bound differently in "
                                         f"the target's module ({where})", where)


# ---------------------------------------------------------------------------
# the other definitions of the class


def _class_node(tree: ast.Module | None, qualname: str) -> ast.ClassDef | None:
    """The class ``qualname`` (dotted through classes only) of a module, if defined once."""
    if tree is None:
        return None
    body: list = tree.body
    node = None
    for part in qualname.split("."):
        found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == part]
        if len(found) != 1:
            return None
        node = found[0]
        body = node.body
    return node


def _members(cls: ast.ClassDef) -> dict[str, ast.AST]:
    """A class's methods by name (the last of a name defined twice), and its own other
    statements as one pseudo member ``<body>``."""
    out: dict[str, ast.AST] = {}
    rest = []
    for n in cls.body:
        if isinstance(n, astdiff.FUNCS):
            out[n.name] = n
        elif not isinstance(n, ast.ClassDef):
            rest.append(n)
    if rest:
        out["<body>"] = ast.Module(body=rest, type_ignores=[])
    return out


def _text_of(lines: list[str], node: ast.AST) -> str:
    if isinstance(node, ast.Module):
        return "".join("".join(lines[s.lineno - 1:s.end_lineno]) for s in node.body)  # type: ignore[attr-defined]
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
    return "".join(lines[first - 1:node.end_lineno])  # type: ignore[attr-defined]


def _flat(node: ast.AST | None) -> list[Elem]:
    if node is None:
        return []
    if isinstance(node, ast.Module):
        out: list[Elem] = []
        for s in node.body:
            out += flatten(s)  # a class-body statement: names in scope ''
        return out
    return flatten(node)


def _assigned(cls: ast.ClassDef) -> set[str]:
    """The attribute chains ``self.x`` any statement of the class assigns (``self.x = ...``)."""
    out = set()
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
                    c = astdiff.attr_chain(sub)
                    if c:
                        out.add(c)
    return out


def siblings(base_text: str, theirs_text: str, qualname: str, relpath: str, attrs: Iterable[str]) -> list[Sibling]:
    """Upstream's changes to the other definitions of the class holding the method
    ``qualname`` (base module text -> the target's) whose text spells one of the attribute
    chains ``attrs`` (the patch's): a method changed, added or removed, or the class
    body's own statements. [] for a definition that is not a method, or a class not
    defined once on both sides."""
    attrs = sorted({a.split(".")[1] for a in attrs if dataflow.is_chain(a) and "." in a})
    if "." not in qualname or not attrs:
        return []
    cls_q, member = qualname.rsplit(".", 1)
    bc = _class_node(astdiff.module_tree(base_text), cls_q)
    tc = _class_node(astdiff.module_tree(theirs_text), cls_q)
    if bc is None or tc is None:
        return []
    b_lines, t_lines = definitions.split_lines(base_text), definitions.split_lines(theirs_text)
    bm, tm = _members(bc), _members(tc)
    # an attribute assigned on both sides is the same attribute (another value is the flow of
    # its own code); one assigned on one side only is new or gone
    one_side = _assigned(bc) ^ _assigned(tc)
    out = []
    for name in sorted(bm.keys() | tm.keys()):
        if name == member:
            continue
        b, t = bm.get(name), tm.get(name)
        texts = (_text_of(b_lines, b) if b is not None else "") + (_text_of(t_lines, t) if t is not None else "")
        if not any(a in texts for a in attrs):
            continue
        if b is not None and t is not None and astdiff.node_key(b) == astdiff.node_key(t):
            continue
        be, te = _flat(b), _flat(t)
        # the method itself added, removed or its parameters changed: what self.<name> is
        contract = name != "<body>" and (b is None or t is None or bool(dataflow.param_changes(b, t)))
        for h in hunks(be, te):
            ch = dataflow.change(be, te, h)
            ch.rebinds = {k: v for k, v in ch.rebinds.items() if k in one_side}
            if contract:
                ch.rebinds.setdefault(f"self.{name}", (te or be)[0])
                contract = False
            out.append(Sibling(f"{cls_q}.{name}", ch, relpath))
    return out


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
            exits: Sequence[Exit] = (), key_sites: Callable[[set[str]], dict[str, str]] | None = None) -> dict:
    """The ``threeway`` entry of one drifted definition: findings, a possible upstream
    match (score and both texts), the view. ``exits``: the patch's result wrappers
    (:func:`findings`); ``key_sites``: the keys' new sites in the target's package
    (:func:`new_key_sites` bound to the two releases), None to look for none."""
    p_hunks = hunks(base.elems, ours.elems)
    reads = set()
    for h in p_hunks:
        for e in ours.elems[h.j1:h.j2]:
            reads |= {r.split("::")[-1].split(".")[0] for r in e.reads}
    for x in exits:
        reads |= {r.split("::")[-1].split(".")[0] for r in x.names()[0]}
    changed = module_changes(base_module, theirs_module, theirs.relpath, sorted(reads)) if reads else {}
    attrs = {n for h in p_hunks for e in (*ours.elems[h.j1:h.j2], *base.elems[h.i1:h.i2]) for n in (*e.reads, *e.writes)
             if dataflow.is_chain(n)}
    sibs = siblings(base_module, theirs_module, qualname, theirs.relpath, attrs) if attrs else []
    keys = {k for h in p_hunks for e in ours.elems[h.j1:h.j2] for k in dataflow.keys(e)}
    new = key_sites(keys) if keys and key_sites is not None else {}
    found = findings(base, ours, theirs, changed, sibs, exits, new)
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
    return compare(qualname, base, ours, theirs, base_text, theirs_text, exits,
                   lambda keys: new_key_sites(plan.source, target, keys))


_KEY_USES: dict[tuple[str, str], str | None] = {}


def _key_use(source: CodeSource, key: str) -> str | None:
    """``path:line`` of the first use of ``key`` as a whole word in ``source``'s package
    (files in path order, upstream's only: :meth:`CodeSource.upstream_texts`), or None.
    Kept per (release, key): a matrix asks again."""
    from patchq.compat.callers import source_key

    label = source_key(source)
    if (label, key) not in _KEY_USES:

        word = re.compile(rf"(?<![\w]){re.escape(key)}(?![\w])")
        found = None
        for rel, text in source.upstream_texts(key):
            m = word.search(text)
            if m is not None:
                found = f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
                break
        if len(_KEY_USES) > 4096:
            _KEY_USES.clear()
        _KEY_USES[(label, key)] = found
    return _KEY_USES[(label, key)]


def new_key_sites(base: CodeSource, target: CodeSource, keys: Iterable[str]) -> dict[str, str]:
    """key -> ``path:line`` of each of ``keys`` (:func:`patchq.plan.dataflow.keys`) that
    ``target``'s package uses and ``base``'s does not use anywhere: an environment variable
    or entry the patch introduces that upstream has since taken up, in whatever module.
    A source whose files cannot be listed gives no site (no finding)."""
    out = {}
    for k in sorted(set(keys)):
        try:
            there = _key_use(target, k)
            if there is not None and _key_use(base, k) is None:
                out[k] = there
        except (OSError, ValueError):
            continue
    return out


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
                            f"(three-way, by data flow: upstream's change shares no name with it, here or in "
                            f"the class, changes no statement, condition or parameter it relies on, and no "
                            f"jump skips either's change); the transform applies and the result compiles", entries)


def _shown(qualname: str, relpath: str) -> str:
    """A definition as the messages name it: its qualname; a module-level anchor's, the
    module-level statements of its file (:func:`patchq.model.definition_label`)."""
    return definition_label(qualname, relpath) if qualname == MODULE_QUALNAME else qualname


def _clip(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."
