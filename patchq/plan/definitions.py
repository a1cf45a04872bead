"""Definitions of a vLLM: one type, one index per release, cached by content.

A *definition* is a ``def`` or ``class`` that :func:`patchq.plan.anchors.ast_index` names by
qualified name (``Class.method``; definitions under module-level ``if``/``try``/``with``
count, nested functions do not). Everything in patchq that asks "what is ``qualname`` in
this release" (the engine, ``check``, ``rebase``, ``upstream log``, a patch's
``upstream_check``) asks this module:

* :class:`Entry` -- one definition as the index stores it: qualname, kind, the line of its
  keyword, its span (decorators included) and indentation. No text, no AST, and no
  fingerprint: computing every definition's fingerprint doubled the cost of indexing a
  file, and only anchored definitions need one (:func:`definition_from` computes it from
  the definition's own lines).
* :func:`file_entries` / :func:`text_index` -- the entries of one module text, in
  :func:`ast_index`'s walk order, memoized in-process by the text's sha256.
* :class:`SourceIndex` -- every definition of a :class:`CodeSource`'s package, keyed by
  the content of each file and persisted in ``<cache>/index/defs-3.sqlite``
  (:mod:`patchq.vllmdist.cache`): a file is parsed once, ever, whichever release or
  installed copy holds it (consecutive releases share most files); the cold files a
  package-wide question needs are parsed in parallel processes. Which files declare
  which names (a regex, no parsing) is kept per release tree, so a package-wide search
  reads nothing but the index.
* :class:`Definition` -- one definition with its text and its :mod:`ast` node (parsed
  from the definition's own lines, line numbers as in the whole file): what
  ``check``'s drift, ``rebase``'s merge, ``upstream log`` and :mod:`patchq.postcheck`
  hand around.

The fingerprint of a definition is :func:`patchq.plan.anchors.fingerprint_ast` of it (its
normalized AST, docstrings left out). Every value here equals what parsing the whole file
with :mod:`ast` would give; only the cost differs.
"""

from __future__ import annotations

import ast
import hashlib
import marshal
import os
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from patchq.errors import SourceError
from patchq.sentinels import find_sentinels
from patchq.vllmdist import cache

#: Bump when the entry format or the fingerprint changes (old index files are ignored).
#: 2: every row carries a checksum (a damaged row is recomputed, never used).
#: 3: entries are stored without fingerprints (computed when asked, from the definition's
#: own lines: :func:`definition_from`, :meth:`patchq.plan.engine.Workspace.pristine_fingerprint`).
INDEX_FORMAT = 3


