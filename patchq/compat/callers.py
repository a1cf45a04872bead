"""Callers a patch that disables a function was not reviewed with.

A patch that inserts an unconditional ``return`` or ``raise`` at the top of a module-level
function's body (:func:`short_circuit`: the function now skips the rest of its body on
every call, e.g. a fail-fast check made a no-op) changes what every caller gets. Its
reviewed release had some callers; when the target release calls the function from a
module that did not call it there, that new caller relies on what the patch skips, and
no fingerprint shows it: the patched definition itself may be unchanged
(vllm-gaudi's ``check_shm_free_space`` no-op met a new caller in
``vllm/v1/kv_offload/cpu/shared_offload_region.py`` on 0.28.0).

:func:`new_callers` answers with the first such call's ``path:line``; the check makes the
row ``review`` (blocking) naming it. Callers are found by text, a call ``name(`` in a
``.py`` file of the package that is not the ``def`` itself; a method (``C.m``) is not
looked for (an attribute call cannot be tied to its class by text).
"""

from __future__ import annotations

import ast
import re

from patchq.vllmdist.sources import CodeSource

_JUMPS = (ast.Return, ast.Raise)
#: (source label, function name) -> {relpath: first call line}
_CALLS: dict[tuple[str, str], dict[str, int]] = {}


def short_circuit(pristine: ast.AST | None, patched: ast.AST | None) -> ast.stmt | None:
    """The unconditional ``return``/``raise`` the patch put in the top level of a function's
    body ahead of other statements (every call now skips them), or None: also when the
    pristine body already had such a jump there, or either side is not a function."""
    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    if not isinstance(pristine, funcs) or not isinstance(patched, funcs):
        return None

    def early(body: list[ast.stmt]) -> ast.stmt | None:
        return next((s for s in body[:-1] if isinstance(s, _JUMPS)), None)

    if early(pristine.body) is not None:
        return None
    return early(patched.body)


def source_key(source: CodeSource) -> str:
    """What a package-wide answer about ``source`` is kept under: a release by its version
    (its tree is checked against RECORD), any other source by its kind and place."""
    return f"release:{source.version}" if source.kind == "release" else f"{source.kind}:{source.label}"


def calls(source: CodeSource, name: str) -> dict[str, int]:
    """{relpath: line of its first call of ``name``} over ``source``'s package (a call
    ``name(`` not preceded by ``.`` or a word character, on a line that is not its ``def``),
    in upstream's files (:meth:`CodeSource.upstream_texts`). Kept per (release, name)."""
    key = (source_key(source), name)
    if key not in _CALLS:
        word = re.compile(rf"(?<![\w.]){re.escape(name)}\(")
        out: dict[str, int] = {}
        for rel, text in source.upstream_texts(name):
            for m in word.finditer(text):
                start = text.rfind("\n", 0, m.start()) + 1
                if text[start:m.start()].strip().endswith("def"):
                    continue
                out[rel] = text.count("\n", 0, m.start()) + 1
                break
        if len(_CALLS) > 4096:
            _CALLS.clear()
        _CALLS[key] = out
    return _CALLS[key]


def new_callers(base: CodeSource, target: CodeSource, name: str) -> list[str]:
    """``path:line`` of each module of ``target`` that calls the function ``name`` and did
    not call it in ``base`` (the reviewed release), in path order; [] when the files of a
    source cannot be read."""
    try:
        before, now = calls(base, name), calls(target, name)
    except (OSError, ValueError):
        return []
    return [f"{rel}:{line}" for rel, line in sorted(now.items()) if rel not in before]
