"""``patchq import``: a unified diff made against a vLLM release becomes an anchored patch.

1. **Parse** the diff with :mod:`unidiff` (git, quilt or patch-package format). Paths
   are normalized to site-packages-relative ``vllm/...``: the ``a/``/``b/`` prefix, a
   quilt top directory (``vllm-0.23.0.orig/``), ``.../site-packages/`` or
   ``node_modules/``-style prefixes all go, by taking the path from its ``vllm``
   component (the first such suffix that exists in the release). New, deleted and
   renamed files are refused: a patch changes existing vLLM code.
2. **Release**: ``--release``, else the newest cached release to which every hunk
   applies exactly (context and removed lines at the stated line numbers).
3. **Apply** the hunks exactly to the pristine files, giving the patched texts.
4. **Attribute** each hunk to its enclosing definition by line range (:mod:`ast`,
   decorators included; qualnames as :func:`patchq.plan.anchors.ast_index` indexes them:
   classes nest, nested functions do not): removed lines by the pristine file, added
   lines by the patched one (a definition new in the patch counts as its parent's
   change). A hunk outside every definition is *module level*.
5. **Node-scoped changes**: for each touched definition :func:`patchq.plan.stmtpatch.diff_definition`
   gives the statement operations; when a class and one of its methods are both touched,
   the method is an anchor of its own and the class's operations are its own statements
   (computed with the method already changed), so a change of the method is found in the
   method and fingerprinted there. Module-level insertions are anchored to the nearest
   definition by structure: right before the definition that follows them, else right
   after the one before them; when neither neighbour is a definition (e.g. an import
   in the middle of the imports) they go before the next definition and are reported as
   *relocated*. Module-level changes of existing statements are refused.
6. **Write** ``anchors/<id>.toml`` (one anchor per definition: module hint, qualname,
   fingerprint at the release) and ``series/<id_with_underscores>.py`` (the operations
   as literals, ``variant(">=<release>", edits={...})``), then **verify**: the new patch
   planned on the release must give exactly the diff's result, sentinel lines aside.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst
from packaging.version import Version
from unidiff import PatchSet
from unidiff.constants import LINE_TYPE_NO_NEWLINE
from unidiff.errors import UnidiffParseError

from patchq.authoring.merge import module_of, strip_sentinels
from patchq.errors import ImportRefused, PatchqError, UsageError  # noqa: F401
from patchq.model import MODULE_QUALNAME
from patchq.plan import stmtpatch
from patchq.plan.anchors import (
    ast_index,
    cut_segment,
    definition_span,
    fingerprint,
    module_fingerprint,
    split_lines,
)
from patchq.vllmdist import releases
from patchq.vllmdist.sources import CodeSource, release_source

if TYPE_CHECKING:
    from patchq.authoring.repowrite import Transaction
    from patchq.series import Series

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


# --------------------------------------------------------------------------- parsing


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


#: The largest diff (or ``--replacement`` file) ``import`` reads, in bytes; ``$PATCHQ_IMPORT_MAX_BYTES``
#: overrides it. Importing costs about 30 s and 0.6 GB per MB of hunks.
MAX_BYTES = 1 << 20
MAX_ENV = "PATCHQ_IMPORT_MAX_BYTES"


def max_bytes() -> int:
    """The size bound: ``$PATCHQ_IMPORT_MAX_BYTES`` (a positive integer), else :data:`MAX_BYTES`.

    Raises:
        UsageError: the variable is not a positive integer.
    """
    import os

    raw = os.environ.get(MAX_ENV)
    if not raw:
        return MAX_BYTES
    if not raw.strip().isdigit() or int(raw) <= 0:
        raise UsageError(f"{MAX_ENV}={raw!r}: give a positive number of bytes")
    return int(raw)


def read_input(file: str | Path, what: str = "diff") -> str:
    """The text of the diff (or replacement) ``file`` a user gives ``import``: a regular
    file (a FIFO or device such as ``/dev/zero`` is refused, never read) of at most
    :func:`max_bytes` bytes, in UTF-8.

    Raises:
        UsageError: missing, unreadable, not a regular file, larger than the bound (exit 2).
        ImportRefused: not UTF-8: another encoding (UTF-16 is named) or a stray byte,
            with its line (exit 1: it cannot become a patch; vLLM's sources are UTF-8).
    """
    import os
    import stat

    from patchq.errors import ImportRefused

    limit = max_bytes()
    too_large = UsageError(f"{file} is larger than {limit} bytes, the most `patchq import` reads (a {what} that "
                           f"size takes minutes and gigabytes to import); set {MAX_ENV}=N to allow more")
    try:
        fd = os.open(str(file), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{file} is not a regular file (a FIFO, device or directory); give the {what} as a file")
        if st.st_size > limit:
            raise too_large
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # it grew while read
                raise too_large
            chunks.append(chunk)
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ImportRefused(f"{file} is UTF-16 text; patchq reads UTF-8 {what}s, as vLLM's sources are "
                            f"(convert it: iconv -f UTF-16 -t UTF-8)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ImportRefused(f"{file}:{line}: not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start}); "
                            f"vLLM's sources are UTF-8, so a {what} of them is too") from None


def git_unquote(path: str) -> str:
    """A diff header path as git writes one holding non-ASCII or special characters:
    ``"a/foo\\303\\251.py"`` (C-style quoted, octal bytes of UTF-8) is ``a/fooé.py``; any
    other path is returned as it is.

    Raises:
        ImportRefused: a quoted path that does not decode (a bad escape, not UTF-8).
    """
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    body, out, i = path[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
        elif body[i + 1:i + 4].isdigit() and len(body[i + 1:i + 4]) == 3 and set(body[i + 1:i + 4]) <= set("01234567"):
            out.append(int(body[i + 1:i + 4], 8) & 0xFF)
            i += 4
        elif i + 1 < len(body) and body[i + 1] in _C_ESCAPES:
            out.append(_C_ESCAPES[body[i + 1]])
            i += 2
        else:
            raise ImportRefused(f"{path}: a quoted path with a bad escape at {body[i:i + 4]!r}")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise ImportRefused(f"{path}: a quoted path that is not UTF-8") from None


def outside_problem(relpath: str, raw: str) -> str | None:
    """Why the normalized diff path ``relpath`` (from the header's ``raw``) is not a file of
    the vllm package, or None: one refusal for every way out (``../``, an absolute path with
    no ``vllm`` directory in it, another package), exit 1 as every hunk patchq cannot import."""
    from patchq.env.layout import relpath_problem

    if relpath.startswith("vllm/") and relpath_problem(relpath) is None:
        return None
    return (f"{raw}: outside the vllm package ({relpath!r}); a patch changes files under vllm/, so every path of "
            f"the diff must name one (a/vllm/..., b/vllm/..., or .../site-packages/vllm/...)")


def normalize_path(raw: str, exists: Callable[[str], bool] | None = None) -> str | None:
    """A diff header path as a site-packages relpath ``vllm/...``; None for ``/dev/null``
    (a git-quoted path is unquoted first: :func:`git_unquote`)."""
    path = git_unquote(raw.split("\t")[0].strip())
    if path == "/dev/null":
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    cands = ["/".join(parts[i:]) for i, p in enumerate(parts) if p == "vllm" and i < len(parts) - 1]
    from patchq.env.layout import relpath_problem

    for c in cands:
        if exists is None or (relpath_problem(c) is None and exists(c)):
            return c
    if cands:
        return cands[-1]
    return "/".join(parts[1:]) if parts and parts[0] in ("a", "b") else "/".join(parts)


@dataclass
class FilePatch:
    """One file of the diff: its relpath and hunks (:class:`unidiff.Hunk`)."""

    relpath: str
    hunks: list


def parse(text: str, exists: Callable[[str], bool] | None = None) -> list[FilePatch]:
    """The files of a unified diff. Raises ImportRefused for non-diffs, new/deleted/renamed files."""
    try:
        ps = PatchSet(text)
    except UnidiffParseError as exc:
        raise ImportRefused(f"not a unified diff: {exc}") from None
    if not len(ps):
        raise ImportRefused("the diff changes no file")
    out = []
    for pf in ps:
        src = normalize_path(pf.source_file, exists)
        dst = normalize_path(pf.target_file, exists)
        if src is None or dst is None or pf.is_added_file or pf.is_removed_file:
            raise ImportRefused(f"{pf.path}: adds or deletes a file; patchq patches change existing vLLM files")
        for rel, raw in ((src, pf.source_file), (dst, pf.target_file)):
            problem = outside_problem(rel, raw)
            if problem:
                raise ImportRefused(problem)
        if src != dst:
            raise ImportRefused(f"{src} -> {dst}: renames a file; not supported")
        if not src.endswith(".py"):
            raise ImportRefused(f"{src}: not a Python file")
        out.append(FilePatch(src, list(pf)))
    return out


def apply_exact(text: str, fp: FilePatch) -> str:
    """``text`` with the hunks applied at their stated lines (no offset, no fuzz).

    Raises:
        ImportRefused: a context or removed line differs from ``text``.
    """
    lines = split_lines(text)
    out: list[str] = []
    pos = 0
    for h in fp.hunks:
        start = h.source_start - 1 if h.source_length else h.source_start
        if start < pos or start > len(lines):
            raise ImportRefused(f"{fp.relpath}: hunk {h.source_start},{h.source_length} is out of range")
        out += lines[pos:start]
        pos = start
        items = list(h)
        for n, ln in enumerate(items):
            if ln.line_type == LINE_TYPE_NO_NEWLINE:
                continue
            no_eol = n + 1 < len(items) and items[n + 1].line_type == LINE_TYPE_NO_NEWLINE
            value = ln.value[:-1] if no_eol and ln.value.endswith("\n") else ln.value
            if ln.is_added:
                out.append(value)
                continue
            if pos >= len(lines) or lines[pos].rstrip("\r\n") != value.rstrip("\r\n"):
                got = lines[pos].rstrip("\n") if pos < len(lines) else "<end of file>"
                raise ImportRefused(f"{fp.relpath}:{pos + 1}: the diff expects {value.rstrip(chr(10))!r}, "
                                    f"the file has {got!r}")
            if ln.is_context:
                out.append(lines[pos])
            pos += 1
    out += lines[pos:]
    return "".join(out)


def guess_release(files: list[FilePatch]) -> Version:
    """The newest cached release to which every hunk applies exactly. Raises ImportRefused."""
    for v in sorted(releases.cached_releases(), reverse=True):
        src = release_source(str(v))
        try:
            for fp in files:
                text = src.read_text(fp.relpath)
                if text is None:
                    raise ImportRefused(fp.relpath)
                apply_exact(text, fp)
        except ImportRefused:
            continue
        return v
    raise ImportRefused("the diff applies exactly to no cached release: pass --release VERSION")


# --------------------------------------------------------------------------- attribution


def _spans(text: str) -> dict[str, tuple[int, int]]:
    """qualname -> (first, last) line of every definition defined once."""
    return {q: definition_span(nodes[0]) for q, nodes in ast_index(text).items() if len(nodes) == 1}


def _innermost(spans: dict[str, tuple[int, int]], line: int) -> str | None:
    best = None
    for q, (a, b) in spans.items():
        if a <= line <= b and (best is None or (b - a) < (spans[best][1] - spans[best][0])):
            best = q
    return best


@dataclass
class HunkInfo:
    """A hunk of the diff and where it went: ``qualnames`` (definitions) and/or module level."""

    relpath: str
    header: str
    qualnames: list[str] = field(default_factory=list)
    module_level: bool = False
    #: the level it landed at (:data:`LEVELS`), filled by :func:`build`
    level: str = ""
    #: the stripped text of its added and removed lines (to tell which operations are its own)
    lines: list[str] = field(default_factory=list)


def attribute(relpath: str, pristine: str, patched: str, hunks: list) -> list[HunkInfo]:
    """Each hunk's enclosing definitions by line range (module docstring, step 4)."""
    old_spans, new_spans = _spans(pristine), _spans(patched)
    out = []
    for h in hunks:
        info = HunkInfo(relpath, f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@")
        found: list[str | None] = []
        info.lines = [ln.value.strip() for ln in h if (ln.is_added or ln.is_removed) and ln.value.strip()]
        for ln in h:
            if ln.is_removed:
                found.append(_innermost(old_spans, ln.source_line_no))
            elif ln.is_added:
                q = _innermost(new_spans, ln.target_line_no)
                while q is not None and q not in old_spans:  # a new definition: its parent changed
                    q = q.rpartition(".")[0] or None
                found.append(q)
        for q in found:
            if q is None:
                info.module_level = True
            elif q not in info.qualnames:
                info.qualnames.append(q)
        out.append(info)
    return out


#: Where a hunk can land, most precise first (the importer's order of preference): a
#: statement inserted/replaced/deleted; an expression inside one statement; a module-level
#: statement (a module-level anchor); a block prepend/append; the whole definition.
LEVELS = ("statement", "expression", "module", "block", "definition")


def op_level(op: dict, module: bool = False) -> str:
    """The :data:`LEVELS` entry of one statement operation (``module``: of a module-level anchor)."""
    if op["op"] == "definition":
        return "definition"
    if op["op"] == "expression":
        return "expression"
    if op["op"] == "result":  # a statement-level edit of every return: anchored on the definition
        return "statement"
    if module:
        return "module"
    if op["op"] == "insert" and op.get("at"):
        return "block"
    return "statement"


def _op_lines(op: dict) -> set[str]:
    return {ln.strip() for key in ("old", "new") for ln in str(op.get(key) or "").splitlines() if ln.strip()}


def hunk_levels(hunks: list[HunkInfo], anchors: list) -> None:
    """Fill each hunk's ``level``: the least precise level among the operations of its
    anchors that carry one of its changed lines (all its anchors' operations when none does)."""
    for h in hunks:
        mine = [a for a in anchors if a.relpath == h.relpath and
                (a.qualname in h.qualnames or any(q.startswith(a.qualname + ".") for q in h.qualnames)
                 or (h.module_level and a.qualname == MODULE_QUALNAME))]
        pairs = [(op, a.qualname == MODULE_QUALNAME) for a in mine for op in a.ops]
        own = [(op, m) for op, m in pairs if _op_lines(op) & set(h.lines)] or pairs
        levels = [op_level(op, m) for op, m in own]
        h.level = max(levels, key=LEVELS.index) if levels else "statement"


def _outermost(qualnames: list[str]) -> list[str]:
    """The qualnames not nested in another of them, each once."""
    unique = list(dict.fromkeys(qualnames))
    return [q for q in unique if not any(q.startswith(o + ".") for o in unique if o != q)]


def _touched(qualnames: list[str]) -> list[str]:
    """The definitions the hunks touch, each once, innermost first: every changed definition
    is an anchor of its own (a changed method is anchored on the method, not on its class:
    issue 37, item 7), and a class whose own statements changed is anchored for those."""
    unique = list(dict.fromkeys(qualnames))
    return sorted(unique, key=lambda q: -q.count("."))


# --------------------------------------------------------------------------- module level


def _with_definitions(pristine: str, patched: str, relpath: str, qualnames: list[str]) -> str:
    """``pristine`` with the lines of each of ``qualnames`` (decorators to end, not the comments
    above) taken from ``patched``: the module as the definition anchors leave it, before the
    module-level anchor runs."""
    old_index, new_index = ast_index(pristine), ast_index(patched)
    lines, new_lines = split_lines(pristine), split_lines(patched)
    spans = []
    for q in qualnames:
        a, b = definition_span(old_index[q][0])
        c, d = definition_span(new_index[q][0])
        spans.append((a - 1, b, new_lines[c - 1:d]))
    for a, b, repl in sorted(spans, reverse=True):
        lines[a:b] = repl
    return "".join(lines)


def module_anchor(relpath: str, pristine: str, patched: str, definition_anchors: list,
                  taken: set[str]) -> AnchorOut:
    """The module-level anchor of a file (series format 2): statement operations on the
    module's own statements (imports, assignments, calls, ``__all__``, helpers added or
    removed), computed against the module as its definition anchors leave it.

    Raises:
        ImportRefused: the operations do not reproduce the patched module exactly.
    """
    middle = _with_definitions(pristine, patched, relpath, _outermost([a.qualname for a in definition_anchors]))
    ops = stmtpatch.diff_module(cst.parse_module(middle), cst.parse_module(patched))
    if not ops and middle != patched:
        raise ImportRefused(f"{relpath}: the module-level change cannot be expressed as statement operations on "
                            f"the module's own statements (nothing written)")
    return AnchorOut(_anchor_id("module " + module_of(relpath).rsplit(".", 1)[-1], taken), relpath,
                     MODULE_QUALNAME, module_fingerprint(pristine), ops)


# --------------------------------------------------------------------------- the import


@dataclass
class AnchorOut:
    """One anchor of the imported patch."""

    anchor_id: str
    relpath: str
    qualname: str
    fingerprint: str
    ops: list[dict]


@dataclass
class ImportPlan:
    """What :func:`build` made of a diff (nothing written yet)."""

    patch_id: str
    release: str
    release_guessed: bool
    source_name: str
    hunks: list[HunkInfo]
    anchors: list[AnchorOut]
    pristine: dict[str, str]
    patched: dict[str, str]
    notes: list[str] = field(default_factory=list)
    #: names undefined in the diff's own result that the caller declared: the patch's ``runtime_names``
    runtime_names: list[str] = field(default_factory=list)


def undefined_names(pristine: str, patched: str) -> list[tuple[str, int]]:
    """(name, line in ``patched``) of each name pyflakes finds undefined in ``patched`` and
    not in ``pristine`` (each once, at its first line). A name used only in a local
    variable's annotation is left out: Python never evaluates it
    (:func:`patchq.plan.validate.lazy_annotations`)."""
    from pyflakes import checker  # type: ignore[import-untyped]

    from patchq.plan.validate import lazy_annotations

    def undefined(text: str) -> list[tuple[str, int]]:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return []
        lazy = lazy_annotations(tree)
        msgs = checker.Checker(tree, filename="<patchq>").messages
        return [(str(m.message_args[0]), m.lineno) for m in msgs
                if type(m).__name__ in ("UndefinedName", "UndefinedExport")
                and not any(a <= (m.lineno, m.col) < b for a, b in lazy)]

    before = [n for n, _ in undefined(pristine)]
    out: list[tuple[str, int]] = []
    for name, line in undefined(patched):
        if name in before:
            before.remove(name)
        elif name not in {n for n, _ in out}:
            out.append((name, line))
    return out


def undefined_in_result(pristine: str, patched: str) -> list[str]:
    """The names of :func:`undefined_names`."""
    return [n for n, _ in undefined_names(pristine, patched)]


def _bound_in_release(name: str, source: CodeSource, limit: int = 3) -> list[str]:
    """``vllm.module`` of up to ``limit`` modules of the release that bind ``name`` at
    module level, or declare it there (``x: T``, e.g. under ``if TYPE_CHECKING:``): a hint
    for a name a diff uses without importing it."""
    head = rf"^(?:def|class|async def)\s+{re.escape(name)}\b"  # a top-level def or class
    decl = rf"^(?: {{4}})?{re.escape(name)}\s*(?::[^=\n]*)?(?:=(?!=)|$)"  # x = ..., or x: T (under an if)
    pat = re.compile(f"{head}|{decl}", re.M)
    out = []
    for rel in source.py_files():
        text = source.read_text(rel) or ""
        if name in text and pat.search(text):
            out.append(module_of(rel))
            if len(out) >= limit:
                break
    return out


def level_counts(plan: ImportPlan) -> dict[str, int]:
    """level -> number of hunks that landed there (:data:`LEVELS` order, zeros left out)."""
    out = {lvl: sum(h.level == lvl for h in plan.hunks) for lvl in LEVELS}
    return {k: v for k, v in out.items() if v}


def summary_line(plan: ImportPlan) -> str:
    """One line: how many hunks landed at which level, and every whole-definition
    replacement with its reason (the command's own summary, not a note after it)."""
    counts = ", ".join(f"{v} {k}" for k, v in level_counts(plan).items())
    line = f"{len(plan.hunks)} hunk(s): {counts or 'none'}"
    whole = [a for a in plan.anchors if any(o["op"] == "definition" for o in a.ops)]
    if whole:
        line += "; REPLACED WHOLE: " + "; ".join(
            f"{a.qualname} (no statement, expression or block operation reproduces its patched text exactly; "
            f"it applies only where its fingerprint is {a.fingerprint})" for a in whole)
    return line


def _anchor_id(qualname: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", qualname.lower()).strip("-") or "definition"
    out, n = base, 2
    while out in taken:
        out, n = f"{base}-{n}", n + 1
    taken.add(out)
    return out


def _check_runtime_names(plan: ImportPlan, relpath: str, pristine: str, patched: str, declared: Iterable[str],
                         source: CodeSource) -> None:
    """The names undefined in the diff's own result (pyflakes; local annotations aside):
    those the caller declares (``--runtime-name``, a refined patch's ``runtime_names``)
    become the patch's ``runtime_names``; any other is refused, naming its line and where
    the release binds it, if anywhere (issue 37: a name the runtime does not provide is
    never declared by itself: the patched code would raise NameError).

    Raises:
        ImportRefused: an undeclared undefined name (nothing written).
    """
    allowed = set(declared)
    refused = []
    for name, line in undefined_names(pristine, patched):
        if name in allowed:
            if name not in plan.runtime_names:
                plan.runtime_names.append(name)
                plan.notes.append(f"{relpath}: `{name}` is undefined in the diff's own result (pyflakes); declared "
                                  f"runtime_names=[{name!r}] as asked")
            continue
        where = _bound_in_release(name, source)
        hint = f" (vllm {source.version} binds it in {', '.join(where)}: import it in the diff)" if where else ""
        refused.append(f"`{name}` ({relpath}:{line}){hint}")
    if refused:
        raise ImportRefused(f"the changed code reads names its module does not bind (nothing written; it would raise "
                            f"NameError): {'; '.join(refused)}. Import or define them in the diff, or pass "
                            f"--runtime-name NAME for a name something really provides at run time")


def _anchor_definitions(plan: ImportPlan, relpath: str, pristine: str, patched: str, infos: list[HunkInfo],
                        taken: set[str]) -> None:
    """One anchor per outermost definition the hunks ``infos`` touch, with the statement
    operations that turn its pristine text into the patched one.

    Raises:
        ImportRefused: a touched definition is not defined exactly once on both sides.
    """
    touched = _touched([q for i in infos for q in i.qualnames if q])
    old_index, new_index = ast_index(pristine), ast_index(patched)
    for q in touched:
        if len(old_index.get(q, [])) != 1 or len(new_index.get(q, [])) != 1:
            raise ImportRefused(f"{relpath}: {q} is not defined exactly once in the pristine and the "
                                f"patched file (conditional definitions): cannot anchor it")
        pristine_seg = cut_segment(pristine, relpath, q, old_index[q][0])
        inner = _outermost([t for t in touched if t.startswith(q + ".")])  # changed by their own anchors first
        old_seg = pristine_seg
        if inner:
            before = _with_definitions(pristine, patched, relpath, inner)
            old_seg = cut_segment(before, relpath, q, ast_index(before)[q][0])
        new_seg = cut_segment(patched, relpath, q, new_index[q][0])
        if old_seg.def_text == new_seg.def_text:
            continue  # only its inner definitions changed
        ops = stmtpatch.diff_definition(old_seg.node, new_seg.node)
        fp = fingerprint(pristine_seg.node)
        if any(o["op"] == "definition" for o in ops):
            plan.notes.append(f"{q}: replaced as a whole: no statement, expression or block operation "
                              f"reproduces the patched text exactly; it applies only where {q} is unchanged "
                              f"(fingerprint {fp})")
            if inner:  # the whole definition, inner ones included, as one anchor
                ops = stmtpatch.diff_definition(pristine_seg.node, new_seg.node)
                plan.anchors[:] = [a for a in plan.anchors
                                   if not (a.relpath == relpath and a.qualname.startswith(q + "."))]
        plan.anchors.append(AnchorOut(_anchor_id(q, taken), relpath, q, fp, ops))


def build(diff_text: str, patch_id: str, release: str | None = None, source_name: str = "",
          runtime_names: Iterable[str] = ()) -> ImportPlan:
    """Turn a diff into an :class:`ImportPlan` (module docstring, steps 1-5).
    ``runtime_names``: names the caller declares as provided at run time (the only
    undefined names accepted: :func:`_check_runtime_names`).

    Raises:
        UsageError: a bad patch id.
        ImportRefused: the diff cannot become an anchored patch.
        TargetNotFound: the release cannot be had.
    """
    if not _ID_RE.match(patch_id):
        raise UsageError(f"patch id {patch_id!r}: use kebab-case (a-z, 0-9, -)")
    probe: CodeSource | None = release_source(release) if release else None
    files = parse(diff_text, probe.exists if probe else None)
    guessed = release is None
    version = Version(release) if release else guess_release(files)
    source = probe or release_source(str(version))
    plan = ImportPlan(patch_id, str(version), guessed, source_name, [], [], {}, {})
    taken: set[str] = set()
    for fp in files:
        pristine = source.read_text(fp.relpath)
        if pristine is None:
            raise ImportRefused(f"{fp.relpath} is not in vllm {version}")
        patched = apply_exact(pristine, fp)
        try:
            compile(patched, fp.relpath, "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise ImportRefused(f"{fp.relpath}:{exc.lineno}: the changed file is not valid Python "
                                f"({exc.msg}); nothing written") from None
        plan.pristine[fp.relpath], plan.patched[fp.relpath] = pristine, patched
        _check_runtime_names(plan, fp.relpath, pristine, patched, runtime_names, source)
        infos = attribute(fp.relpath, pristine, patched, fp.hunks)
        plan.hunks += infos
        _anchor_definitions(plan, fp.relpath, pristine, patched, infos, taken)
        if any(i.module_level for i in infos):
            mine = [a for a in plan.anchors if a.relpath == fp.relpath]
            plan.anchors.append(module_anchor(fp.relpath, pristine, patched, mine, taken))
    hunk_levels(plan.hunks, plan.anchors)
    if not any(a.ops for a in plan.anchors):
        raise ImportRefused("the diff changes nothing that can be anchored (only comments or blank lines "
                            "outside definitions?)")
    return plan


# --------------------------------------------------------------------------- files


def _literal(value: object, indent: int) -> str:
    """A Python literal for ``value``; multi-line strings as triple-quoted blocks."""
    pad = " " * indent
    if isinstance(value, str) and "\n" in value and '"""' not in value and "\\" not in value \
            and not value.endswith('"') and value.endswith("\n"):
        return '"""\\\n' + value + '"""'
    if isinstance(value, dict):
        items = ",\n".join(f"{pad}    {k!r}: {_literal(v, indent + 4)}" for k, v in value.items())
        return "{\n" + items + f",\n{pad}}}"
    if isinstance(value, list):
        items = ",\n".join(f"{pad}    {_literal(v, indent + 4)}" for v in value)
        return "[\n" + items + f",\n{pad}]" if value else "[]"
    return repr(value)


def render_module(plan: ImportPlan, summary: str | None = None) -> str:
    """The text of ``series/<id>.py``: the operations per anchor and the ``PATCH``."""
    ops = {a.anchor_id: a.ops for a in plan.anchors}
    runtime = f"\n    runtime_names={plan.runtime_names!r}," if plan.runtime_names else ""
    summ = summary or f"imported from {plan.source_name or 'a diff'} (vllm {plan.release})"
    where = "".join(f"\n* {a.anchor_id}: {a.qualname} ({a.relpath})" for a in plan.anchors)
    from patchq.authoring.scaffold import case_skeleton

    first = plan.anchors[0]
    case_fn, case_text = case_skeleton(plan.patch_id, module_of(first.relpath), first.qualname)
    return f'''"""{plan.patch_id}: {summ}.

Generated by `patchq import` from {plan.source_name or 'a unified diff'} made against vllm {plan.release}.
Each anchor's change is a list of statement operations (patchq.statements: the public format), found by
structure inside the anchored definition:
{where}
"""

from patchq.series import case, patch, patched_definition, variant
from patchq.statements import statement_edit

OPS = {_literal(ops, 0)}


{case_text}

PATCH = patch(
    id={plan.patch_id!r},
    summary={summ!r},
    why={("Imported from " + (plan.source_name or "a unified diff") + "; describe why vLLM needs it.")!r},
    applies={">=" + plan.release!r},{runtime}
    variants=[
        variant({">=" + plan.release!r}, edits={{anchor: statement_edit(ops) for anchor, ops in OPS.items()}}),
    ],
    cases=[{case_fn}],
)
'''


def render_anchors(plan: ImportPlan) -> str:
    """The text of ``anchors/<id>.toml`` (tomli_w; one anchor per definition, with its fingerprint)."""
    import tomli_w

    anchors = {a.anchor_id: {"module": module_of(a.relpath), "qualname": a.qualname, "count": 1,
                             "fingerprints": {plan.release: a.fingerprint}} for a in plan.anchors}
    head = (f"# Anchors of patch {plan.patch_id}, generated by `patchq import` (vllm {plan.release}).\n"
            f"# One anchor per changed definition (qualname \"{MODULE_QUALNAME}\": the module's own statements);\n"
            f"# the statements are found by series/{plan.patch_id.replace('-', '_')}.py.\n\n")
    if any(a.qualname == MODULE_QUALNAME for a in plan.anchors):
        head += "format = 2   # anchors format 2: module-level anchors\n\n"
    return head + tomli_w.dumps({"anchors": anchors}, multiline_strings=True)


def variant_anchors(plan: ImportPlan, data: dict) -> dict[str, list[dict]]:
    """Add ``plan``'s anchors to ``data`` (a parsed anchors file, changed in place) as the
    anchors of a new variant from ``plan.release`` on: ``<anchor id>-<release>`` (``-x``
    appended while the id is taken), no node pattern, count 1, a fingerprint on
    ``plan.release`` only (the release the change was made and verified on). ``plan``'s
    anchors take those ids.

    Returns:
        The variant's statement operations by new anchor id.
    """
    ops: dict[str, list[dict]] = {}
    suffix = "-" + plan.release.replace(".", "-")
    table = data.setdefault("anchors", {})
    for a in plan.anchors:
        aid = a.anchor_id + suffix
        while aid in table:
            aid += "-x"
        table[aid] = {"module": module_of(a.relpath), "qualname": a.qualname, "count": 1,
                      "fingerprints": {plan.release: a.fingerprint}}
        a.anchor_id, ops[aid] = aid, a.ops
    return ops


def module_file_name(patch_id: str) -> str:
    """``series/<id_with_underscores>.py``'s file name (the series loader's rule)."""
    return patch_id.replace("-", "_") + ".py"


def write(plan: ImportPlan, series_root: Path, anchors_root: Path, summary: str | None = None,
          force: bool = False, txn: Transaction | None = None) -> list[str]:
    """Write ``series/<id>.py`` and ``anchors/<id>.toml``, both or neither
    (:mod:`patchq.authoring.repowrite`; staged in ``txn`` when given). Raises UsageError
    when they exist, RepoWriteError when the environment refuses the write."""
    from patchq.authoring import repowrite

    module = series_root / module_file_name(plan.patch_id)
    anchors = anchors_root / f"{plan.patch_id}.toml"
    if not force and (os.path.lexists(module) or os.path.lexists(anchors)):
        raise UsageError(f"patch {plan.patch_id} exists ({module.name}); pass --force to overwrite")
    if txn is None:
        with repowrite.Transaction(repowrite.repo_of(series_root), f"patchq import {plan.patch_id}",
                                   [repowrite.repo_of(series_root), series_root, anchors_root]) as own:
            return write(plan, series_root, anchors_root, summary, force, own)
    txn.write(module, render_module(plan, summary))
    txn.write(anchors, render_anchors(plan))
    return [str(module), str(anchors)]


def write_verified(plan: ImportPlan, series: Series, summary: str | None, force: bool, what: str,
                   after_write: Callable[[Transaction], object] | None = None,
                   txn: Transaction | None = None) -> list[str]:
    """Write the patch (:func:`write`), run ``after_write(txn)`` if given (it may stage
    more files), land them, then :func:`verify` it; when it does not reproduce the edit,
    every file goes back to what it was (the transaction rolls back) and it raises.
    Returns the written paths. With ``txn`` the caller's transaction is used (it may
    stage more files after this returns; they land together).

    Raises:
        UsageError: the files exist and not ``force``.
        ImportRefused: the written patch does not reproduce ``what`` on its release.
        RepoWriteError: the environment refused a write (nothing changed).
    """
    from patchq.authoring import repowrite
    from patchq.series import Series

    if txn is None:
        with repowrite.series_transaction(series, f"patchq import {plan.patch_id}") as own:
            return write_verified(plan, series, summary, force, what, after_write, own)
    written = write(plan, series.root, series.anchors_root, summary, force=force, txn=txn)
    if after_write is not None:
        after_write(txn)
    txn.apply()
    ok, why = verify(plan, Series(series.root, series.anchors_root, series.profiles, {}))
    if not ok:
        raise ImportRefused(f"the generated patch does not reproduce {what} on vllm {plan.release} "
                            f"(nothing written): {why}")
    return written


def verify(plan: ImportPlan, series: Series) -> tuple[bool, str]:
    """Plan the written patch on its release: (True, "") when every file equals the diff's
    result (sentinel lines aside), else (False, why)."""
    from patchq.plan import engine

    sys.modules.pop("patchq_series_" + plan.patch_id.replace("-", "_"), None)
    patch = series.patch(plan.patch_id)
    result = engine.plan(release_source(plan.release), [patch])
    r = result.results[0]
    if r.status != engine.OK:
        return False, r.reason
    for rel, want in plan.patched.items():
        got = strip_sentinels(result.patched.get(rel, plan.pristine[rel]))
        if got != want:
            diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "diff", "patchq", n=1))
            return False, f"{rel}: the applied patch differs from the diff's result:\n{diff[:2000]}"
    return True, ""
