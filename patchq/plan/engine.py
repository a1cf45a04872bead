"""Planning: run a series of patches over one vLLM in memory.

:func:`plan` resolves every anchor, runs every transform, adds sentinels and compiles
every changed module, without writing anything. It attempts every patch and records
each failure with its reason; a failed patch leaves no trace in the result (its partial
edits are dropped), so the plan of the other patches stays usable for a report.

Beyond "it applies and compiles", every edit is judged by what it changes
(:mod:`patchq.plan.survival`, :mod:`patchq.plan.validate`):

* **upstream** (a patch without a hand-written ``upstream_check``): an edit whose added
  statements are all already in the release's pristine definition is upstream there.
  Every edit upstream: the patch is ``upstreamed`` and nothing of it is applied (with
  ``strict``: ``failed``, kind ``upstreamed``). Some but not all: ``failed``, kind
  ``partially-upstreamed``. An anchor that no longer matches is then tried backwards
  (:mod:`patchq.plan.backward`): a release whose definition equals what the patch
  produced on its last verified release, or holds all its added statements, is
  ``upstreamed``. A hand-written ``upstream_check`` wins: when it returns a reason the
  patch is ``upstreamed``; when it does not and the generic detection finds the change
  already there, the patch fails (kind ``conflict``) rather than apply it twice.
* **validity**: the result check, the docstring check, the undefined-name and
  redefinition checks (pyflakes) and the duplicate-member check
  (:mod:`patchq.plan.validate`); a refusal is ``failed``, kind ``invalid``.
* **survival**: once a patch is planned, every statement an earlier patch added to a
  definition it touched must still be there. When it is not and the later patch
  declares ``supersedes`` the earlier one, the earlier one is ``superseded`` (its
  reason names the later one); otherwise the later patch fails, kind ``interaction``,
  naming both patches, the definition and the statement. An anchor that matches the
  release's statement but no longer the planned text, because an earlier patch of the
  profile replaced it, is an ``interaction`` too; so is an anchor that matches a
  statement an earlier patch added, unless the later patch ``requires`` or
  ``supersedes`` it.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Callable, Iterable

import libcst as cst

from patchq.edits import EditContext, add_sentinel
from patchq.errors import AnchorError
from patchq.model import MODULE_QUALNAME, AnchorSpec, Patch
from patchq.plan import definitions, forward, survival, validate
from patchq.plan.anchors import (
    Pattern,
    Segment,
    ast_index,
    cut_segment,
    fingerprint,
    fingerprint_ast,
    locate_definition,
    match_anchor,
    module_fingerprint,
    module_segment,
    node_code,
    splice,
)
from patchq.plan.results import (  # noqa: F401 (re-exported: engine.Plan, engine.OK, ...)
    ABSENT,
    FAILED,
    JOURNALLED,
    NOT_APPLICABLE,
    OK,
    SUPERSEDED,
    UPSTREAMED,
    AnchorResult,
    PatchResult,
    Plan,
    journal_outcome,
)
from patchq.vllmdist.sources import CodeSource


class Workspace:
    """The texts of one source, pristine and edited, and their definition indexes.

    Definitions are located with the release's definition index
    (:mod:`patchq.plan.definitions`: qualname, span and fingerprint of every definition,
    cached by content, so an unchanged file is not parsed at all) and only the anchored
    definition is parsed with libcst (:func:`patchq.plan.anchors.cut_segment`), then
    spliced back into the text: everything outside the changed definitions stays
    byte-identical. After an edit the file's index is updated from the new definition's
    text alone (the other entries shift), never by re-parsing the module.
    """

    def __init__(self, source: CodeSource, read: Callable[[str], str | None]) -> None:
        self.source = source
        self._read = read
        self.defs = definitions.for_source(source)
        self.pristine_text: dict[str, str] = {}
        self.text: dict[str, str] = {}
        self._index: dict[str, tuple[str, list, dict]] = {}
        self._pristine_index: dict[str, dict | None] = {}
        self._modules: dict[str, tuple[str, cst.Module]] = {}
        self._pristine_nodes: dict[tuple[str, str], ast.stmt | None] = {}
        #: relpath -> 1-based inclusive line spans of the current text that edits wrote
        self.dirty: dict[str, list[tuple[int, int]]] = {}
        #: True once a definition was searched for in the whole package
        self.searched = False
        #: relpath -> top-level modules imported by code written there (:attr:`Plan.imports`)
        self.imports: dict[str, set[str] | None] = {}

    def current(self, relpath: str) -> str | None:
        """The current (possibly edited) text, or None when the file does not exist."""
        if relpath not in self.text:
            text = self._read(relpath)
            if text is None:
                return None
            self.pristine_text[relpath] = self.text[relpath] = text
        return self.text[relpath]

    def index(self, relpath: str) -> dict | None:
        """qualname -> :class:`patchq.plan.definitions.Entry` list of the current text."""
        text = self.current(relpath)
        if text is None:
            return None
        cached = self._index.get(relpath)
        if cached is not None and cached[0] is text:
            return cached[2]
        if text is self.pristine_text[relpath]:
            return self.pristine_index(relpath)
        return definitions.text_index(text)  # pragma: no cover - texts change only through replace()

    def pristine_index(self, relpath: str) -> dict | None:
        """qualname -> entries of the pristine text (None when it does not parse).

        Raises:
            SyntaxError: the pristine text does not parse (as :func:`ast.parse` would).
        """
        if relpath not in self._pristine_index:
            self.current(relpath)
            text = self.pristine_text[relpath]
            got = self.defs.text_index(relpath, text)
            if got is None:
                ast.parse(text)  # raises the parser's own SyntaxError
            self._pristine_index[relpath] = got
        return self._pristine_index[relpath]

    def module(self, relpath: str) -> cst.Module | None:
        """The whole current module parsed with libcst (lazily; for callers that need it)."""
        text = self.current(relpath)
        if text is None:
            return None
        cached = self._modules.get(relpath)
        if cached is None or cached[0] is not text:
            cached = (text, cst.parse_module(text))
            self._modules[relpath] = cached
        return cached[1]

    def package(self, qualname: str) -> list[str]:
        """Files that can hold ``qualname`` (for the package-wide search): those the
        source's index says define it, and every file this plan has read whose text is not
        the one the index looked at (edited, or read from elsewhere than the source)."""
        self.searched = True
        seen = getattr(self.source, "_texts", {})
        loaded = [rel for rel, text in self.text.items()
                  if not (text is self.pristine_text.get(rel) and text is seen.get(rel))]
        return self.defs.candidates(qualname, loaded)

    def locate(self, spec: AnchorSpec) -> tuple[str, bool]:
        """(relpath, moved) of the anchor's definition in the current texts."""
        return locate_definition(spec, self.source, self.index, self.package, self.defs.declares)

    def segment(self, relpath: str, qualname: str) -> Segment:
        """The current definition ``qualname`` of ``relpath``, parsed alone (the whole
        module for a module-level anchor)."""
        if qualname == MODULE_QUALNAME:
            return module_segment(self.current(relpath) or "", relpath)
        entry = self.index(relpath)[qualname][0]  # type: ignore[index]
        return cut_segment(self.text[relpath], relpath, qualname, entry)

    def replace(self, segment: Segment, new_def) -> str:
        """Splice an edited definition back into the current text; update its index and
        record the written lines as dirty (:meth:`compile_error`). Every edit of a text
        goes through here.

        Args:
            new_def: the new definition (or a FlattenSentinel), or
                ``cst.RemovalSentinel.REMOVE`` to remove the segment.
        Returns:
            The rendered segment text (``""`` for a removal).
        """
        relpath = segment.relpath
        old_text = self.text[relpath]
        old_entries = self._entries(relpath)
        removed = new_def is cst.RemovalSentinel.REMOVE
        new_seg = "" if removed else segment.render(new_def)
        text = splice(old_text, segment, new_seg)
        self.text[relpath] = text
        n_new = len(definitions.split_lines(new_seg)) if new_seg else 0
        tree = _segment_tree_of(segment, new_seg)
        fresh = _segment_entries(segment, new_seg, tree)
        known = self.imports.get(relpath, set())
        if tree is None and new_seg:
            self.imports[relpath] = None  # not parsed alone: the texts are read (converge)
        elif known is not None:
            self.imports[relpath] = known | _imported(tree) if tree is not None else known
        if fresh is None:
            self._index.pop(relpath, None)
        else:
            out = _shifted(old_entries, fresh, segment, n_new)
            if out is None:  # pragma: no cover - a segment always holds its definition
                out = list(definitions.file_entries(text) or ())
            self._index[relpath] = (text, out, definitions.group(out))
        n_lines = len(definitions.split_lines(text))
        if removed and segment.wrapped:  # the enclosing block may be left empty: compile it all
            self.dirty[relpath] = [(1, n_lines)]
            return new_seg
        self.dirty[relpath] = _dirty_after(self.dirty.get(relpath, []), segment, n_new, n_lines)
        return new_seg

    def _entries(self, relpath: str) -> list:
        cached = self._index.get(relpath)
        if cached is not None and cached[0] is self.text[relpath]:
            return cached[1]
        if self.text[relpath] is self.pristine_text[relpath]:
            return list(self.defs.entries(relpath, self.pristine_text[relpath]) or ())
        return list(definitions.file_entries(self.text[relpath]) or ())

    def snapshot(self) -> tuple:
        """The edited state (texts, their indexes, dirty spans), for :meth:`restore`."""
        return dict(self.text), dict(self._index), {k: list(v) for k, v in self.dirty.items()}

    def restore(self, state: tuple) -> None:
        """Back to a :meth:`snapshot` (a failed patch leaves no trace)."""
        self.text, self._index, self.dirty = dict(state[0]), dict(state[1]), dict(state[2])

    def pristine_node(self, relpath: str, qualname: str) -> ast.stmt | None:
        """The :mod:`ast` node of the one pristine definition ``qualname`` of ``relpath``
        (line numbers of the whole file), or None (no such file or definition, or it is
        defined more than once). Parsed from the definition's own lines, once.

        Raises:
            SyntaxError: the pristine text does not parse.
        """
        key = (relpath, qualname)
        if key not in self._pristine_nodes:
            node = None
            if self.current(relpath) is not None:
                found = (self.pristine_index(relpath) or {}).get(qualname)
                if found and len(found) == 1:
                    node = definitions.definition_from(self.pristine_text[relpath], relpath, found[0]).node
            self._pristine_nodes[key] = node
        return self._pristine_nodes[key]

    def current_node(self, relpath: str, qualname: str) -> ast.AST | None:
        """The :mod:`ast` node of the one definition ``qualname`` in the current text, or
        None (absent, defined twice, or the text does not parse)."""
        text = self.current(relpath)
        if text is None:
            return None
        if text is self.pristine_text[relpath]:
            return self.pristine_node(relpath, qualname)
        try:
            found = (self.index(relpath) or {}).get(qualname)
            if not found or len(found) != 1:
                return None
            return definitions.definition_from(text, relpath, found[0]).node
        except SyntaxError:
            return None

    def line_of(self, relpath: str, qualname: str) -> int | None:
        """1-based line of a definition in the pristine file."""
        found = (self.pristine_index(relpath) or {}).get(qualname)
        return found[0].line if found else None

    def pristine_fingerprint(self, relpath: str, qualname: str) -> str | None:
        """Fingerprint of the pristine definition (None when it is not in the pristine file;
        :func:`module_fingerprint` of the pristine module for a module-level anchor)."""
        if qualname == MODULE_QUALNAME:
            return module_fingerprint(self.pristine_text[relpath]) if self.current(relpath) is not None else None
        found = (self.pristine_index(relpath) or {}).get(qualname)
        if not found or len(found) != 1:
            return None
        if found[0].fingerprint:
            return found[0].fingerprint
        e = found[0]  # the index leaves fingerprints out: from its own lines, kept per text (a matrix
        key = definitions.span_text(self.pristine_text[relpath], e.start, e.end)  # meets most again)
        if key not in _FINGERPRINTS:
            node = self.pristine_node(relpath, qualname)
            if node is None:  # pragma: no cover - one indexed definition parses alone
                return None
            if len(_FINGERPRINTS) > 4096:
                _FINGERPRINTS.clear()
            _FINGERPRINTS[key] = fingerprint_ast(node)
        return _FINGERPRINTS[key]

    def changed(self) -> list[str]:
        """Relpaths whose text differs from the pristine one, sorted."""
        return sorted(p for p, t in self.text.items() if t != self.pristine_text[p])

    def compile_error(self, relpath: str) -> SyntaxError | None:
        """The SyntaxError compiling the current text raises, or None.

        Only the lines edits wrote are compiled (each span alone, an indented one inside a
        dummy class): the rest of the file is the pristine release's code. When a span
        fails, the whole file is compiled, so the error is exactly the one the whole
        file gives.
        """
        text = self.text[relpath]
        if relpath in self.dirty and self.spans_compile(relpath):
            return None
        try:
            compile(text, relpath, "exec", dont_inherit=True)
        except SyntaxError as exc:
            return exc
        return None

    def spans_compile(self, relpath: str) -> bool:
        """True when every span edits wrote in the current text compiles alone (an
        indented one inside a dummy class); then the whole file compiles
        (:meth:`compile_error`). Memoized per text."""
        return _spans_ok(self.text[relpath], relpath, self.dirty.get(relpath, []))

    def context_entries(self, relpath: str) -> list | None:
        """The definition entries of the current text of ``relpath`` when they are known to
        describe a text that parses (pristine, or every edited span compiles), else None
        (the caller then parses the text itself)."""
        text = self.current(relpath)
        if text is None:
            return None
        if text is not self.pristine_text[relpath] and not (relpath in self.dirty and self.spans_compile(relpath)):
            return None
        return self._entries(relpath)

    def owner_class(self, relpath: str, text: str, qualname: str, state: tuple | None = None) -> ast.ClassDef | None:
        """The :mod:`ast` of the one class ``qualname`` in ``text`` (a text of ``relpath``),
        or None (absent, defined more than once, not a class, or the text does not parse):
        what the pyflakes checks of a method need of its class
        (:func:`patchq.plan.validate.check_names` keeps only the names and kinds of its
        other members). Only the class's own lines are parsed when its entries are known and
        the text is known to parse: the pristine text (its members' bodies left out:
        :func:`_class_outline`), and an edited one (the current text, or the one of
        ``state``, a :meth:`snapshot`) whose edited spans compile alone."""
        if text is self.pristine_text.get(relpath):
            index = self.pristine_index(relpath) or {}
            found = index.get(qualname)
            if not found or len(found) != 1 or found[0].kind != "class":
                return None
            node = _class_outline(text, relpath, qualname, found[0], index) or self.pristine_node(relpath, qualname)
            return node if isinstance(node, ast.ClassDef) else None
        for index, dirty in ((self._index, self.dirty), (state[1], state[2]) if state else ({}, {})):
            cached = index.get(relpath)
            if cached is None or cached[0] is not text or not dirty.get(relpath) or \
                    not _spans_ok(text, relpath, dirty[relpath]):
                continue
            found = cached[2].get(qualname)
            if not found or len(found) != 1 or found[0].kind != "class":
                return None
            try:
                node = definitions.definition_from(text, relpath, found[0]).node
            except SyntaxError:  # pragma: no cover - a class of a text that parses parses alone
                break
            return node if isinstance(node, ast.ClassDef) else None
        nodes = _index_of(text).get(qualname)
        return nodes[0] if nodes and len(nodes) == 1 and isinstance(nodes[0], ast.ClassDef) else None


