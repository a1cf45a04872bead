"""Resolving anchors: qualified-name lookup, statement patterns, fingerprints.

An anchor (:class:`patchq.model.AnchorSpec`) is resolved in two steps:

1. **The definition.** The module hint's definitions are indexed by qualified name
   with :mod:`ast` (:func:`ast_index`: ``Class.method``; definitions under module-level
   ``if``/``try``/``with`` count, nested functions do not). When the hint does not
   define the name, every ``.py`` file of the package whose text declares the first
   name component is indexed too (code moves between files across releases).
   Exactly one definition must be found; otherwise :class:`AnchorError` names what was.
   Only that definition is then cut out and parsed with libcst (:func:`cut_segment`).
2. **The statements.** The pattern is parsed with :mod:`ast` and compared with every
   statement of the definition by normalized AST, so re-wrapping, re-indenting,
   comments and quotes do not matter. ``...`` in a pattern matches any expression, or
   any block; an ``if``/``for``/``try`` pattern with ``...`` as body matches whatever
   ``else`` follows; a call ``f(**...)`` matches ``f`` with any arguments. A
   bare-expression pattern matches every statement that contains a matching expression.
   A module-level anchor (qualname ``<module>``, anchors format 2) matches the module's
   own top-level statements.

A *fingerprint* is 16 hex chars of sha256 over the definition's normalized AST with
docstrings removed (comments are not in the AST): stable across Python versions,
blind to formatting, sensitive to every code change.
"""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import libcst as cst

from patchq.errors import AnchorError
from patchq.model import MODULE_QUALNAME, AnchorSpec
from patchq.plan.definitions import split_lines  # noqa: F401 - re-exported
from patchq.report import clip
from patchq.vllmdist.sources import CodeSource

DefNode = cst.FunctionDef | cst.ClassDef
_Found = TypeVar("_Found")  # what an index holds per definition (an ast node, an Entry, a libcst node)

# ---------------------------------------------------------------------------
# normalized AST


_SKIP_FIELDS = frozenset({"ctx", "type_comment", "kind"})
_WILDCARD_WHEN_EMPTY = frozenset({"orelse", "finalbody", "decorator_list", "type_params"})


def _is_docstring(stmt: object) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


_DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _normalize(node: object, strip_docstrings: bool = False) -> object:
    """A plain, Python-version-independent structure for an AST node.

    With ``strip_docstrings`` the docstring of every module, class and function is left
    out (an emptied body becomes ``pass``), without mutating the tree.
    """
    if isinstance(node, ast.AST):
        items = []
        for name in node._fields:
            if name in _SKIP_FIELDS:
                continue
            value = getattr(node, name, None)
            if (strip_docstrings and name == "body" and isinstance(node, _DOC_OWNERS) and value
                    and _is_docstring(value[0])):
                value = value[1:] or [ast.Pass()]
            if value is None or value == []:
                continue
            items.append((name, _normalize(value, strip_docstrings)))
        return (type(node).__name__, tuple(items))
    if isinstance(node, list):
        return tuple(_normalize(v, strip_docstrings) for v in node)
    return repr(node)


def fingerprint_code(code: str) -> str:
    """Fingerprint of a definition's source text (see module docstring).

    Raises:
        SyntaxError: ``code`` does not parse.
    """
    tree = ast.parse(code)
    return hashlib.sha256(repr(_normalize(tree, strip_docstrings=True)).encode()).hexdigest()[:16]


def node_code(node: cst.CSTNode) -> str:
    """Source of a libcst statement or definition, rendered at column 0."""
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):  # every BaseStatement
        return cst.Module(body=[node]).code
    return cst.Module(body=[]).code_for_node(node)


def fingerprint(defn: DefNode | cst.Module) -> str:
    """Fingerprint of a libcst definition (:func:`fingerprint_code` of its source); of a
    module (a module-level anchor), :func:`module_fingerprint` of its text."""
    if isinstance(defn, cst.Module):
        return module_fingerprint(defn.code)
    return fingerprint_code(node_code(defn))


