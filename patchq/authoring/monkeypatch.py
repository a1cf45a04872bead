"""``patchq import --replacement``: a monkeypatch becomes the change its author meant.

A monkeypatch module rebinds a vLLM function or method at run time (``Cls.method = f``).
``f`` is one of two shapes, and each becomes statement operations on vLLM's own
definition (never a copy of ``f``, never a call to anything only the monkeypatch module
has):

**A wrapper** calls the original: through a saved reference (``orig = Cls.x`` or
``Cls._orig_x = Cls.x`` in the module or in the factory function that installs the
patch; ``@functools.wraps(orig)``), ``super().x(...)``, or ``self._orig_x(...)`` (saved
by a framework the file does not show: the name says so). The code before the call is
inserted at the start of vLLM's body (after its docstring; statements vLLM's body
already starts with are not repeated); arguments the wrapper passes in place of its own
parameters become rebindings of vLLM's parameters there; the code after the call becomes
a *result wrapper* on every way out of vLLM's definition (``{"op": "result"}``:
:func:`patchq.edits.wrap_result`), with the original's return value bound to the name the
wrapper gave it. ``if TEST: return orig(...)`` followed by the wrapper's own code (a
dispatch) becomes ``if not TEST: <that code>`` first in vLLM's body. The saved original
is never referred to.

**A copy** does not call the original: it is compared with vLLM's definition statement
by statement, by normalized AST, recursing into compound statements whose header is
unchanged. A statement equal to vLLM's is vLLM's text (comments and formatting
included: a re-wrapped copy records nothing); the copy's docstring, parameter and return
annotations never count (vLLM's are kept); a changed statement is the copy's. A copy
that only returns a constant is that ``return`` first in vLLM's body. In both shapes,
``alias.x`` with ``alias`` vLLM's module itself is ``x``, and a local import of what
vLLM's module binds the same way is left out.

**Decorators**: the rebinding statement in the source says what the new function is
(``Cls.m = classmethod(f)``: ``f`` is a classmethod; ``mod.fn = f``: ``f`` undecorated);
a copy gets the decorators it has there, so a replacement that exists to drop vLLM's
``@torch.compile`` drops it (and says so). Descriptor decorators (``@classmethod``,
``@staticmethod``, ``@property``...) of vLLM's definition are kept when the source does
not show the rebinding. Code a wrapper runs before or after the original cannot move
into a definition under another decorator (it would run inside it): refused.

**Names**: every name the new code reads must be bound in vLLM's module. A name the
source binds by an import is imported where it is used (a local import at the top of the
new code, as the source imports it, when the import resolves: a ``vllm`` module of the
release, the standard library, or a package vLLM itself imports); a helper function the
source defines (module level or in the factory) and whose own names resolve is added to
vLLM's module beside the definition. Anything else (a helper class, a module variable,
a closure variable of the factory, the saved original, an import of the source project)
is refused, naming the name, its line in the source and what binds it: ``runtime_names``
is never filled in by itself. A call ``self.m(...)`` of a method that vLLM's class does
not define (statically, where its bases are known) is refused too.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import libcst as cst

from patchq.authoring import importer
from patchq.authoring.importer import ImportPlan
from patchq.errors import ImportRefused, UsageError
from patchq.plan.anchors import Segment, ast_index, cut_segment, node_code, splice
from patchq.vllmdist.sources import CodeSource, release_source

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BUILTINS = frozenset(dir(builtins))
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: decorators that say what kind of member a function is, not what it does
_DESCRIPTORS = frozenset({"classmethod", "staticmethod", "property", "abstractmethod", "abc.abstractmethod",
                          "override", "typing.override", "typing_extensions.override", "functools.cached_property",
                          "cached_property"})


# --------------------------------------------------------------------------- source model


@dataclass
class Binding:
    """Where the source binds a name: ``line`` (1-based), ``what`` (``import``, ``def``,
    ``class``, ``assignment``, ``parameter``...), ``scope`` (``module`` or ``function F``),
    ``node`` (the binding statement; for an import, a one-name import statement)."""

    name: str
    line: int
    what: str
    scope: str
    node: ast.AST | None = None


@dataclass
class Scope:
    """One scope around the replacement (the module, or a function enclosing it)."""

    label: str
    node: ast.AST
    bindings: dict[str, Binding] = field(default_factory=dict)


def _dotted(expr: ast.AST) -> str | None:
    """``a.b.c`` of a Name/Attribute chain; ``getattr(X, "y")`` counts as ``X.y``."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.value)
        return f"{base}.{expr.attr}" if base else None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "getattr" \
            and len(expr.args) >= 2 and isinstance(expr.args[1], ast.Constant) and isinstance(expr.args[1].value, str):
        base = _dotted(expr.args[0])
        return f"{base}.{expr.args[1].value}" if base else None
    return None