def _segment_tree_of(segment: Segment, new_seg: str) -> ast.Module | None:
    """The :mod:`ast` of a rendered segment parsed alone (an indented one inside a dummy
    class, whose body the returned module holds), or None: a removal, or it does not parse
    alone."""
    if not new_seg:
        return None
    try:
        if segment.wrapped:
            tree = ast.parse("class _patchq_segment_:\n" + new_seg)
            return ast.Module(body=tree.body[0].body, type_ignores=[])  # type: ignore[attr-defined]
        return ast.parse(new_seg)
    except SyntaxError:
        return None


def _segment_entries(segment: Segment, new_seg: str, tree: ast.Module | None = None) -> list | None:
    """The definition entries of a rendered segment (line numbers of the whole file,
    no fingerprints); [] for a removal; None when it does not parse alone. ``tree``: the
    segment's :func:`_segment_tree_of`, when the caller has it."""
    if not new_seg:
        return []
    tree = tree if tree is not None else _segment_tree_of(segment, new_seg)
    if tree is None:
        return None
    prefix = segment.qualname.rsplit(".", 1)[0] + "." if "." in segment.qualname else ""
    offset = segment.start - 1 if segment.wrapped else segment.start
    return definitions.entries_of_tree(tree, prefix, offset, with_fingerprints=False)


