"""Statement operations an earlier patchq wrote, read as what they mean (the series format is public).

Until the importer compared statements by their code (``patchq.plan.stmtviews.code_text``:
without the comment and blank lines above them), an insertion followed by a blank line, or
put under the comment above the next statement, was recorded as a ``replace`` of that next
statement: ``{"op": "replace", "old": "image_io = ...\\n", "new": "if ...:\\n    raise ...\\n\\nimage_io = ...\\n"}``
(libcst keeps the blank line in the next statement's leading lines, so its text "changed").
Such an operation conflicts wherever upstream changes or removes the statement it never
meant to change.

:func:`read` turns each such ``replace`` into the insertion it is when the series is loaded;
no file is rewritten (the patch hash, the sentinels and the goldens stay as they are). The
insertion keeps the recorded replace (``"_legacy"``): :func:`patchq.plan.stmtpatch.apply_op`
applies the replace as recorded wherever it places, so a series keeps giving the same bytes
where it applied, and falls back to the insertion (found by its neighbours, as a recorded
insert is) where it did not. A ``replace`` read this way:

- has one old statement, and a ``new`` that ends with that statement's code (the inserted
  statements before it), or starts with it, comment lines alike (the inserted statements
  after it);
- has no ordinal (``nth``/``of``: alike places are counted per operation kind);
- the comment and blank lines above the kept statement are the ones it had, with lines added
  above them, or the ones above it moved to the top of the inserted block
  (:func:`patchq.plan.stmtviews.absorb`).

Anything else stays the replace it was.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from patchq.plan import stmtviews

Op = dict


def read(ops: Sequence[Op]) -> list[Op]:
    """``ops`` with every insertion recorded as a replace read as an insertion (module docstring).

    Args:
        ops: statement operations as a series file stores them (never changed).
    Returns:
        A new list: the operations, each either unchanged or its :func:`as_insert` reading.
    """
    return [as_insert(op) or op for op in ops]


def as_insert(op: Op) -> Op | None:
    """The insertion a recorded ``replace`` means (module docstring), with the replace kept as
    ``"_legacy"``; None when ``op`` is not such a replace."""
    if op.get("op") != "replace" or "nth" in op or not op.get("old") or not op.get("new"):
        return None
    try:
        old = stmtviews.parse_statements(op["old"])
        new, tail = stmtviews.parse_with_tail(op["new"])
    except cst.ParserSyntaxError:
        return None
    if len(old) != 1 or len(new) < 2 or tail:
        return None
    kept = old[0]
    if stmtviews.code_text(new[-1]) == stmtviews.code_text(kept):
        inserted = new[:-1]
        out = {"op": "insert", "new": "".join(stmtviews.stmt_text(s) for s in inserted), "after": op.get("after"),
               "before": stmtviews.header_text(kept, leading=False)}
        if not stmtviews.absorb((out, inserted), kept, new[-1]):
            return None
    elif stmtviews.stmt_text(new[0]) == stmtviews.stmt_text(kept):
        out = {"op": "insert", "new": "".join(stmtviews.stmt_text(s) for s in new[1:]),
               "after": stmtviews.header_text(kept, leading=False), "before": op.get("before")}
    else:
        return None
    out["_legacy"] = op
    return out