def _own_statements(body: Sequence[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements of one scope, descending into blocks but not into nested definitions."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, _DEFS):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _own_statements(getattr(stmt, name, []) or [])
        for h in getattr(stmt, "handlers", []) or []:
            yield from _own_statements(h.body)
        for case in getattr(stmt, "cases", []) or []:
            yield from _own_statements(case.body)


def _bind_targets(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _scope(label: str, node: ast.AST, body: Sequence[ast.stmt]) -> Scope:
    out = Scope(label, node)

    def add(name: str, line: int, what: str, stmt: ast.AST | None = None) -> None:
        out.bindings.setdefault(name, Binding(name, line, what, label, stmt))

    if isinstance(node, _FUNCS):
        a = node.args
        for param in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
            if param is not None:
                add(param.arg, node.lineno, "parameter")
    for stmt in _own_statements(body):
        if isinstance(stmt, _DEFS):
            add(stmt.name, stmt.lineno, "class" if isinstance(stmt, ast.ClassDef) else "def", stmt)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                add((alias.asname or alias.name).split(".")[0], stmt.lineno, "import", ast.Import(names=[alias]))
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                add(alias.asname or alias.name, stmt.lineno, "import",
                    ast.ImportFrom(module=stmt.module, names=[alias], level=stmt.level))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in _bind_targets(t):
                    add(n, stmt.lineno, "assignment", stmt)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            for n in _bind_targets(stmt.target):
                add(n, stmt.lineno, "loop variable", stmt)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    for n in _bind_targets(item.optional_vars):
                        add(n, stmt.lineno, "with variable", stmt)
    return out


@dataclass
class Replacement:
    """The replacing definition in its source file."""

    path: str
    text: str
    tree: ast.Module
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    #: the definitions enclosing it, outermost first (functions and classes)
    chain: list[ast.AST]
    dotted: str

    @property
    def scopes(self) -> list[Scope]:
        """Innermost first: the enclosing functions (a class body is no closure scope), then the module."""
        out = [_scope(f"function {n.name}", n, n.body) for n in reversed(self.chain) if isinstance(n, _FUNCS)]
        return out + [_scope("module", self.tree, self.tree.body)]

    def where(self, b: Binding) -> str:
        return f"{Path(self.path).name}:{b.line}"


def _all_definitions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
                                                   list[ast.AST]]]:
    """(dotted path, node, enclosing definitions) of every def/class at any depth; ``if``,
    ``try`` and ``with`` blocks are looked through (a definition per branch is found per branch)."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, list[ast.AST]]] = []

    def walk(body: Sequence[ast.stmt], prefix: str, chain: list[ast.AST]) -> None:
        for stmt in _own_statements(body):
            if isinstance(stmt, _DEFS):
                path = prefix + stmt.name
                out.append((path, stmt, chain))
                walk(stmt.body, path + ".", [*chain, stmt])

    walk(tree.body, "", [])
    return out


def read_replacement(spec: str) -> tuple[str, str, str, int | None]:
    """(text, dotted name, file path, line or None) of ``--replacement FILE.py:NAME[@LINE]``
    (or ``package.module:NAME``). The module's file is found with
    :func:`importlib.util.find_spec` (its parent packages are imported, the module is not).

    Raises:
        UsageError: malformed, or the file or module is not found.
    """
    import importlib.util

    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise UsageError(f"--replacement {spec!r}: give FILE.py:NAME or package.module:NAME")
    line = None
    if "@" in name:
        name, _, at = name.partition("@")
        if not at.isdigit():
            raise UsageError(f"--replacement {spec!r}: NAME@LINE takes the line number of the definition")
        line = int(at)
    path = Path(where)
    if not path.is_file():
        try:
            found = importlib.util.find_spec(where)
        except (ImportError, ValueError) as exc:
            raise UsageError(f"--replacement {spec!r}: module {where} not found ({exc})") from None
        if found is None or not found.origin or not found.origin.endswith(".py"):
            raise UsageError(f"--replacement {spec!r}: no Python file for module {where}")
        path = Path(found.origin)
    return importer.read_input(path, "replacement"), name, str(path), line


def find_replacement(text: str, name: str, path: str, line: int | None = None) -> Replacement:
    """The definition ``name`` of the source: a dotted path (``factory.inner``,
    ``Class.method``) or the last part of one when that is unique; nested in functions
    and classes, inside ``if``/``try`` blocks. ``line`` picks one of several (a
    definition per branch of an ``if``).

    Raises:
        UsageError: the source does not parse, the name is not there, or several
            definitions match and no line picks one (their lines are listed).
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise UsageError(f"--replacement {path}: not valid Python ({exc.msg}, line {exc.lineno})") from None
    defs = _all_definitions(tree)
    found = [d for d in defs if d[0] == name] or [d for d in defs if d[0].rsplit(".", 1)[-1] == name]
    if line is not None:
        found = [d for d in found if d[1].lineno == line or any(x.lineno == line for x in d[1].decorator_list)]
    if not found:
        raise UsageError(f"--replacement {path}:{name}: no definition {name}"
                         + (f" at line {line}" if line else "") + f" in {path}")
    if len(found) > 1:
        lines = ", ".join(f"{d[0]} (line {d[1].lineno})" for d in found)
        raise UsageError(f"--replacement {path}:{name}: {len(found)} definitions match ({lines}), e.g. one per "
                         f"branch of an `if`: pick one with {path}:{name}@LINE")
    dotted, node, chain = found[0]
    return Replacement(path, text, tree, cast(ast.FunctionDef, node), list(chain), dotted)


# --------------------------------------------------------------------------- the target


@dataclass
class Target:
    """vLLM's definition the monkeypatch rebinds, at one release."""

    module: str
    relpath: str
    qualname: str
    release: str
    source: CodeSource
    pristine: str
    node: ast.stmt
    segment: Segment

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def decorators(self) -> list[str]:
        return [ast.unparse(d) for d in getattr(self.node, "decorator_list", [])]

    @property
    def kind(self) -> str:
        """``function``, ``method``, ``classmethod`` or ``staticmethod``."""
        if "." not in self.qualname:
            return "function"
        decos = {d.split("(")[0] for d in self.decorators}
        return "classmethod" if "classmethod" in decos else "staticmethod" if "staticmethod" in decos else "method"


def find_target(replaces: str, release: str) -> Target:
    """vLLM's ``module:Qualname`` at ``release``.

    Raises:
        UsageError: malformed, or not defined exactly once in the release.
    """
    mod, sep, qualname = replaces.partition(":")
    if not sep or not qualname:
        raise UsageError(f"--replaces {replaces!r}: give vllm.module:Qualname")
    source = release_source(release)
    base = mod.replace(".", "/")
    rel = next((r for r in (base + ".py", base + "/__init__.py") if source.exists(r)), None)
    if rel is None:
        raise UsageError(f"--replaces {replaces!r}: no module {mod} in vllm {release}")
    pristine = source.read_text(rel) or ""
    found = ast_index(pristine).get(qualname, [])
    if len(found) != 1:
        raise UsageError(f"--replaces {replaces!r}: {qualname} is defined {len(found)} times in {rel} (vllm {release})")
    seg = cut_segment(pristine, rel, qualname, found[0])
    return Target(mod, rel, qualname, release, source, pristine, found[0], seg)


# --------------------------------------------------------------------------- the original


@dataclass
class Original:
    """How the source refers to the original: saved names (``orig = Cls.x``), saved
    attributes (``Cls._orig_x = Cls.x``: attribute ``_orig_x``), ``functools.wraps``."""

    names: dict[str, int] = field(default_factory=dict)
    attrs: dict[str, int] = field(default_factory=dict)


def _is_original(expr: ast.AST, target: Target, scopes: list[Scope]) -> bool:
    dotted = _dotted(expr)
    if dotted is None:
        return False
    q = target.qualname
    if dotted == q:
        if "." in q:  # Cls.meth with Cls imported from the target's module
            return True
        b = next((s.bindings[q] for s in scopes if q in s.bindings), None)
        return b is not None and b.what == "import" and isinstance(b.node, ast.ImportFrom) and \
            b.node.module == target.module
    return dotted.endswith("." + q) or dotted == f"{target.module}.{q}"


def saved_originals(repl: Replacement, target: Target) -> Original:
    """The names and attributes the source binds to the original (module docstring)."""
    out = Original()
    scopes = repl.scopes
    for scope in scopes:
        body = scope.node.body if hasattr(scope.node, "body") else []
        for stmt in _own_statements(body):
            if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
                continue
            if not _is_original(stmt.value, target, scopes):
                continue
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                if isinstance(t, ast.Name):
                    out.names.setdefault(t.id, stmt.lineno)
                elif isinstance(t, ast.Attribute):
                    out.attrs.setdefault(t.attr, stmt.lineno)
    return out


@dataclass
class Call:
    """A call of the original in the wrapper: the statement (index in the wrapper's body),
    the call, whether it is bound (its first parameter implicit) and awaited."""

    index: int
    call: ast.Call
    bound: bool
    what: str
    #: the call is ``if TEST: return orig(...)``: the rest of the wrapper runs when not TEST
    dispatch: bool = False


def _calls(repl: Replacement, target: Target, orig: Original) -> tuple[list[Call], list[str]]:
    """The calls of the original in the replacement's own body, and where any lies deeper
    than a statement of that body (inside an ``if``, a loop, a lambda...)."""
    node = repl.node
    if not isinstance(node, _FUNCS):
        return [], []
    first = (node.args.posonlyargs + node.args.args)[:1]
    me = first[0].arg if first else None
    unbound_saved = target.kind != "classmethod"
    found: list[Call] = []
    deep: list[str] = []

    def kind(call: ast.Call) -> tuple[bool, str] | None:
        f = call.func
        if isinstance(f, ast.Name) and f.id in orig.names:
            return (not unbound_saved, f"the saved original `{f.id}` (line {orig.names[f.id]})")
        if isinstance(f, ast.Attribute):
            if f.attr in orig.attrs:
                if isinstance(f.value, ast.Name) and f.value.id == me:
                    return (True, f"`{me}.{f.attr}`, the original saved at line {orig.attrs[f.attr]}")
                return (not unbound_saved, f"`{_dotted(f)}`, the original saved at line {orig.attrs[f.attr]}")
            if f.attr == target.name and isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) \
                    and f.value.func.id == "super":
                return (True, f"`super().{f.attr}`")
            if isinstance(f.value, ast.Name) and f.value.id == me and _named_original(f.attr, target):
                return (True, f"`{me}.{f.attr}`, taken for the original saved by a framework (its name says so, "
                              f"and vLLM's {target.qualname.rsplit('.', 1)[0]} does not define it)")
        return None

    for i, stmt in enumerate(node.body):
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Call):
                got = kind(sub)
                if got is None:
                    continue
                top = _top_call(stmt)
                if top is sub:
                    found.append(Call(i, sub, got[0], got[1]))
                elif _dispatch_call(stmt) is sub:
                    found.append(Call(i, sub, got[0], got[1], dispatch=True))
                else:
                    deep.append(f"{got[1]} is called at line {sub.lineno} inside `{_head(stmt)}`")
    return found, deep