def _imported(tree: ast.Module) -> set[str]:
    """The top-level modules the statements of ``tree`` import (absolute imports, nested
    blocks and definitions included; expressions are not entered: an import is a statement)."""
    out: set[str] = set()
    todo: list = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if not node.level and node.module:
                out.add(node.module.split(".")[0])
        else:
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                todo += getattr(node, name, None) or []
    return out


def _shifted(old_entries: list, fresh: list, segment: Segment, n_new: int) -> list | None:
    """The file's entries after the segment's lines became ``fresh``'s: the segment's own
    entries replaced, those below shifted, those enclosing it stretched; None when no old
    entry lay inside the segment."""
    delta = n_new - (segment.end - segment.start)
    lo, hi = segment.start + 1, segment.end  # 1-based inclusive lines replaced
    out, placed = [], False
    for e in old_entries:
        if e.start >= lo and e.end <= hi:  # inside the replaced lines
            if not placed:
                out += fresh
                placed = True
            continue
        if e.start > hi:
            e = e._replace(line=e.line + delta, start=e.start + delta, end=e.end + delta)
        elif e.end >= hi:  # encloses the segment
            e = e._replace(end=e.end + delta)
        out.append(e)
    return out if placed else None


def _dirty_after(spans: list[tuple[int, int]], segment: Segment, n_new: int, n_lines: int) -> list[tuple[int, int]]:
    """The dirty spans of a file after a segment edit (earlier spans shifted, the new
    segment's lines added); the whole file when an earlier span overlaps it partially."""
    delta = n_new - (segment.end - segment.start)
    lo, hi = segment.start + 1, segment.end
    out = []
    for a, b in spans:
        if b < lo:
            out.append((a, b))
        elif a > hi:
            out.append((a + delta, b + delta))
        elif a >= lo and b <= hi:
            pass  # inside the replaced lines: covered by the new span
        elif a <= lo and b >= hi:  # encloses them (an earlier edit of the owner class)
            out.append((a, b + delta))
        else:  # pragma: no cover - overlaps partially: compile the whole file
            return [(1, n_lines)]
    out.append((lo, lo + n_new - 1))
    return sorted(out)


