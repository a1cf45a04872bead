"""The patch model: anchors, variants, patches and profiles.

A *patch* is a named change to vLLM with a why, upstream links and an applies-range on
the vLLM version. It holds one or more *variants*, each keyed by its own applies-range:
either a set of *edits* (an anchor id -> a libcst transform of the anchored definition),
or a verdict that the change is already *upstreamed* or that its target is *absent* in
that range. An *anchor* names where an edit goes by structure, never by line: a module
path (a hint), the qualified name of the enclosing definition, and a statement pattern
inside it with the number of matches expected.

Anchors live as data in ``anchors/<patch>.toml`` (with per-release fingerprints); the
variants and their transforms live as code in ``series/<patch>.py``; the profiles in
``series/profiles.toml``. :mod:`patchq.series` loads all three into these types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.version import Version

if TYPE_CHECKING:  # libcst is imported lazily: the no-op paths never load it
    import libcst as cst

    from patchq.edits import EditContext

    DefNode = cst.FunctionDef | cst.ClassDef
    #: An edit: (anchored definition, matched statements, context) -> new definition.
    EditFn = Callable[[DefNode, Sequence[cst.CSTNode], EditContext], DefNode]


#: The qualname of a module-level anchor (series format 2): the anchored "definition" is the
#: module itself (a :class:`libcst.Module`), its ``node`` pattern matches top-level statements
#: (assignments, imports, calls, ``__all__``...). An anchors file holding one starts with
#: ``format = 2`` (:data:`patchq.hashing.ANCHORS_FORMAT`); files without it are format 1.
MODULE_QUALNAME = "<module>"


@dataclass(frozen=True)
class AnchorSpec:
    """Where one edit goes, by structure.

    Attributes:
        id: the anchor's key within its patch (``anchors/<patch>.toml`` table name).
        module: dotted module path where the definition is expected, e.g.
            ``vllm.v1.core.kv_cache_utils``; a hint only: when the definition is not
            there, the whole package is searched (code moves between files).
        qualname: qualified name of the enclosing definition, e.g.
            ``LogitsProcessor._get_logits`` (classes and methods; no ``<locals>``), or
            :data:`MODULE_QUALNAME` for a module-level anchor.
        node: a statement pattern (Python source) matched by normalized AST inside the
            definition, or ``None`` to anchor the definition itself. ``...`` in the
            pattern matches any expression or any block.
        min_count, max_count: how many statements must match (``max_count`` None:
            no upper bound). Zero matches, or more than ``max_count``, is an error.
        fingerprints: vLLM version -> fingerprint of the anchored definition
            (:func:`patchq.plan.anchors.fingerprint`) on the releases it was verified on.
    """

    id: str
    module: str
    qualname: str
    node: str | None = None
    min_count: int = 1
    max_count: int | None = 1
    fingerprints: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_module(self) -> bool:
        """True for a module-level anchor (:data:`MODULE_QUALNAME`)."""
        return self.qualname == MODULE_QUALNAME

    @property
    def module_paths(self) -> tuple[str, str]:
        """The two file paths the module hint can name: ``a/b.py`` and ``a/b/__init__.py``."""
        base = self.module.replace(".", "/")
        return (base + ".py", base + "/__init__.py")

    def count_ok(self, n: int) -> bool:
        """True when ``n`` matches satisfy the expected count."""
        return n >= self.min_count and (self.max_count is None or n <= self.max_count)

    def count_text(self) -> str:
        """The expected count as a phrase: ``1``, ``at least 2``, ``2 to 4``."""
        if self.max_count == self.min_count:
            return str(self.min_count)
        if self.max_count is None:
            return f"at least {self.min_count}"
        return f"{self.min_count} to {self.max_count}"


@dataclass(frozen=True)
class Variant:
    """One implementation of a patch, for the vLLM versions in ``applies``.

    Exactly one of ``edits``, ``upstreamed`` or ``absent`` is set:
    ``edits`` maps anchor ids (applied in order) to libcst transforms;
    ``upstreamed`` says why the release already does what the patch intends;
    ``absent`` says why the target code does not exist yet in that range.
    """

    applies: SpecifierSet
    edits: Mapping[str, EditFn] = field(default_factory=dict)
    upstreamed: str | None = None
    absent: str | None = None
    note: str = ""

    @property
    def kind(self) -> str:
        """``edit``, ``upstreamed`` or ``absent``."""
        if self.upstreamed is not None:
            return "upstreamed"
        if self.absent is not None:
            return "absent"
        return "edit"


@dataclass(frozen=True)
class Case:
    """One behavioural case a patch carries (as a Fixit rule carries its VALID/INVALID
    cases): a small callable, run in an interpreter that imports the patched vLLM on CPU
    (``patchq probe``, :mod:`patchq.probe`), that builds its inputs (specs, configs, small
    tensors, a tiny module) and asserts the patched behaviour. It passes when it returns
    (its return value, JSON-able, is recorded as what it observed) and fails when it
    raises.

    Attributes:
        name: kebab-case, unique within the patch (the function's name with ``-``).
        fn: the callable; takes no argument.
        releases: the vLLM versions the case is for (outside them it is skipped, said so).
        pristine: what the case does on the *unpatched* release, when known: ``"fails"``
            (the case shows what the patch changes: the negative control) or ``"passes"``
            (the patch keeps behaviour that upstream already has); ``None``: not claimed.
            Checked by ``patchq probe --pristine``.
        doc: the first line of the callable's docstring.
    """

    name: str
    fn: Callable[[], object]
    releases: SpecifierSet = field(default_factory=SpecifierSet)
    pristine: str | None = None
    doc: str = ""

    def is_for(self, version: Version | str) -> bool:
        """True when the case applies to ``version`` (prereleases included)."""
        return self.releases.contains(Version(str(version)), prereleases=True)


@dataclass(frozen=True)
class Patch:
    """A named change to vLLM (see module docstring).

    Attributes:
        id: kebab-case id, also the sentinel's name (``# patchq:<id>:<hash>``).
        summary: one line. why: the reason, a paragraph.
        upstream: links (issues, PRs) where known.
        applies: the overall applies-range on the vLLM version.
        variants: in order; the first whose range contains the version is used.
        anchors: anchor id -> :class:`AnchorSpec` (from ``anchors/<id>.toml``).
        hash: 12 hex chars of sha256 over the patch's source file and its anchor
            definitions (fingerprints excluded): a change here marks applied copies stale.
        source_file: path of ``series/<module>.py``.
        upstream_check: optional ``(CodeSource) -> str | None``; returns a reason when
            the release already does what the patch intends (used by ``check``).
        probe: optional behavioural probe, run in an interpreter that imports vLLM (the
            first form of a case: loaded as the case ``probe``; write ``cases=`` instead).
        cases: the patch's behavioural :class:`Case` s (``patchq probe``; ``probe`` among them
            as the case ``probe`` when given).
        requires: ids of patches that must come before this one in every profile that
            holds it (:mod:`patchq.plan.relations`).
        conflicts: ids of patches that must never be in a profile with this one.
        supersedes: ids of patches whose change this one deliberately rewrites, building
            on it: they must come before it, and their rewritten change is reported
            ``superseded by <this id>`` instead of failing the profile.
        runtime_names: names the patched code uses that are provided at run time
            (builtins injected by a plugin, names the module defines dynamically); the
            undefined-name check (:mod:`patchq.plan.validate`) accepts them.
        removes: anchor ids whose transform deliberately removes the anchored
            definition (returns ``libcst.RemovalSentinel.REMOVE``); any other anchor must
            give back a definition of the same kind and name.
    """

    id: str
    summary: str
    why: str
    applies: SpecifierSet
    variants: tuple[Variant, ...]
    upstream: tuple[str, ...] = ()
    anchors: Mapping[str, AnchorSpec] = field(default_factory=dict)
    hash: str = ""
    source_file: str = ""
    upstream_check: Callable | None = None
    probe: Callable | None = None
    requires: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    runtime_names: tuple[str, ...] = ()
    removes: tuple[str, ...] = ()
    cases: tuple[Case, ...] = ()

    def relations(self) -> dict[str, list[str]]:
        """The declared relations as JSON lists: ``requires``, ``conflicts``, ``supersedes``."""
        return {"requires": list(self.requires), "conflicts": list(self.conflicts),
                "supersedes": list(self.supersedes)}

    def variant_for(self, version: Version | str) -> Variant | None:
        """The first variant whose applies-range contains ``version``, or None."""
        v = Version(str(version))
        if v not in self.applies:
            return None
        for variant in self.variants:
            if variant.applies.contains(v, prereleases=True):
                return variant
        return None


@dataclass(frozen=True)
class Profile:
    """A named, ordered list of patch ids (``series/profiles.toml``)."""

    name: str
    patches: tuple[str, ...]
    description: str = ""
