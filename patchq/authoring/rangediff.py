"""Range-diff of two renderings of one patch (``git range-diff``, hunk by hunk).

A patch rendered on two releases gives two unified diffs (:func:`patchq.plan.diffs.unified_all`).
Line numbers, file paths and context move between releases; what the patch *does* is
the lines it removes and adds. Hunks are therefore compared by their ``-``/``+`` lines
(stripped, sentinel comments left out): equal content is ``=`` (the same change, perhaps
elsewhere), similar content (:func:`rapidfuzz.fuzz.ratio` >= :data:`SIMILAR`) is ``!``
(changed), and the rest is ``<`` (only in the old rendering) or ``>`` (only in the new).
Diffs are parsed with :mod:`unidiff`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz import fuzz
from unidiff import PatchSet

from patchq.sentinels import SENTINEL_RE

#: rapidfuzz ratio (0-100) from which two different hunks count as one changed hunk.
SIMILAR = 60.0


@dataclass(frozen=True)
class Hunk:
    """One hunk of a rendered diff: its file, ``@@`` header and changed lines."""

    path: str
    header: str
    removed: tuple[str, ...]
    added: tuple[str, ...]

    @property
    def content(self) -> str:
        """The changed lines as one text (for similarity)."""
        return "\n".join([f"-{x}" for x in self.removed] + [f"+{x}" for x in self.added])

    def where(self) -> str:
        """``path @@ -a,b +c,d @@``."""
        return f"{self.path} {self.header}"


@dataclass(frozen=True)
class Pair:
    """A row of the range-diff.

    ``marker``: ``=`` same change, ``!`` changed, ``<`` dropped, ``>`` new.
    ``old``/``new``: the hunks (None on the missing side); ``score``: similarity.
    """

    marker: str
    old: Hunk | None
    new: Hunk | None
    score: float
    old_index: int = 0
    new_index: int = 0


def hunks(diff_text: str) -> list[Hunk]:
    """The hunks of a unified diff (``unidiff``), sentinel lines left out of the content.

    Raises:
        unidiff.UnidiffParseError: the text is not a unified diff.
    """
    out = []
    for pf in PatchSet(diff_text):
        path = pf.target_file[2:] if pf.target_file.startswith("b/") else pf.target_file
        for h in pf:
            header = f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
            rem = tuple(ln.value.strip() for ln in h if ln.is_removed and not SENTINEL_RE.search(ln.value))
            add = tuple(ln.value.strip() for ln in h if ln.is_added and not SENTINEL_RE.search(ln.value))
            if rem or add:
                out.append(Hunk(path, header, rem, add))
    return out


def compare(old_diff: str, new_diff: str) -> list[Pair]:
    """Pair the hunks of two renderings (see module docstring), in the old order."""
    old, new = hunks(old_diff), hunks(new_diff)
    used: set[int] = set()
    pairs: list[Pair | None] = [None] * len(old)
    for i, h in enumerate(old):  # exact content first
        for j, g in enumerate(new):
            if j not in used and (h.removed, h.added) == (g.removed, g.added):
                pairs[i] = Pair("=", h, g, 100.0, i + 1, j + 1)
                used.add(j)
                break
    scored = sorted(((fuzz.ratio(h.content, g.content), i, j)
                     for i, h in enumerate(old) if pairs[i] is None
                     for j, g in enumerate(new) if j not in used), reverse=True)
    for score, i, j in scored:
        if score >= SIMILAR and pairs[i] is None and j not in used:
            pairs[i] = Pair("!", old[i], new[j], round(score, 1), i + 1, j + 1)
            used.add(j)
    rows = [p if p is not None else Pair("<", old[i], None, 0.0, i + 1, 0) for i, p in enumerate(pairs)]
    rows += [Pair(">", None, g, 0.0, 0, j + 1) for j, g in enumerate(new) if j not in used]
    return rows


def counts(pairs: list[Pair]) -> dict[str, int]:
    """``{"same": n, "changed": n, "removed": n, "added": n}``."""
    names = {"=": "same", "!": "changed", "<": "removed", ">": "added"}
    out = {v: 0 for v in names.values()}
    for p in pairs:
        out[names[p.marker]] += 1
    return out


def render(pairs: list[Pair]) -> list[str]:
    """One line per pair, ``git range-diff`` style: ``1: path @@..@@ = 1: path @@..@@``."""
    lines = []
    for p in pairs:
        left = f"{p.old_index}: {p.old.where()}" if p.old is not None else "-"
        right = f"{p.new_index}: {p.new.where()}" if p.new is not None else "-"
        note = f"  (similarity {p.score:g})" if p.marker == "!" else ""
        lines.append(f"{left} {p.marker} {right}{note}")
    return lines