def _verified(spec: AnchorSpec, fp: str) -> str | None:
    for version, recorded in spec.fingerprints.items():
        if recorded == fp:
            return version
    return None


def _stmt_ast(node) -> ast.AST | None:
    """The :mod:`ast` of a libcst definition (the definition inside a FlattenSentinel; the
    :class:`ast.Module` of a module)."""
    if node is None or node is cst.RemovalSentinel.REMOVE:
        return None
    if isinstance(node, cst.Module):
        return ast.parse(node.code)
    if isinstance(node, cst.FlattenSentinel):
        defs = [n for n in node.nodes if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
        if not defs:
            return None
        node = defs[0]
    return ast.parse(textwrap.dedent(node_code(node))).body[0]


def _rendered_def(text: str, qualname: str) -> ast.AST | None:
    """The :mod:`ast` of the definition in a rendered segment (None when it does not
    parse alone, e.g. a multi-line string at a lower indentation); the module itself for
    a module-level anchor."""
    if qualname == MODULE_QUALNAME:
        try:
            return ast.parse(text)
        except SyntaxError:
            return None
    try:
        body = ast.parse(textwrap.dedent(text)).body
    except SyntaxError:
        return None
    name = qualname.rsplit(".", 1)[-1]
    found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             and n.name == name]
    return found[0] if len(found) == 1 else None


def _line_key(node) -> int | None:
    """The normalized-AST key of a matched libcst statement (line), or None."""
    try:
        code = node_code(node) if isinstance(node, cst.BaseStatement) else \
            cst.Module(body=[cst.SimpleStatementLine(body=[node])]).code
        body = ast.parse(textwrap.dedent(code)).body
    except (SyntaxError, Exception):
        return None
    return survival.statement_key(body[0]) if len(body) == 1 else None


def _segment_tree(ws: Workspace, seg: Segment) -> ast.AST:
    """The :mod:`ast` of a segment's definition as cut (line numbers of the whole file)."""
    try:
        return seg.tree()
    except SyntaxError:  # pragma: no cover - a cut definition parses alone (as libcst parsed it)
        found = ast_index(ws.text[seg.relpath]).get(seg.qualname)
        return found[0]  # type: ignore[index]


def _run_edits(ws: Workspace, patch: Patch, variant, ctx: EditContext, result: PatchResult,
               changes: list[survival.EditChange] | None = None,
               earlier: dict[str, list[survival.EditChange]] | None = None) -> None:
    """Run a variant's edits in order. Consecutive edits of the same definition share one
    libcst parse and one render; each edited definition gets the patch's sentinel.

    Args:
        changes: receives one :class:`survival.EditChange` per edit, in order.
        earlier: patch id -> changes of the patches planned before this one (for the
            interaction checks on anchors).
    Raises:
        AnchorError: an anchor does not resolve or match, a transform fails, or a
            validation check refuses an edit (kind ``invalid``) or an anchor lands on
            another patch's statement (kind ``interaction``).
    """
    seg = None  # the definition being edited, and its edited node
    node = None
    node_ast = None
    changes = [] if changes is None else changes
    deferred: list[survival.EditChange] = []  # the segment's last change, summarised from its render

    def finish(change: survival.EditChange, after: ast.AST | None) -> None:
        before = change.before
        # node_ast is never None where an EditChange is made: the segment's tree, or the
        # previous edit's result (a definition or module once check_result passed it)
        assert before is not None
        change.after = after
        if after is None:
            change.removed = [survival.Item(survival.statement_key(before), change.qualname)]
        else:
            change.added, change.removed = survival.diff_definition(before, after)
            change.duplicates = survival.duplicate_members(before, after)  # refused after upstream detection

    def flush() -> None:
        if seg is None:
            return
        if node is cst.RemovalSentinel.REMOVE:
            ws.replace(seg, node)  # through the workspace: index and dirty spans follow
            after = None
        else:
            text = ws.replace(seg, add_sentinel(node, patch.id, patch.hash))
            after = _rendered_def(text, seg.qualname) if deferred else None
            if deferred and after is None:
                after = _stmt_ast(node)
        for change in deferred:
            finish(change, after)
        deferred.clear()

    edit_items = list(variant.edits.items())
    for i, (anchor_id, edit) in enumerate(edit_items):
        spec = patch.anchors[anchor_id]
        relpath, moved = ws.locate(spec)
        tree = None
        if seg is None or (seg.relpath, seg.qualname) != (relpath, spec.qualname):
            flush()
            seg = ws.segment(relpath, spec.qualname)
            node = seg.node
            tree = _segment_tree(ws, seg)  # the unedited definition's ast (survival's ``before``)
            node_ast = tree
        if node is cst.RemovalSentinel.REMOVE:
            raise AnchorError(f"anchor {anchor_id}: {spec.qualname} was removed by an earlier edit of "
                              f"{patch.id}", kind="invalid", anchor=anchor_id)
        assert node is not None  # set with seg, then each edit's checked result
        fp = ws.pristine_fingerprint(relpath, spec.qualname) or fingerprint(seg.node)
        try:
            matches = match_anchor(spec, node, tree)
        except AnchorError as exc:
            _anchor_interaction(ws, patch, spec, relpath, earlier or {}, exc)
            _name_where_searched(exc, ws, relpath, spec.qualname)
            raise
        validate.check_docstring_matches(patch.id, anchor_id, spec.qualname, matches)
        _matched_interaction(ws, patch, spec, relpath, matches, earlier or {})
        try:
            new = edit(node, matches, ctx)
        except AnchorError as exc:
            exc.anchor = exc.anchor or anchor_id
            _name_where_searched(exc, ws, relpath, spec.qualname)
            raise
        except Exception as exc:  # a transform bug or an unexpected shape
            raise AnchorError(f"anchor {anchor_id}: transform failed in {spec.qualname}: "
                              f"{type(exc).__name__}: {exc}", kind="conflict", anchor=anchor_id) from exc
        validate.check_result(patch.id, anchor_id, spec.qualname, node, new, patch.removes)
        if isinstance(new, cst.FlattenSentinel):  # definitions placed beside the anchored one
            _check_siblings(ws, patch, anchor_id, relpath, spec.qualname, new)
        change = survival.EditChange(patch.id, anchor_id, relpath, spec.qualname, before=node_ast)
        changes.append(change)
        following = patch.anchors[edit_items[i + 1][0]] if i + 1 < len(edit_items) else None
        if following is not None and following.qualname == spec.qualname and new is not cst.RemovalSentinel.REMOVE:
            new_ast = _stmt_ast(new)  # the next edit of this definition starts from it
            finish(change, new_ast)
        else:  # summarised from the segment's render at flush (one codegen, not two)
            new_ast = None
            deferred.append(change)
        node, node_ast = new, new_ast
        result.anchors.append(AnchorResult(
            anchor_id, relpath, spec.qualname, ws.line_of(relpath, spec.qualname),
            moved, len(matches), fp, _verified(spec, fp)))
        if relpath not in result.files:
            result.files.append(relpath)
    flush()