def module_fingerprint(text: str) -> str:
    """Fingerprint of what a module-level anchor depends on: the module's top-level
    statements with every definition reduced to its name (a ``def``/``class`` body may
    change without touching an import or a constant; docstrings left out).

    Raises:
        SyntaxError: ``text`` does not parse.
    """
    tree = ast.parse(text)
    body = [_name_only(s) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else s
            for s in tree.body]
    tree = ast.Module(body=body, type_ignores=[])
    return hashlib.sha256(repr(_normalize(tree, strip_docstrings=True)).encode()).hexdigest()[:16]


def _name_only(node: ast.stmt) -> ast.stmt:
    return ast.Name(id=f"{type(node).__name__}:{node.name}")  # type: ignore[attr-defined, return-value]


# ---------------------------------------------------------------------------
# statement patterns


def _is_ellipsis(node: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def _is_ellipsis_block(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 1
        and isinstance(value[0], ast.Expr)
        and _is_ellipsis(value[0].value)
    )


def _any_arguments(call: ast.Call) -> bool:
    """``f(**...)``: a call pattern whose only argument is ``**...`` matches ``f`` called
    with any arguments, positional and keyword. (``f(...)`` keeps its meaning: exactly
    one positional argument, ``...`` being one expression.)"""
    return not call.args and len(call.keywords) == 1 and call.keywords[0].arg is None \
        and _is_ellipsis(call.keywords[0].value)


def ast_match(pattern: object, node: object) -> bool:
    """Structural match of a pattern AST against a code AST (``...`` is a wildcard for one
    expression or a block; a call ``f(**...)`` matches ``f`` called with any arguments)."""
    if _is_ellipsis(pattern):
        return isinstance(node, ast.AST) or node is None or isinstance(node, list)
    if isinstance(pattern, list):
        if _is_ellipsis_block(pattern):
            return isinstance(node, list)
        return (
            isinstance(node, list)
            and len(pattern) == len(node)
            and all(ast_match(p, n) for p, n in zip(pattern, node, strict=False))
        )
    if isinstance(pattern, ast.AST):
        if type(pattern) is not type(node):
            return False
        if isinstance(pattern, ast.Call) and _any_arguments(pattern):  # f(...): any arguments at all
            return ast_match(pattern.func, node.func)  # type: ignore[attr-defined]
        body_wild = _is_ellipsis_block(getattr(pattern, "body", None))
        for name in pattern._fields:
            if name in _SKIP_FIELDS:
                continue
            pv = getattr(pattern, name, None)
            nv = getattr(node, name, None)
            if name in _WILDCARD_WHEN_EMPTY and pv == [] and (body_wild or name != "orelse"):
                continue
            if not ast_match(pv, nv):
                return False
        return True
    return pattern == node


@dataclass(frozen=True)
class Pattern:
    """A compiled statement pattern.

    Attributes:
        source: the pattern text.
        stmt: its single statement, parsed.
        is_expression: True for a bare-expression pattern (matches containing statements).
    """

    source: str
    stmt: ast.stmt
    is_expression: bool

    @classmethod
    def compile(cls, source: str) -> Pattern:
        """Parse a pattern. Raises :class:`AnchorError` unless it is one statement."""
        try:
            tree = ast.parse(source.strip())
        except SyntaxError as exc:
            raise AnchorError(f"pattern {source!r} does not parse: {exc.msg}") from None
        if len(tree.body) != 1:
            raise AnchorError(f"pattern {source!r} must be one statement, not {len(tree.body)}")
        stmt = tree.body[0]
        is_expr = isinstance(stmt, ast.Expr) and not _is_ellipsis(stmt.value)
        return cls(source=source, stmt=stmt, is_expression=is_expr)

    def matches(self, stmt: ast.stmt) -> bool:
        """True when ``stmt`` matches (or, for an expression pattern, contains a match)."""
        if not self.is_expression:
            return ast_match(self.stmt, stmt)
        target = self.stmt.value  # type: ignore[attr-defined]
        for sub in _header_nodes(stmt):
            if ast_match(target, sub):
                return True
        return False


_HEADER_FIELDS = ("test", "iter", "target", "items", "subject", "value", "targets", "msg", "exc")


def _header_nodes(stmt: ast.stmt) -> Iterable[ast.AST]:
    """Expression nodes of a statement, not descending into nested statements."""
    if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Match)):
        roots = []
        for name in _HEADER_FIELDS:
            value = getattr(stmt, name, None)
            if isinstance(value, list):
                roots.extend(value)
            elif value is not None:
                roots.append(value)
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
        roots = []
    else:
        roots = [stmt]
    for root in roots:
        yield from ast.walk(root)


