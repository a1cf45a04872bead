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

A cached plan carries the results and the texts only (``workspace`` None, ``changes``
and ``hand_checks`` empty): enough for ``apply``, ``run`` and ``diff`` (converge), which
read nothing else; ``check`` and the authoring commands plan with :func:`engine.plan`.
The relations outcomes (superseded, upstreamed by generic or hand-written detection) are
in the results. The backward upstream detection may read the patch's last verified
release from patchq's cache: that release's content is fixed, but whether it was cached
when the plan was made is not part of the key.

What a patch's transform runs is identified as the journal and the import hook identify
it: by the patch hash (its series module and anchors file) and the planner's sources; a
helper module that a series module imports from elsewhere is not part of the key.

**The entry is plain data** (format 3, ``plans/<key>.json``;
:func:`patchq.vllmdist.cache.pack_entry`): a line ``patchq.plan-cache/3 <sha256 of the
body>``, then one JSON object: ``format``, ``key``, ``vllm`` (the version planned on),
``read`` and ``source`` ({relpath: sha256 of the pristine text, or null for a file that
was not there}), ``patched`` ({relpath: sha256 of the patched text}), ``imports``
({relpath: the modules the patched code imports, or null}, or null: the converge then
reads the texts; :attr:`patchq.plan.engine.Plan.imports`) and ``results``
(one object per patch, the fields of :class:`~patchq.plan.results.PatchResult`, its
``anchors`` those of :class:`~patchq.plan.results.AnchorResult`). Loading builds those two
dataclasses from their field names, and nothing else: no name in the data is imported or
called, so a planted entry cannot run code (format 2 was a pickle; its ``.pickle`` files
are never read). An entry whose body does not match its sha256 is a miss; one owned by
another user (not root) or writable by others is a miss with a one-line note
(:func:`patchq.vllmdist.cache.read_entry`), and so is a patched text that is (it would
be written into site-packages). The key and the per-file sha256 make the entry reusable
by anything that meets the same pristine bytes and the same series (issue 41: ``apply``
after ``check``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

from patchq.model import Patch
from patchq.plan import engine, toolchain
from patchq.plan.results import AnchorResult, PatchResult
from patchq.vllmdist import cache
from patchq.vllmdist.sources import CodeSource

FORMAT = 3  # 2: a pickle behind its sha256; 3: JSON behind its sha256 (module docstring)
SCHEMA = f"patchq.plan-cache/{FORMAT}"


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


def _entry_path(key: str) -> Path:
    return cache.plans() / f"{key}.json"


def result_data(result: PatchResult) -> dict:
    """A :class:`PatchResult` as JSON data (its fields; ``anchors`` as their fields)."""
    return dataclasses.asdict(result)


def result_from(data: dict) -> PatchResult:
    """The :class:`PatchResult` of :func:`result_data`'s ``data``, built from its field names
    only (an unknown or missing field raises).

    Raises:
        TypeError, KeyError, AttributeError: ``data`` is not such an object.
    """
    anchors = [AnchorResult(**a) for a in data["anchors"]]
    return PatchResult(**{**data, "anchors": anchors})


def _text(sha: str) -> str | None:
    """The stored patched text of sha256 ``sha``, or None (missing, damaged, or another
    user's: it would be written into site-packages)."""
    from patchq import jsonsafe

    path = _text_path(sha)
    try:
        text = jsonsafe.read_bytes(path, cache.MAX_ENTRY_BYTES, owned=True).decode("utf-8")
    except jsonsafe.Untrusted as exc:
        cache.note_untrusted("patched text", path, str(exc))
        return None
    except (OSError, ValueError):
        return None
    return text if _sha(text) == sha else None


def load(source: CodeSource, key: str, read: Callable[[str], str | None]) -> engine.Plan | None:
    """The plan stored under ``key`` when every file it read still reads the same through
    ``read`` (and through ``source``) and its patched texts are intact, else None (a miss:
    a damaged, foreign or untrusted entry is never served)."""
    entry = cache.read_entry(_entry_path(key), SCHEMA, "plan")
    try:
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
            return None
        results = [result_from(r) for r in entry["results"]]
        reads, source_reads, patched_shas = entry["read"], entry["source"], entry["patched"]
        texts: dict[str, str | None] = {}
        for rel, sha in reads.items():  # every file planning read through ``read``
            texts[rel] = read(rel)
            if _sha(texts[rel]) != sha:
                return None
        for rel, sha in source_reads.items():  # and through the source
            if _sha(source.read_text(rel)) != sha:
                return None
        patched: dict[str, str] = {}
        for rel, sha in patched_shas.items():
            text = _text(sha)
            if text is None:
                return None
            patched[rel] = text
    except (TypeError, KeyError, AttributeError, ValueError):  # a well-formed but wrong entry: a miss
        return None
    pristine = {rel: texts.get(rel) for rel in patched}
    if any(t is None for t in pristine.values()):
        return None
    imports = entry.get("imports")
    if not (isinstance(imports, dict) and set(imports) == set(patched)
            and all(v is None or (isinstance(v, list) and all(isinstance(m, str) for m in v))
                    for v in imports.values())):
        imports = None  # the converge reads the texts
    return engine.Plan(source, results, pristine, patched, workspace=None,  # type: ignore[arg-type]
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
            sha = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            path = _text_path(sha)
            if not path.is_file() or _text(sha) is None:  # absent, damaged or another user's: write ours
                cache.write_entry(path, text.encode("utf-8"))
            shas[rel] = sha
        imports = {rel: None if mods is None else list(mods) for rel, mods in (plan.imports or {}).items()}
        entry = {"format": FORMAT, "key": key, "vllm": str(plan.source.version),
                 "read": dict(reads), "source": dict(source_reads),
                 "patched": shas, "results": [result_data(r) for r in plan.results],
                 "imports": imports if set(imports) == set(shas) else None}
        payload = cache.pack_entry(SCHEMA, entry)
        if [result_from(r) for r in cache.unpack_body(payload)["results"]] != plan.results:
            return  # not plain data (a tuple where a list comes back): never served different
        cache.write_entry(_entry_path(key), payload)
    except (OSError, TypeError, ValueError):
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