def _check_siblings(ws: Workspace, patch: Patch, anchor_id: str, relpath: str, qualname: str,
                    new: cst.FlattenSentinel) -> None:
    """Definitions a transform places beside the anchored one must not redefine a name its
    class or module already defines (the duplicate-member check).

    Raises:
        AnchorError: kind ``invalid``.
    """
    name = qualname.rsplit(".", 1)[-1]
    parent = qualname.rsplit(".", 1)[0] + "." if "." in qualname else ""
    known = ws.index(relpath) or {}
    for n in new.nodes:
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)) and n.name.value != name and \
                (parent + n.name.value) in known:
            raise AnchorError(f"duplicate-member check: patch {patch.id}, anchor {anchor_id}: the edit defines "
                              f"{parent + n.name.value} beside {qualname}, but {relpath} already defines it",
                              kind="invalid", anchor=anchor_id)


def _pristine_def(ws: Workspace, relpath: str, qualname: str) -> ast.AST | None:
    return ws.pristine_node(relpath, qualname)


def _current_def(ws: Workspace, relpath: str, qualname: str) -> ast.AST | None:
    return ws.current_node(relpath, qualname)


def _anchor_interaction(ws: Workspace, patch: Patch, spec: AnchorSpec, relpath: str,
                        earlier: dict[str, list[survival.EditChange]], exc: AnchorError) -> None:
    """An anchor that matches the release's statement but not the planned text: when an
    earlier patch replaced that statement, raise an ``interaction`` error naming it."""
    if spec.node is None or not earlier:
        return
    pristine = _pristine_def(ws, relpath, spec.qualname)
    if pristine is None:
        return
    pattern = Pattern.compile(spec.node)
    hits = [s for s in ast.walk(pristine) if isinstance(s, ast.stmt) and s is not pristine and pattern.matches(s)]
    if not spec.count_ok(len(hits)):
        return
    keys = {survival.statement_key(h): h for h in hits}
    for other, chs in earlier.items():
        for ch in chs:
            if (ch.relpath, ch.qualname) != (relpath, spec.qualname):
                continue
            gone = [keys[i.key] for i in ch.removed if i.key in keys]
            if gone:
                stmt = survival.one_line(gone[0])
                how = (f"{patch.id} supersedes {other} but anchors on the statement {other} replaced: anchor it "
                       f"on {other}'s result" if other in patch.supersedes else
                       "both patches anchor on one statement")
                raise AnchorError(f"interaction: anchor {spec.id} of {patch.id} matches `{stmt}` in {spec.qualname} "
                                  f"({relpath}:{gone[0].lineno}) of the release, but {other} (earlier in the profile) "
                                  f"replaced it; {how}", kind="interaction", anchor=spec.id) from exc


def _matched_interaction(ws: Workspace, patch: Patch, spec: AnchorSpec, relpath: str, matches,
                         earlier: dict[str, list[survival.EditChange]]) -> None:
    """An anchor that matched a statement an earlier patch added: the patch must declare
    ``requires`` or ``supersedes`` of that patch."""
    if spec.node is None or not earlier:
        return
    mine = [(ch, i) for other, chs in earlier.items() if other not in patch.requires and other not in patch.supersedes
            for ch in chs if (ch.relpath, ch.qualname) == (relpath, spec.qualname) for i in ch.added]
    if not mine:
        return
    pristine = _pristine_def(ws, relpath, spec.qualname)
    keys = survival.statement_keys(pristine) if pristine is not None else {}
    for m in matches:
        key = _line_key(m)
        for ch, item in mine:
            if key == item.key and key not in keys:
                raise AnchorError(f"interaction: anchor {spec.id} of {patch.id} matches `{item.code}` in "
                                  f"{spec.qualname} ({relpath}), which {ch.patch_id} added; declare "
                                  f"requires=['{ch.patch_id}'] (or supersedes) in {patch.id}",
                                  kind="interaction", anchor=spec.id)


def _detect_upstream(ws: Workspace, changes: list[survival.EditChange]) -> None:
    """Fill each change's ``upstream`` from the release's pristine definition."""
    for ch in changes:
        pristine = _pristine_def(ws, ch.relpath, ch.qualname)
        if pristine is not None and ch.added:
            ch.upstream = survival.upstream_items(ch, pristine, ch.relpath)
    forward.by_meaning(ws, changes)  # the same change in another form


_UPSTREAM_LINE = re.compile(r"\b[\w./-]+\.py:\d+")


def _name_where_searched(exc: AnchorError, ws: Workspace, relpath: str, qualname: str) -> None:
    """Add to ``exc``'s message the release's lines that were searched for the edit's place,
    ``(searched <qualname>, path:start-end)`` from the pristine file (the whole module for a
    module-level anchor), unless the message already names a line: a conflict names its
    evidence, never a bare "no place" (issue 35)."""
    message = str(exc)
    if _UPSTREAM_LINE.search(message):
        return
    text = ws.pristine_text.get(relpath)
    if qualname == MODULE_QUALNAME:
        if text is None:
            return
        span, what = f"1-{max(text.count(chr(10)), 1)}", "the module-level statements"
    else:
        found = (ws.pristine_index(relpath) or {}).get(qualname)
        if not found or len(found) != 1:
            return
        span, what = f"{found[0].start}-{found[0].end}", qualname
    exc.args = (f"{message} (searched {what}, {relpath}:{span})",)


