"""Statement-level changes of one definition, as data: computed from two texts, applied by structure.

``patchq import`` turns a text diff into a node-scoped patch with this module. For each
changed definition, :func:`diff_definition` compares its pristine and its patched
version statement by statement (:class:`difflib.SequenceMatcher` over each block's
statements, recursing into compound statements whose header is unchanged) and yields a
list of *operations*, plain dicts that ``series/<patch>.py`` stores as literals:

``{"op": "replace", "old": SRC, "new": SRC, "after": PAT|None, "before": PAT|None}``
    the run of statements ``old`` (matched by normalized AST, anywhere in the
    definition, as consecutive siblings) becomes ``new`` (``""``: deleted);
``{"op": "insert", "new": SRC, "after": PAT|None, "before": PAT|None}``
    ``new`` goes between the sibling statements matching ``after`` and ``before``
    (``"at": "top"``: at the top of the definition's body, after its docstring;
    ``"at": "start"|"end"``: a block prepend/append, :mod:`patchq.statements`);
``{"op": "header", "old": SRC, "new": SRC}``
    the definition's own decorators/signature change (body kept);
``{"op": "definition", "fingerprint": FP, "new": SRC}``
    the fallback when the above cannot reproduce the patched text exactly (e.g. a
    comment at the end of a block): the whole definition is replaced, and only where
    its fingerprint is still ``FP``;
``{"op": "result", "name": NAME, "new": SRC}``
    wrap the result: on every way out of the anchored function (each ``return`` of its
    own body, and its end), the value returned is bound to ``NAME`` and ``SRC`` runs on
    it (:func:`patchq.edits.wrap_result`); anchored on the definition, not on the text
    of a ``return``, so it applies whatever upstream returns;
``{"op": "module-insert", "where": "before"|"after", "new": SRC, "gap": N}``
    module-level statements placed right before/after the anchored definition; for
    ``before``, ``gap`` blank lines separate them from the definition (the blank lines
    above the inserted block are the ones already above the definition, outside it).

Statements are compared without the comment and blank lines above them
(:func:`code_text`), so an insertion is an insertion whatever blank lines or comments
surround it: lines that changed above the statement after it belong to it (:func:`absorb`).

``after``/``before`` are the neighbouring statements' patterns (a compound statement is
reduced to its header, ``...`` standing for each block), so an operation finds its place
by structure and still applies when lines shifted, the block was re-indented, or the
definition moved to another file. When both neighbours are given and no place has
both, one neighbour is enough if it is unique; anything ambiguous or missing raises
:class:`patchq.errors.AnchorError`, never a guess. :func:`statement_edit` wraps a list
of operations as an edit function for :func:`patchq.series.variant`.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Sequence

import libcst as cst

from patchq.errors import AnchorError
from patchq.plan import legacyops
from patchq.plan.anchors import ast_match, fingerprint, node_code  # noqa: F401 - node_code re-exported
from patchq.plan.stmtviews import (  # noqa: F401 - re-exported: series and patchq.statements import them from here
    Emitted,
    absorb,
    all_blocks,
    code_text,
    header_text,
    is_docstring,
    leading,
    lines_text,
    parse_statements,
    parse_with_tail,
    stmt_text,
    sub_blocks,
)

DefNode = cst.FunctionDef | cst.ClassDef
Op = dict



def _pattern(text: str) -> ast.stmt:
    return ast.parse(text.strip("\n") + "\n").body[0]


def _stmts_ast(text: str) -> list[ast.stmt]:
    return ast.parse(text).body if text.strip() else []


_LEAD = "pass\n"  # keeps the comments above the first line out of Module.header
_parse_stmts = parse_statements


def _is_docstring_pattern(pattern: ast.stmt) -> bool:
    return isinstance(pattern, ast.Expr) and isinstance(pattern.value, ast.Constant) \
        and isinstance(pattern.value.value, str)


# --------------------------------------------------------------------------- diff


def _op_context(block: Sequence[cst.CSTNode], i: int, j: int) -> dict:
    return {"after": header_text(block[i - 1], leading=False) if i > 0 else None,
            "before": header_text(block[j], leading=False) if j < len(block) else None}


#: (header pattern of the compound statement owning a block, or None for the definition's
#: own body; index of the block among that statement's blocks: ``if`` 0, ``else`` 1, ...)
Owner = tuple[str | None, int]


def _emit(ops: list[Op], a: Sequence[cst.CSTNode], i: int, j: int, new: Sequence[cst.CSTNode],
          owner: Owner = (None, 0), module: bool = False) -> Emitted:
    new_src = "".join(stmt_text(s) for s in new)
    ctx = _op_context(a, i, j)
    if i == j:
        op = {"op": "insert", "new": new_src, **ctx}
        if owner == (None, 0) and not module and (i == 0 and not (a and is_docstring(a[0]))
                                                  or i == 1 and is_docstring(a[0])):
            op["at"] = "top"  # the definition's body start (after its docstring): found whatever its neighbours
        elif i == 0 or j == len(a):  # a block prepend/append: found by its block, not only by a neighbour
            op.update({"at": "start" if i == 0 else "end", "block": owner[0], "branch": owner[1]})
    else:
        op = {"op": "replace", "old": "".join(stmt_text(s) for s in a[i:j]), "new": new_src, **ctx}
    ops.append(op)
    return op, new


def _diff_blocks(a: Sequence[cst.CSTNode], b: Sequence[cst.CSTNode], ops: list[Op], module: bool = False,
                 owner: Owner = (None, 0)) -> None:
    """Statement operations turning block ``a`` into ``b``: statements are compared without
    the comment and blank lines above them (:func:`code_text`); a change of those lines
    belongs to the operation right before (:func:`absorb`), else it replaces the statement."""
    last: Emitted | None = None

    def pair(i: int, x: cst.CSTNode, y: cst.CSTNode) -> bool:
        """True when the lines above ``x``/``y`` are alike or taken by ``last``; otherwise
        ``x`` is replaced by ``y`` whole (its comments changed)."""
        nonlocal last
        if lines_text(leading(x)) == lines_text(leading(y)) or absorb(last, x, y):
            last = None
            return True
        last = _emit(ops, a, i, i + 1, [y], owner, module)
        return False

    ka, kb = [code_text(s) for s in a], [code_text(s) for s in b]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                pair(i1 + k, a[i1 + k], b[j1 + k])
            continue
        ha = [header_text(s, leading=False) for s in a[i1:i2]]
        hb = [header_text(s, leading=False) for s in b[j1:j2]]
        for t2, a1, a2, b1, b2 in difflib.SequenceMatcher(None, ha, hb, autojunk=False).get_opcodes():
            if t2 != "equal":
                last = _emit(ops, a, i1 + a1, i1 + a2, b[j1 + b1:j1 + b2], owner, module)
                continue
            for k in range(a2 - a1):
                x, y = a[i1 + a1 + k], b[j1 + b1 + k]
                if not pair(i1 + a1 + k, x, y) or code_text(x) == code_text(y):
                    continue
                bx, by = sub_blocks(x), sub_blocks(y)
                nested = not (module and isinstance(x, (cst.FunctionDef, cst.ClassDef)))  # a module op stays outside
                if nested and bx and len(bx) == len(by):
                    head = header_text(x, leading=False)
                    for n, (sx, sy) in enumerate(zip(bx, by, strict=False)):
                        _diff_blocks(sx.body, sy.body, ops, module, (head, n))
                        _diff_footer(sx, sy, ops, (head, n))
                else:
                    last = _emit(ops, a, i1 + a1 + k, i1 + a1 + k + 1, [y], owner, module)


def _footer_text(block: cst.IndentedBlock | cst.Module) -> str:
    return "".join(cst.Module(body=[]).code_for_node(line) for line in block.footer)


def _diff_footer(x: cst.IndentedBlock | cst.Module, y: cst.IndentedBlock | cst.Module, ops: list[Op],
                 owner: Owner) -> None:
    """A change of the comment lines that end a block (after its last statement)."""
    old, new = _footer_text(x), _footer_text(y)
    if old != new:
        last = header_text(x.body[-1], leading=False) if x.body else None
        ops.append({"op": "footer", "block": owner[0], "branch": owner[1], "after": last, "old": old, "new": new})


def diff_definition(old: DefNode, new: DefNode) -> list[Op]:
    """The operations that turn definition ``old`` into ``new`` (module docstring).

    The result is verified: applying it to ``old`` must give ``new``'s exact text;
    otherwise a single ``definition`` operation is returned instead.
    """
    ops: list[Op] = []
    old_head, new_head = header_text(old, leading=False), header_text(new, leading=False)
    if old_head != new_head:
        ops.append({"op": "header", "old": old_head, "new": new_head})
    if isinstance(old.body, cst.IndentedBlock) and isinstance(new.body, cst.IndentedBlock):
        _diff_blocks(old.body.body, new.body.body, ops)
        _diff_footer(old.body, new.body, ops, (None, 0))
    else:
        ops = []
    want = node_code(new.with_changes(leading_lines=old.leading_lines))
    ok = bool(ops) and _resolve(old, ops, want, lambda d: node_code(d))
    if not ok:
        ops = [{"op": "definition", "fingerprint": fingerprint(old),
                "new": node_code(new.with_changes(leading_lines=[]))}]
    return ops


def diff_module(old: cst.Module, new: cst.Module) -> list[Op]:
    """The operations that turn module ``old`` into ``new`` at module level (a module-level
    anchor, series format 2): top-level statements, and those inside module-level
    ``if``/``try``/``with`` blocks; a definition is one statement (what changes inside an
    existing one is its own anchor's business).

    Returns:
        The operations, or ``[]`` when they do not reproduce ``new``'s text exactly.
    """
    ops: list[Op] = []
    _diff_blocks(old.body, new.body, ops, module=True)
    _diff_footer(old, new, ops, (None, 0))  # comment lines ending the module (after its last statement)
    return ops if _resolve(old, ops, new.code, lambda m: m.code) else []


def _resolve(old: cst.CSTNode, ops: list[Op], want: str, render: Callable) -> bool:
    """True when ``ops`` applied to ``old`` give ``want`` exactly. An operation whose place
    several statements match alike (the same statement twice in a definition) gets the
    ordinal of the intended one among them in source order (``nth``) and their number
    (``of``): the place is structural, and where the number of matches differs the
    operation refuses instead of guessing. Each candidate is tried against the result."""

    def run(node, k: int) -> bool:
        if k == len(ops):
            return render(node) == want
        op = ops[k]
        if op["op"] not in ("insert", "replace"):
            try:
                return run(apply_op(node, op), k + 1)
            except AnchorError:
                return False
        places = _places(node, op, {})
        if not places:
            return False
        for n, place in enumerate(places if len(places) > 1 else places[:1]):
            try:
                if run(_apply_at(node, op, place), k + 1):
                    if len(places) > 1:
                        op["nth"], op["of"] = n, len(places)
                    return True
            except AnchorError:
                continue
        return False

    return run(old, 0)


# --------------------------------------------------------------------------- apply


def _module_blocks(module: cst.Module) -> list:
    """The places a module-level operation may go: the module, and the blocks of its
    top-level compound statements other than definitions (``if TYPE_CHECKING:``...)."""
    out: list = [module]

    def walk(stmts) -> None:
        for st in stmts:
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)) or not isinstance(st, cst.BaseCompoundStatement):
                continue
            for blk in sub_blocks(st):
                out.append(blk)
                walk(blk.body)

    walk(module.body)
    return out


def _norm_match(pattern: ast.stmt, stmt: cst.CSTNode, cache: dict) -> bool:
    key = id(stmt)
    if key not in cache:
        try:
            cache[key] = _pattern(stmt_text(stmt))
        except SyntaxError:  # pragma: no cover - a statement of a parsed module parses
            cache[key] = None
    return cache[key] is not None and ast_match(pattern, cache[key])


def _places(defn: DefNode, op: Op, cache: dict) -> list[tuple[cst.IndentedBlock, int, int]]:
    """Candidate (block, start, end) places of an operation, context applied with relaxing."""
    old = _stmts_ast(op.get("old", "")) if op["op"] == "replace" else []
    runs: list[tuple[cst.IndentedBlock, int, int]] = []
    for block in (_module_blocks(defn) if isinstance(defn, cst.Module) else all_blocks(defn)):
        body = block.body
        k = len(old)
        for i in range(len(body) - k + 1 if k else len(body) + 1):
            if all(_norm_match(p, body[i + n], cache) for n, p in enumerate(old)):
                runs.append((block, i, i + k))
    if not runs and old and _is_docstring_pattern(old[0]) and not op.get("after"):
        runs = _docstring_runs(defn, old, cache)  # a docstring is found as the docstring, whatever it says
    if "nth" in op:  # several alike places when the patch was made: the nth of them, if still as many
        found = _candidates(defn, op, runs, cache)
        return [found[op["nth"]]] if len(found) == op["of"] else found
    return _candidates(defn, op, runs, cache)


def _own_body(defn: cst.CSTNode) -> cst.IndentedBlock | None:
    """The body of a definition (None for a module or a one-line body)."""
    if isinstance(defn, (cst.FunctionDef, cst.ClassDef)) and isinstance(defn.body, cst.IndentedBlock):
        return defn.body
    return None


def _docstring_runs(defn: cst.CSTNode, old: list[ast.stmt], cache: dict) -> list[tuple[cst.IndentedBlock, int, int]]:
    """The run of a replace whose first old statement is a string opening its block (nothing
    before it: ``after`` is None) and is not there as recorded: the definition's docstring,
    whatever its text (fingerprints leave docstrings out, so an upstream change of the
    docstring alone is no reason to lose the place). The statements after it must match as
    recorded."""
    own = _own_body(defn)
    if own is None or len(own.body) < len(old) or not is_docstring(own.body[0]):
        return []
    if not all(_norm_match(p, own.body[n], cache) for n, p in enumerate(old) if n):
        return []
    return [(own, 0, len(old))]


def _top_candidates(defn: cst.CSTNode, runs: list[Run]) -> list[Run]:
    """The place of an insert at the top of the definition's body: after its docstring, if it has one."""
    own = _own_body(defn)
    if own is None:
        return []
    at = 1 if own.body and is_docstring(own.body[0]) else 0
    return [r for r in runs if r[0] is own and r[1] == at]


def _block_owners(defn: cst.CSTNode) -> dict[int, Owner]:
    """id(block) -> its :data:`Owner` for every block of ``defn`` (``None``: its own body)."""
    out: dict[int, Owner] = {}
    if isinstance(defn, cst.Module):
        out[id(defn)] = (None, 0)
    elif isinstance(defn, (cst.FunctionDef, cst.ClassDef)) and isinstance(defn.body, cst.IndentedBlock):
        out[id(defn.body)] = (None, 0)

    class _Walk(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.BaseCompoundStatement) and node is not defn:
                head = header_text(node, leading=False)
                for n, blk in enumerate(sub_blocks(node)):
                    out.setdefault(id(blk), (head, n))  # an elif is part of its if
            return True

    defn.visit(_Walk())
    return out


Run = tuple[cst.IndentedBlock, int, int]


class _Context:
    """An operation's recorded neighbours (``after``: the statement before its place,
    ``before``: the one after), matched against a candidate run."""

    def __init__(self, op: Op, cache: dict) -> None:
        self.after = _pattern(op["after"]) if op.get("after") else None
        self.before = _pattern(op["before"]) if op.get("before") else None
        self.cache = cache

    def ok_after(self, r: Run) -> bool:
        return self.after is not None and r[1] > 0 and _norm_match(self.after, r[0].body[r[1] - 1], self.cache)

    def ok_before(self, r: Run) -> bool:
        return self.before is not None and r[2] < len(r[0].body) and \
            _norm_match(self.before, r[0].body[r[2]], self.cache)

    def tiers(self, runs: list[Run]) -> list[list[Run]]:
        """``runs`` narrowed by both neighbours, by the one before, by the one after (those
        recorded), most specific first."""
        tiers = []
        if self.after is not None and self.before is not None:
            tiers.append([r for r in runs if self.ok_after(r) and self.ok_before(r)])
        if self.after is not None:
            tiers.append([r for r in runs if self.ok_after(r)])
        if self.before is not None:
            tiers.append([r for r in runs if self.ok_before(r)])
        return tiers


def _candidates(defn: cst.CSTNode, op: Op, runs: list[Run], cache: dict) -> list[Run]:
    """The runs where ``op`` may go, narrowed by its context: the first tier (both
    neighbours, the one before, the one after, any) that leaves exactly one, else the
    largest tier."""
    ctx = _Context(op, cache)
    if op["op"] == "insert" and op.get("at") == "top":
        return _top_candidates(defn, runs)
    if op.get("at") in ("start", "end") and op["op"] == "insert":
        return _edge_candidates(defn, op, runs, ctx)
    if op["op"] == "replace" and len(runs) == 1:
        return runs
    tiers = ctx.tiers(runs)
    if op["op"] == "replace":
        tiers.append(runs)
    for tier in tiers:
        if len(tier) == 1:
            return tier
    best = max(tiers, key=len) if tiers else runs
    if not best and op["op"] == "insert" and ctx.after is not None and _is_docstring_pattern(ctx.after):
        return _lost_docstring_neighbour(defn, runs)
    return best if best else []


def _lost_docstring_neighbour(defn: cst.CSTNode, runs: list[Run]) -> list[Run]:
    """An insert recorded right after a string statement (before ``"at": "top"`` existed, an
    insert at the top of a body was found by the docstring and the first statement), when
    neither neighbour is there any more: the top of a function's body, when the string can
    only have been its docstring: the function has one, and no other statement of it is a
    bare string. Otherwise no place."""
    if not isinstance(defn, cst.FunctionDef):
        return []
    own = _own_body(defn)
    if own is None or not own.body or not is_docstring(own.body[0]):
        return []
    if sum(is_docstring(st) for blk in all_blocks(defn) for st in blk.body) != 1:
        return []
    return [r for r in runs if r[0] is own and r[1] == 1]


def _edge_candidates(defn: cst.CSTNode, op: Op, runs: list[Run], ctx: _Context) -> list[Run]:
    """Candidates of an insert at the start or end of a block: in a block of the recorded
    owner (header pattern and branch), narrowed by the neighbour inside the block."""
    owners = _block_owners(defn)
    want_head = _pattern(op["block"]) if op.get("block") else None

    def owned(blk: cst.IndentedBlock) -> bool:
        got = owners.get(id(blk))
        if got is None or got[1] != op.get("branch", 0):
            return False
        if want_head is None:
            return got[0] is None
        return got[0] is not None and ast_match(want_head, _pattern(got[0]))

    def edge(r: Run) -> bool:
        return r[1] == 0 if op["at"] == "start" else r[1] == len(r[0].body)

    def neighbour(r: Run) -> bool:
        return ctx.ok_before(r) if op["at"] == "start" else ctx.ok_after(r)

    at = [r for r in runs if owned(r[0]) and edge(r)]
    near = [r for r in at if neighbour(r)]
    for tier in (near, at):
        if len(tier) == 1:
            return tier
    if near or at or want_head is None:
        return near or at

    def alike(blk: cst.IndentedBlock) -> bool:  # the same branch of the same kind of statement
        got = owners.get(id(blk))
        return got is not None and got[0] is not None and got[1] == op.get("branch", 0) and \
            type(_pattern(got[0])) is type(want_head)

    # no block has the recorded header (upstream changed the condition, the loop...): the
    # block is found by the statement inside it next to the insert, as a middle insert is
    return [r for r in runs if edge(r) and neighbour(r) and alike(r[0])]


def _describe(op: Op) -> str:
    what = op.get("old") or op.get("new") or ""
    first = next((ln.strip() for ln in what.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
    return f"{op['op']} `{first[:70]}`"


def _name(defn: cst.CSTNode) -> str:
    return "the module" if isinstance(defn, cst.Module) else defn.name.value  # type: ignore[attr-defined]


def apply_op(defn: DefNode, op: Op) -> DefNode | cst.FlattenSentinel:
    """Apply one operation to ``defn``. Raises AnchorError when its place is missing or ambiguous."""
    legacy = op.get("_legacy")
    if legacy is not None:  # an insertion recorded as a replace (patchq.plan.legacyops): as recorded where it places
        try:
            return apply_op(defn, legacy)
        except AnchorError:
            pass
    kind = op["op"]
    if kind == "header":
        if not ast_match(_pattern(op["old"]), _pattern(header_text(defn, leading=False))):
            raise AnchorError(f"{_name(defn)}: the signature/decorators differ from the patch's pristine ones")
        head = cst.parse_module(op["new"]).body[0]
        return head.with_changes(body=defn.body, leading_lines=defn.leading_lines)  # type: ignore[return-value]
    if kind == "definition":
        if fingerprint(defn) != op["fingerprint"]:
            raise AnchorError(f"{_name(defn)} changed (fingerprint {fingerprint(defn)}, the patch "
                              f"replaces the whole definition only at {op['fingerprint']})")
        new = cst.parse_module(op["new"]).body[0]
        return new.with_changes(leading_lines=defn.leading_lines)  # type: ignore[return-value]
    if kind == "module-insert":
        return apply_ops(defn, [op])
    if kind == "result":
        return _apply_result(defn, op)
    if kind == "footer":
        return _apply_footer(defn, op)
    places = _places(defn, op, {})
    if len(places) != 1:
        made = f" (the patch was made where {op['of']} matched)" if "of" in op else ""
        raise AnchorError(f"{_name(defn)}: {_describe(op)}: "
                          f"{'no place' if not places else f'{len(places)} places'} match by structure{made}")
    return _apply_at(defn, op, places[0])


def _apply_result(defn: DefNode, op: Op) -> DefNode:
    """The "wrap the result" operation: :func:`patchq.edits.wrap_result` with the op's name and code."""
    from patchq.edits import wrap_result

    try:
        return wrap_result(defn, op["name"], _parse_stmts(op["new"]))
    except ValueError as exc:
        raise AnchorError(f"{_name(defn)}: {exc}") from None


def _apply_footer(defn: DefNode, op: Op) -> DefNode:
    """Set the comment lines that end the block ``op`` names (by owner and last statement);
    for a module-level anchor with no block named, the comment lines ending the module."""
    if isinstance(defn, cst.Module) and op.get("block") is None:  # one module: no place to tell apart
        lines = cst.parse_module(_LEAD + op["new"]).footer if op["new"] else []
        return defn.with_changes(footer=list(lines))  # type: ignore[return-value]
    owners = _block_owners(defn)
    want_head = _pattern(op["block"]) if op.get("block") else None
    last = _pattern(op["after"]) if op.get("after") else None
    cache: dict = {}
    found = []
    for blk in all_blocks(defn):
        got = owners.get(id(blk))
        if got is None or got[1] != op.get("branch", 0) or (want_head is None) != (got[0] is None):
            continue
        if want_head is not None and not ast_match(want_head, _pattern(str(got[0]))):
            continue
        found.append(blk)
    if len(found) > 1 and last is not None:  # alike blocks: the one ending with the recorded statement
        found = [b for b in found if b.body and _norm_match(last, b.body[-1], cache)]
    if len(found) != 1:
        raise AnchorError(f"{_name(defn)}: the comment lines ending a block: "
                          f"{'no block' if not found else f'{len(found)} blocks'} match by structure")
    footer = [line.with_changes(indent=False) if line.comment is None and not line.whitespace.value else line
              for line in cst.parse_module(_LEAD + op["new"]).footer] if op["new"] else []
    return defn.deep_replace(found[0], found[0].with_changes(footer=footer))  # type: ignore[return-value, arg-type]


def _apply_at(defn, op: Op, place: tuple) -> DefNode:
    """``op`` applied at ``place`` (block, start, end) of ``defn``. The comment and blank
    lines ending ``op["new"]`` go above the statement after the place (at the end of the
    block: above its closing comments); with ``"under"`` the lines above that statement
    open the inserted block instead."""
    block, i, j = place
    body = list(block.body)
    new, tail = parse_with_tail(op["new"])
    following = body[j] if j < len(body) else None
    footer = None
    if following is not None and (tail or op.get("under") and new):
        lead = leading(following)
        if op.get("under") and new:
            new[0] = new[0].with_changes(leading_lines=[*lead, *leading(new[0])])
            lead = []
        body[j] = following.with_changes(leading_lines=[*tail, *lead])
    elif following is None and tail:
        footer = [*tail, *block.footer]
    body[i:j] = new
    if not body and not isinstance(block, cst.Module):
        body = [cst.SimpleStatementLine(body=[cst.Pass()])]
    changed = block.with_changes(body=body) if footer is None else block.with_changes(body=body, footer=footer)
    if block is defn:
        return changed  # type: ignore[return-value]
    return defn.deep_replace(block, changed)  # type: ignore[return-value]


def apply_ops(defn: DefNode, ops: Sequence[Op]) -> DefNode | cst.FlattenSentinel:
    """Apply operations in order (module-level insertions last). Raises AnchorError."""
    inner = [o for o in ops if o["op"] != "module-insert"]
    outer = [o for o in ops if o["op"] == "module-insert"]
    for op in inner:
        defn = apply_op(defn, op)  # type: ignore[assignment]
    if not outer:
        return defn
    before: list[cst.CSTNode] = []
    after: list[cst.CSTNode] = []
    gap = 0
    for o in outer:
        stmts = _parse_stmts(o["new"])
        if o["where"] == "before":
            if not before and stmts and hasattr(stmts[0], "leading_lines"):  # blank lines already above
                lead = list(stmts[0].leading_lines)
                while lead and lead[0].comment is None:
                    lead.pop(0)
                stmts[0] = stmts[0].with_changes(leading_lines=lead)
            before += stmts
            gap = int(o.get("gap", 2))
        else:
            after += stmts
    if before:
        blank = [cst.EmptyLine(indent=False)] * gap
        defn = defn.with_changes(leading_lines=[*blank, *defn.leading_lines])
    return cst.FlattenSentinel([*before, defn, *after])


def statement_edit(ops: Sequence[Op]) -> Callable:
    """An edit function for :func:`patchq.series.variant` that applies ``ops``.

    Operations an earlier patchq wrote are read as what they mean
    (:func:`patchq.plan.legacyops.read`, on the first call): the series file is not rewritten.
    The function's ``statement_ops`` attribute is ``ops`` as written (``rebase`` merges a
    definition whose edits are all statement operations by structure).
    """
    read: list[Sequence[Op]] = []

    def edit(defn, found, ctx):
        if not read:
            read.append(legacyops.read(ops))
        if isinstance(defn, cst.FlattenSentinel):  # an earlier edit placed statements beside the definition
            nodes = list(defn.nodes)
            at = next(i for i, n in enumerate(nodes) if isinstance(n, (cst.FunctionDef, cst.ClassDef)))
            done = apply_ops(nodes[at], read[0])
            inner = list(done.nodes) if isinstance(done, cst.FlattenSentinel) else [done]
            return cst.FlattenSentinel([*nodes[:at], *inner, *nodes[at + 1:]])
        return apply_ops(defn, read[0])

    edit.__doc__ = f"{len(ops)} statement operation(s) (patchq.plan.stmtpatch), generated by `patchq import`."
    edit.statement_ops = list(ops)  # type: ignore[attr-defined]  # read by rebase and the three-way view
    return edit
