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
    ``new`` goes between the sibling statements matching ``after`` and ``before``;
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
from typing import cast

import libcst as cst

from patchq.errors import AnchorError
from patchq.plan.anchors import ast_match, fingerprint, node_code

DefNode = cst.FunctionDef | cst.ClassDef
Op = dict

_ELLIPSIS = cst.SimpleStatementLine(body=[cst.Expr(cst.Ellipsis())])


# --------------------------------------------------------------------------- statement views


class _Blocks(cst.CSTVisitor):
    """IndentedBlocks under a node; ``depth1`` stops at the first level."""

    def __init__(self, depth1: bool) -> None:
        self.depth1 = depth1
        self.found: list[cst.IndentedBlock] = []

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        self.found.append(node)
        return not self.depth1


def sub_blocks(stmt: cst.CSTNode) -> list[cst.IndentedBlock]:
    """The blocks directly under a compound statement (body, elif/else, handlers...), in order."""
    v = _Blocks(depth1=True)
    stmt.visit(v)
    return v.found


def all_blocks(defn: cst.CSTNode) -> list[cst.IndentedBlock]:
    """Every block inside ``defn`` at any depth (its own body first), in source order."""
    v = _Blocks(depth1=False)
    defn.visit(v)
    return v.found


class _Headers(cst.CSTTransformer):
    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return False

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=[_ELLIPSIS], footer=[])


def stmt_text(stmt: cst.CSTNode) -> str:
    """A statement's source at column 0, comments above it included."""
    return node_code(stmt)


def header_text(stmt: cst.CSTNode, leading: bool = True) -> str:
    """A statement with every block directly under it reduced to ``...`` (a pattern).

    For a simple statement this is its text. ``leading=False`` leaves out the comment
    lines above it.
    """
    if not leading and hasattr(stmt, "leading_lines"):
        stmt = stmt.with_changes(leading_lines=[])
    if not sub_blocks(stmt):
        return stmt_text(stmt)
    return stmt_text(cast(cst.CSTNode, stmt.visit(_Headers())))  # _Headers removes nothing


def _pattern(text: str) -> ast.stmt:
    return ast.parse(text.strip("\n") + "\n").body[0]


def _stmts_ast(text: str) -> list[ast.stmt]:
    return ast.parse(text).body if text.strip() else []


def parse_statements(text: str) -> list[cst.BaseStatement]:
    """Statements of ``text`` (at column 0) with the comment and blank lines above the first
    one kept as its ``leading_lines``: a plain :func:`libcst.parse_module` would put them in
    the module header, and an inserted comment would be lost."""
    if not text.strip():
        return []
    return [_unindent_blank_lines(s) for s in cst.parse_module(_LEAD + text).body[1:]]


class _BlankLines(cst.CSTTransformer):
    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine) -> cst.EmptyLine:
        return updated.with_changes(indent=False) if updated.comment is None and not updated.whitespace.value \
            else updated


