"""Where a gone definition went: the release searched for its content and for the patch's change.

When an anchored definition is found nowhere in a release (neither under its qualified
name nor, with the anchor's pattern, under its last name: :func:`patchq.compat.check.renamed_candidates`),
the release may still carry it under another name in another module (a move or a
rename), or carry the patch's change somewhere else (a rewrite that already does what
the patch does: vLLM 0.34.0 deleted ``vllm/v1/worker/gpu_model_runner.py``, and model
runner V2 in ``vllm/v1/worker/gpu/`` carries some of its fixes). Two searches, both
bounded by the release's definition index (:mod:`patchq.plan.definitions`; no file is
parsed that declares none of the names the definition uses):

* :func:`nearest` -- the definitions of the release most alike the gone one: files
  ranked by the names they declare that the definition uses (rarer names count more),
  then the definitions of the best files scored by the similarity of their source
  (:func:`rapidfuzz.fuzz.ratio`);
* :func:`find_change` -- the patch's added statements in any definition of those files,
  by meaning (:func:`patchq.plan.meaning.group_found`): where the release holds them.

Both return data; the backward detection (:mod:`patchq.plan.backward`) turns them into a
verdict (``upstreamed`` with the place and the evidence) or into the reason of a ``gone``
(the nearest candidates, and what was searched).
"""

from __future__ import annotations

import ast
import math
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from patchq.plan import definitions, meaning

#: files searched (the best ranked by the names they declare)
FILES = 8
#: similarity below which a definition is no candidate
NEAR = 0.4
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
#: words every definition spells: no evidence of kinship
_COMMON = frozenset({"self", "cls", "def", "return", "None", "True", "False", "not", "and", "for", "if", "else",
                     "elif", "in", "is", "or", "with", "as", "import", "from", "class", "int", "str", "list", "dict",
                     "len", "range", "isinstance", "assert", "raise", "torch", "Tensor", "bool", "float"})


@dataclass(frozen=True)
class Candidate:
    """A definition of the release alike a gone one: ``qualname`` at ``relpath:line``,
    ``score`` in [0, 1]."""

    qualname: str
    relpath: str
    line: int
    score: float

    def __str__(self) -> str:
        return f"{self.qualname} ({self.relpath}:{self.line}, similarity {self.score:.2f})"


def used_names(node: ast.AST) -> set[str]:
    """The names a definition uses or declares: its own name, the attributes and names it
    reads or calls, the definitions inside it."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            out.add(sub.attr)
        elif isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(sub.name)
    return {n for n in out if len(n) > 2 and n not in ("self", "cls")}


def ranked_files(source, names: Iterable[str], skip: Iterable[str] = (), strong: Iterable[str] = (),
                 near: str = "") -> list[str]:
    """The release's files ranked by the names of ``names`` their ``def``/``class``
    statements declare: a name weighs its rarity (log of files / files declaring it),
    twice for the ``strong`` ones (the gone definition's qualified name's parts), the sum
    damped by how many names the file declares (a file declaring everything is no
    evidence), with a bonus for sharing the directory of ``near`` (the gone module's
    path); at most :data:`FILES`, those declaring none left out, topped up with the other
    files of ``near``'s directory."""
    index = definitions.for_source(source)
    per_file = index.names()
    strong = set(strong)
    wanted = set(names) | strong
    df: dict[str, int] = {}
    for _sha, declared in per_file.values():
        for n in wanted & declared:
            df[n] = df.get(n, 0) + 1
    total = max(1, len(per_file))
    skipped = set(skip)
    home = near.rsplit("/", 1)[0].split("/") if near else []
    scores = []
    for rel, (_sha, declared) in per_file.items():
        if rel in skipped:
            continue
        hit = wanted & declared
        if not hit:
            continue
        score = sum(math.log(total / df[n]) * (2 if n in strong else 1) for n in hit)
        score /= math.log(2 + len(declared))
        parts = rel.split("/")
        shared = next((i for i, (a, b) in enumerate(zip(home, parts, strict=False)) if a != b),
                      min(len(home), len(parts)))
        scores.append((score * (1 + 0.1 * shared), rel))
    scores.sort(key=lambda s: (-s[0], s[1]))
    out = [rel for _, rel in scores[:FILES]]
    if near and len(out) < FILES:  # too few: the gone module's own directory (a move next door)
        folder = near.rsplit("/", 1)[0] + "/"
        out += [rel for rel in per_file if rel.startswith(folder) and rel not in out and rel not in skipped
                and "/" not in rel[len(folder):]][:FILES - len(out)]
    return out


def _definitions(source, rels: Sequence[str]) -> list[tuple[str, definitions.Entry, str]]:
    """(relpath, entry, dedented text) of every definition of ``rels`` (functions, methods
    and classes)."""
    index = definitions.for_source(source)
    index.prefetch(rels)
    out = []
    for rel in rels:
        text = source.read_text(rel) or ""
        lines = definitions.split_lines(text)
        for entries in (index.file(rel) or {}).values():
            for e in entries:
                out.append((rel, e, textwrap.dedent(definitions.span_text(text, e.start, e.end, lines))))
    return out


def nearest(source, gone: ast.AST, gone_text: str, limit: int = 3,
            files: Sequence[str] | None = None) -> list[Candidate]:
    """The definitions of ``source`` most alike ``gone`` (its text ``gone_text``), best
    first, at most ``limit``, each at least :data:`NEAR`; ``files``: where to look
    (default :func:`ranked_files` of the names it uses)."""
    from rapidfuzz import fuzz

    rels = list(files) if files is not None else ranked_files(source, used_names(gone))
    want = textwrap.dedent(gone_text)
    words = set(_WORD.findall(want)) - _COMMON
    kind = "class" if isinstance(gone, ast.ClassDef) else "def"
    scored = []
    for rel, e, text in _definitions(source, rels):
        if e.kind != kind or not (len(want) / 4 <= len(text) <= len(want) * 4):
            continue
        theirs = set(_WORD.findall(text)) - _COMMON
        shared = len(words & theirs) / max(1, len(words | theirs))  # the names both use
        score = max(fuzz.ratio(want, text) / 100.0, shared)
        if score >= NEAR:
            scored.append(Candidate(e.qualname, rel, e.line, round(score, 2)))
    scored.sort(key=lambda c: (-c.score, c.relpath, c.line))
    return scored[:limit]


def find_change(source, group: Sequence[ast.stmt], group_root: ast.AST, files: Sequence[str],
                keep: Iterable[str] = ()) -> tuple[str, meaning.Match] | None:
    """(qualname, match) of the first definition of ``files`` that holds ``group`` (the
    statements one edit of the patch adds; ``group_root``: the patched definition holding
    them) by meaning, or None. A definition's text must spell every attribute the group
    reads before it is parsed."""
    if not group:
        return None
    attrs = {n.attr for s in group for n in ast.walk(s) if isinstance(n, ast.Attribute)}
    kept = list(keep)
    for rel, e, text in _definitions(source, files):
        if not all(a in text for a in attrs):
            continue
        d = definitions.for_source(source).definition(rel, e.qualname)
        if d is None:
            continue
        match = meaning.group_found(group, d.node, rel, group_root=group_root, keep=kept)
        if match is not None:
            return e.qualname, match
    return None
