"""Upstream detection by meaning: normalized-AST comparison beyond statement identity.

Statement identity (:mod:`patchq.plan.survival`) finds a patch's added statement upstream
only when the release spells it the same way (formatting aside). Upstream often merges a
fix in another form. This module compares *canonical* forms, in which

* a helper the patch adds (a ``def`` beside or inside the edited definition) and a helper
  of the release with the same body under another name are the same name
  (:func:`helper_renames`: bodies compared with their own names and docstrings left out);
* names bound inside the compared code (locals, not parameters) are renamed by order of
  first binding (``limit`` and ``max_len`` are both ``_v0``), when the comparison is of
  a whole definition or a group of statements that binds them;
* ``x op= y`` is ``x = x op y``, ``not a == b`` is ``a != b`` (and the other negated
  comparisons), ``if not c: A else: B`` is ``if c: B else: A``, keyword arguments are
  in name order (a call without ``**``), and annotations and docstrings are left out.

Two verdicts come from it:

``sure`` (:func:`same_definition`, :func:`group_found`)
    canonical forms are equal: the release does what the patch does. The evidence names
    the release's lines and the score is 1.0.
``possible`` (:func:`similarity`)
    the patch's change and upstream's change (what each adds to the same definition)
    are alike but not equal: a score in [0, 1] (:func:`rapidfuzz.fuzz.ratio` of their
    canonical texts / 100); :data:`POSSIBLE` and above is reported as
    ``possibly-upstreamed`` (blocking) with both texts, never as upstreamed.

Everything here is a pure function of the :mod:`ast` nodes it is given.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

#: similarity at or above which two changes are reported as possibly the same (blocking)
POSSIBLE = 0.6

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_NEGATED = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
            ast.LtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


@dataclass(frozen=True)
class Match:
    """A canonical match: ``what`` (one line) found at ``where`` (``path:line``)."""

    what: str
    where: str
    score: float = 1.0


def _strip_docstring(body: list) -> list:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


class _Normalize(ast.NodeTransformer):
    """Equivalent constructs to one form (module docstring), names renamed by ``names``."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        new = self.names.get(node.id)
        return ast.Name(id=new, ctx=node.ctx) if new else node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        new = self.names.get(node.attr)
        if new and not new.startswith("_v"):  # a helper method renamed (``self._helper``)
            node.attr = new
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.annotation = None  # annotations do not change what the code does
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        load = copy.deepcopy(node.target)
        for sub in ast.walk(load):
            if hasattr(sub, "ctx"):
                sub.ctx = ast.Load()
        return ast.Assign(targets=[node.target], value=ast.BinOp(left=load, op=node.op, right=node.value))

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if all(k.arg is not None for k in node.keywords):  # no **kwargs: keyword order is not meaning
            node.keywords = sorted(node.keywords, key=lambda k: k.arg or "")
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Compare) \
                and len(node.operand.ops) == 1 and type(node.operand.ops[0]) in _NEGATED:
            cmp = node.operand
            return ast.Compare(left=cmp.left, ops=[_NEGATED[type(cmp.ops[0])]()], comparators=cmp.comparators)
        return node

    def visit_If(self, node: ast.If) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not) and node.orelse:
            return ast.If(test=node.test.operand, body=node.orelse, orelse=node.body)
        return node

    def _def(self, node):
        node.body = _strip_docstring(node.body)
        node.returns = None
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.body = _strip_docstring(node.body)
        self.generic_visit(node)
        return node


def bound_names(nodes: Iterable[ast.AST], params: bool = False) -> list[str]:
    """Names bound by ``nodes`` (assignment and loop targets, ``with ... as``, ``except ...
    as``, imports, walrus), in order of first binding; with ``params`` the parameters of
    function definitions too. Names of nested ``def``/``class`` are not included (helpers
    are matched by :func:`helper_renames`)."""
    out: list[str] = []
    for node in nodes:
        for sub in ast.walk(node):
            names: list[str] = []
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names = [sub.id]
            elif isinstance(sub, ast.ExceptHandler) and sub.name:
                names = [sub.name]
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                names = [(a.asname or a.name).split(".")[0] for a in sub.names]
            elif params and isinstance(sub, ast.arg):
                names = [sub.arg]
            for n in names:
                if n not in out:
                    out.append(n)
    return out