def _dispatch_call(stmt: ast.stmt) -> ast.Call | None:
    """The call of ``if TEST: return f(...)`` (no ``else``): a wrapper that hands some calls
    to the original unchanged and runs its own code for the others."""
    if isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return):
        return _top_call(stmt.body[0])
    return None


def _named_original(attr: str, target: Target) -> bool:
    """Whether ``attr`` names the saved original of ``target``'s method by the usual
    convention (``_orig_m``, ``_original_m``, ``m_orig``...; dunders stripped) and vLLM's
    class body does not define it."""
    if "." not in target.qualname:
        return False
    base = target.name.strip("_")
    words = "(?:orig|original|old|saved|wrapped|unpatched|vllm)"
    pattern = rf"_*{words}_*{re.escape(base)}_*|_*{re.escape(base)}_*{words}_*"
    if not re.fullmatch(pattern, attr):
        return False
    cls = ast_index(target.pristine).get(target.qualname.rsplit(".", 1)[0], [])
    return not any(isinstance(n, ast.Attribute) and n.attr == attr or isinstance(n, _DEFS) and n.name == attr
                   for c in cls for n in ast.walk(c))


def _top_call(stmt: ast.stmt) -> ast.Call | None:
    """The call a statement is (``f()``, ``x = f()``, ``return f()``, each maybe awaited)."""
    value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return)) \
        else None
    if isinstance(value, ast.Await):
        value = value.value
    return value if isinstance(value, ast.Call) else None


def _head(stmt: ast.stmt) -> str:
    text = ast.unparse(stmt).splitlines()[0]
    return text if len(text) <= 70 else text[:67] + "..."


# --------------------------------------------------------------------------- libcst helpers


def _libcst_def(repl: Replacement) -> cst.FunctionDef | cst.ClassDef:
    seg = cut_segment(repl.text, repl.path, repl.dotted, repl.node)
    return seg.node


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
        isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, (cst.SimpleString,
                                                                                cst.ConcatenatedString))


def _key(node: cst.CSTNode) -> str:
    """The normalized-AST key of a libcst statement (formatting and comments left out)."""
    try:
        return ast.dump(ast.parse(textwrap.dedent(node_code(node))), include_attributes=False)
    except SyntaxError:  # pragma: no cover - a statement of a parsed module parses
        return node_code(node)


def _header_key(stmt: cst.CSTNode) -> str:
    from patchq.plan.stmtpatch import header_text

    try:
        return ast.dump(ast.parse(header_text(stmt, leading=False)), include_attributes=False)
    except SyntaxError:  # pragma: no cover
        return header_text(stmt, leading=False)


class _Rename(cst.CSTTransformer):
    """Renames plain names (not attributes, keyword names or parameters of lambdas)."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.mapping.get(updated_node.value)
        return updated_node.with_changes(value=new) if new else updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)


def _renamed(stmts: Sequence[cst.BaseStatement], mapping: dict[str, str]) -> list[cst.BaseStatement]:
    if not mapping:
        return list(stmts)
    return [cast(cst.BaseStatement, s.visit(_Rename(mapping))) for s in stmts]


def _code_ast(stmts: Sequence[cst.CSTNode]) -> list[ast.stmt]:
    return ast.parse("".join(node_code(s) for s in stmts)).body if stmts else []


def _strip_leading_blank(stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    if stmts and hasattr(stmts[0], "leading_lines"):
        lead = list(stmts[0].leading_lines)  # type: ignore[attr-defined]
        while lead and lead[0].comment is None:
            lead.pop(0)
        stmts[0] = stmts[0].with_changes(leading_lines=lead)
    return stmts


# --------------------------------------------------------------------------- vLLM's own names


def _same_import(a: ast.AST | None, b: ast.AST | None) -> bool:
    if isinstance(a, ast.ImportFrom) and isinstance(b, ast.ImportFrom):
        return (a.module, a.level, a.names[0].name) == (b.module, b.level, b.names[0].name)
    if isinstance(a, ast.Import) and isinstance(b, ast.Import):
        return a.names[0].name == b.names[0].name
    return False


def self_aliases(repl: Replacement, target: Target, stmts: Sequence[cst.BaseStatement] = ()) -> set[str]:
    """Names the source binds to vLLM's module itself (``from vllm.parser import qwen3``,
    ``import vllm.v1.sample.sampler as _sampler_mod``), in its scopes or in ``stmts``."""
    out = set()
    nodes: list[ast.AST] = [b.node for sc in repl.scopes for b in sc.bindings.values()
                            if b.what == "import" and b.node is not None]
    for st in _code_ast(stmts):
        if isinstance(st, ast.Import):
            nodes += [ast.Import(names=[a]) for a in st.names]
        elif isinstance(st, ast.ImportFrom):
            nodes += [ast.ImportFrom(module=st.module, names=[a], level=st.level) for a in st.names]
    for node in nodes:
        if isinstance(node, ast.Import) and node.names[0].name == target.module and node.names[0].asname:
            out.add(node.names[0].asname)
        elif isinstance(node, ast.ImportFrom) and not node.level and \
                f"{node.module}.{node.names[0].name}" == target.module:
            out.add(node.names[0].asname or node.names[0].name)
    return out


class _Unalias(cst.CSTTransformer):
    """``alias.x`` -> ``x`` where ``alias`` is vLLM's module itself and it binds ``x``."""

    def __init__(self, aliases: set[str], names: set[str]) -> None:
        self.aliases, self.names = aliases, names
        self.done = 0

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        v = updated_node.value
        if isinstance(v, cst.Name) and v.value in self.aliases and updated_node.attr.value in self.names:
            self.done += 1
            return cst.Name(updated_node.attr.value, lpar=updated_node.lpar, rpar=updated_node.rpar)
        return updated_node


def own_names(repl: Replacement, target: Target, stmts: Sequence[cst.BaseStatement],
              notes: list[str]) -> list[cst.BaseStatement]:
    """``stmts`` in vLLM's module's own terms: ``alias.x`` of vLLM's module itself is
    ``x``; an import (among ``stmts``, not nested) of what vLLM's module already binds the
    same way, or of vLLM's module itself, is left out (it would shadow vLLM's name)."""
    here = f"{Path(repl.path).name}:{repl.dotted}"
    tree = ast.parse(target.pristine)
    mine = _scope("module", tree, tree.body).bindings
    aliases = self_aliases(repl, target, stmts)
    out: list[cst.BaseStatement] = []
    changed = 0
    for st in stmts:
        un = _Unalias(aliases, set(mine))
        st = cast(cst.BaseStatement, st.visit(un)) if aliases else st
        changed += un.done
        node = _code_ast([st])[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [ast.Import(names=[a]) if isinstance(node, ast.Import) else
                     ast.ImportFrom(module=node.module, names=[a], level=node.level) for a in node.names]
            redundant = all(
                (a.names[0].asname or a.names[0].name).split(".")[0] in aliases or
                _same_import(a, mine.get((a.names[0].asname or a.names[0].name).split(".")[0],
                                         Binding("", 0, "", "")).node)
                for a in names)
            if redundant:
                notes.append(f"{here}: `{ast.unparse(node)}` is left out: vLLM's {target.relpath} is that module or "
                             f"binds those names the same way")
                continue
        out.append(st)
    if changed:
        notes.append(f"{here}: {changed} reference(s) to vLLM's module through an alias are its own names there")
    return out


# --------------------------------------------------------------------------- the wrapper


@dataclass
class Shape:
    """What a wrapper means: code before the original (``before``), rebindings of
    vLLM's parameters (``adapters``), the name of the original's result and the code
    after it (``post``), or no post-processing (``post`` empty)."""

    before: list[cst.BaseStatement]
    adapters: list[cst.BaseStatement]
    name: str
    post: list[cst.BaseStatement]
    notes: list[str] = field(default_factory=list)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[str], str | None, list[str], str | None]:
    a = fn.args
    return ([x.arg for x in (*a.posonlyargs, *a.args)], a.vararg.arg if a.vararg else None,
            [x.arg for x in a.kwonlyargs], a.kwarg.arg if a.kwarg else None)