def _unindent_blank_lines(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """Blank lines parsed at column 0 count as indented; in a block they would render with its
    indentation. An empty line in the source is an empty line in the result."""
    return stmt.visit(_BlankLines())  # type: ignore[return-value]


_LEAD = "pass\n"  # keeps the comments above the first statement out of Module.header


_parse_stmts = parse_statements


# --------------------------------------------------------------------------- diff


def _op_context(block: Sequence[cst.CSTNode], i: int, j: int) -> dict:
    return {"after": header_text(block[i - 1], leading=False) if i > 0 else None,
            "before": header_text(block[j], leading=False) if j < len(block) else None}


#: (header pattern of the compound statement owning a block, or None for the definition's
#: own body; index of the block among that statement's blocks: ``if`` 0, ``else`` 1, ...)
Owner = tuple[str | None, int]


def _emit(ops: list[Op], a: Sequence[cst.CSTNode], i: int, j: int, new: Sequence[cst.CSTNode],
          owner: Owner = (None, 0)) -> None:
    new_src = "".join(stmt_text(s) for s in new)
    ctx = _op_context(a, i, j)
    if i == j:
        op = {"op": "insert", "new": new_src, **ctx}
        if i == 0 or j == len(a):  # a block prepend/append: found by its block, not only by a neighbour
            op.update({"at": "start" if i == 0 else "end", "block": owner[0], "branch": owner[1]})
        ops.append(op)
    else:
        ops.append({"op": "replace", "old": "".join(stmt_text(s) for s in a[i:j]), "new": new_src, **ctx})


def _diff_blocks(a: Sequence[cst.CSTNode], b: Sequence[cst.CSTNode], ops: list[Op], module: bool = False,
                 owner: Owner = (None, 0)) -> None:
    ka, kb = [stmt_text(s) for s in a], [stmt_text(s) for s in b]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        ha = [header_text(s) for s in a[i1:i2]]
        hb = [header_text(s) for s in b[j1:j2]]
        for t2, a1, a2, b1, b2 in difflib.SequenceMatcher(None, ha, hb, autojunk=False).get_opcodes():
            if t2 != "equal":
                _emit(ops, a, i1 + a1, i1 + a2, b[j1 + b1:j1 + b2], owner)
                continue
            for k in range(a2 - a1):
                x, y = a[i1 + a1 + k], b[j1 + b1 + k]
                if stmt_text(x) == stmt_text(y):
                    continue
                bx, by = sub_blocks(x), sub_blocks(y)
                nested = not (module and isinstance(x, (cst.FunctionDef, cst.ClassDef)))  # a module op stays outside
                if nested and bx and len(bx) == len(by):
                    head = header_text(x, leading=False)
                    for n, (sx, sy) in enumerate(zip(bx, by, strict=False)):
                        _diff_blocks(sx.body, sy.body, ops, module, (head, n))
                        _diff_footer(sx, sy, ops, (head, n))
                else:
                    _emit(ops, a, i1 + a1 + k, i1 + a1 + k + 1, [y], owner)


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
    if "nth" in op:  # several alike places when the patch was made: the nth of them, if still as many
        found = _candidates(defn, op, runs, cache)
        return [found[op["nth"]]] if len(found) == op["of"] else found
    return _candidates(defn, op, runs, cache)


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
    return best if best else []


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

    at = [r for r in runs if owned(r[0]) and (r[1] == 0 if op["at"] == "start" else r[1] == len(r[0].body))]
    near = [r for r in at if (ctx.ok_before(r) if op["at"] == "start" else ctx.ok_after(r))]
    for tier in (near, at):
        if len(tier) == 1:
            return tier
    return near or at


def _describe(op: Op) -> str:
    what = op.get("old") or op.get("new") or ""
    first = next((ln.strip() for ln in what.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
    return f"{op['op']} `{first[:70]}`"


def _name(defn: cst.CSTNode) -> str:
    return "the module" if isinstance(defn, cst.Module) else defn.name.value  # type: ignore[attr-defined]


def apply_op(defn: DefNode, op: Op) -> DefNode | cst.FlattenSentinel:
    """Apply one operation to ``defn``. Raises AnchorError when its place is missing or ambiguous."""
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
    """``op`` applied at ``place`` (block, start, end) of ``defn``."""
    block, i, j = place
    body = list(block.body)
    body[i:j] = _parse_stmts(op["new"])
    if not body and not isinstance(block, cst.Module):
        body = [cst.SimpleStatementLine(body=[cst.Pass()])]
    if block is defn:
        return block.with_changes(body=body)  # type: ignore[return-value]
    return defn.deep_replace(block, block.with_changes(body=body))  # type: ignore[return-value]


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
    """An edit function for :func:`patchq.series.variant` that applies ``ops``."""

    def edit(defn, found, ctx):
        if isinstance(defn, cst.FlattenSentinel):  # an earlier edit placed statements beside the definition
            nodes = list(defn.nodes)
            at = next(i for i, n in enumerate(nodes) if isinstance(n, (cst.FunctionDef, cst.ClassDef)))
            done = apply_ops(nodes[at], ops)
            inner = list(done.nodes) if isinstance(done, cst.FlattenSentinel) else [done]
            return cst.FlattenSentinel([*nodes[:at], *inner, *nodes[at + 1:]])
        return apply_ops(defn, ops)

    edit.__doc__ = f"{len(ops)} statement operation(s) (patchq.plan.stmtpatch), generated by `patchq import`."
    edit.ops = tuple(ops)  # type: ignore[attr-defined]  # read by the three-way view (a result wrapper)
    return edit