def upstream_evidence(changes: list[survival.EditChange]) -> str:
    """``anchor: `stmt` (path:line), ...`` for the upstream items of ``changes``."""
    parts = []
    for ch in changes:
        if getattr(ch, "meaning", None):  # found by meaning (plan/forward.py by_meaning)
            parts.append(f"{ch.anchor}: by meaning, similarity 1.00: {'; '.join(ch.meaning)}")
            continue
        for item, where in ch.upstream:
            parts.append(f"{ch.anchor}: `{item.code}` ({where})")
    if len(parts) > 4:  # the check row's upstream_evidence lists them all
        parts = parts[:4] + [f"+{len(parts) - 4} more"]
    return "; ".join(parts)


def _validate_names(ws: Workspace, patch: Patch, state: tuple, changes: list[survival.EditChange]) -> None:
    """The pyflakes checks of every definition the patch changed (module context;
    :func:`validate.check_names`). ``state``: the :meth:`Workspace.snapshot` before this patch."""
    before: dict[str, str] = state[0]
    first: dict[tuple[str, str], survival.EditChange] = {}
    last: dict[tuple[str, str], survival.EditChange] = {}
    for ch in changes:
        first.setdefault((ch.relpath, ch.qualname), ch)
        last[(ch.relpath, ch.qualname)] = ch
    for key, ch in first.items():
        relpath, qualname = key
        old, new = ch.before, last[key].after
        text_before = before.get(relpath, ws.pristine_text.get(relpath))  # unread before: pristine
        if text_before is None or old is None or new is None:
            continue
        # the module context as this patch leaves it: a helper, import or constant the patch
        # itself adds at module level is defined for its own definitions
        context_text = ws.text.get(relpath, text_before)
        if qualname == MODULE_QUALNAME:  # the module's own statements: pyflakes over the whole module
            try:
                validate.check_module_names(patch.id, relpath, text_before, ws.text[relpath], patch.runtime_names)
            except AnchorError as exc:
                exc.anchor = ch.anchor
                raise
            continue
        # a definition's ast (the module's own was handled above)
        assert isinstance(old, ast.stmt) and isinstance(new, ast.stmt)
        owner = ws.owner_class(relpath, text_before, qualname.rsplit(".", 1)[0], state) if "." in qualname else None
        entries = ws.context_entries(relpath) if context_text is ws.text.get(relpath) else None
        try:
            validate.check_names(patch.id, qualname, context_text, old, new, owner, patch.runtime_names, entries)
            validate.undefined_self_calls(patch.id, qualname, context_text, old, new, relpath)
        except AnchorError as exc:
            exc.anchor = ch.anchor
            raise


_OUTLINES: dict[str, ast.ClassDef | None] = {}


def _class_outline(text: str, relpath: str, qualname: str, entry, index: dict) -> ast.ClassDef | None:
    """The class ``qualname`` of ``text`` (its index ``entry``) with every member
    ``def``/``class`` cut to a stub (``def name():`` or ``class name:`` over ``pass``):
    the same node as the class parsed whole for :func:`patchq.plan.validate.check_names`,
    which reduces every other member to such a stub, at the cost of the class's own
    statements. None when a member is not a direct child of the class body (a definition
    under an ``if``: it would be kept whole) or the outline does not parse. Kept per text."""
    prefix = qualname + "."
    members = sorted((e for q, es in index.items() if q.startswith(prefix) and "." not in q[len(prefix):]
                      for e in es), key=lambda e: e.start)
    lines = definitions.split_lines(text)
    out: list[str] = []
    pos = entry.start
    for m in members:
        if m.start < pos or m.end > entry.end:
            return None
        indent = lines[m.line - 1][:m.col]
        name = m.qualname[len(prefix):]
        out += lines[pos - 1:m.start - 1]
        out.append(f"{indent}class {name}:\n{indent}    pass\n" if m.kind == "class" else
                   f"{indent}def {name}():\n{indent}    pass\n")
        pos = m.end + 1
    out += lines[pos - 1:entry.end]
    seg = "".join(out)
    if not seg.endswith("\n"):
        seg += "\n"
    if seg not in _OUTLINES:
        try:
            node = definitions.parse_definition(seg, entry.start)
        except SyntaxError:
            node = None
        if not isinstance(node, ast.ClassDef) or \
                [(type(n), n.name) for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))] != \
                [(ast.ClassDef if m.kind == "class" else ast.FunctionDef, m.qualname[len(prefix):]) for m in members]:
            node = None  # a member under a compound statement, or lines that do not stand alone
        if len(_OUTLINES) > 2048:
            _OUTLINES.clear()
        _OUTLINES[seg] = node
    return _OUTLINES[seg]


#: definition text (its lines, indentation kept) -> fingerprint (:meth:`Workspace.pristine_fingerprint`)
_FINGERPRINTS: dict[str, str] = {}
_SPANS_OK: dict[tuple[str, int], tuple[str, tuple, bool]] = {}


def _spans_ok(text: str, relpath: str, dirty: list[tuple[int, int]]) -> bool:
    """True when every span ``dirty`` (1-based inclusive lines) of an edited ``text``
    compiles alone, an indented one inside a dummy class (then the whole text does:
    :meth:`Workspace.spans_compile`). Memoized per text and spans."""
    key = (relpath, id(text))
    got = _SPANS_OK.get(key)
    if got is not None and got[0] is text and got[1] == tuple(dirty):
        return got[2]
    lines = definitions.split_lines(text)
    ok = True
    for a, b in dirty:
        seg = "".join(lines[a - 1:b])
        code = ("class _patchq_segment_:\n" + seg) if seg.lstrip("\n")[:1] in (" ", "\t") else seg
        try:
            compile(code, relpath, "exec", dont_inherit=True)
        except SyntaxError:
            ok = False
            break
    if len(_SPANS_OK) > 256:
        _SPANS_OK.clear()
    _SPANS_OK[key] = (text, tuple(dirty), ok)
    return ok


@functools.lru_cache(maxsize=16)
def _index_of(text: str) -> dict:
    """:func:`ast_index` of a text, cached (the plan's texts are the same objects)."""
    try:
        return ast_index(text)
    except SyntaxError:
        return {}