def _normalizer(renames: Mapping[str, str] | None, alpha: Iterable[str]) -> _Normalize:
    """The normalizer of :func:`canonical` and :func:`canonical_text`: ``renames`` applied,
    the names in ``alpha`` renamed ``_v0, _v1, ...`` in their order (a rename wins)."""
    names = dict(renames or {})
    for i, n in enumerate(alpha):
        names.setdefault(n, f"_v{i}")
    return _Normalize(names)


def canonical(nodes: Sequence[ast.AST], renames: Mapping[str, str] | None = None,
              alpha: Iterable[str] = ()) -> str:
    """The canonical text of ``nodes`` (statements or one definition): normalized
    constructs, ``renames`` applied (helper names), the names in ``alpha`` renamed
    ``_v0, _v1, ...`` in their order. Positions, formatting and docstrings left out."""
    norm = _normalizer(renames, alpha)
    out = []
    for node in nodes:
        fresh = norm.visit(copy.deepcopy(node))
        out.append(ast.dump(fresh, annotate_fields=False, include_attributes=False))
    return "\n".join(out)


def canonical_text(nodes: Sequence[ast.AST], renames: Mapping[str, str] | None = None,
                   alpha: Iterable[str] = ()) -> str:
    """Like :func:`canonical` but as source (``ast.unparse``), for similarity scores and views."""
    norm = _normalizer(renames, alpha)
    parts = []
    for node in nodes:
        try:
            parts.append(ast.unparse(norm.visit(copy.deepcopy(node))))
        except Exception:  # pragma: no cover - unparse handles parsed nodes
            parts.append(type(node).__name__)
    return "\n".join(parts)


def _local_names(defn: ast.AST) -> list[str]:
    """Locals of a definition (bound in its body, parameters excluded), in binding order."""
    body = getattr(defn, "body", [])
    return bound_names(body)


def body_key(defn: ast.AST) -> str:
    """A helper's canonical body: name, docstring and locals' names left out, parameters kept."""
    cached = defn.__dict__.get("_patchq_body_key")
    if cached is not None:
        return cached
    if not isinstance(defn, _DEFS):
        return canonical([defn])
    node = copy.deepcopy(defn)
    node.name = "_helper"
    key = canonical([node], alpha=_local_names(defn))
    defn.__dict__["_patchq_body_key"] = key
    return key


def helper_renames(added: Iterable[ast.AST], candidates: Iterable[tuple[ast.AST, str]]) -> dict[str, tuple[str, str]]:
    """Helpers the patch adds that the release has under another name with the same body.

    Args:
        added: ``def``/``class`` nodes the patch adds (members or module-level).
        candidates: (node, ``path:line``) of the release's definitions to compare with
            (the edited class's members, the module's top-level definitions).
    Returns:
        patch helper name -> (release's name, ``path:line``), for exact canonical bodies.
    """
    added = [n for n in added if isinstance(n, _DEFS)]
    if not added:
        return {}

    def shape(node: ast.AST) -> tuple:  # a cheap filter: kind, body length, parameter count
        args = getattr(node, "args", None)
        return (type(node).__name__, len(_strip_docstring(getattr(node, "body", []))),
                len(args.args) + len(args.kwonlyargs) if args is not None else len(getattr(node, "bases", [])))

    wanted = {shape(n) for n in added}
    by_key: dict[str, list[tuple[str, str]]] = {}
    for node, where in candidates:
        if isinstance(node, _DEFS) and shape(node) in wanted:
            by_key.setdefault(body_key(node), []).append((getattr(node, "name", ""), where))
    out = {}
    for node in added:
        name = getattr(node, "name", "")
        hits = [h for h in by_key.get(body_key(node), []) if h[0] != name]
        if len(hits) == 1:
            out[name] = hits[0]
    return out


def same_definition(ours: ast.AST, theirs: ast.AST, renames: Mapping[str, str] | None = None) -> bool:
    """True when two definitions are the same code up to local names, helper ``renames``
    and the constructs of the module docstring (docstrings aside)."""
    if _statements(ours) != _statements(theirs):  # a cheap necessary condition first
        return False
    return canonical([ours], renames, _local_names(ours)) == canonical([theirs], None, _local_names(theirs))


