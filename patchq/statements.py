"""Statement operations: the public format of the edits ``patchq import``, ``patchq record``
and ``patchq rebase --continue --write`` generate (a series file imports this module).

A generated ``series/<patch>.py`` stores, per anchor id, a list of *operations* as plain
literals and turns each list into an edit function with :func:`statement_edit`::

    from patchq.statements import statement_edit
    OPS = {"my-anchor": [{"op": "insert", "new": "x = 1\\n", "after": "y = 2\\n", "before": None}]}
    variant(">=0.23.0", edits={a: statement_edit(ops) for a, ops in OPS.items()})

An operation is found by structure inside the anchored definition (or the module, for a
module-level anchor: qualname ``<module>``, anchors format 2); patterns are matched by
normalized AST (:func:`patchq.plan.anchors.ast_match`), never by line number:

``{"op": "replace", "old": SRC, "new": SRC, "after": PAT|None, "before": PAT|None}``
    the run of statements ``old`` becomes ``new`` (``""``: deleted); ``after``/``before``
    are the neighbouring statements (a compound one reduced to its header, ``...`` for
    each block) that tell alike places apart. A run that starts with a string statement
    and has nothing before it (``after`` None) and is not there as recorded is the
    definition's docstring, whatever its text (fingerprints leave docstrings out).
``{"op": "insert", "new": SRC, "after": PAT|None, "before": PAT|None}``
    ``new`` goes between the siblings matching ``after`` and ``before`` (both; else the one
    that is unique). With ``"at": "top"`` it goes at the top of the definition's body, after
    its docstring if it has one, whatever its neighbours are now. With ``"at":
    "start"|"end"``, ``"block": HEADER|None`` and ``"branch": N`` it is a block
    prepend/append: the block is the ``N``-th block of the compound statement whose header
    matches ``HEADER`` (None: the definition's own body), so it still applies when the
    first/last statement of that block changed; when no block has that header any more
    (upstream changed the condition), the block of the same kind and branch whose
    first/last statement matches ``before``/``after``. With ``"under": true`` the inserted
    block goes under the comment and blank lines above the statement after it (they move
    to its top).
``new`` (on replace/insert)
    may end with comment and blank lines: they go above the statement after the place (a
    blank line after an inserted block, PEP 8 style).
``"nth": K, "of": N`` (on replace/insert)
    the statement occurs N times alike (same neighbours): the K-th of them in source
    order; where they are not N any more the operation refuses (never a guess).
``{"op": "footer", "block": HEADER|None, "branch": N, "after": PAT|None, "old": SRC, "new": SRC}``
    the comment lines that end a block (after its last statement, matching ``after``).
``{"op": "header", "old": SRC, "new": SRC}``
    the definition's own decorators/signature change (body kept).
``{"op": "result", "name": NAME, "new": SRC}``
    wrap the result (a wrapper that calls the original and works on what it returns):
    each ``return VALUE`` of the anchored function's own body becomes ``NAME = VALUE``
    followed by ``SRC``; a bare ``return`` and the end of the body bind ``NAME = None``;
    ``return NAME`` follows when ``SRC`` does not return itself. Anchored on the
    definition, not on the text of one ``return``: it applies whatever upstream returns
    and wherever it returns (:func:`patchq.edits.wrap_result`, which also lists what it
    refuses: a generator, a ``return`` under ``with`` or ``try``/``finally``...).
``{"op": "definition", "fingerprint": FP, "new": SRC}``
    the last resort, when nothing smaller reproduces the text: the whole definition is
    replaced, only where its fingerprint is still ``FP`` (the importer's summary line says so).
``{"op": "module-insert", "where": "before"|"after", "new": SRC, "gap": N}``
    (written by patchq before anchors format 2, still applied) module-level statements
    placed right before/after the anchored definition.

Every ``SRC`` is source at column 0; comment lines above a statement belong to it. An
operation that finds no place, or several where none was recorded, raises
:class:`patchq.errors.AnchorError` (the patch fails with kind ``conflict``).

Operations written by an earlier patchq load unchanged and mean what they meant: an
insertion it recorded as a ``replace`` of the statement after it (a blank line followed
the insertion) is read as that insertion, applied as recorded wherever the replace places
(:mod:`patchq.plan.legacyops`).
"""

from __future__ import annotations

from patchq.plan.stmtpatch import apply_ops, diff_definition, diff_module, parse_statements, statement_edit

__all__ = ["apply_ops", "diff_definition", "diff_module", "parse_statements", "statement_edit"]
