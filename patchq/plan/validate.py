"""Validating an edit by what it means, not only by whether it compiles.

The engine (:mod:`patchq.plan.engine`) runs these checks on every edit; each failure is
an :class:`AnchorError` of kind ``invalid`` whose message starts with the name of the
check that refused the edit:

``result check``
    a transform must return a libcst definition of the same kind (``def``/``async
    def``/``class``) and name as the anchored one (a ``FlattenSentinel`` holding exactly
    one such definition is accepted: statements placed beside it), or, for an anchor the
    patch lists in ``removes=[...]``, ``libcst.RemovalSentinel.REMOVE``. ``None``, a
    string, a module or any other value is refused with one line naming the patch.
``docstring check``
    a statement pattern must not match a docstring (or any bare string statement): the
    edit would land in documentation.
``undefined-name check`` / ``redefinition check`` (pyflakes)
    the patched definition is checked with pyflakes in its module's context against the
    same definition before the patch: a name that becomes undefined (unless the patch
    declares it in ``runtime_names=[...]``) or a name defined twice where it was not
    (pyflakes' ``RedefinedWhileUnused``) refuses the edit. A name used only in a local
    variable's annotation (never evaluated, PEP 526) is no undefined name.
``undefined-method check``
    a call ``self.m(...)`` the patch adds to a method of a class that does not define
    ``m`` (its members known statically: :func:`class_members`) refuses the edit: it
    would raise AttributeError on every call.
``duplicate-member check``
    a class or function body must never get a second definition of a name
    (:func:`patchq.plan.survival.duplicate_members`).

The module context is the module's text with every other top-level ``def``/``class``
reduced to a one-line stub (their names stay bound, their bodies are not analysed); a
method is analysed inside its class with the other members stubbed, and a class with its
unchanged members stubbed, so a check costs a pyflakes pass over what the patch changed,
not the module.
"""

from __future__ import annotations

import ast
import functools
import keyword
import re
import sys
from collections.abc import Iterable
from typing import NamedTuple

import libcst as cst

from patchq.errors import AnchorError


def check_result(patch_id: str, anchor: str, qualname: str, old: cst.CSTNode, new: object,
                 removes: Iterable[str]) -> None:
    """The result check (module docstring).

    Raises:
        AnchorError: kind ``invalid``, naming the patch, the anchor and what came back.
    """
    if new is cst.RemovalSentinel.REMOVE:
        if anchor in set(removes):
            return
        raise AnchorError(f"result check: patch {patch_id}, anchor {anchor}: the transform removes {qualname}; "
                          f"declare removes=['{anchor}'] in patch(...) if that is intended",
                          kind="invalid", anchor=anchor)
    if isinstance(old, cst.Module):  # a module-level anchor gives back the module
        if isinstance(new, cst.Module):
            return
        raise AnchorError(f"result check: patch {patch_id}, anchor {anchor}: the transform of a module-level anchor "
                          f"returned {'None' if new is None else 'a ' + type(new).__name__}, not the libcst Module",
                          kind="invalid", anchor=anchor)
    _check_definition(patch_id, anchor, qualname, old, new)