def _fresh(base: str, taken: set[str]) -> str:
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def _all_names(nodes: Iterable[ast.AST]) -> set[str]:
    return {n.id for x in nodes for n in ast.walk(x) if isinstance(n, ast.Name)}


def wrapper_shape(repl: Replacement, target: Target, call: Call) -> Shape:
    """The before/after shape of a wrapper (module docstring).

    Raises:
        ImportRefused: the wrapper's shape has no before/after form (named in the message).
    """
    fn = cast(ast.FunctionDef, repl.node)
    tfn = cast(ast.FunctionDef, target.node)
    here = f"{Path(repl.path).name}:{repl.dotted}"
    cdef = cast(cst.FunctionDef, _libcst_def(repl))
    body = list(cast(cst.IndentedBlock, cdef.body).body)
    notes: list[str] = []
    if body and _is_docstring(body[0]) and call.index > 0:
        body, index = body[1:], call.index - 1
        notes.append(f"{here}: the wrapper's docstring is not carried (vLLM's definition keeps its own)")
    else:
        index = call.index
    stmt = fn.body[call.index]
    before, post = own_names(repl, target, body[:index], notes), body[index + 1:]
    branch_node = body[index]
    post = own_names(repl, target, post, notes)
    # the parameters the call passes: wrapper name -> vLLM's name; expressions -> rebindings
    w_pos, w_var, w_kw, w_kwarg = _params(fn)
    t_pos, t_var, t_kw, t_kwarg = _params(tfn)
    mapping: dict[str, str] = {}
    adapters: list[tuple[str, ast.expr]] = []
    targets = list(t_pos)
    if call.bound:
        if not w_pos or not t_pos:
            raise ImportRefused(f"{here}: calls the original bound ({call.what}) but has no first parameter")
        mapping[w_pos[0]] = t_pos[0]
        targets = t_pos[1:]
    forwarded_var = forwarded_kw = False
    for k, arg in enumerate(call.call.args):
        if isinstance(arg, ast.Starred):
            if isinstance(arg.value, ast.Name) and arg.value.id == w_var and k == len(call.call.args) - 1:
                forwarded_var = True
                continue
            raise ImportRefused(f"{here}: passes `{ast.unparse(arg)}` to the original: no before/after form")
        if k >= len(targets):
            if t_var is None:
                raise ImportRefused(f"{here}: passes {len(call.call.args)} positional arguments to the original, "
                                    f"which takes {len(targets)} in vllm {target.release}")
            raise ImportRefused(f"{here}: passes extra positional arguments to vLLM's *{t_var}: no before/after form")
        _bind(arg, targets[k], w_pos + w_kw, mapping, adapters, here)
    for kw in call.call.keywords:
        if kw.arg is None:
            if isinstance(kw.value, ast.Name) and kw.value.id == w_kwarg:
                forwarded_kw = True
                continue
            raise ImportRefused(f"{here}: passes `**{ast.unparse(kw.value)}` to the original: no before/after form")
        if kw.arg not in t_pos + t_kw:
            raise ImportRefused(f"{here}: passes {kw.arg}= to the original, which has no such parameter in "
                                f"vllm {target.release}")
        _bind(kw.value, kw.arg, w_pos + w_kw, mapping, adapters, here)
    del forwarded_var, forwarded_kw
    # the result: its name, and the code after it
    taken = _all_names([fn, tfn])
    if call.dispatch:
        if adapters:
            raise ImportRefused(f"{here}: hands some calls to the original with other arguments: no before/after "
                                f"form")
        from patchq.edits import _falls_through

        if _falls_through(post):
            raise ImportRefused(f"{here}: hands some calls to the original and runs code that can end without "
                                f"returning for the others: no before/after form")
        before = [*before, _negated_branch(cast(cst.If, branch_node), post)]
        name, post = "", []
        notes.append(f"{here}: hands the calls where `{ast.unparse(cast(ast.If, stmt).test)}` to the original; its "
                     f"own code runs first in vLLM's definition for the others")
    elif isinstance(stmt, ast.Return):
        name, post = "", []
    elif isinstance(stmt, ast.Expr):
        name = _fresh("result", taken)
        if post and _returns_value(tfn):
            notes.append(f"{here}: the wrapper drops the original's return value; the recorded patch returns what "
                         f"vLLM's {target.qualname} returns")
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) or \
            isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        name = cast(ast.Name, stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target).id
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        name = _fresh("result", taken)
        unpack = cst.parse_statement(f"{ast.unparse(stmt.targets[0])} = {name}\n")
        post = [unpack, *post]
    else:  # pragma: no cover - _top_call admits only these statements
        raise ImportRefused(f"{here}: uses the original's result inside `{_head(stmt)}`: no before/after form")
    # names the moved code reads must be vLLM's parameters (through the call) or its own
    unmapped = sorted((set(w_pos + w_kw) | {x for x in (w_var, w_kwarg) if x}) - set(mapping))
    used = _all_names(_code_ast(before + post))
    bad = [n for n in unmapped if n in used]
    if bad:
        raise ImportRefused(f"{here}: the code around the original reads {', '.join(bad)}, which the wrapper does not "
                            f"pass to the original as one of its parameters: vLLM's definition has no such name")
    mapping = {k: v for k, v in mapping.items() if k != v}
    before = _renamed(before, mapping)
    post = _renamed(post, mapping)
    rebind = [_adapter(t, e, mapping) for t, e in adapters]
    if any(isinstance(n, ast.Return) for s in _code_ast(before) for n in ast.walk(s)) and post:
        raise ImportRefused(f"{here}: returns early before calling the original and also works on the original's "
                            f"result: the early return would be post-processed too; write a diff")
    return Shape(_strip_leading_blank(list(before)), [x for r in rebind for x in r], name,
                 _strip_leading_blank(list(post)), notes)


def _returns_value(fn: ast.AST) -> bool:
    """Whether a function's own body returns a value somewhere (``return x``, not ``return``)."""
    def walk(node: ast.AST) -> bool:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Return) and child.value is not None and \
                    not (isinstance(child.value, ast.Constant) and child.value.value is None):
                return True
            if walk(child):
                return True
        return False

    return walk(fn)


def _negated_branch(branch: cst.If, body: Sequence[cst.BaseStatement]) -> cst.If:
    """``if not TEST:`` with ``body`` (``if TEST:`` of the wrapper, which calls the original)."""
    test = branch.test
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        neg: cst.BaseExpression = test.expression.with_changes(lpar=[], rpar=[]) \
            if isinstance(test.expression, (cst.Name, cst.Call, cst.Attribute, cst.Subscript)) else test.expression
    else:
        inner = test if isinstance(test, (cst.Name, cst.Call, cst.Attribute, cst.Subscript)) or test.lpar else \
            test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        neg = cst.UnaryOperation(operator=cst.Not(), expression=inner)
    block = cst.IndentedBlock(body=[s.with_changes(leading_lines=[]) if i == 0 and hasattr(s, "leading_lines")
                                    else s for i, s in enumerate(body)])
    return branch.with_changes(test=neg, body=block, orelse=None)


def _bind(arg: ast.expr, target_param: str, wrapper_params: list[str], mapping: dict[str, str],
          adapters: list[tuple[str, ast.expr]], here: str) -> None:
    if isinstance(arg, ast.Name) and arg.id in wrapper_params:
        if mapping.get(arg.id, target_param) != target_param:
            raise ImportRefused(f"{here}: passes {arg.id} as two of the original's parameters")
        mapping[arg.id] = target_param
    else:
        adapters.append((target_param, arg))