class _StatementCollector(cst.CSTVisitor):
    """Statements of a definition in source order: (statement, line to edit)."""

    def __init__(self) -> None:
        self.items: list[tuple[cst.CSTNode, cst.BaseStatement | cst.BaseSmallStatement]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self.items.append((small, node))
            return False
        if isinstance(node, cst.SimpleStatementSuite):
            for small in node.body:
                self.items.append((small, small))
            return False
        if isinstance(node, cst.BaseCompoundStatement):
            self.items.append((node, node))
        return True


def _ast_statements(tree: ast.AST) -> list[ast.stmt]:
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    stmts.sort(key=lambda n: (n.lineno, n.col_offset))
    return stmts


def find_statements(defn: DefNode, pattern: Pattern, tree: ast.AST | None = None) -> list[cst.CSTNode]:
    """The statements of ``defn`` that match ``pattern``, in source order.

    A small statement is returned as its whole line (``SimpleStatementLine``), which is
    what edits insert before, after or in place of. ``tree`` is the :mod:`ast` of the
    same definition when the caller has it (saves rendering and re-parsing ``defn``).
    """
    if isinstance(defn, cst.Module):
        return _module_statements(defn, pattern)
    collector = _StatementCollector()
    defn.visit(collector)
    ast_stmts = _ast_statements(tree if tree is not None else ast.parse(node_code(defn)))
    if len(ast_stmts) != len(collector.items):  # pragma: no cover - defensive
        ast_stmts = [ast.parse(node_code(line) if isinstance(line, cst.BaseStatement) else  # else: small is line
                               cst.Module(body=[cst.SimpleStatementLine(body=[line])]).code).body[0]
                     for _small, line in collector.items]
    out: list[cst.CSTNode] = []
    for ast_stmt, (_small, line) in zip(ast_stmts, collector.items, strict=False):
        if ast_stmt is not None and pattern.matches(ast_stmt) and line is not defn:
            if not out or out[-1] is not line:
                out.append(line)
    return out


def _module_statements(module: cst.Module, pattern: Pattern) -> list[cst.CSTNode]:
    """The top-level statements of ``module`` that match ``pattern`` (a module-level anchor
    looks at the module's own statements, never inside its definitions)."""
    out: list[cst.CSTNode] = []
    for stmt in module.body:
        try:
            tree = ast.parse(textwrap.dedent(node_code(stmt)))
        except SyntaxError:  # pragma: no cover - a statement of a parsed module parses
            continue
        if tree.body and pattern.matches(tree.body[0]):
            out.append(stmt)
    return out


# ---------------------------------------------------------------------------
# definitions by qualified name


def index_definitions(module: cst.Module) -> dict[str, list[DefNode]]:
    """qualname -> libcst definitions in ``module`` (several when conditionally defined).

    The libcst twin of :func:`ast_index`, for callers that hold a whole parsed module
    (tests put patched definitions back node by node with it).
    """
    out: dict[str, list[DefNode]] = {}

    def walk(body: Sequence[cst.CSTNode], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                qual = prefix + stmt.name.value
                out.setdefault(qual, []).append(stmt)
                if isinstance(stmt, cst.ClassDef):
                    walk(_block(stmt.body), qual + ".")
            elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
                for block in _sub_blocks(stmt):
                    walk(block, prefix)

    walk(module.body, "")
    return out


def _block(body: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return body.body if isinstance(body, cst.IndentedBlock) else ()


def _sub_blocks(stmt: cst.CSTNode) -> Iterable[Sequence[cst.CSTNode]]:
    if isinstance(stmt, cst.If):
        yield _block(stmt.body)
        if stmt.orelse is not None:
            if isinstance(stmt.orelse, cst.If):
                yield from _sub_blocks(stmt.orelse)
            else:
                yield _block(stmt.orelse.body)
    elif isinstance(stmt, cst.Try):
        yield _block(stmt.body)
        for h in stmt.handlers:
            yield _block(h.body)
        if stmt.orelse is not None:
            yield _block(stmt.orelse.body)
    elif isinstance(stmt, cst.With):
        yield _block(stmt.body)


def declares(text: str, name: str) -> bool:
    """True when ``text`` has a ``def`` or ``class`` statement named ``name`` (no parsing)."""
    if name not in text:  # a substring test first: the regex over every file of vllm costs seconds
        return False
    return re.search(rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{re.escape(name)}\b", text, re.M) is not None


def find_definitions(
    source: CodeSource,
    qualname: str,
    hints: Sequence[str],
    index_of: Callable[[str], Mapping[str, Sequence[_Found]] | None],
    package: Callable[[str], Iterable[str]] | None = None,
    declared: Callable[[str, str, str], bool] | None = None,
) -> tuple[list[tuple[str, _Found]], bool]:
    """Every definition of ``qualname``: those of the first ``hints`` file that has any,
    else those of every other ``.py`` file of ``source`` whose text declares the first
    name component (module docstring).

    Args:
        source: the vLLM to search (its file list and texts, for the package-wide search).
        qualname: ``Class.method`` as :func:`ast_index` names it.
        hints: files to look in first, in order (missing ones are skipped).
        index_of: relpath -> {qualname: [definitions]} of the (possibly edited) file, or
            None when it does not exist or does not parse; :func:`ast_index` or
            :func:`index_definitions` or :func:`patchq.plan.definitions.text_index`.
        package: qualname -> the files (in ``source.py_files()`` order) that can define
            it, from an index (:meth:`patchq.plan.definitions.SourceIndex.where`); every
            file holding the name must be among them. Default: every file.
        declared: (relpath, text, name) -> :func:`declares` of that text, from an index
            that knows (:meth:`patchq.plan.definitions.SourceIndex.declares`). Default:
            :func:`declares`.
    Returns:
        ([(relpath, definition)], searched_package): searched_package is True when no
        hint defines the name (the hits, if any, moved).
    """
    for relpath in hints:
        found = (index_of(relpath) or {}).get(qualname, [])
        if found:
            return [(relpath, node) for node in found], False
    first = qualname.split(".")[0]
    hits: list[tuple[str, _Found]] = []
    for relpath in (package(qualname) if package is not None else source.py_files()):
        if relpath in hints:
            continue
        text = source.read_text(relpath)
        if text is None or not (declared(relpath, text, first) if declared is not None else declares(text, first)):
            continue
        hits += [(relpath, node) for node in (index_of(relpath) or {}).get(qualname, [])]
    return hits, True


def locate_definition(
    spec: AnchorSpec,
    source: CodeSource,
    index_of: Callable[[str], Mapping[str, Sequence[object]] | None],
    package: Callable[[str], Iterable[str]] | None = None,
    declared: Callable[[str, str, str], bool] | None = None,
) -> tuple[str, bool]:
    """Which file holds the one definition ``spec.qualname`` names (module docstring).

    Args:
        spec: the anchor.
        source: the vLLM to search (its file list and texts, for the package-wide search).
        index_of, package, declared: as for :func:`find_definitions`.
    Returns:
        (relpath, moved): moved is True when found outside the module hint.
    Raises:
        AnchorError: ``gone`` when not found anywhere; ``conflict`` when defined more than
            once in the hinted module, or found in several other files.
    """
    hinted = [p for p in spec.module_paths if source.exists(p)]
    if spec.qualname == MODULE_QUALNAME:  # a module-level anchor: the module itself
        if not hinted:
            raise AnchorError(f"anchor {spec.id}: module {spec.module} ({spec.module_paths[0]}) is not in vllm "
                              f"{source.version}", kind="gone", anchor=spec.id)
        return hinted[0], False
    found, moved = find_definitions(source, spec.qualname, hinted, index_of, package, declared)
    if len(found) == 1:
        return found[0][0], moved
    if found and not moved:
        raise AnchorError(
            f"{spec.qualname} is defined {len(found)} times in {found[0][0]} "
            f"(conditional definitions): cannot pick one", kind="conflict", anchor=spec.id,
        )
    hits = [relpath for relpath, _ in found]
    where = spec.module_paths[0] if not hinted else hinted[0]
    if not hits:
        raise AnchorError(
            f"anchor {spec.id}: {spec.qualname} not found in {where} nor anywhere in the package",
            kind="gone", anchor=spec.id,
        )
    raise AnchorError(f"anchor {spec.id}: {spec.qualname} not in {where}; found {len(hits)} times "
                      f"elsewhere: {', '.join(hits)}", kind="conflict", anchor=spec.id)


# ---------------------------------------------------------------------------
# definitions as text segments (the engine parses only these with libcst)


def ast_index(text: str) -> dict[str, list[ast.stmt]]:
    """qualname -> :mod:`ast` definitions of a module's text (same rules as
    :func:`index_definitions`, at C-parser speed).

    Raises:
        SyntaxError: the text does not parse.
    """
    out: dict[str, list[ast.stmt]] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = prefix + stmt.name
                out.setdefault(qual, []).append(stmt)
                if isinstance(stmt, ast.ClassDef):
                    walk(stmt.body, qual + ".")
            elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
                walk(getattr(stmt, "body", []), prefix)
                walk(getattr(stmt, "orelse", []), prefix)
                walk(getattr(stmt, "finalbody", []), prefix)
                for h in getattr(stmt, "handlers", []):
                    walk(h.body, prefix)

    walk(ast.parse(text).body, "")
    return out


def definition_span(node) -> tuple[int, int]:
    """1-based (first, last) line of an :mod:`ast` definition, decorators included (or of a
    :class:`patchq.plan.definitions.Entry`)."""
    if hasattr(node, "start") and hasattr(node, "end"):
        return node.start, node.end
    decos = getattr(node, "decorator_list", [])
    start = min([node.lineno] + [d.lineno for d in decos])  # type: ignore[attr-defined]
    return start, node.end_lineno  # type: ignore[attr-defined]


def fingerprint_ast(node: ast.stmt) -> str:
    """:func:`fingerprint` of an :mod:`ast` definition (the same value, without libcst)."""
    tree = ast.Module(body=[node], type_ignores=[])
    return hashlib.sha256(repr(_normalize(tree, strip_docstrings=True)).encode()).hexdigest()[:16]


_WRAPPER = "class _patchq_segment_:\n"  # an indented definition parses inside it
_LEAD = "pass\n"  # keeps comments above a top-level definition out of Module.header


@dataclass
class Segment:
    """One definition cut out of a module's text, parsed alone with libcst.

    Attributes:
        relpath, qualname: where it is.
        start, end: 0-based line range ``[start, end)`` in the module text, including
            the comment lines directly above (sentinels) and decorators.
        wrapped: True when the definition is indented (a method): it is parsed inside a
            one-line dummy class, so its lines are parsed unchanged.
        module: the parsed segment; node: the definition inside it.
        first: 0-based line of the definition itself (decorators included);
            def_text: its lines ``[first, end)``.
    """

    relpath: str
    qualname: str
    start: int
    end: int
    wrapped: bool
    module: cst.Module
    node: DefNode
    first: int = 0
    def_text: str = ""
    #: the file's line end (``"\r\n"`` for a CRLF file): lines a transform inserts get it too
    newline: str = "\n"

    def tree(self) -> ast.AST:
        """The :mod:`ast` node of the definition as cut (lines of the whole file); the
        :class:`ast.Module` for a module segment."""
        from patchq.plan.definitions import parse_definition

        if self.qualname == MODULE_QUALNAME:
            return ast.parse(self.def_text)
        return parse_definition(self.def_text, self.first + 1)

    def render(self, new: DefNode | cst.FlattenSentinel) -> str:
        """The segment's text with ``node`` replaced by ``new`` (same indentation).

        ``new`` may be a FlattenSentinel: statements placed beside the definition (an
        imported patch's module-level insertions, :mod:`patchq.plan.stmtpatch`).
        """
        if isinstance(new, cst.Module):  # a module-level anchor: the segment is the whole file
            return new.code
        nodes = list(new.nodes) if isinstance(new, cst.FlattenSentinel) else [new]
        if self.wrapped:
            cls = cast(cst.ClassDef, self.module.body[0])  # the _WRAPPER class
            block = cls.body.with_changes(body=nodes)
            code = self.module.with_changes(body=[cls.with_changes(body=block)]).code
            return code[len(_WRAPPER.replace("\n", self.newline)):]
        code = self.module.with_changes(body=[self.module.body[0], *nodes]).code
        return code[len(_LEAD.replace("\n", self.newline)):]


def module_segment(text: str, relpath: str) -> Segment:
    """The whole module as one segment (a module-level anchor): lines ``[0, n)``, its
    ``node`` the parsed :class:`libcst.Module`.

    Raises:
        libcst.ParserSyntaxError: the module does not parse.
    """
    module = cst.parse_module(text)
    return Segment(relpath, MODULE_QUALNAME, 0, len(split_lines(text)), False, module, module,  # type: ignore[arg-type]
                   0, text)


def cut_segment(text: str, relpath: str, qualname: str, node) -> Segment:
    """Cut the definition ``node`` (from :func:`ast_index` of ``text``, or its
    :class:`patchq.plan.definitions.Entry`) out and parse it.

    Raises:
        libcst.ParserSyntaxError: the segment does not parse alone (never seen in vLLM).
    """
    lines = split_lines(text)
    first, end = definition_span(node)
    first -= 1
    line = lines[first]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    start = first
    while start > 0:
        above = lines[start - 1]
        stripped = above.lstrip(" \t")
        if stripped.startswith("#") and above[: len(above) - len(stripped)] == indent:
            start -= 1
        else:
            break
    seg = "".join(lines[start:end])
    # the wrapper's line end is the file's: libcst takes the first one it meets for the lines
    # a transform inserts (a CRLF file got LF-only inserted lines)
    newline = "\r\n" if lines[first].endswith("\r\n") else "\n"
    if not seg.endswith("\n"):
        seg += newline
    if indent:
        module = _parse_cst(_WRAPPER.replace("\n", newline) + seg)
        defn = cast(cst.ClassDef, module.body[0]).body.body[0]  # the def inside the _WRAPPER class
    else:
        module = _parse_cst(_LEAD.replace("\n", newline) + seg)
        defn = module.body[1]
    def_text = "".join(lines[first:end])
    if not def_text.endswith("\n"):
        def_text += "\n"
    # the lines of an ast def/class (decorators included) parse as that definition
    return Segment(relpath, qualname, start, end, bool(indent), module, cast(DefNode, defn), first, def_text, newline)


_CST: dict[str, cst.Module] = {}


def _parse_cst(code: str) -> cst.Module:
    """:func:`libcst.parse_module`, kept per text for the process (libcst trees are
    immutable: a matrix cuts most definitions again, unchanged, release after release)."""
    got = _CST.get(code)
    if got is None:
        got = cst.parse_module(code)
        if len(_CST) > 1024:
            _CST.clear()
        _CST[code] = got
    return got


def splice(text: str, segment: Segment, new_text: str) -> str:
    """``text`` with the segment's lines replaced by ``new_text``."""
    lines = split_lines(text)
    tail = lines[segment.end:]
    if not tail and not text.endswith("\n") and new_text.endswith("\n"):
        new_text = new_text[:-1]
    return "".join(lines[: segment.start]) + new_text + "".join(tail)


def match_anchor(spec: AnchorSpec, defn: DefNode, tree: ast.AST | None = None) -> list[cst.CSTNode]:
    """The statements of ``defn`` that ``spec.node`` matches, checked against the count.

    Returns ``[defn]`` when the anchor has no node pattern.
    Raises:
        AnchorError: the number of matches is not what ``spec`` expects; the message
            gives the number found.
    """
    if spec.node is None:
        return [defn]
    found = find_statements(defn, Pattern.compile(spec.node), tree)
    if not spec.count_ok(len(found)):
        hint = ("; `...` in a call is one argument: `f(**...)` matches any arguments"
                if not found and "(...)" in spec.node else "")
        raise AnchorError(
            f"anchor {spec.id}: expected {spec.count_text()} match(es) of "
            f"`{_one_line(spec.node)}` in {spec.qualname}, found {len(found)}{hint}",
            kind="conflict", anchor=spec.id,
        )
    return found


def _one_line(text: str, limit: int = 80) -> str:
    return clip(" ".join(text.split()), limit)
