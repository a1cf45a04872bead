"""The small libcst toolkit that patch transforms are written with.

A transform (``series/<patch>.py``) receives the anchored definition, the statements
its anchor matched, and an :class:`EditContext`; it returns the new definition, built
with the helpers here. Transforms stay node-scoped: they never see or return anything
outside the definition, which keeps rebases and runtime mode definition-local too.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import libcst as cst
from packaging.version import Version

from patchq.sentinels import SENTINEL_RE, find_sentinels, sentinel_comment  # noqa: F401
from patchq.vllmdist.sources import CodeSource

DefNode = cst.FunctionDef | cst.ClassDef



@dataclass
class EditContext:
    """What a transform may know beyond its definition.

    Attributes:
        patch_id, patch_hash: the patch being applied.
        version: the vLLM version being patched.
        source: the vLLM being patched (read-only; e.g. to read a base class).
        lookup: qualname, module hint -> the pristine definition, or None (read-only).
    """

    patch_id: str
    patch_hash: str
    version: Version
    source: CodeSource
    lookup: Callable[[str, str], DefNode | None]


def stmts(code: str) -> list[cst.BaseStatement]:
    """Parse statements from (possibly indented) source text. Comment lines above the first
    statement stay with it (``"# why\\nx = 1"`` keeps ``# why``); blank lines around the
    text are dropped."""
    from patchq.plan.stmtpatch import parse_statements

    return parse_statements(textwrap.dedent(code).strip("\n") + "\n")


def stmt(code: str) -> cst.BaseStatement:
    """Parse exactly one statement. Raises ValueError otherwise."""
    out = stmts(code)
    if len(out) != 1:
        raise ValueError(f"expected one statement, got {len(out)}: {code!r}")
    return out[0]


def expr(code: str) -> cst.BaseExpression:
    """Parse one expression."""
    return cst.parse_expression(textwrap.dedent(code).strip())


class _Replace(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, make: Callable[[cst.CSTNode], object]) -> None:
        self.target = target
        self.make = make
        self.hits = 0

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> object:  # type: ignore[override]
        if original_node is self.target:
            self.hits += 1
            return self.make(updated_node)
        return updated_node


class _SameCode(cst.CSTVisitor):
    """Nodes of ``target``'s type whose code equals ``target``'s."""

    def __init__(self, target: cst.CSTNode) -> None:
        self.kind, self.code = type(target), _code(target)
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is self.kind and _code(node) == self.code:
            self.found.append(node)
        return True


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _apply(tree: DefNode, target: cst.CSTNode, make: Callable[[cst.CSTNode], object]) -> DefNode:
    """Replace ``target`` in ``tree`` by ``make(target)``.

    ``target`` is found by identity; when an earlier edit rebuilt the tree (a second
    ``replace`` with the statements matched before the first), by its code: the one node
    of its type with the same code (comments and all). Several or none raise.
    """
    tr = _Replace(target, make)
    new = tree.visit(tr)
    if tr.hits == 0:
        same = _SameCode(target)
        tree.visit(same)
        if len(same.found) == 1:
            tr = _Replace(same.found[0], make)
            new = tree.visit(tr)
        elif same.found:
            raise ValueError(f"edit target {_code(target).strip()[:60]!r} is not in the definition any more as that "
                             f"node, and {len(same.found)} nodes have its code: pass the node of the edited tree")
    if tr.hits != 1:
        raise ValueError(f"edit target {_code(target).strip()[:60]!r} found {tr.hits} times in the definition "
                         f"(expected 1)")
    return new  # type: ignore[return-value]


def _with_leading(first: cst.BaseStatement, lines: Sequence[cst.EmptyLine]) -> cst.BaseStatement:
    if hasattr(first, "leading_lines"):
        return first.with_changes(leading_lines=[*lines, *first.leading_lines])
    return first


def replace(tree: DefNode, target: cst.CSTNode, new: Sequence[cst.BaseStatement] | cst.CSTNode) -> DefNode:
    """Replace ``target`` (a statement, or any node) by ``new``; comments above it are kept."""
    if isinstance(new, cst.CSTNode):
        return _apply(tree, target, lambda old: new)

    def make(old: cst.CSTNode) -> cst.FlattenSentinel:
        body = list(new)
        if body and hasattr(old, "leading_lines"):
            body[0] = _with_leading(body[0], old.leading_lines)  # type: ignore[attr-defined]
        return cst.FlattenSentinel(body)

    return _apply(tree, target, make)


def insert_after(tree: DefNode, target: cst.BaseStatement, new: Sequence[cst.BaseStatement]) -> DefNode:
    """Insert statements right after the statement ``target`` (same block)."""
    return _apply(tree, target, lambda old: cst.FlattenSentinel([old, *new]))


def insert_before(tree: DefNode, target: cst.BaseStatement, new: Sequence[cst.BaseStatement]) -> DefNode:
    """Insert statements right before ``target``; comments above ``target`` move above them."""

    def make(old: cst.CSTNode) -> cst.FlattenSentinel:
        lead = getattr(old, "leading_lines", ())
        body: list = [*new, old.with_changes(leading_lines=[]) if lead else old]
        if lead:
            body[0] = _with_leading(body[0], lead)
        return cst.FlattenSentinel(body)

    return _apply(tree, target, make)


def append_members(tree: DefNode, new: Sequence[cst.BaseStatement]) -> DefNode:
    """Append statements (e.g. methods) at the end of a class or function body."""
    body = tree.body
    if not isinstance(body, cst.IndentedBlock):
        raise ValueError("cannot append to a one-line body")
    blank = cst.EmptyLine(indent=False)
    spaced = [s.with_changes(leading_lines=[blank]) if isinstance(s, (cst.FunctionDef, cst.ClassDef)) else s
              for s in new]
    return tree.with_changes(body=body.with_changes(body=[*body.body, *spaced]))


def add_sentinel(tree: DefNode, patch_id: str, patch_hash: str) -> DefNode:
    """Mark ``tree`` as changed by a patch: a sentinel comment above the definition.

    An older sentinel of the same patch is replaced; other patches' are kept. For a
    FlattenSentinel (statements inserted beside the definition), every definition in it
    is marked.
    """
    if isinstance(tree, cst.FlattenSentinel):
        defs = (cst.FunctionDef, cst.ClassDef)
        return cst.FlattenSentinel([add_sentinel(n, patch_id, patch_hash) if isinstance(n, defs)
                                    else n for n in tree.nodes])  # type: ignore[return-value]
    text = sentinel_comment(patch_id, patch_hash)
    if isinstance(tree, cst.Module):  # a module-level edit: the sentinel ends the module's header comments
        kept_head = [line for line in tree.header
                     if not (line.comment and (m := SENTINEL_RE.match(line.comment.value)) and m.group(1) == patch_id)]
        return tree.with_changes(header=[*kept_head, cst.EmptyLine(comment=cst.Comment(text))])  # type: ignore[return-value]
    kept = [
        line
        for line in tree.leading_lines
        if not (line.comment and (m := SENTINEL_RE.match(line.comment.value)) and m.group(1) == patch_id)
    ]
    return tree.with_changes(leading_lines=[*kept, cst.EmptyLine(comment=cst.Comment(text))])




def replace_each(tree: DefNode, targets: Sequence[cst.CSTNode], make: Callable[[cst.CSTNode], cst.CSTNode]) -> DefNode:
    """Replace every node of ``targets`` by ``make(node)`` in one pass.

    Raises:
        ValueError: a target was not found in ``tree``.
    """
    wanted = {id(t) for t in targets}
    seen: set[int] = set()

    class _Each(cst.CSTTransformer):
        def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> object:  # type: ignore[override]
            if id(original_node) in wanted:
                seen.add(id(original_node))
                return make(updated_node)
            return updated_node

    new = tree.visit(_Each())
    if len(seen) != len(wanted):
        raise ValueError(f"{len(wanted) - len(seen)} edit target(s) not found in the definition")
    return new  # type: ignore[return-value]


def prepend_to_block(compound: cst.BaseCompoundStatement,
                     new: Sequence[cst.BaseStatement]) -> cst.BaseCompoundStatement:
    """``compound`` (an ``if``/``for``/``with``...) with ``new`` at the start of its body."""
    body = compound.body
    if not isinstance(body, cst.IndentedBlock):
        raise ValueError("cannot prepend to a one-line block")
    return compound.with_changes(body=body.with_changes(body=[*new, *body.body]))


class _OwnExits(cst.CSTTransformer):
    """Rewrites every ``return`` of one function's own body (not of nested functions,
    classes or lambdas) with ``make(value, bare)`` -> statements."""

    def __init__(self, root: cst.FunctionDef, make: Callable[[cst.BaseExpression | None, bool],
                                                             list[cst.BaseStatement]]) -> None:
        self.root = root
        self.make = make
        self.exits = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _split(self, small: Sequence[cst.BaseSmallStatement]) -> list[cst.BaseStatement] | None:
        """The statements that replace a line of small statements holding a ``return`` (last
        on the line: what follows a return never runs), or None when it holds none."""
        at = next((i for i, s in enumerate(small) if isinstance(s, cst.Return)), None)
        if at is None:
            return None
        ret = cast(cst.Return, small[at])
        out: list[cst.BaseStatement] = []
        if at:
            before = [s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for s in small[:at]]
            out.append(cst.SimpleStatementLine(body=before))
        self.exits += 1
        return out + self.make(ret.value, ret.value is None)

    def leave_SimpleStatementLine(  # type: ignore[override]
            self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine) -> object:
        new = self._split(updated_node.body)
        if new is None:
            return updated_node
        if new and original_node.leading_lines:
            new[0] = _with_leading(new[0], original_node.leading_lines)
        return cst.FlattenSentinel(new)

    def leave_SimpleStatementSuite(  # type: ignore[override]
            self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite) -> object:
        new = self._split(updated_node.body)
        if new is None:
            return updated_node
        return cst.IndentedBlock(body=new, header=updated_node.trailing_whitespace)


class _Facts(cst.CSTVisitor):
    """What a function's own body holds (nested functions, classes and lambdas left out):
    ``yield``s and the ``return``s under a ``with`` or a ``try`` with ``finally``."""

    def __init__(self, root: cst.CSTNode | None = None) -> None:
        self.root = root
        self.yields = 0
        self.guarded_returns: list[str] = []
        self._guards: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Yield(self, node: cst.Yield) -> None:
        self.yields += 1

    def visit_With(self, node: cst.With) -> None:
        self._guards.append("with")

    def leave_With(self, original_node: cst.With) -> None:
        self._guards.pop()

    def visit_Try(self, node: cst.Try) -> None:
        self._guards.append("try/finally" if node.finalbody is not None else "")

    def leave_Try(self, original_node: cst.Try) -> None:
        self._guards.pop()

    def visit_Return(self, node: cst.Return) -> None:
        kinds = [g for g in self._guards if g]
        if kinds:
            self.guarded_returns.append(kinds[-1])


def scope_names(nodes: Sequence[ast.AST]) -> tuple[set[str], set[str], set[str]]:
    """(names read, names bound, names declared ``global``/``nonlocal``) by statements in
    one scope: nested functions, lambdas and classes count only as the name they bind,
    comprehension variables not at all (:mod:`ast`, exact where text matching is not)."""
    loads: set[str] = set()
    stores: set[str] = set()
    declared: set[str] = set()

    def walk(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stores.add(node.name)
            for d in node.decorator_list:
                walk(d)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        if isinstance(node, ast.Name):
            (stores if isinstance(node.ctx, (ast.Store, ast.Del)) else loads).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stores.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            stores.add(node.name)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            inner: set[str] = set()
            for g in node.generators:
                inner |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            sub = [*node.generators, *([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt])]
            got_loads, _, _ = scope_names(sub)
            loads.update(got_loads - inner)
            return
        for child in ast.iter_child_nodes(node):
            walk(child)

    for n in nodes:
        walk(n)
    return loads, stores, declared


def _code_ast(nodes: Sequence[cst.CSTNode]) -> list[ast.stmt]:
    return ast.parse(textwrap.dedent("".join(_code(n) for n in nodes))).body


def _falls_through(body: Sequence[cst.BaseStatement]) -> bool:
    """Whether running ``body`` can reach its end (conservative: True when unsure)."""
    if not body:
        return True
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return not any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    if isinstance(last, cst.If):
        if last.orelse is None or _block_falls(last.body):
            return True
        if isinstance(last.orelse, cst.If):
            return _falls_through([last.orelse])
        return _block_falls(last.orelse.body)
    if isinstance(last, cst.With):
        return _block_falls(last.body)
    return True


def _block_body(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    return [cst.SimpleStatementLine(body=list(cast(cst.SimpleStatementSuite, block).body))]


def _block_falls(block: cst.BaseSuite) -> bool:
    return _falls_through(_block_body(block))


def _name_of(expr: cst.BaseExpression | None) -> str | None:
    return expr.value if isinstance(expr, cst.Name) else None


_CONSTANTS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)


def wrap_result(tree: DefNode, name: str, post: Sequence[cst.BaseStatement]) -> DefNode:
    """Post-process what the function ``tree`` returns, on every way out of it (the "wrap
    the result" edit: a monkeypatch that calls the original and then works on its result).

    Each ``return VALUE`` of the function's own body (nested functions, classes and lambdas
    aside) becomes ``name = VALUE`` followed by ``post``; a bare ``return``, and the end of
    the body when it can be reached, bind ``name = None``. When ``post`` does not end by
    returning or raising, ``return name`` follows it (at the end of the body, nothing more
    is returned than before: ``None``). Where the value is a name or a constant that
    ``post`` does not rebind, and ``post`` does not use ``name``, the binding is left out
    and the ``return`` kept as it was (the same behaviour, vLLM's own text). The comment
    lines above a ``return`` stay above the code that replaces it.

    Args:
        tree: a ``def`` (or ``async def``).
        name: the name the returned value is bound to (``post`` reads it).
        post: the statements run on the result, usually ending with ``return name``.
    Raises:
        ValueError: ``tree`` is not a function, is a generator, ``post`` is empty, a
            ``return`` lies under a ``with`` or a ``try`` with ``finally`` (``post`` would run
            inside them, where the wrapper ran it after them), the function declares
            ``name`` or a name ``post`` binds ``global``/``nonlocal``, or reads such a name
            without binding it (``post`` would make it local to the whole function).
    """
    if not isinstance(tree, cst.FunctionDef):
        raise ValueError(f"wrap the result: {type(tree).__name__} is not a function")
    if not post:
        raise ValueError("wrap the result: no statements to run on the result")
    facts = _Facts(tree)
    tree.visit(facts)
    label = tree.name.value
    if facts.yields:
        raise ValueError(f"wrap the result: {label} is a generator (it yields); its result is not one value")
    if facts.guarded_returns:
        raise ValueError(f"wrap the result: a `return` of {label} lies under a `{facts.guarded_returns[0]}`: the "
                         f"code on its result would run inside it")
    own_loads, own_stores, _ = scope_names(_code_ast(post))
    binds = own_stores | {name}
    fn = cast(ast.FunctionDef, _code_ast([tree.with_changes(decorators=[])])[0])
    loads, stores, declared = scope_names(fn.body)
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs,
                              *(x for x in (fn.args.vararg, fn.args.kwarg) if x is not None))}
    free = loads - stores - params
    clash = sorted(binds & (declared | free))
    if clash:
        raise ValueError(f"wrap the result: {label} uses {', '.join(clash)} as a name it does not bind "
                         f"(a global, a builtin or declared global/nonlocal); binding it on the way out would "
                         f"change what the rest of {label} reads")
    mentions = name in own_loads
    ends = not _falls_through(list(post))

    def make(value: cst.BaseExpression | None, bare: bool, end: bool = False) -> list[cst.BaseStatement]:
        body = [s.deep_clone() for s in post]
        stable = value is None or isinstance(value, _CONSTANTS) or \
            (_name_of(value) is not None and _name_of(value) not in own_stores)
        if not mentions and stable:
            if not ends and not end:
                body.append(cst.SimpleStatementLine(body=[cst.Return(value=value)]))
            return body
        bound = value if value is not None else cst.Name("None")
        out: list[cst.BaseStatement] = [
            cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=bound)]),
            *body]
        if not ends:
            out.append(cst.SimpleStatementLine(body=[cst.Return(value=cst.Name(name))]))
        return out

    rewrite = _OwnExits(tree, make)
    new = cast(cst.FunctionDef, tree.visit(rewrite))
    block = new.body
    if not isinstance(block, cst.IndentedBlock):
        block = cst.IndentedBlock(body=_block_body(block), header=cast(cst.SimpleStatementSuite,
                                                                        block).trailing_whitespace)
    if _falls_through(list(block.body)):
        block = block.with_changes(body=[*block.body, *make(None, True, end=True)])
    return new.with_changes(body=block)


def signature_text(params: cst.Parameters) -> str:
    """A one-line parameter list without annotations, e.g. ``self, name, rev=None``.

    Used to copy a base-class hook's signature, whose shape differs across releases;
    annotations are dropped because their names may not be imported where it is copied.
    """
    render = cst.Module(body=[]).code_for_node

    def one(p: cst.Param, star: str = "") -> str:
        default = f"={render(p.default)}" if p.default is not None else ""
        return f"{star}{p.name.value}{default}"

    parts = [one(p) for p in params.posonly_params]
    if params.posonly_params:
        parts.append("/")
    parts += [one(p) for p in params.params]
    if isinstance(params.star_arg, cst.Param):
        parts.append(one(params.star_arg, "*"))
    elif params.kwonly_params:
        parts.append("*")
    parts += [one(p) for p in params.kwonly_params]
    if params.star_kwarg is not None:
        parts.append(one(params.star_kwarg, "**"))
    return ", ".join(parts)