def _survival(ws: Workspace, patch: Patch, results: list[PatchResult],
              done: dict[str, list[survival.EditChange]], changes: list[survival.EditChange]) -> None:
    """After ``patch`` is planned: every earlier patch's added statements in the
    definitions ``patch`` touched must still be there (module docstring).

    Raises:
        AnchorError: kind ``interaction`` when one is gone and ``patch`` does not declare
            ``supersedes`` of its owner. Owners it supersedes are marked ``superseded``.
    """
    touched = {(c.relpath, c.qualname) for c in changes}
    by_id = {r.patch_id: r for r in results}
    marks = []
    for other, chs in done.items():
        lost = []
        for ch in chs:
            if (ch.relpath, ch.qualname) not in touched:
                continue
            gone = survival.missing_items(ch.added, _current_def(ws, ch.relpath, ch.qualname))
            lost += [(ch, i) for i in gone]
        if not lost:
            continue
        ch, item = lost[0]
        line = ws.line_of(ch.relpath, ch.qualname)
        if other in patch.supersedes:
            marks.append((other, f"superseded by {patch.id}: it rewrites `{item.code}` in {ch.qualname} "
                                 f"({ch.relpath}:{line})"))
            continue
        raise AnchorError(f"interaction: {patch.id} removes what {other} changed in {ch.qualname} "
                          f"({ch.relpath}:{line}): `{item.code}` is gone from the planned text; declare "
                          f"supersedes=['{other}'] in {patch.id} if it rewrites {other} on purpose",
                          kind="interaction")
    for other, reason in marks:
        r = by_id.get(other)
        if r is not None and r.status == OK:
            r.status, r.reason = SUPERSEDED, reason


class _PristineView:
    """The plan's source as its ``read`` sees it (pristine copies of files patchq changed;
    a foreign edit is noticed by the reader): what a hand-written ``upstream_check`` reads,
    so that neither patchq's own edits nor someone else's pass for upstream's code."""

    def __init__(self, source: CodeSource, ws: Workspace) -> None:
        self._source = source
        self._ws = ws

    def __getattr__(self, name: str):
        return getattr(self._source, name)

    def read_text(self, relpath: str) -> str | None:
        """The pristine text of ``relpath`` (None when it does not exist)."""
        if self._ws.current(relpath) is None:
            return None
        return self._ws.pristine_text[relpath]


def _hand_check(patch: Patch, source: CodeSource | _PristineView) -> tuple[str, str] | None:
    """(verdict, reason) of the patch's own ``upstream_check``; None when it has none."""
    if patch.upstream_check is None:
        return None
    try:
        reason = patch.upstream_check(source)
    except Exception as exc:  # series code: a broken check never crashes a plan
        return "error", f"{type(exc).__name__}: {exc}"
    return ("upstreamed", str(reason)) if reason else ("not-upstreamed", "")



def plan(
    source: CodeSource,
    patches: Iterable[Patch],
    read: Callable[[str], str | None] | None = None,
    *,
    strict: bool = False,
    backward: bool = True,
) -> Plan:
    """Apply ``patches`` in order to ``source`` in memory.

    Args:
        source: the vLLM to patch (its version selects each patch's variant).
        patches: in series order.
        read: relpath -> pristine text (default: ``source.read_text``); an installed
            target passes the journal's pristine copy for files patchq already changed.
        strict: an upstreamed edit patch fails (kind ``upstreamed``) instead of being
            skipped (``apply --strict``).
        backward: try the backward upstream detection on an anchor that does not
            resolve (:mod:`patchq.plan.backward`; it plans the patch on its last
            verified release, when that release is in patchq's cache).
    Returns:
        A :class:`Plan`; nothing is written.
    """
    ws = Workspace(source, read or source.read_text)
    results: list[PatchResult] = []
    all_changes: dict[str, list[survival.EditChange]] = {}
    hand_checks: dict[str, tuple[str, str]] = {}
    done: dict[str, list[survival.EditChange]] = {}
    lookup = _lookup(ws)
    for patch in patches:
        result = _outside_variants(patch, source.version)
        if result is None:
            result = _plan_patch(ws, patch, lookup, all_changes, hand_checks, done, results, strict, backward)
        if result.status in (OK, SUPERSEDED):
            done[patch.id] = all_changes.get(patch.id, [])
        results.append(result)
    pristine, patched = _compiled_texts(ws, results)
    definitions.save_all()
    imports: dict[str, list[str] | None] = {}
    for rel in patched:
        found = ws.imports.get(rel)
        imports[rel] = sorted(found) if found is not None else None
    return Plan(source, results, pristine, patched, workspace=ws, changes=all_changes,
                hand_checks=hand_checks, imports=imports)


def _lookup(ws: Workspace) -> Callable[[str, str], object]:
    """The ``lookup`` of an :class:`EditContext`: a pristine definition elsewhere (e.g. a
    base class hook), read-only; None when it does not resolve."""

    def lookup(qualname: str, module: str):
        spec = AnchorSpec(id="lookup", module=module, qualname=qualname)
        try:
            relpath, _ = locate_definition(spec, ws.source,
                                           lambda p: ws.pristine_index(p) if ws.current(p) is not None else None,
                                           ws.package, ws.defs.declares)
        except AnchorError:
            return None
        index = ws.pristine_index(relpath)
        assert index is not None  # locate_definition found qualname in this (cached) index
        node = index[qualname][0]
        return cut_segment(ws.pristine_text[relpath], relpath, qualname, node).node

    return lookup


def _outside_variants(patch: Patch, version) -> PatchResult | None:
    """The result of a patch with no edit variant for ``version`` (out of range, uncovered,
    an ``upstreamed`` or ``absent`` variant), or None when an edit variant covers it."""
    variant = patch.variant_for(version)
    if variant is None:
        if version in patch.applies:
            return PatchResult(patch.id, patch.hash, FAILED, f"no variant of {patch.id} covers vllm {version}",
                               failure="uncovered")
        return PatchResult(patch.id, patch.hash, NOT_APPLICABLE,
                           f"vllm {version} is outside {patch.id}'s applies-range {patch.applies}")
    if variant.kind != "edit":
        return PatchResult(patch.id, patch.hash, variant.kind, variant.upstreamed or variant.absent or "",
                           str(variant.applies) or "all")
    return None