class _LambdaReads(ast.NodeVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.depth = 0

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_Name(self, node: ast.Name) -> None:
        if self.depth:
            self.names.add(node.id)


def _adapter(param: str, expr: ast.expr, mapping: dict[str, str]) -> list[cst.BaseStatement]:
    """``param = EXPR`` (EXPR renamed to vLLM's names); when a lambda in EXPR reads
    ``param`` itself, the value before the rebinding is kept under ``_param`` first."""
    text = ast.unparse(expr)
    stmt: cst.BaseStatement = cst.parse_statement(f"{param} = {text}\n")
    stmt = cast(cst.BaseStatement, stmt.visit(_Rename(mapping))) if mapping else stmt
    reads = _LambdaReads()
    reads.visit(_code_ast([stmt])[0].value)  # type: ignore[attr-defined]
    if param not in reads.names:
        return [stmt]
    keep = "_" + param
    value = cast(cst.Assign, cast(cst.SimpleStatementLine, stmt).body[0]).value.visit(_Rename({param: keep}))
    return [cst.parse_statement(f"{keep} = {param}\n"),
            cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(param))],
                                                     value=cast(cst.BaseExpression, value))])]


def _idempotent(stmt: ast.stmt) -> bool:
    """Running ``stmt`` twice in a row does what running it once does: assignments of
    names by call-free expressions that read none of the names assigned, maybe under a
    call-free ``if``."""
    def call_free(node: ast.AST) -> bool:
        return not any(isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr))
                       for n in ast.walk(node))

    def assigns(stmts: list[ast.stmt]) -> tuple[bool, set[str], set[str]]:
        ok, writes, reads = True, set(), set()
        for s in stmts:
            if isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets) and call_free(s.value):
                writes |= {cast(ast.Name, t).id for t in s.targets}
                reads |= _all_names([s.value])
            elif isinstance(s, ast.If) and call_free(s.test):
                a, w, r = assigns(s.body + s.orelse)
                ok, writes, reads = ok and a, writes | w, reads | r | _all_names([s.test]) - w
            else:
                return False, writes, reads
        return ok, writes, reads

    ok, writes, reads = assigns([stmt])
    return ok and not (writes & reads - _test_names(stmt))


def _test_names(stmt: ast.stmt) -> set[str]:
    return _all_names([stmt.test]) if isinstance(stmt, ast.If) else set()


def _target_body(seg: Segment) -> tuple[list[cst.BaseStatement], int]:
    """vLLM's body statements, and where code at its top goes (after the docstring)."""
    body = list(cast(cst.IndentedBlock, seg.node.body).body)
    return body, 1 if body and _is_docstring(body[0]) else 0


def place_before(target: Target, before: list[cst.BaseStatement]) -> tuple[int, list[cst.BaseStatement], list[str]]:
    """Where the wrapper's code before the original goes in vLLM's body: after the
    docstring and after the statements both start with alike (not repeated when running
    them again changes nothing: :func:`_idempotent`). Returns (index, code left, notes)."""
    body, at = _target_body(target.segment)
    skip = 0
    while skip < len(before) and at + skip < len(body) and _key(before[skip]) == _key(body[at + skip]):
        mine = _code_ast([before[skip]])[0]
        later = _code_ast(before[skip + 1:])
        from patchq.edits import scope_names

        _, later_writes, _ = scope_names(later)
        if not _idempotent(mine) or later_writes & _all_names([mine]):
            break
        skip += 1
    notes = [f"the wrapper starts with {skip} statement(s) vLLM's {target.qualname} starts with: not repeated"] \
        if skip else []
    return at + skip, before[skip:], notes


# --------------------------------------------------------------------------- the copy


def merge_block(old: Sequence[cst.BaseStatement], new: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``new`` with every statement equal to one of ``old`` by normalized AST replaced by
    ``old``'s (its text, comments and formatting), compound statements with an equal
    header merged block by block (module docstring)."""
    import difflib

    ka, kb = [_key(s) for s in old], [_key(s) for s in new]
    out: list[cst.BaseStatement] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes():
        if tag == "equal":
            out += old[i1:i2]
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for a, b in zip(old[i1:i2], new[j1:j2], strict=False):
                out.append(_merge_compound(a, b))
            continue
        out += new[j1:j2]
    return out


def _merge_compound(a: cst.BaseStatement, b: cst.BaseStatement) -> cst.BaseStatement:
    from patchq.plan.stmtpatch import sub_blocks

    if type(a) is not type(b) or not isinstance(a, cst.BaseCompoundStatement) or _header_key(a) != _header_key(b):
        return b
    ba, bb = sub_blocks(a), sub_blocks(b)
    if len(ba) != len(bb):
        return b
    bodies = {id(x): merge_block(x.body, y.body) for x, y in zip(ba, bb, strict=False)}

    class _Blocks(cst.CSTTransformer):  # every block in one pass: a rebuilt tree has new nodes
        def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                                updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
            body = bodies.get(id(original_node))
            return updated_node if body is None else updated_node.with_changes(body=body)

    return cast(cst.BaseStatement, a.visit(_Blocks()))


def _decorator_names(decos: Sequence[cst.Decorator]) -> list[str]:
    return [node_code(d.decorator).strip() for d in decos]


def _base_name(text: str) -> str:
    return text.split("(")[0].strip()


def rebinding(repl: Replacement, target: Target) -> tuple[list[str], int] | None:
    """The decorators the source's rebinding applies (``Cls.x = classmethod(f)`` ->
    ``["classmethod"]``), and its line; None when the source does not show it."""
    name = repl.node.name
    for stmt in ast.walk(repl.tree):
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        t = stmt.targets[0]
        if not (isinstance(t, ast.Attribute) and t.attr == target.name):
            continue
        decos: list[str] = []
        value = stmt.value
        while isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            decos.append(ast.unparse(value.func))
            value = value.args[0]
        if isinstance(value, ast.Name) and value.id == name:
            return decos, stmt.lineno
    return None


def new_decorators(repl: Replacement, target: Target, notes: list[str]) -> list[cst.Decorator]:
    """The decorators of the copy in vLLM's module (module docstring): the copy's own and
    those of the rebinding; vLLM's descriptor decorators when the source shows no rebinding."""
    mine = cast(cst.FunctionDef, _libcst_def(repl)).decorators
    mine = [d for d in mine if _base_name(node_code(d.decorator)) not in ("functools.wraps", "wraps")]
    seg = target.segment.node
    vllm = list(seg.decorators)
    found = rebinding(repl, target)
    if found is not None:
        outer = [cst.Decorator(decorator=cst.parse_expression(d)) for d in found[0]]
        wanted = outer + list(mine)
    else:
        keep = [d for d in vllm if _base_name(node_code(d.decorator)) in _DESCRIPTORS
                and _base_name(node_code(d.decorator)) not in {_base_name(x) for x in _decorator_names(mine)}]
        wanted = keep + list(mine)
    names = [_base_name(x) for x in _decorator_names(wanted)]
    old = [_base_name(x) for x in _decorator_names(vllm)]
    # vLLM's own text for the decorators that stay
    by_key = {_key_expr(d.decorator): d for d in vllm}
    wanted = [by_key.get(_key_expr(d.decorator), d) for d in wanted]
    dropped = [x for x in _decorator_names(vllm) if _base_name(x) not in names]
    if dropped:
        how = f"the source rebinds it undecorated (line {found[1]})" if found is not None and not found[0] else \
            f"the source rebinds it as {', '.join(found[0])}(...) (line {found[1]})" if found is not None else \
            "the replacement has none of them"
        notes.append(f"vLLM's decorator(s) {', '.join('@' + d for d in dropped)} of {target.qualname} are DROPPED: "
                     f"{how}")
    added = [x for x in names if x not in old]
    if added:
        notes.append(f"{target.qualname} gets decorator(s) {', '.join('@' + a for a in added)} (the replacement's)")
    return wanted


def _key_expr(expr: cst.BaseExpression) -> str:
    try:
        return ast.dump(ast.parse(node_code(expr).strip(), mode="eval"), include_attributes=False)
    except SyntaxError:  # pragma: no cover
        return node_code(expr)


