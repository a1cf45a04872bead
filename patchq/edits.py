"""The small libcst toolkit that patch transforms are written with.

A transform (``series/<patch>.py``) receives the anchored definition, the statements
its anchor matched, and an :class:`EditContext`; it returns the new definition, built
with the helpers here. Transforms stay node-scoped: they never see or return anything
outside the definition, which keeps rebases and runtime mode definition-local too.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