def _plan_patch(ws: Workspace, patch: Patch, lookup, all_changes: dict, hand_checks: dict, done: dict,
                results: list[PatchResult], strict: bool, backward: bool) -> PatchResult:
    """Plan one patch's edit variant on the workspace (a failure restores it)."""
    source = ws.source
    variant = patch.variant_for(source.version)
    assert variant is not None
    before = ws.snapshot()
    result = PatchResult(patch.id, patch.hash, OK, variant=str(variant.applies) or "all")
    ctx = EditContext(patch.id, patch.hash, source.version, source, lookup)
    hand = _hand_check(patch, _PristineView(source, ws))
    if hand is not None:
        hand_checks[patch.id] = hand
    if hand is not None and hand[0] == "upstreamed":
        result.status, result.reason = UPSTREAMED, f"upstream check: {hand[1]}"
        if strict:
            result.status, result.failure = FAILED, "upstreamed"
            result.reason += "; --strict asks patchq to apply every patch"
        return result
    changes: list[survival.EditChange] = []
    all_changes[patch.id] = changes
    try:
        _run_edits(ws, patch, variant, ctx, result, changes, done)
        _detect_upstream(ws, changes)
        if _all_upstream(ws, patch, changes, hand, result, before, strict):
            return result
        _validate_names(ws, patch, before, changes)  # the texts before this patch
        _survival(ws, patch, results, done, changes)
    except (AnchorError, SyntaxError, cst.ParserSyntaxError) as exc:
        ws.restore(before)
        _failed(result, exc)
        if backward and result.failure in ("conflict", "gone"):
            _backward(ws, patch, hand, result, strict)
    return result


def _all_upstream(ws: Workspace, patch: Patch, changes: list[survival.EditChange], hand, result: PatchResult,
                  before: tuple, strict: bool) -> bool:
    """The generic upstream detection's word on a planned patch: True when every edit is
    upstream (``result`` is then ``upstreamed``, or failed with ``strict``, and the
    workspace restored).

    Raises:
        AnchorError: the hand-written check disagrees (``conflict``), some but not all
            edits are upstream (``partially-upstreamed``), or an edit gives a definition a
            second member (``invalid``).
    """
    version = ws.source.version
    up = [c for c in changes if c.is_upstream]
    if up and hand is not None:
        raise AnchorError(f"generic upstream detection finds the change already in vllm {version} "
                          f"({upstream_evidence(up)}) but the patch's upstream_check does not: "
                          f"applying it would add it a second time", kind="conflict", anchor=up[0].anchor)
    if up and len(up) == len(changes):
        ws.restore(before)
        result.status = UPSTREAMED
        result.reason = f"every edit's change is already in vllm {version}: {upstream_evidence(up)}"
        result.files.clear()  # nothing of it is written
        if strict:
            result.status, result.failure = FAILED, "upstreamed"
            result.reason += "; --strict asks patchq to apply every patch"
            result.anchors.clear()
        return True
    if up:
        rest = [c.anchor for c in changes if not c.is_upstream]
        raise AnchorError(f"partially upstreamed in vllm {version}: {upstream_evidence(up)}; "
                          f"not upstream: {', '.join(dict.fromkeys(rest))}", kind="partially-upstreamed",
                          anchor=up[0].anchor)
    for ch in changes:
        if ch.duplicates:
            lines = [f"{ch.relpath}:{line}" for d in ch.duplicates
                     if (line := ws.line_of(ch.relpath, f"{ch.qualname}.{d}")) is not None]
            raise AnchorError(f"duplicate-member check: patch {patch.id}, anchor {ch.anchor}: the edit gives "
                              f"{ch.qualname} a second definition of {', '.join(ch.duplicates)}"
                              + (f" (upstream's: {', '.join(lines)})" if lines else ""),
                              kind="invalid", anchor=ch.anchor)
    return False


def _failed(result: PatchResult, exc: Exception) -> None:
    """``result`` failed with ``exc`` (its first line; the kind and anchor it names)."""
    result.status, result.reason = FAILED, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    result.failure = getattr(exc, "kind", "conflict")
    result.failed_anchor = getattr(exc, "anchor", "") or ""
    result.anchors.clear()
    result.files.clear()


def _backward(ws: Workspace, patch: Patch, hand, result: PatchResult, strict: bool) -> None:
    """The backward upstream detection's word on a failed patch (:mod:`patchq.plan.backward`)."""
    from patchq.plan import backward as bw

    verdict = bw.detect(patch, ws.source, ws, gone=result.failure == "gone")
    if verdict is None:
        return
    if hand is not None:  # the hand-written check wins
        if verdict[0] != "not-upstreamed":
            result.reason += (f"; generic detection: {verdict[1]}, but the patch's upstream_check "
                              f"does not find it upstream")
        return
    status, why = verdict
    if status == UPSTREAMED and not strict:
        result.status, result.reason, result.failure, result.failed_anchor = UPSTREAMED, why, "", ""
    elif status == UPSTREAMED:
        result.failure = "upstreamed"
        result.reason = f"{why}; --strict asks patchq to apply every patch"
    elif status in ("partially-upstreamed", "possibly-upstreamed"):
        result.failure, result.reason = status, f"{why} ({result.reason})"
    else:
        result.reason += f"; {why}"


def _compiled_texts(ws: Workspace, results: list[PatchResult]) -> tuple[dict[str, str], dict[str, str]]:
    """(pristine, patched) texts of every changed file whose result compiles; a file that
    does not compile fails every patch that changed it, and is not written at all."""
    pristine: dict[str, str] = {}
    patched: dict[str, str] = {}
    for relpath in ws.changed():
        code = ws.text[relpath]
        err = ws.compile_error(relpath)
        if err is not None:
            for r in results:
                if relpath in r.files and r.status == OK:
                    r.status, r.reason = FAILED, f"{relpath}: result does not compile: line {err.lineno}: {err.msg}"
                    r.failure = "conflict"
            continue
        pristine[relpath] = ws.pristine_text[relpath]
        patched[relpath] = code
    # a file whose patches all failed to compile is not written at all
    bad = {f for r in results if r.status == FAILED for f in r.files}
    for relpath in bad:
        pristine.pop(relpath, None)
        patched.pop(relpath, None)
    return pristine, patched