def _strip_annotations(params: cst.Parameters) -> str:
    def bare(p: cst.Param) -> cst.Param:
        return p.with_changes(annotation=None)

    stripped = params.with_changes(
        params=[bare(p) for p in params.params], posonly_params=[bare(p) for p in params.posonly_params],
        kwonly_params=[bare(p) for p in params.kwonly_params],
        star_arg=bare(params.star_arg) if isinstance(params.star_arg, cst.Param) else params.star_arg,
        star_kwarg=bare(params.star_kwarg) if params.star_kwarg is not None else None)
    code = cst.Module(body=[]).code_for_node(stripped)
    try:
        return ast.dump(ast.parse(f"def f({code}): pass").body[0].args, include_attributes=False)  # type: ignore[attr-defined]
    except SyntaxError:  # pragma: no cover
        return code


def _with_vllm_annotations(mine: cst.Parameters, vllm: cst.Parameters, bound: set[str],
                           notes: list[str]) -> cst.Parameters:
    """The copy's parameters, each one vLLM has (by name) with vLLM's annotation; a new
    parameter's annotation that reads a name vLLM's module does not bind (``bound``) is
    left out: an annotation is no behaviour, and evaluated when the ``def`` runs it would
    make vLLM's module fail to import."""
    ann = {p.name.value: p.annotation for p in (*vllm.posonly_params, *vllm.params, *vllm.kwonly_params)}
    for star in (vllm.star_arg, vllm.star_kwarg):
        if isinstance(star, cst.Param):
            ann[star.name.value] = star.annotation

    def one(p: cst.Param) -> cst.Param:
        if p.name.value in ann:
            return p.with_changes(annotation=ann[p.name.value])
        if p.annotation is not None:
            names = _all_names([ast.parse(node_code(p.annotation.annotation).strip(), mode="eval")])
            missing = sorted(names - bound - _BUILTINS)
            if missing:
                notes.append(f"the annotation of the new parameter {p.name.value} is left out: it reads "
                             f"{', '.join(missing)}, which vLLM's module does not bind")
                tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace(""))
                return p.with_changes(annotation=None, equal=tight if p.default is not None else p.equal)
        return p

    return mine.with_changes(
        params=[one(p) for p in mine.params], posonly_params=[one(p) for p in mine.posonly_params],
        kwonly_params=[one(p) for p in mine.kwonly_params],
        star_arg=one(mine.star_arg) if isinstance(mine.star_arg, cst.Param) else mine.star_arg,
        star_kwarg=one(mine.star_kwarg) if mine.star_kwarg is not None else None)


def _no_op(mine: cst.FunctionDef, body: Sequence[cst.BaseStatement], vllm: ast.FunctionDef) -> cst.BaseStatement | None:
    """The one statement of a replacement that does nothing (``pass``, ``return``,
    ``return CONSTANT``) and reads none of its parameters, as the ``return`` to put first
    in vLLM's body; None for any other replacement, or when vLLM's function is a generator
    (a ``return`` first would make it an empty generator, not a function returning None)."""
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    small = body[0].body[0]
    if isinstance(small, cst.Pass):
        stmt: cst.BaseStatement = cst.SimpleStatementLine(body=[cst.Return()], leading_lines=body[0].leading_lines)
    elif isinstance(small, cst.Return) and (small.value is None or isinstance(small.value, (
            cst.Name, cst.Integer, cst.Float, cst.SimpleString))) and \
            (not isinstance(small.value, cst.Name) or small.value.value in ("None", "True", "False")):
        stmt = body[0]
    else:
        return None
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(vllm)):
        return None
    return stmt


def copy_definition(repl: Replacement, target: Target, notes: list[str]) -> cst.FunctionDef | cst.ClassDef:
    """vLLM's definition changed the way the copy changes it (module docstring)."""
    vllm = target.segment.node
    mine = _libcst_def(repl)
    here = f"{Path(repl.path).name}:{repl.dotted}"
    if type(mine) is not type(vllm):
        raise ImportRefused(f"{here} is a {type(mine).__name__}, vLLM's {target.qualname} a {type(vllm).__name__}")
    body = list(cast(cst.IndentedBlock, mine.body).body)
    old_body, _ = _target_body(target.segment)
    if body and _is_docstring(body[0]):
        body = body[1:]
        if not (old_body and _is_docstring(old_body[0]) and _key(old_body[0]) == _key(mine.body.body[0])):  # type: ignore[attr-defined]
            notes.append(f"{here}: the replacement's docstring is not carried (vLLM's stays)")
    body = own_names(repl, target, body, notes)
    doc = old_body[:1] if old_body and _is_docstring(old_body[0]) else []
    if isinstance(vllm, cst.FunctionDef):
        early = _no_op(cast(cst.FunctionDef, mine), body, cast(ast.FunctionDef, target.node))
        if early is not None:
            notes.append(f"{here} does nothing (`{node_code(early).strip()}`, none of its parameters read): recorded "
                         f"as that statement first in vLLM's body, vLLM's signature kept")
            return vllm.with_changes(body=vllm.body.with_changes(body=doc + [early] + old_body[len(doc):]))
    merged = doc + merge_block(old_body[len(doc):], body)
    if [_key(x) for x in merged[len(doc):]] != [_key(x) for x in body]:  # pragma: no cover - a merge bug
        raise ImportRefused(f"{here}: vLLM's text kept for the unchanged statements does not give the replacement's "
                            f"statements back (a patchq bug; nothing written)")
    if isinstance(vllm, cst.ClassDef):
        return vllm.with_changes(body=vllm.body.with_changes(body=merged))
    mine_f = cast(cst.FunctionDef, mine)
    if _strip_annotations(mine_f.params) == _strip_annotations(vllm.params):
        params = vllm.params
    else:
        tree = ast.parse(target.pristine)
        params = _with_vllm_annotations(mine_f.params, vllm.params, set(_scope("module", tree, tree.body).bindings),
                                        notes)
    return vllm.with_changes(body=vllm.body.with_changes(body=merged), params=params,
                             decorators=new_decorators(repl, target, notes),
                             asynchronous=mine_f.asynchronous)


# --------------------------------------------------------------------------- names


@dataclass
class Resolved:
    """What the names check decided: imports to add at the top of the new code, helper
    definitions to add to vLLM's module, notes."""

    imports: list[cst.BaseStatement] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _module_names(text: str) -> set[str]:
    tree = ast.parse(text)
    out: set[str] = set()
    for scope in [_scope("module", tree, tree.body)]:
        out |= set(scope.bindings)
    return out


def _import_ok(node: ast.Import | ast.ImportFrom, source: CodeSource, scan: dict[str, bool]) -> str | None:
    """None when the import works in vLLM's environment (a ``vllm`` module of the
    release, the standard library, a package the release itself imports), else why not."""
    if isinstance(node, ast.ImportFrom) and node.level:
        return "a relative import of the source project"
    module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
    top = (module or "").split(".")[0]
    if top == "vllm":
        base = (module or "").replace(".", "/")
        if not any(source.exists(r) for r in (base + ".py", base + "/__init__.py")):
            return f"{module} is not a module of vllm {source.version}"
        if isinstance(node, ast.ImportFrom):
            name = node.names[0].name
            rel = next(r for r in (base + ".py", base + "/__init__.py") if source.exists(r))
            sub = f"{base}/{name}"
            if name not in _module_names(source.read_text(rel) or "") and \
                    not any(source.exists(r) for r in (sub + ".py", sub + "/__init__.py")):
                return f"{module} does not bind {name} in vllm {source.version}"
        return None
    if top in sys.stdlib_module_names:
        return None
    if top not in scan:
        pat = re.compile(rf"^\s*(import|from)\s+{re.escape(top)}\b", re.M)
        scan[top] = any(pat.search(source.read_text(r) or "") for r in source.py_files())
    return None if scan[top] else f"{top} is a package vLLM {source.version} does not use"