def _statements(node: ast.AST) -> int:
    """Statements under ``node``, docstrings not counted (what :func:`canonical` keeps)."""
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.stmt) and not _is_doc(n))


def _is_doc(n: ast.AST) -> bool:
    return isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    out = []
    for name in ("body", "orelse", "finalbody"):
        value = getattr(node, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            out.append(value)
    for h in getattr(node, "handlers", []) or []:
        out.append(h.body)
    for c in getattr(node, "cases", []) or []:
        out.append(c.body)
    return out


def _all_blocks(defn: ast.AST) -> list[tuple[list[ast.stmt], bool]]:
    """Every statement block under ``defn``, with whether a function owns it (its names
    are locals; a class body's names are attributes and are never renamed)."""
    out = []
    todo = [(defn, isinstance(defn, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    while todo:
        node, local = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local = True
        elif isinstance(node, ast.ClassDef):
            local = False
        for block in _blocks(node):
            out.append((block, local))
            todo += [(s, local) for s in block if isinstance(s, ast.stmt)]
    return out


def in_function(root: ast.AST, stmt: ast.AST) -> bool:
    """True when the block holding ``stmt`` under ``root`` belongs to a function."""
    for block, local in _all_blocks(root):
        if any(s is stmt for s in block):
            return local
    return False


def _tokens(stmt: ast.AST, renames: Mapping[str, str] | None = None) -> frozenset:
    """Attribute names and constants of a statement: equal canonical forms have equal
    tokens (a cheap filter before :func:`canonical`); kept on the node when not renamed."""
    cached = None if renames else stmt.__dict__.get("_patchq_tokens")
    if cached is not None:
        return cached
    out = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Attribute):
            out.add(("a", (renames or {}).get(n.attr, n.attr)))
        elif isinstance(n, ast.Constant) and not isinstance(n.value, str):
            out.add(("c", repr(n.value)))
    got = frozenset(out)
    if not renames:
        stmt.__dict__["_patchq_tokens"] = got
    return got


def _kind(stmt: ast.AST) -> str:
    return "Assign" if isinstance(stmt, ast.AugAssign) else type(stmt).__name__


def group_found(group: Sequence[ast.stmt], release_def: ast.AST, relpath: str,
                renames: Mapping[str, str] | None = None, offset: int = 0,
                keep: Iterable[str] | Callable[..., Iterable[str]] = (),
                group_root: ast.AST | None = None) -> Match | None:
    """Where the release's definition holds ``group`` (statements a patch adds together),
    compared canonically: the names the group binds renamed in both (locals), helper
    ``renames`` applied to the group. A window of the same length in any block, in the
    same order or reordered when no statement of the window reads or writes what another
    binds (independent statements). None when no window matches.

    ``offset`` is added to the release's line numbers; names in ``keep`` (bound by the
    group but read by the code around it; or a callable giving them, called only when a
    window may match) are compared as spelled, on both sides.
    ``group_root``: the definition holding ``group``; names are renamed only in function
    blocks (a class body's names are attributes) and only against blocks of the same kind."""
    if not group:
        return None
    want_kinds = sorted(_kind(s) for s in group)
    want_tokens = frozenset().union(*(_tokens(s, renames) for s in group))
    want: list[str] | None = None
    local = True
    for window, block_local in _windows(release_def, len(group), want_kinds, want_tokens):
        if want is None:  # the group's canonical form, once a window may match
            kept = set(keep() if callable(keep) else keep)
            local = in_function(group_root, group[0]) if group_root is not None else True
            alpha = [b for b in bound_names(group) if b not in kept] if local else []
            want = [canonical([s], renames, alpha) for s in group]
        if block_local != local:
            continue
        if _same_group(window, want, kept if local else None):
            where = f"{relpath}:{window[0].lineno + offset}"
            return Match(f"`{_one_line(group)}` as `{_one_line(window)}`", where)
    return None


def _same_group(window: Sequence[ast.stmt], want: list[str], kept: set[str] | None) -> bool:
    """``window`` canonically equals the group's canonical ``want``, in order or reordered
    when its statements are independent; ``kept``: the names not renamed (None: a class
    body, where nothing is renamed)."""
    got_alpha = [b for b in bound_names(window) if b not in kept] if kept is not None else []
    got = [canonical([s], None, got_alpha) for s in window]
    return got == want or (sorted(got) == sorted(want) and _independent(window))


def _windows(release_def: ast.AST, n: int, want_kinds: list[str],
             want_tokens: frozenset) -> Iterator[tuple[Sequence[ast.stmt], bool]]:
    """Windows of ``n`` statements in any block of ``release_def`` with the group's
    statement kinds and tokens (cheap checks, in order), with whether their block is a
    function's."""
    for block, block_local in _all_blocks(release_def):
        kinds = [_kind(s) for s in block]
        for i in range(len(block) - n + 1):
            if sorted(kinds[i:i + n]) != want_kinds:
                continue
            window = block[i:i + n]
            if frozenset().union(*(_tokens(s) for s in window)) != want_tokens:
                continue
            yield window, block_local


def _independent(stmts: Sequence[ast.stmt]) -> bool:
    """True when no statement reads or binds a name another statement binds."""
    for i, s in enumerate(stmts):
        binds = set(bound_names([s]))
        for j, t in enumerate(stmts):
            if i == j:
                continue
            used = {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            if binds & used:
                return False
    return True


def _one_line(stmts: Sequence[ast.AST], limit: int = 80) -> str:
    text = "; ".join(" ".join(ast.unparse(s).split()) for s in stmts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _inserted(base: str, text: str) -> str:
    """What ``text`` has that ``base`` does not (inserted or replacing tokens), joined."""
    import difflib
    import re

    a, b = re.findall(r"\w+|\S", base), re.findall(r"\w+|\S", text)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return " ".join(" ".join(b[j1:j2]) for tag, _i1, _i2, j1, j2 in sm.get_opcodes() if tag in ("insert", "replace"))


def similarity(a: Sequence[ast.AST], b: Sequence[ast.AST], renames: Mapping[str, str] | None = None,
               base: Sequence[ast.AST] = ()) -> float:
    """How alike two changes are, in [0, 1]: :func:`rapidfuzz.fuzz.ratio` / 100 of what each
    adds to ``base`` (the statements both replaced; their canonical sources, each with its own
    bound names renamed, ``renames`` applied to ``a``). Two edits of one statement that add
    different terms are not alike because they share the old ones. 0.0 when either is empty."""
    if not a or not b:
        return 0.0
    from rapidfuzz import fuzz

    ta = canonical_text(a, renames, bound_names(a))
    tb = canonical_text(b, None, bound_names(b))
    if base:
        tbase = canonical_text(base, None, bound_names(base))
        ta, tb = _inserted(tbase, ta), _inserted(tbase, tb)
        if not ta.strip() or not tb.strip():
            return 0.0
    return round(fuzz.ratio(ta, tb) / 100.0, 3)


def added_nodes(after: ast.AST, keys: set[int]) -> list[ast.stmt]:
    """The outermost statements of ``after`` whose normalized-AST key
    (:func:`patchq.plan.survival.statement_key`) is in ``keys`` (what an edit added), in
    source order."""
    from patchq.plan.survival import statement_key

    out: list[ast.stmt] = []

    def walk(node: ast.AST) -> None:
        for block in _blocks(node):
            for stmt in block:
                if statement_key(stmt) in keys:
                    out.append(stmt)
                else:
                    walk(stmt)

    walk(after)
    return out


def reads_outside(defn: ast.AST, group: Sequence[ast.AST]) -> set[str]:
    """Names read in ``defn`` outside the statements of ``group``."""
    inside = {id(n) for g in group for n in ast.walk(g)}
    return {n.id for n in ast.walk(defn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and id(n) not in inside}


def used_by(renames: Mapping[str, tuple[str, str]], group: Sequence[ast.AST]) -> dict[str, tuple[str, str]]:
    """The helper renames whose patch helper the ``group`` (the patch's other added code)
    calls or reads: a helper nothing of the patch uses may be a hook the framework calls by
    its name, and another name is then not the same behaviour."""
    used = set()
    for node in group:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                used.add(n.id)
            elif isinstance(n, ast.Attribute):
                used.add(n.attr)
    return {a: b for a, b in renames.items() if a in used}