def _check(*parts: str | bytes) -> str:
    """16 hex of sha256 over a row's fields: stored with the row, compared when read."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass") if isinstance(part, str) else bytes(part))
        h.update(b"\0")
    return h.hexdigest()[:16]

_WRAPPER = "class _patchq_segment_:\n"


class Entry(NamedTuple):
    """One definition in a module text, as indexed.

    Attributes:
        qualname: ``Class.method``. kind: ``class`` or ``def`` (async included).
        line: 1-based line of the ``def``/``class`` keyword (``node.lineno``).
        start, end: 1-based first line (decorators included) and last line.
        col: indentation of the keyword line (``node.col_offset``).
        fingerprint: 16 hex (:func:`patchq.plan.anchors.fingerprint_ast`), or ``""`` when
            not computed (the index's entries, entries of edited texts in a plan):
            :func:`definition_from` computes it.
    """

    qualname: str
    kind: str
    line: int
    start: int
    end: int
    col: int
    fingerprint: str

    @property
    def lineno(self) -> int:
        """Alias of :attr:`line` (what an :mod:`ast` node calls it)."""
        return self.line


# --------------------------------------------------------------------------- normalized AST (memoized)


def _fingerprints(tree: ast.Module) -> dict[int, str]:
    """id(definition node) -> fingerprint, for every definition of ``tree``, each subtree
    normalized once (a class's fingerprint reuses its methods' normal forms)."""
    from patchq.plan.anchors import _DOC_OWNERS, _SKIP_FIELDS, _is_docstring

    memo: dict[int, object] = {}

    def norm(node: object) -> object:
        if isinstance(node, ast.AST):
            key = id(node)
            got = memo.get(key)
            if got is not None:
                return got
            items = []
            for name in node._fields:
                if name in _SKIP_FIELDS:
                    continue
                value = getattr(node, name, None)
                if name == "body" and isinstance(node, _DOC_OWNERS) and value and _is_docstring(value[0]):
                    value = value[1:] or [ast.Pass()]
                if value is None or value == []:
                    continue
                items.append((name, norm(value)))
            out = (type(node).__name__, tuple(items))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                memo[key] = out
            return out
        if isinstance(node, list):
            return tuple(norm(v) for v in node)
        return repr(node)

    fps: dict[int, str] = {}

    def walk(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if isinstance(stmt, ast.ClassDef):
                    walk(stmt.body)  # methods first: their normal forms are reused
                wrapped = ("Module", (("body", (norm(stmt),)),))
                fps[id(stmt)] = hashlib.sha256(repr(wrapped).encode()).hexdigest()[:16]
            elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
                for sub in _blocks(stmt):
                    walk(sub)

    walk(tree.body)
    return fps


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The blocks :func:`patchq.plan.anchors.ast_index` descends into, in its order."""
    out = [getattr(stmt, "body", []), getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
    out += [h.body for h in getattr(stmt, "handlers", [])]
    return out


def entries_of_tree(tree: ast.Module, prefix: str = "", line_offset: int = 0,
                    with_fingerprints: bool = True) -> list[Entry]:
    """The entries of a parsed module (or segment), in :func:`ast_index` walk order.

    Args:
        prefix: qualname prefix of the block the tree stands for (``"Class."``).
        line_offset: added to every line number (a segment parsed alone).
        with_fingerprints: compute fingerprints (else ``""``).
    """
    fps = _fingerprints(tree) if with_fingerprints else {}
    out: list[Entry] = []

    def walk(body: list[ast.stmt], pre: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = pre + stmt.name
                start = min([stmt.lineno] + [d.lineno for d in stmt.decorator_list])
                out.append(Entry(qual, "class" if isinstance(stmt, ast.ClassDef) else "def",
                                 stmt.lineno + line_offset, start + line_offset,
                                 stmt.end_lineno + line_offset,  # type: ignore[operator]
                                 stmt.col_offset, fps.get(id(stmt), "")))
                if isinstance(stmt, ast.ClassDef):
                    walk(stmt.body, qual + ".")
            elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
                for sub in _blocks(stmt):
                    walk(sub, pre)

    walk(tree.body, prefix)
    return out


def file_entries(text: str, fingerprints: bool = True) -> tuple[Entry, ...] | None:
    """The entries of a module text (walk order), or None when it does not parse.
    ``fingerprints``: compute them (half the cost: the index leaves them out)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return tuple(entries_of_tree(tree, with_fingerprints=fingerprints))


def group(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """qualname -> entries (several when conditionally defined), walk order kept."""
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.qualname, []).append(e)
    return out


def text_sha(text: str) -> str:
    """Hex sha256 of a text's UTF-8 bytes (the key of its entries)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_MEMO: dict[str, tuple[Entry, ...] | None] = {}
_GROUPED: dict[str, dict[str, list[Entry]] | None] = {}


def text_index(text: str, sha: str | None = None) -> dict[str, list[Entry]] | None:
    """qualname -> entries of a module text (memoized by sha256); None when it does not parse."""
    sha = sha or text_sha(text)
    if sha in _GROUPED:
        return _GROUPED[sha]
    if sha not in _MEMO:
        _MEMO[sha] = file_entries(text, fingerprints=False)
    ents = _MEMO[sha]
    out = None if ents is None else group(ents)
    _GROUPED[sha] = out
    return out


# --------------------------------------------------------------------------- texts of definitions


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split on ``\\n`` only (as :mod:`ast` counts lines)."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    return lines


def span_text(text: str, start: int, end: int, lines: Sequence[str] | None = None) -> str:
    """Lines ``start``..``end`` (1-based, inclusive) of ``text``, indentation kept."""
    return "".join((lines if lines is not None else split_lines(text))[start - 1:end])


def parse_definition(seg: str, start: int) -> ast.stmt:
    """The :mod:`ast` node of one definition's lines ``seg`` (from :func:`span_text`, first
    line ``start`` of its file), with the line numbers it has in the whole file.

    An indented definition (a method) is parsed inside a one-line dummy class, so its
    columns are unchanged too.

    Raises:
        SyntaxError: the lines do not parse alone.
    """
    indented = seg.lstrip("\n")[:1] in (" ", "\t")
    pad = start - 2 if indented else start - 1
    if pad >= 0:  # blank lines above put every node on its file line (ast.increment_lineno walks them all)
        try:
            tree = ast.parse("\n" * pad + (_WRAPPER + seg if indented else seg))
            return tree.body[0].body[0] if indented else tree.body[0]  # type: ignore[attr-defined]
        except SyntaxError:
            pass  # raised below, as the lines alone give it (line numbers of the segment)
    if indented:
        tree = ast.parse(_WRAPPER + seg)
        node = tree.body[0].body[0]  # type: ignore[attr-defined]
        ast.increment_lineno(tree, start - 2)
    else:
        tree = ast.parse(seg)
        node = tree.body[0]
        ast.increment_lineno(tree, start - 1)
    return node


def module_of(relpath: str) -> str:
    """Dotted module of a relpath: ``vllm/a/b.py`` -> ``vllm.a.b``; ``__init__`` dropped."""
    mod = relpath[:-3] if relpath.endswith(".py") else relpath
    if mod.endswith("/__init__"):
        mod = mod[: -len("/__init__")]
    return mod.replace("/", ".")


def module_paths(module: str) -> tuple[str, str]:
    """The two relpaths a dotted module can be: ``a/b.py`` and ``a/b/__init__.py``."""
    base = module.replace(".", "/")
    return (base + ".py", base + "/__init__.py")


def sentinels_above(lines: Sequence[str], start: int) -> tuple[str, ...]:
    """Patch ids of the sentinel comments directly above line ``start`` (1-based)."""
    out: list[str] = []
    i = start - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        out += [pid for pid, _ in find_sentinels(lines[i].rstrip("\r\n"))]
        i -= 1
    return tuple(out)


@dataclass(frozen=True)
class Definition:
    """One definition in one file of one vLLM.

    Attributes:
        relpath: the file (``vllm/v1/core/kv_cache_utils.py``). qualname: ``Class.method``.
        start, end: 1-based line range, decorators included. line: the ``def``/``class``
            keyword's line.
        kind: ``class`` or ``def``.
        text: lines ``start``..``end``, indentation kept (ends with a newline).
        fingerprint: 16 hex of its normalized AST (:mod:`patchq.plan.anchors`).
        node: its :mod:`ast` node, with the line numbers of the whole file.
        sentinels: patch ids of the sentinel comments directly above it.
        version: the release it was read from, when known. blob: the file's git blob id
            (a release read from git), else ``""``.
    """

    relpath: str
    qualname: str
    start: int
    end: int
    text: str
    fingerprint: str
    kind: str
    node: ast.stmt = field(repr=False, compare=False)
    line: int = 0
    sentinels: tuple[str, ...] = ()
    version: object = None
    blob: str = ""

    @property
    def where(self) -> str:
        """``relpath:line``."""
        return f"{self.relpath}:{self.line}"

    def patched_by(self, patch_id: str) -> bool:
        """True when the definition carries a sentinel of ``patch_id``."""
        return patch_id in self.sentinels

    def dedented(self) -> str:
        """:attr:`text` dedented (what ``check``'s drift diffs)."""
        return textwrap.dedent(self.text)


def definition_from(text: str, relpath: str, entry: Entry, lines: Sequence[str] | None = None,
                    newline: bool = True, **extra) -> Definition:
    """The :class:`Definition` of ``entry`` in the module ``text``.

    ``newline``: end :attr:`Definition.text` with a newline even when the file's last
    line has none. ``extra``: ``version``, ``blob``.
    """
    lines = lines if lines is not None else split_lines(text)
    body = "".join(lines[entry.start - 1:entry.end])
    if newline and not body.endswith("\n"):
        body += "\n"
    node = parse_definition(body if body.endswith("\n") else body + "\n", entry.start)
    fp = entry.fingerprint
    if not fp:
        from patchq.plan.anchors import fingerprint_ast

        fp = fingerprint_ast(node)
    return Definition(relpath, entry.qualname, entry.start, entry.end, body, fp, entry.kind, node,
                      entry.line, sentinels_above(lines, entry.start), **extra)


def cut(text: str, relpath: str, qualname: str, index: Mapping[str, Sequence[Entry]] | None = None
        ) -> Definition | None:
    """The one definition ``qualname`` of a module's text, or None (absent, defined twice,
    or the text does not parse)."""
    index = index if index is not None else text_index(text)
    found = (index or {}).get(qualname, [])
    if len(found) != 1:
        return None
    return definition_from(text, relpath, found[0])


def definition_text(text: str, qualname: str) -> tuple[int, str] | None:
    """(1-based first line, dedented source) of the one ``qualname`` in ``text``; decorators
    and comments inside included. None when absent, defined more than once, or the text
    does not parse."""
    found = (text_index(text) or {}).get(qualname, [])
    if len(found) != 1:
        return None
    e = found[0]
    return e.start, textwrap.dedent(span_text(text, e.start, e.end))


# --------------------------------------------------------------------------- per-source index


_DECL_RE = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)


def declared_names(text: str) -> frozenset[str]:
    """Every name a ``def``/``class`` statement of ``text`` declares, nested ones included
    (no parsing: ``name in declared_names(text)`` is
    :func:`patchq.plan.anchors.declares`)."""
    return frozenset(_DECL_RE.findall(text))


def _index_files(items: list[tuple[str, str]]) -> list[tuple[str, tuple[Entry, ...] | None]]:
    """(sha, entries without fingerprints) of (sha, text) pairs (runs in worker processes)."""
    return [(sha, file_entries(text, fingerprints=False)) for sha, text in items]


def _parallel(todo: list[tuple[str, str]], workers: int) -> list[tuple[str, tuple[Entry, ...] | None]]:
    """:func:`_index_files` over ``todo``, in ``workers`` processes when it is worth it."""
    if workers <= 1 or len(todo) < 48:
        return _index_files(todo)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    todo = sorted(todo, key=lambda it: -len(it[1]))
    chunks = [todo[i::workers * 4] for i in range(workers * 4)]  # big and small files spread
    out: list = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for part in pool.map(_index_files, chunks):
            out += part
    return out


def _workers() -> int:
    """Processes for a cold index: ``$PATCHQ_INDEX_WORKERS``, else the usable CPUs."""
    env = os.environ.get("PATCHQ_INDEX_WORKERS")
    if env and env.isdigit():
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _Store:
    """The persisted entries: ``<cache>/index/defs-3.sqlite`` (:func:`patchq.vllmdist.cache.definition_index`).

    Table ``files``: sha256 of a module text -> its entries (content-addressed: releases
    share the entries of their unchanged files, and an installed copy those of its
    release). Table ``names``: for each release tree from patchq's cache (by its RECORD's
    sha256), relpath -> (sha256, names its ``def``/``class`` statements declare). Reads
    are one query per file or per release; writes are batched (:meth:`save`). Every row
    carries a checksum of its fields (:func:`_check`): a damaged row is recomputed, never
    used. Any database error disables the store for the process: the index is only a
    speed-up; so does a database file another user owns or others can write (a note).
    """

    def __init__(self) -> None:
        self._db = None
        self._pid = None
        self.broken = False
        self.pending: dict[str, tuple[Entry, ...] | None] = {}
        self.pending_names: dict[str, dict[str, tuple[str, frozenset[str]]]] = {}

    def _conn(self):
        if self.broken:
            return None
        if self._db is not None and self._pid == os.getpid():
            return self._db
        import sqlite3

        try:
            path = cache.definition_index()
            from patchq.trust import ownership_problem

            for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                problem = ownership_problem(str(f))
                if problem:  # another user's index could point a rename search anywhere: not used
                    cache.note_untrusted("definition index", f, problem)
                    self.broken = True
                    return None
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), timeout=60, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS files (sha TEXT PRIMARY KEY, data BLOB, chk TEXT) WITHOUT ROWID")
            db.execute("CREATE TABLE IF NOT EXISTS names (digest TEXT, pos INTEGER, rel TEXT, sha TEXT, "
                       "names TEXT, chk TEXT, PRIMARY KEY (digest, pos)) WITHOUT ROWID")
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
            if row is None:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (str(INDEX_FORMAT),))
            elif row[0] != str(INDEX_FORMAT):
                raise sqlite3.DatabaseError("index format")
        except (OSError, sqlite3.Error):
            self.broken = True
            return None
        self._db, self._pid = db, os.getpid()
        return db

    def get(self, shas: Iterable[str]) -> dict[str, tuple[Entry, ...] | None]:
        """The stored entries of those of ``shas`` that are stored."""
        import sqlite3

        want = [sha for sha in shas if sha not in self.pending]
        out = {sha: self.pending[sha] for sha in shas if sha in self.pending}
        db = self._conn()
        if db is None or not want:
            return out
        try:
            for i in range(0, len(want), 500):
                part = want[i:i + 500]
                rows = db.execute(f"SELECT sha, data, chk FROM files WHERE sha IN ({','.join('?' * len(part))})",
                                  part)
                for sha, data, chk in rows:
                    if not isinstance(data, bytes) or chk != _check(sha, data):
                        continue  # a damaged row: the file is parsed again
                    try:
                        raw = marshal.loads(data)
                        out[sha] = None if raw is None else tuple(Entry(*e) for e in raw)
                    except (ValueError, EOFError, TypeError):
                        continue
        except (sqlite3.Error, ValueError, EOFError, TypeError):
            self.broken = True
        return out

    def put(self, sha: str, entries: tuple[Entry, ...] | None) -> None:
        """Remember ``entries`` for :meth:`save`."""
        self.pending[sha] = entries

    def names(self, digest: str) -> dict[str, tuple[str, frozenset[str]]] | None:
        """The stored declared-names map of a release tree, or None."""
        import sqlite3

        if digest in self.pending_names:
            return self.pending_names[digest]
        db = self._conn()
        if db is None:
            return None
        try:
            rows = db.execute("SELECT pos, rel, sha, names, chk FROM names WHERE digest=? ORDER BY pos",
                              (digest,)).fetchall()
        except sqlite3.Error:
            self.broken = True
            return None
        if not rows:
            return None
        for i, (pos, rel, sha, names, chk) in enumerate(rows):  # one damaged or missing row: recompute all
            if pos != i or not all(isinstance(v, str) for v in (rel, sha, names)) or \
                    chk != _check(digest, str(pos), rel, sha, names):
                return None
        return {rel: (sha, frozenset(names.split(" ")) if names else frozenset()) for _p, rel, sha, names, _c in rows}

    def put_names(self, digest: str, names: dict[str, tuple[str, frozenset[str]]]) -> None:
        """Remember a release tree's names map for :meth:`save`."""
        self.pending_names[digest] = names

    def save(self) -> None:
        """Write what was remembered, in one transaction."""
        import sqlite3

        if not self.pending and not self.pending_names:
            return
        db = self._conn()
        if db is None:
            self.pending.clear()
            self.pending_names.clear()
            return
        try:
            db.execute("BEGIN IMMEDIATE")
            blobs = [(sha, marshal.dumps(None if ents is None else tuple(tuple(e) for e in ents)))
                     for sha, ents in self.pending.items()]
            db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?)",
                           [(sha, blob, _check(sha, blob)) for sha, blob in blobs])
            for digest, names in self.pending_names.items():
                rows = [(digest, i, rel, sha, " ".join(sorted(ns))) for i, (rel, (sha, ns)) in enumerate(names.items())]
                db.execute("DELETE FROM names WHERE digest=?", (digest,))
                db.executemany("INSERT INTO names VALUES (?, ?, ?, ?, ?, ?)",
                               [(*row, _check(row[0], str(row[1]), *row[2:])) for row in rows])
            db.execute("COMMIT")
        except sqlite3.Error:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            self.broken = True
        self.pending.clear()
        self.pending_names.clear()