def _check_definition(patch_id: str, anchor: str, qualname: str, old: cst.CSTNode, new: object) -> None:
    """A definition's transform returned one definition of its kind and name (alone, or
    in a FlattenSentinel beside other statements). Raises AnchorError (``invalid``)."""
    kind = type(old).__name__
    name = getattr(getattr(old, "name", None), "value", None)
    if isinstance(new, (cst.FunctionDef, cst.ClassDef)):
        defs = [new]
    elif isinstance(new, cst.FlattenSentinel):
        defs = [n for n in new.nodes if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
    else:
        what = "None" if new is None else f"a {type(new).__name__}"
        raise AnchorError(f"result check: patch {patch_id}, anchor {anchor}: the transform returned {what}, not a "
                          f"definition of {qualname} (a transform returns the edited libcst {kind})",
                          kind="invalid", anchor=anchor)
    same = [d for d in defs if type(d) is type(old) and getattr(getattr(d, "name", None), "value", None) == name
            and _is_async(d) == _is_async(old)]
    if len(defs) == 1 and len(same) == 1 or isinstance(new, cst.FlattenSentinel) and len(same) == 1:
        return
    got = ", ".join(f"{type(d).__name__} {getattr(getattr(d, 'name', None), 'value', '?')}" for d in defs) or "nothing"
    raise AnchorError(f"result check: patch {patch_id}, anchor {anchor}: the transform returned {got}, not the "
                      f"{kind} {name} it was given", kind="invalid", anchor=anchor)


def _is_async(node: object) -> bool:
    return getattr(node, "asynchronous", None) is not None


def check_docstring_matches(patch_id: str, anchor: str, qualname: str, matches: Iterable[cst.CSTNode]) -> None:
    """The docstring check (module docstring).

    Raises:
        AnchorError: kind ``invalid`` when a matched statement is a bare string.
    """
    for node in matches:
        if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Expr) \
                and isinstance(node.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            raise AnchorError(f"docstring check: patch {patch_id}, anchor {anchor}: the statement pattern matches a "
                              f"docstring (a bare string) in {qualname}; anchor on code, not documentation",
                              kind="invalid", anchor=anchor)


# ---------------------------------------------------------------------------
# pyflakes in module context

_REFUSED = {"UndefinedName": "undefined-name check", "UndefinedLocal": "undefined-name check",
            "UndefinedExport": "undefined-name check", "RedefinedWhileUnused": "redefinition check"}


def _is_comment(line: str) -> bool:
    """A line that can only be a comment right above a definition: it starts with ``#``
    and holds no quote (a string or bracket open there would have to close before the
    ``def`` or ``class`` line, which only a quote on such a line can do)."""
    return line.lstrip().startswith("#") and "'" not in line and '"' not in line


def _skeleton(text: str, entries: Iterable) -> str | None:
    """``text`` with every module-level ``def``/``class`` (an index entry at column 0,
    decorators and the comment lines right above included) reduced to a one-line stub:
    parsing it gives the module's other statements exactly as parsing ``text`` does, at a
    fraction of the cost, and the same skeleton whatever a patch changed inside the
    definitions or wrote above them (sentinels). None when the entries do not tile the
    text."""
    from patchq.plan.definitions import split_lines

    lines = split_lines(text)
    out: list[str] = []
    pos = 1
    for e in sorted((e for e in entries if e.col == 0), key=lambda e: e.start):
        if e.start < pos or e.end > len(lines) or "." in e.qualname:
            return None
        start = e.start
        while start - 1 > pos - 1 and _is_comment(lines[start - 2]):
            start -= 1  # the comments right above it (patchq's sentinels): the same stub without them
        out += lines[pos - 1:start - 1]
        out.append(f"class {e.qualname}:\n    pass\n" if e.kind == "class" else f"def {e.qualname}():\n    pass\n")
        pos = e.end + 1
    out += lines[pos - 1:]
    return "".join(out)


_DEFS_AND_CLASSES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class _Piece(NamedTuple):
    """One top-level statement of a module's context (its definitions stubbed)."""

    stmt: ast.stmt | None  #: the statement; None once the pieces are known to join exactly
    is_def: bool  #: a (stubbed) ``def`` or ``class``
    name: str | None  #: the name of a stubbed definition, else None
    code: str  #: ast.unparse of the statement when it is not the module's first
    first: str  #: ... when it is (a string expression is then written as a docstring)
    words: frozenset[str]  #: the identifiers its code spells (strings included)
    always: bool  #: a ``__future__`` or star import: kept whatever a definition names


#: An identifier, as a word of source text (a superset: words inside strings count too).
_WORD = re.compile(r"[^\W\d]\w*")
#: Words that are never names (soft keywords such as ``match`` or ``type`` can be).
_KEYWORDS = frozenset(keyword.kwlist)


def _words(code: str) -> frozenset[str]:
    """The names ``code`` may spell: its identifier-shaped words, hard keywords aside."""
    return frozenset(_WORD.findall(code)) - _KEYWORDS


@functools.lru_cache(maxsize=256)
def _pieces(source: str) -> tuple[list[_Piece], bool] | None:
    """The top-level statements of a module text or skeleton, each rendered once, and
    whether joining them as :func:`ast.unparse` does (one line break before a statement,
    two before a definition) gives what it gives for the whole module: then the context
    without any one definition is a join of pieces, not a render of the whole module per
    patch. None when ``source`` does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    pieces = []
    for stmt in tree.body:
        name = stmt.name if isinstance(stmt, _DEFS_AND_CLASSES) else None
        node = ast.fix_missing_locations(_stub(stmt)) if name is not None else stmt  # type: ignore[arg-type]
        code = ast.unparse(node)
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
            isinstance(node.value.value, str)
        first = ast.unparse(ast.Module(body=[node], type_ignores=[])) if docstring else code
        always = isinstance(node, ast.ImportFrom) and (node.module == "__future__" or
                                                       any(a.name == "*" for a in node.names))
        pieces.append(_Piece(node, name is not None, name, code, first, _words(code), always))
    whole = ast.unparse(ast.fix_missing_locations(ast.Module(body=_stmts(pieces), type_ignores=[])))
    if _join(pieces) != whole:
        return pieces, False
    return [p._replace(stmt=None) for p in pieces], True  # kept for many modules: the text is enough


def _stmts(pieces: list[_Piece]) -> list[ast.stmt]:
    """The statements of pieces that keep them (not known to join exactly)."""
    return [p.stmt for p in pieces if p.stmt is not None]


def _join(pieces: list[_Piece], names: set[str] | None = None) -> str:
    """The pieces as :func:`ast.unparse` writes their module; with ``names``, a statement
    spelling none of them (and not ``always`` kept) is written as as many empty lines."""
    out: list[str] = []
    for i, p in enumerate(pieces):
        code = p.first if i == 0 else p.code
        if names is not None and not p.always and p.words.isdisjoint(names):
            code = "\n" * code.count("\n")
        if i:
            out.append("\n\n" if p.is_def else "\n")
        out.append(code)
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _context_cached(source: str, top: str) -> tuple[list[_Piece], bool] | None:
    """The pieces of :func:`_context` for one module text or skeleton and the definition
    left out, and whether :func:`_join` writes them exactly (memoized: the patches of one
    module that edit only its definitions share one skeleton, so it is parsed once)."""
    got = _pieces(source)
    if got is None:
        return None
    pieces, exact = got
    kept = [p for p in pieces if p.name != top]
    return kept, exact


def _context_pieces(text: str, top: str, entries: Iterable | None) -> tuple[list[_Piece], bool] | None:
    skeleton = _skeleton(text, entries) if entries is not None else None
    got = _context_cached(skeleton, top) if skeleton is not None else None
    return got if got is not None else _context_cached(text, top)


def _render(pieces: list[_Piece], exact: bool, names: set[str] | None = None) -> str:
    """The context's code (:func:`_context`), every statement spelling none of ``names``
    left empty (:func:`_relevant`); rendered whole when joining is not known to be exact."""
    if not exact:
        code = ast.unparse(ast.fix_missing_locations(ast.Module(body=_stmts(pieces), type_ignores=[])))
        return _relevant(code + "\n", names) if names is not None else code + "\n"
    return _join(pieces, names) + "\n"


def _context(text: str, top: str, entries: Iterable | None = None) -> tuple[str, int] | None:
    """(context text, number of its lines) of a module without the top-level definition
    ``top``, every other top-level definition reduced to a stub; None when it does not parse.

    ``entries``: the text's definition entries (:mod:`patchq.plan.definitions`), when the
    caller has them: the module is then parsed with its definitions already stubbed
    (:func:`_skeleton`), which gives the same context."""
    got = _context_pieces(text, top, entries)
    if got is None:
        return None
    code = _render(*got)
    return code, code.count("\n")


def _relevant(code: str, names: set[str]) -> str:
    """The context ``code`` with every top-level statement that spells none of ``names`` as
    a word blanked (its lines kept empty, so every other line keeps its number).

    pyflakes' messages about a definition placed after the context depend on the context
    only through the bindings of the names the definition spells (bound, read, deleted,
    redefined; in string annotations too), their statements' place among the module's
    branches, whether an earlier statement read them, and on ``__future__`` and star
    imports: a statement that spells none of those names cannot change any of them (its
    function bodies, run after the module's, can only mark names it spells as used), so
    the messages at the definition's lines are the same with or without it, at a
    fraction of the cost on a large module (a check costs a pass over what the patch
    touches and what that names)."""
    lines = code.split("\n")
    for stmt in ast.parse(code).body:
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        last = stmt.end_lineno or stmt.lineno
        always = isinstance(stmt, ast.ImportFrom) and (stmt.module == "__future__" or
                                                       any(a.name == "*" for a in stmt.names))
        if not always and names.isdisjoint(_words("\n".join(lines[first - 1:last]))):
            lines[first - 1:last] = [""] * (last - first + 1)
    return "\n".join(lines)


def _messages(code: str, first_line: int) -> list[tuple[str, tuple[str, ...], str]]:
    """(message class name, its first string argument or (), message text) of each
    refused pyflakes message after line ``first_line`` (memoized: a matrix checks the same
    definitions in the same contexts release after release)."""
    return list(_messages_cached(code, first_line))


@functools.lru_cache(maxsize=2048)
def _messages_cached(code: str, first_line: int) -> tuple[tuple[str, tuple[str, ...], str], ...]:
    return tuple(_pyflakes(code, first_line))


def _pyflakes(code: str, first_line: int) -> list[tuple[str, tuple[str, ...], str]]:
    from pyflakes import checker

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    w = checker.Checker(tree, filename="<patchq>")
    out: list[tuple[str, tuple[str, ...], str]] = []
    lazy = lazy_annotations(tree)
    for m in w.messages:
        if type(m).__name__ == "UndefinedName" and _inside(lazy, m.lineno, m.col):
            continue  # a local variable's annotation: never evaluated (PEP 526)
        if m.lineno > first_line and type(m).__name__ in _REFUSED:
            args = tuple(a for a in m.message_args if isinstance(a, str))
            out.append((type(m).__name__, args[:1], m.message % m.message_args))
    return out


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

Span = tuple[tuple[int, int], tuple[int, int]]


def lazy_annotations(tree: ast.AST) -> list[Span]:
    """((line, col), (end line, end col)) of every annotation Python never evaluates: the
    annotation of a local variable in a function body (``x: Optional[int] = 0``; PEP 526).
    A name used only there is no name the code needs at run time. Parameter, return and
    class-level annotations are evaluated (at ``def`` time, or by dataclasses and pydantic)
    and are not listed."""
    out: list[Span] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.AnnAssign) and in_function:
                a = child.annotation
                out.append(((a.lineno, a.col_offset), (a.end_lineno or a.lineno, a.end_col_offset or 0)))
            walk(child, (in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))
                 and not isinstance(child, ast.ClassDef))

    walk(tree, False)
    return out


def _inside(spans: list[Span], line: int, col: int) -> bool:
    return any(a <= (line, col) < b for a, b in spans)


#: class decorators that add no attribute but dunders (vLLM's ``@config`` is a pydantic dataclass)
_PLAIN_CLASS_DECORATORS = frozenset({"dataclass", "dataclasses.dataclass", "config", "final", "typing.final",
                                     "pydantic.dataclasses.dataclass", "total_ordering", "functools.total_ordering"})


def _decorator_name(node: ast.expr) -> str:
    return ast.unparse(node.func if isinstance(node, ast.Call) else node)


def class_members(text: str, qualname: str) -> set[str] | None:
    """The attribute names instances of class ``qualname`` of the module ``text`` have,
    known statically: its body's definitions and assignments (fields), the ``self.x``
    its methods assign, the members of ``object``, and those of its bases when each is a
    class of the same module (recursively). None when that is not known: a base defined
    elsewhere or computed, a metaclass, or ``__getattr__``/``__getattribute__``.
    """
    from patchq.plan.anchors import ast_index

    try:
        index = ast_index(text)
    except SyntaxError:
        return None
    out = set(dir(object))
    seen: set[str] = set()

    def add(q: str) -> bool:
        if q in seen:
            return True
        seen.add(q)
        found = index.get(q, [])
        if len(found) != 1 or not isinstance(found[0], ast.ClassDef):
            return False
        cls = found[0]
        if cls.keywords or any(_decorator_name(d) not in _PLAIN_CLASS_DECORATORS for d in cls.decorator_list):
            return False  # a metaclass or a decorator may add members
        if {s.name for s in cls.body if isinstance(s, _DEFS)} & {"__getattr__", "__getattribute__"}:
            return False
        for stmt in cls.body:
            if isinstance(stmt, _DEFS):
                out.add(stmt.name)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                    out.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            for n in ast.walk(stmt):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name):
                    out.add(n.attr)
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else None
            if name in ("object", "ABC", "Generic", "Protocol") or \
                    isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name) and base.value.id == "Generic":
                continue
            if name is None or not add(name):
                return False
        return True

    return out if add(qualname) else None


def undefined_self_calls(patch_id: str, qualname: str, module_text: str, before: ast.stmt, after: ast.stmt,
                         relpath: str = "") -> None:
    """The undefined-method check: a call ``self.m(...)`` the patch adds to method
    ``qualname`` (``C.m``) of a method ``m`` that class ``C`` does not have in this module
    (:func:`class_members`; skipped when its members are not known statically) would raise
    AttributeError on every call (a method only another project adds, or only another
    release has).

    Raises:
        AnchorError: kind ``invalid``, naming the method and the class.
    """
    if qualname.count(".") != 1 or not isinstance(after, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    args = after.args.posonlyargs + after.args.args
    if not args or any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in after.decorator_list):
        return
    me = args[0].arg

    def calls(node: ast.AST) -> list[str]:
        return [n.func.attr for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name) and n.func.value.id == me]

    old = set(calls(before))
    new = [a for a in calls(after) if a not in old and not a.startswith("__")]
    if not new:
        return
    members = class_members(module_text, qualname.split(".")[0])
    if members is None:
        return
    missing = sorted({a for a in new if a not in members})
    if missing:
        from patchq.plan.anchors import ast_index

        cls = qualname.split(".")[0]
        found = ast_index(module_text).get(cls) or []
        where = f" ({relpath}:{found[0].lineno})" if relpath and found else ""
        raise AnchorError(f"undefined-method check: patch {patch_id} in {qualname}: calls "
                          f"{', '.join(f'{me}.{a}()' for a in missing)}, which {cls}{where} does not define "
                          f"here: it would raise AttributeError", kind="invalid")


def _stub(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.stmt:
    """``class Name: pass`` or ``def name(): pass`` (the name stays bound, nothing else)."""
    if isinstance(node, ast.ClassDef):
        return ast.ClassDef(name=node.name, bases=[], keywords=[], body=[ast.Pass()], decorator_list=[])
    args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                         defaults=[])
    return ast.FunctionDef(name=node.name, args=args, body=[ast.Pass()], decorator_list=[], returns=None)


def _with_body(cls: ast.ClassDef, body: list) -> ast.ClassDef:
    new = ast.ClassDef(name=cls.name, bases=cls.bases, keywords=cls.keywords, body=body or [ast.Pass()],
                       decorator_list=cls.decorator_list)
    if sys.version_info >= (3, 12) and hasattr(cls, "type_params"):  # Python 3.12+
        new.type_params = cls.type_params
    return new


def _shrink_pair(before: ast.stmt, after: ast.stmt) -> tuple[ast.stmt, ast.stmt]:
    """Two versions of a class with the members they share unchanged reduced to stubs
    (their names stay bound; only what the patch changed is analysed)."""
    if not (isinstance(before, ast.ClassDef) and isinstance(after, ast.ClassDef)):
        return before, after
    from patchq.plan.survival import statement_key

    same = {statement_key(m) for m in before.body} & {statement_key(m) for m in after.body}

    def shrink(cls):
        return _with_body(cls, [_stub(m) if isinstance(m, _DEFS) and statement_key(m) in same else m
                                for m in cls.body])

    return shrink(before), shrink(after)


def _in_class(cls: ast.ClassDef, member: str, node: ast.stmt) -> ast.ClassDef:
    """``cls`` with every other member stubbed and ``member`` replaced by ``node``."""
    body, placed = [], False
    for m in cls.body:
        if isinstance(m, _DEFS) and m.name == member and not placed:
            body.append(node)
            placed = True
        elif isinstance(m, _DEFS):
            body.append(_stub(m))
        else:
            body.append(m)
    if not placed:
        body.append(node)
    return _with_body(cls, body)


def check_names(patch_id: str, qualname: str, module_text_before: str, before: ast.stmt, after: ast.stmt,
                owner: ast.ClassDef | None, runtime_names: Iterable[str], entries: Iterable | None = None) -> None:
    """The undefined-name and redefinition checks (pyflakes, module docstring).

    Args:
        qualname: the patched definition (``f``, ``C`` or ``C.m``; deeper ones are not
            checked).
        module_text_before: the module's text before the patch's edit of this definition.
        before, after: the :mod:`ast` of the definition before and after the patch.
        owner: for ``C.m``, the class ``C`` as it was before (its other members become
            stubs); None for a top-level definition.
        runtime_names: names the patch declares as provided at run time.
        entries: the definition entries of ``module_text_before``, when known (a cheaper
            context, the same checks).
    Raises:
        AnchorError: kind ``invalid``, naming the check, the patch and each new message.
    """
    parts = qualname.split(".")
    if len(parts) > 2:
        return
    if len(parts) == 2:
        if owner is None:
            return
        before, after = _in_class(owner, parts[1], before), _in_class(owner, parts[1], after)
    before, after = _shrink_pair(before, after)
    old_code = ast.unparse(ast.fix_missing_locations(ast.Module(body=[before], type_ignores=[]))) + "\n"
    new_code = ast.unparse(ast.fix_missing_locations(ast.Module(body=[after], type_ignores=[]))) + "\n"
    if old_code == new_code:
        return
    ctx = _context_pieces(module_text_before, parts[0], entries)
    if ctx is None:
        return
    code = _render(*ctx, set(_words(old_code) | _words(new_code)))
    lines = code.count("\n")  # as many as the whole context's: messages after them are the definition's
    old = _messages(code + old_code, lines)
    new = _new_messages(old, _messages(code + new_code, lines), runtime_names)
    if new:
        check = _REFUSED[new[0][0]]
        raise AnchorError(f"{check}: patch {patch_id} in {qualname}: " + "; ".join(t for _, t in new)
                          + ("" if check != "undefined-name check" else
                             " (declare runtime_names=[...] in patch(...) for names provided at run time)"),
                          kind="invalid")


def _new_messages(old: list, now: list, runtime_names: Iterable[str]) -> list[tuple[str, str]]:
    """The pyflakes messages of ``now`` that ``old`` did not have, as (kind, text): each old
    message pays for one new one of the same kind and arguments; an undefined name the
    patch declares in ``runtime_names`` is no message."""
    allowed = set(runtime_names)
    remaining = list(old)
    new = []
    for kind, args, text in now:
        match = next((b for b in remaining if b[0] == kind and b[1] == args), None)
        if match is not None:
            remaining.remove(match)
            continue
        if kind.startswith("Undefined") and args and args[0] in allowed:
            continue
        new.append((kind, text))
    return new


def check_module_names(patch_id: str, relpath: str, before: str, after: str, runtime_names: Iterable[str]) -> None:
    """The undefined-name and redefinition checks of a module-level edit: pyflakes over
    the whole module before and after; a message new in ``after`` refuses the edit (names
    in ``runtime_names`` aside).

    Raises:
        AnchorError: kind ``invalid``, naming the check, the patch and each new message.
    """
    new = _new_messages(_messages(before, 0), _messages(after, 0), runtime_names)
    if new:
        check = _REFUSED[new[0][0]]
        lines = sorted({int(n) for _, t in new for n in re.findall(r"\bfrom line (\d+)", t)})
        where = f" (the first definition: {', '.join(f'{relpath}:{n}' for n in lines)} as patched)" if lines else ""
        raise AnchorError(f"{check}: patch {patch_id} in module {relpath}: " + "; ".join(t for _, t in new) + where,
                          kind="invalid")