def resolve_names(repl: Replacement, target: Target, patched: str, runtime_names: Iterable[str] = ()) -> Resolved:
    """Decide, for each name the new code reads that vLLM's module does not bind, what to
    do (module docstring).

    Raises:
        ImportRefused: a name the runtime does not provide, named with its line and binder.
    """
    out = Resolved()
    allowed = set(runtime_names)
    scopes = repl.scopes
    scan: dict[str, bool] = {}
    refused: list[str] = []
    orig = saved_originals(repl, target)
    for name in importer.undefined_in_result(target.pristine, patched):
        if name in allowed:
            continue
        b = next((s.bindings[name] for s in scopes if name in s.bindings), None)
        if b is None:
            refused.append(f"`{name}` is bound nowhere in {Path(repl.path).name} nor in vLLM's {target.relpath}")
            continue
        where = repl.where(b)
        if name in orig.names:
            refused.append(f"`{name}` is the saved original ({where}): it exists only in the monkeypatch module")
        elif b.what == "import":
            why = _import_ok(cast(ast.Import, b.node), target.source, scan)
            if why is None:
                out.imports.append(cst.parse_statement(ast.unparse(cast(ast.AST, b.node)) + "\n"))
                out.notes.append(f"`{name}` is imported where the new code uses it, as {where} imports it "
                                 f"(`{ast.unparse(cast(ast.AST, b.node))}`)")
            else:
                refused.append(f"`{name}` is imported at {where} (`{ast.unparse(cast(ast.AST, b.node))}`): {why}")
        elif b.what == "def" and isinstance(b.node, _FUNCS):
            out.helpers.append(name)
        elif b.scope != "module":
            refused.append(f"`{name}` is {_a(b.what)} of the enclosing {b.scope} ({where}), a closure variable: "
                           f"vLLM's {target.relpath} has no such name")
        else:
            refused.append(f"`{name}` is {_a(b.what)} of {Path(repl.path).name} ({where}): vLLM's {target.relpath} "
                           f"has no such name")
    out.notes += _closure_notes(repl, target, patched)
    if refused:
        raise ImportRefused(f"{Path(repl.path).name}:{repl.dotted}: the new code reads names the runtime does not "
                            f"provide (nothing written; the patched vLLM would raise NameError): "
                            + "; ".join(refused)
                            + ". Write a diff that defines or imports them in vLLM's module, or pass "
                              "--runtime-name NAME for a name something really provides at run time")
    return out


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _closure_notes(repl: Replacement, target: Target, patched: str) -> list[str]:
    """A note per name the new code reads that the source binds in a function enclosing
    the replacement (a closure variable) while vLLM's module binds it too: the patched code
    reads vLLM's, not the closure's."""
    from patchq.edits import scope_names

    new = ast_index(patched).get(target.qualname, [])
    if len(new) != 1 or not isinstance(new[0], _FUNCS):
        return []
    loads_new, _, _ = scope_names(new[0].body)
    loads_old, _, _ = scope_names(getattr(target.node, "body", []))
    out = []
    for name in sorted(loads_new - loads_old):
        b = next((sc.bindings[name] for sc in repl.scopes[:-1] if name in sc.bindings), None)
        if b is not None:
            out.append(f"`{name}` is {_a(b.what)} of the enclosing {b.scope} ({repl.where(b)}), a closure variable; "
                       f"in vLLM's {target.relpath} the new code reads the module's own `{name}`")
    return out


def helper_text(repl: Replacement, name: str) -> str:
    """The source of a helper function the source defines, at column 0."""
    scopes = repl.scopes
    b = next(s.bindings[name] for s in scopes if name in s.bindings)
    node = cast(ast.stmt, b.node)
    lines = repl.text.splitlines(keepends=True)
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return textwrap.dedent("".join(lines[first - 1:node.end_lineno]))


# --------------------------------------------------------------------------- attributes


def class_members(target: Target) -> set[str] | None:
    """The members vLLM's class of ``target`` has (its body, ``self.x = ...`` in its
    methods, its bases defined in the same module, recursively); None when a base is
    defined elsewhere or the class has ``__getattr__`` (not known statically)."""
    if "." not in target.qualname:
        return None
    from patchq.plan.validate import class_members as members

    return members(target.pristine, target.qualname.rsplit(".", 1)[0])


def undefined_self_calls(code_ast: Sequence[ast.stmt], me: str, members: set[str]) -> list[tuple[str, int]]:
    """``me.m(...)`` calls in the code whose ``m`` is not a member (name, line)."""
    out = []
    for s in code_ast:
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id == me and n.func.attr not in members and not n.func.attr.startswith("__"):
                out.append((n.func.attr, n.lineno))
    return out


# --------------------------------------------------------------------------- the import


@dataclass
class Meant:
    """The change a monkeypatch means: vLLM's module without and with the result wrapper."""

    middle: str
    final: str
    result_op: dict | None
    notes: list[str]


def _render(target: Target, new_def: cst.CSTNode) -> str:
    return splice(target.pristine, target.segment, target.segment.render(cast(cst.FunctionDef, new_def)))


def _with_helpers(text: str, target: Target, helpers: list[str], repl: Replacement) -> str:
    """``text`` with the source's helper functions placed right before the (top-level)
    definition the patched one is or belongs to."""
    if not helpers:
        return text
    top = target.qualname.split(".")[0]
    node = ast_index(text)[top][0]
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    lines = text.splitlines(keepends=True)
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    block = "".join(helper_text(repl, h) + "\n\n" for h in helpers)
    return "".join(lines[:first - 1]) + block + "".join(lines[first - 1:])


def meant_change(repl: Replacement, target: Target, runtime_names: Iterable[str] = ()) -> Meant:
    """vLLM's module changed the way the monkeypatch means (module docstring).

    Raises:
        ImportRefused: the monkeypatch has no faithful statement-level form.
    """
    here = f"{Path(repl.path).name}:{repl.dotted}"
    orig = saved_originals(repl, target)
    calls, deep = _calls(repl, target, orig)
    notes: list[str] = []
    if deep:
        raise ImportRefused(f"{here}: {deep[0]}: no before/after form (write a diff of what it means)")
    if len(calls) > 1:
        raise ImportRefused(f"{here} calls the original {len(calls)} times (lines "
                            f"{', '.join(str(c.call.lineno) for c in calls)}): no before/after form")
    me = None
    if isinstance(target.node, _FUNCS):
        a = target.node.args
        first = (a.posonlyargs + a.args)[:1]
        me = first[0].arg if first and target.kind in ("method", "classmethod") else None
    extra: list[cst.BaseStatement] = []
    import_notes: list[str] = []
    for _round in range(3):
        notes = []
        if calls:
            middle, final, result_op, notes = _wrapper_texts(repl, target, calls[0], extra, here)
        else:
            new_def = copy_definition(repl, target, notes)
            if extra:
                body = list(cast(cst.IndentedBlock, new_def.body).body)
                at = 1 if body and _is_docstring(body[0]) else 0
                new_def = new_def.with_changes(body=new_def.body.with_changes(body=body[:at] + extra + body[at:]))
            middle = final = _render(target, new_def)
            result_op = None
        got = resolve_names(repl, target, final, runtime_names)
        have = {node_code(x) for x in extra}
        new = [s for s in got.imports if node_code(s) not in have]
        import_notes += got.notes
        if new:
            extra += new
            continue
        if got.helpers:
            middle = _with_helpers(middle, target, got.helpers, repl)
            final = _with_helpers(final, target, got.helpers, repl)
            more = resolve_names(repl, target, final, runtime_names)
            if more.imports or more.helpers:
                needs = [node_code(s).strip() for s in more.imports] + more.helpers
                raise ImportRefused(f"{here}: helper(s) {', '.join(got.helpers)} of {Path(repl.path).name} need "
                                    f"{', '.join(needs)}, which vLLM's {target.relpath} lacks: write a diff")
            notes.append(f"helper(s) {', '.join(got.helpers)} defined by {Path(repl.path).name} are added to "
                         f"vLLM's {target.relpath}")
        break
    else:  # pragma: no cover - each round adds imports; three rounds settle any real source
        raise ImportRefused(f"{here}: the imports the new code needs do not settle")
    notes += list(dict.fromkeys(import_notes))
    if me is not None:
        _check_self_calls(target, final, me, here, notes)
    return Meant(middle, final, result_op, notes)