_STORE = _Store()


def save_all() -> None:
    """Persist the entries and names this process computed (one transaction)."""
    _STORE.save()


class SourceIndex:
    """Every definition of one :class:`CodeSource`'s ``vllm`` package (module docstring).

    Files are parsed only when asked about (:meth:`file`, or the files whose text
    declares a name for :meth:`where` / :meth:`named`), each once per content, in
    parallel processes when many are cold; entries persist per version
    (:class:`_Store`; :func:`save_all`).
    """

    def __init__(self, source) -> None:
        self.source = source
        self._names: dict[str, tuple[str, frozenset[str]]] | None = None
        self._by_name: dict[str, list[tuple[str, Entry]]] = {}

    def _record_digest(self) -> str | None:
        """The RECORD digest of a release tree from patchq's cache (immutable), else None."""
        src = self.source
        if src.kind != "release" or src.dist_info is None:
            return None
        try:
            return hashlib.sha256((Path(src.dist_info) / "RECORD").read_bytes()).hexdigest()[:16]
        except OSError:
            return None

    def names(self) -> dict[str, tuple[str, frozenset[str]]]:
        """relpath -> (sha256 of its text, names its ``def``/``class`` statements declare),
        every ``.py`` file of the package in ``py_files`` order (files that cannot be read
        as UTF-8 are left out)."""
        if self._names is not None:
            return self._names
        digest = self._record_digest()
        names = _STORE.names(digest) if digest else None
        if names is None:
            names = {}
            for rel in self.source.py_files():
                try:
                    text = self.source.read_text(rel)
                except (UnicodeDecodeError, SourceError):  # not a source patchq can patch: not searched
                    continue
                if text is not None:
                    names[rel] = (text_sha(text), declared_names(text))
            if digest:
                _STORE.put_names(digest, names)
        self._names = names
        return names

    def entries(self, relpath: str, text: str, sha: str | None = None) -> tuple[Entry, ...] | None:
        """The entries of ``text`` (the file ``relpath`` as some reader gives it): from the
        version's store when it knows the content, else parsed (and stored)."""
        sha = sha or text_sha(text)
        got = _MEMO.get(sha, _MISSING)
        if got is _MISSING:
            stored = _STORE.get([sha])
            if sha in stored:
                got = stored[sha]
            else:
                got = file_entries(text, fingerprints=False)
                _STORE.put(sha, got)
            _MEMO[sha] = got
        return got  # type: ignore[return-value]

    def text_index(self, relpath: str, text: str) -> dict[str, list[Entry]] | None:
        """qualname -> entries of ``text`` (see :meth:`entries`)."""
        sha = text_sha(text)
        if sha not in _GROUPED:
            ents = self.entries(relpath, text, sha)
            _GROUPED[sha] = None if ents is None else group(ents)
        return _GROUPED[sha]

    def file(self, relpath: str) -> dict[str, list[Entry]] | None:
        """qualname -> entries of one file as ``source.read_text`` gives it; None when it
        is missing or does not parse."""
        text = self.source.read_text(relpath)
        return None if text is None else self.text_index(relpath, text)

    def declaring(self, name: str) -> list[str]:
        """The files whose text declares ``name`` (:func:`declared_names`), in order."""
        return [rel for rel, (_, names) in self.names().items() if name in names]

    def declares(self, relpath: str, text: str, name: str) -> bool:
        """:func:`patchq.plan.anchors.declares` of ``text``, the file ``relpath``: from the
        names map when ``text`` is the one the source handed out (no regex over it)."""
        if getattr(self.source, "_texts", {}).get(relpath) is text:
            got = self.names().get(relpath)
            if got is not None:
                return name in got[1]
        from patchq.plan.anchors import declares

        return declares(text, name)

    def _ensure(self, rels: Sequence[str]) -> None:
        """Entries for ``rels`` in the store, the cold ones parsed in parallel."""
        names = self.names()
        shas = {names[rel][0]: rel for rel in rels if names[rel][0] not in _MEMO}
        if not shas:
            return
        stored = _STORE.get(list(shas))
        _MEMO.update(stored)
        todo = [(sha, self.source.read_text(rel) or "") for sha, rel in shas.items() if sha not in stored]
        for sha, ents in _parallel(todo, _workers()):
            _MEMO[sha] = ents
            _STORE.put(sha, ents)

    def prefetch(self, rels: Iterable[str]) -> None:
        """Index the files ``rels`` (as ``source.read_text`` gives them) now: those the
        store does not know are parsed together, in parallel processes when there are
        many (a check indexes the modules its anchors name at once, not one by one).
        Missing or unreadable files are left to the caller."""
        todo: dict[str, str] = {}
        for rel in dict.fromkeys(rels):
            try:
                text = self.source.read_text(rel)
            except (UnicodeDecodeError, SourceError):
                continue
            if text is not None:
                sha = text_sha(text)
                if sha not in _MEMO:
                    todo[sha] = text
        if not todo:
            return
        stored = _STORE.get(list(todo))
        _MEMO.update(stored)
        for sha, ents in _parallel([(sha, text) for sha, text in todo.items() if sha not in stored], _workers()):
            _MEMO[sha] = ents
            _STORE.put(sha, ents)

    def _entries_named(self, first: str) -> list[tuple[str, Entry]]:
        rels = self.declaring(first)
        self._ensure(rels)
        names = self.names()
        return [(rel, e) for rel in rels for e in (_MEMO[names[rel][0]] or ())]

    def where(self, qualname: str) -> list[tuple[str, Entry]]:
        """Every (relpath, entry) of ``qualname`` in the package, files in ``py_files`` order."""
        first = qualname.split(".")[0]
        return [(rel, e) for rel, e in self._entries_named(first) if e.qualname == qualname]

    def named(self, last: str) -> list[tuple[str, Entry]]:
        """Every (relpath, entry) whose qualname's last component is ``last``."""
        return [(rel, e) for rel, e in self._entries_named(last) if e.qualname.rsplit(".", 1)[-1] == last]

    def candidates(self, qualname: str, loaded: Iterable[str] = ()) -> list[str]:
        """Files that may define ``qualname`` (``py_files`` order): those whose text
        declares its first component (what the package-wide search of
        :func:`patchq.plan.anchors.find_definitions` reads; the ``loaded`` ones are
        included whatever their text)."""
        want = set(self.declaring(qualname.split(".")[0])) | set(loaded)
        return [rel for rel in self.source.py_files() if rel in want]

    def definition(self, relpath: str, qualname: str) -> Definition | None:
        """The one ``qualname`` of ``relpath`` as a :class:`Definition`, or None."""
        found = (self.file(relpath) or {}).get(qualname, [])
        if len(found) != 1:
            return None
        return definition_from(self.source.read_text(relpath) or "", relpath, found[0])


_MISSING = object()


def for_source(source) -> SourceIndex:
    """The :class:`SourceIndex` of ``source`` (one per CodeSource object, this process).

    Looked up in the object's own attributes: a view that delegates attribute access to
    another source (the planner's pristine view) reads other text, so it must not share
    that source's index (its line numbers would cut the view's text in the wrong places).
    """
    got = getattr(source, "__dict__", {}).get("_patchq_defindex")
    if got is None:
        got = SourceIndex(source)
        try:
            object.__setattr__(source, "_patchq_defindex", got)
        except (AttributeError, TypeError):  # pragma: no cover - a frozen source
            pass
    return got
