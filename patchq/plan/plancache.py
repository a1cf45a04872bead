"""A content-addressed cache of plans, shared by ``apply`` and ``run``.

:func:`plan` is :func:`patchq.plan.engine.plan` with a memory: a successful plan is
stored under ``<cache>/plans/`` (:func:`patchq.vllmdist.cache.plans`), keyed by

* patchq's version and the sha256 of the planner's sources (:mod:`patchq.plan.toolchain`),
* the vLLM version (it selects each patch's variant) and ``strict``,
* every patch's id, hash (its series module and anchor definitions) and recorded
  fingerprints (they decide each anchor's ``verified``),

and holds the sha256 of every file the plan read (through ``read``, and through the
source: module hints looked at, files a transform read) with the per-patch results; the
patched texts are stored once each, by their sha256 (``plans/texts/``). A later plan
with the same key is taken from the cache when every one of those files still reads
to the same sha256 (``read`` is called for each, exactly as planning would) and the
stored texts are intact; then nothing is parsed. A plan that searched the whole package
for a moved definition, or that failed, is never stored (it would depend on files it
did not read, or there is nothing to reuse). Any cache error falls back to planning.

A cached plan carries the results, the texts and the modules the patched code imports
(:attr:`patchq.plan.results.Plan.imports`) only (``workspace`` None, ``changes`` and
``hand_checks`` empty): enough for ``apply``, ``run`` and ``diff`` (converge), which read
nothing else; ``check`` and the authoring commands plan with :func:`engine.plan`.
:func:`load` and :func:`store` serve and keep a plan by key for whoever made it
(:func:`plan`, and ``check``, whose plan ``apply`` reuses).
The relations outcomes (superseded, upstreamed by generic or hand-written detection) are
in the results. The backward upstream detection may read the patch's last verified
release from patchq's cache: that release's content is fixed, but whether it was cached
when the plan was made is not part of the key.

What a patch's transform runs is identified as the journal and the import hook identify
it: by the patch hash (its series module and anchors file) and the planner's sources; a
helper module that a series module imports from elsewhere is not part of the key.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path

from patchq.model import Patch
from patchq.plan import engine, toolchain
from patchq.vllmdist import cache
from patchq.vllmdist.sources import CodeSource

FORMAT = 2  # 2: a sha256 of the pickle precedes it


def toolchain_hash() -> str:
    """sha256 over the planner's sources (:func:`patchq.plan.toolchain.digest`) and this
    cache's :data:`FORMAT`."""
    return hashlib.sha256(f"{toolchain.digest()}\0{FORMAT}".encode()).hexdigest()


def plan_key(source: CodeSource, patches: Iterable[Patch], strict: bool = False) -> str:
    """The cache key of planning ``patches`` on ``source``'s version (module docstring)."""
    h = hashlib.sha256(toolchain_hash().encode() + b"\0" + str(source.version).encode()
                       + (b"\0strict" if strict else b"\0lenient"))
    for p in patches:
        h.update(f"\0{p.id}\0{p.hash}".encode())
        for aid, spec in sorted(p.anchors.items()):
            h.update(f"\0{aid}\0{spec.qualname}\0{sorted(spec.fingerprints.items())!r}".encode())
    return h.hexdigest()


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _text_path(sha: str) -> Path:
    return cache.plans() / "texts" / sha[:2] / sha


def load(source: CodeSource, key: str, read: Callable[[str], str | None]) -> engine.Plan | None:
    """The plan stored under ``key`` when every file it read still reads the same through
    ``read`` (and through ``source``) and its patched texts are intact, else None (a miss:
    a damaged entry is never served)."""
    try:
        with open(cache.plans() / f"{key}.pickle", "rb") as fh:
            data = fh.read()
        # sha256 of the pickle ahead of it: a damaged entry is a miss, never unpickled
        if len(data) < 32 or hashlib.sha256(data[32:]).digest() != data[:32]:
            return None
        entry = pickle.loads(data[32:])
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            return None
    except Exception:  # noqa: BLE001 - any damaged entry is only a cache miss
        return None
    texts: dict[str, str | None] = {}
    for rel, sha in entry["read"].items():  # every file planning read through ``read``
        texts[rel] = read(rel)
        if _sha(texts[rel]) != sha:
            return None
    for rel, sha in entry["source"].items():  # and through the source
        if _sha(source.read_text(rel)) != sha:
            return None
    patched: dict[str, str] = {}
    for rel, sha in entry["patched"].items():
        try:
            text = _text_path(sha).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if _sha(text) != sha:
            return None
        patched[rel] = text
    pristine = {rel: texts[rel] for rel in patched}
    if any(t is None for t in pristine.values()):
        return None
    imports = entry.get("imports")
    if not (isinstance(imports, dict) and set(imports) == set(patched)):
        imports = None  # the converge reads the texts
    return engine.Plan(source, entry["results"], pristine, patched, workspace=None,  # type: ignore[arg-type]
                       imports=imports)


def store(plan: engine.Plan, key: str, source_reads: dict[str, str | None],
          reads: dict[str, str | None] | None = None) -> None:
    """Store a successful ``plan`` under ``key`` (nothing for a failed one, or one that
    searched the whole package for a definition).

    Args:
        source_reads: relpath -> sha256 of the text (None: absent) of every file the source
            handed out while planning.
        reads: relpath -> sha256 of every file planning read through its ``read``; default:
            the plan's workspace's (a plan without a workspace needs them given).
    """
    ws = plan.workspace
    if not plan.ok or getattr(ws, "searched", False) or (ws is None and reads is None):
        return
    if reads is None:
        reads = {rel: _sha(t) for rel, t in ws.pristine_text.items()}  # type: ignore[union-attr]
    try:
        shas = {}
        for rel, text in plan.patched.items():
            sha = _sha(text)
            path = _text_path(sha)  # type: ignore[arg-type]
            if not path.is_file():
                cache.write_entry(path, text.encode("utf-8"))
            shas[rel] = sha
        entry = {"format": FORMAT, "read": dict(reads),
                 "source": dict(source_reads),
                 "patched": shas, "results": plan.results, "imports": plan.imports}
        payload = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
        cache.write_entry(cache.plans() / f"{key}.pickle", hashlib.sha256(payload).digest() + payload)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return  # the cache is only a speed-up


def plan(source: CodeSource, patches: list[Patch], read: Callable[[str], str | None] | None = None,
         strict: bool = False) -> engine.Plan:
    """:func:`patchq.plan.engine.plan`, from the cache when the same plan was made on the
    same content (module docstring). A cached plan has ``workspace`` None and empty
    ``changes`` and ``hand_checks``: it serves ``apply`` and ``run`` (which use only the
    results and the texts), not ``check`` (which plans with :func:`engine.plan`)."""
    read = read or source.read_text
    patches = list(patches)
    key = plan_key(source, patches, strict)
    cached = load(source, key, read)
    if cached is not None:
        return cached
    out = engine.plan(source, patches, read=read, strict=strict)
    from patchq.compat import gate  # drift not provably apart from a patch blocks (as check says)

    gate.review(out, patches)
    store(out, key, {rel: _sha(t) for rel, t in source._texts.items()})  # every text the source handed out so far
    return out