def _wrapper_texts(repl: Replacement, target: Target, call: Call, extra: list[cst.BaseStatement],
                   here: str) -> tuple[str, str, dict | None, list[str]]:
    """(module without the result wrapper, with it, the result operation or None, notes)
    of a wrapper; ``extra``: imports the new code needs, placed with the code that uses them."""
    from patchq.edits import wrap_result

    shape = wrapper_shape(repl, target, call)
    odd = [d for d in target.decorators if _base_name(d) not in _DESCRIPTORS]
    if odd and (shape.before or shape.adapters or shape.post):
        raise ImportRefused(f"{here} wraps vLLM's {target.qualname}, which is decorated @{odd[0]}: its code "
                            f"would run inside the decorator, where the wrapper runs outside; write a diff")
    notes = [f"{here} wraps vLLM's {target.qualname} ({call.what}): the code around the call becomes "
             f"statement edits of vLLM's definition"] + shape.notes
    at, before, placed = place_before(target, shape.before)
    notes += placed
    if not before and not shape.adapters and not shape.post:
        raise ImportRefused(f"{here} only calls the original: there is no change to record")
    uses_before = _all_names(_code_ast(before + shape.adapters))
    first = [s for s in extra if _bound(s) & uses_before or not shape.post]
    post = [s for s in extra if s not in first] + shape.post
    body, _ = _target_body(target.segment)
    new_body = body[:at] + first + before + shape.adapters + body[at:]
    node = target.segment.node
    new_def = node.with_changes(body=node.body.with_changes(body=new_body))
    result_op = None
    final_def: cst.CSTNode = new_def
    if post:
        result_op = {"op": "result", "name": shape.name, "new": "".join(node_code(s) for s in post)}
        try:
            final_def = wrap_result(cast(cst.FunctionDef, new_def), shape.name, post)
        except ValueError as exc:
            raise ImportRefused(f"{here}: the code after the original cannot wrap vLLM's result: {exc}") from None
    _check_semantics(target, shape, here)
    return _render(target, new_def), _render(target, final_def), result_op, notes


def _bound(stmt: cst.BaseStatement) -> set[str]:
    from patchq.edits import scope_names

    return scope_names(_code_ast([stmt]))[1]


def _check_semantics(target: Target, shape: Shape, here: str) -> None:
    """The moved code means in vLLM's body what it meant in the wrapper: the names it binds
    are not names vLLM's definition reads from outside (they would become local to it),
    and the parameters the code after the original reads are not rebound by vLLM's body.

    Raises:
        ImportRefused: naming the names.
    """
    from patchq.edits import scope_names

    tfn = cast(ast.FunctionDef, target.node)
    loads, stores, _ = scope_names(tfn.body)
    t_pos, t_var, t_kw, t_kwarg = _params(tfn)
    params = set(t_pos + t_kw) | {x for x in (t_var, t_kwarg) if x}
    free = loads - stores - params
    _, b_stores, _ = scope_names(_code_ast(shape.before + shape.adapters))
    p_loads, p_stores, _ = scope_names(_code_ast(shape.post))
    clash = sorted((b_stores | p_stores | ({shape.name} if shape.post else set())) & free)
    if clash:
        raise ImportRefused(f"{here}: the wrapper's code binds {', '.join(clash)}, which vLLM's {target.qualname} "
                            f"reads from its module or builtins: moved into it, the name would become local to it")
    rebound = sorted(p_loads & params & stores)
    if rebound:
        raise ImportRefused(f"{here}: the code after the original reads {', '.join(rebound)}, which vLLM's "
                            f"{target.qualname} rebinds before it returns: it would see another value")


def _check_self_calls(target: Target, final: str, me: str, here: str, notes: list[str]) -> None:
    """Refuse a call ``me.m(...)`` the new code adds of a method vLLM's class does not have
    (:func:`patchq.plan.validate.class_members`); where its members are not known
    statically (a base defined elsewhere), note each added call the class body lacks."""
    members = class_members(target)
    new = ast_index(final).get(target.qualname, [])
    if len(new) != 1:  # pragma: no cover
        return
    if members is None:
        cls = target.qualname.rsplit(".", 1)[0]
        own = {n.name for c in ast_index(target.pristine).get(cls, []) for n in ast.walk(c) if isinstance(n, _DEFS)}
        own |= {n.attr for c in ast_index(target.pristine).get(cls, []) for n in ast.walk(c)
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
        old = {n for n, _ in undefined_self_calls([target.node], me, own)}
        for n, _ in undefined_self_calls([new[0]], me, own):
            if n not in old:
                notes.append(f"{here}: the new code calls `{me}.{n}(...)`, which vLLM's {cls} body does not define; "
                             f"its bases are not known statically: make sure one of them has it in every release")
        return
    old_calls = {n for n, _ in undefined_self_calls([target.node], me, members)}
    bad = [(n, line) for n, line in undefined_self_calls([new[0]], me, members) if n not in old_calls]
    if bad:
        n, line = bad[0]
        raise ImportRefused(f"{here}: the new code calls `{me}.{n}(...)` ({target.relpath}:{line} once patched), "
                            f"which vLLM's {target.qualname.rsplit('.', 1)[0]} does not define in vllm "
                            f"{target.release}: it would raise AttributeError (a method only the source project "
                            f"adds, or the original saved under another name)")


def build(replacement: str, replaces: str, release: str, patch_id: str,
          runtime_names: Iterable[str] = ()) -> tuple[ImportPlan, list[str]]:
    """The :class:`patchq.authoring.importer.ImportPlan` of a monkeypatch import, and the
    notes (module docstring). Nothing is written.

    Raises:
        UsageError: a malformed argument, or a name not found.
        ImportRefused: no faithful statement-level form, or a name the runtime lacks.
    """
    from patchq.plan import diffs

    text, name, path, line = read_replacement(replacement)
    repl = find_replacement(text, name, path, line)
    target = find_target(replaces, release)
    if repl.node.name != target.name and not isinstance(repl.node, ast.ClassDef):
        pre = [f"the replacement {repl.dotted} is recorded as vLLM's {target.qualname} (the name it rebinds)"]
    else:
        pre = []
    if any(isinstance(n, _FUNCS) for n in repl.chain):
        outer = next(n for n in repl.chain if isinstance(n, _FUNCS))
        pre.append(f"{repl.dotted} is defined inside {outer.name}() ({Path(path).name}:{repl.node.lineno})")
    meant = meant_change(repl, target, runtime_names)
    rel = target.relpath
    source_name = Path(path).name
    if meant.middle != target.pristine:
        plan = importer.build(diffs.unified(rel, target.pristine, meant.middle), patch_id, release,
                              source_name=source_name, runtime_names=runtime_names)
    else:
        plan = importer.ImportPlan(patch_id, release, False, source_name, [], [], {}, {})
    if meant.result_op is not None:
        _add_result(plan, target, meant)
    plan.notes[:0] = pre + meant.notes
    return plan, pre + meant.notes


def _add_result(plan: ImportPlan, target: Target, meant: Meant) -> None:
    """Put the result wrapper on the definition's anchor (made when the rest changed nothing)."""
    from patchq.plan.anchors import fingerprint

    rel, q = target.relpath, target.qualname
    anchor = next((a for a in plan.anchors if a.relpath == rel and a.qualname == q), None)
    if anchor is None:
        taken = {a.anchor_id for a in plan.anchors}
        anchor = importer.AnchorOut(importer._anchor_id(q, taken), rel, q, fingerprint(target.segment.node), [])
        plan.anchors.append(anchor)
    if meant.result_op is not None:
        anchor.ops.append(meant.result_op)
    plan.pristine.setdefault(rel, target.pristine)
    plan.patched[rel] = meant.final
    if not any(q in h.qualnames for h in plan.hunks):
        plan.hunks.append(importer.HunkInfo(rel, f"result of {q}", [q], level="statement"))


__all__ = ["Meant", "Replacement", "Target", "build", "find_replacement", "find_target", "meant_change",
           "merge_block", "read_replacement"]
