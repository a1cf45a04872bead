"""What a plan produced: per-patch and per-anchor results, and the :class:`Plan` itself.

Kept apart from :mod:`patchq.plan.engine` (which imports libcst) so that a command that
plans nothing (``revert --all``) and the renderers need not import libcst.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from patchq.vllmdist.sources import CodeSource

if TYPE_CHECKING:
    from patchq.plan.engine import Workspace

# Per-patch outcomes of a plan.
OK = "ok"
FAILED = "failed"
NOT_APPLICABLE = "not-applicable"
UPSTREAMED = "upstreamed"
ABSENT = "absent"
SUPERSEDED = "superseded"  # applied, and a later patch of the profile rewrote its change on purpose
#: outcomes the journal records for a profile's patch (an entry per patch); see :func:`journal_outcome`
JOURNALLED = (OK, SUPERSEDED, UPSTREAMED)


@dataclass
class AnchorResult:
    """Where one anchor resolved.

    Attributes:
        anchor: anchor id. relpath: file. qualname: definition. line: 1-based line of
        the definition in the pristine file. moved: found outside the module hint.
        matches: statements matched. fingerprint: of the pristine definition.
        verified: the recorded release with an identical fingerprint, if any.
    """

    anchor: str
    relpath: str
    qualname: str
    line: int | None
    moved: bool
    matches: int
    fingerprint: str
    verified: str | None


@dataclass
class PatchResult:
    """The outcome of one patch in a plan.

    ``status`` is one of ``ok``, ``failed``, ``not-applicable``, ``upstreamed``,
    ``absent``, ``superseded``; ``reason`` explains anything but ``ok``. For ``failed``,
    ``failure`` says which step failed: ``gone`` (a definition not found anywhere),
    ``conflict`` (found, but the pattern count is wrong, it is ambiguous, the transform
    fails or the result does not compile), ``uncovered`` (no variant covers the
    version), ``invalid`` (a validation check refused the edit), ``interaction``
    (another patch of the profile removed or replaced this one's statement, or the
    other way round), ``partially-upstreamed`` (some edits are already in the release)
    or ``upstreamed`` (all are, and the plan is ``strict``); ``failed_anchor`` names
    the anchor when one is to blame.
    """

    patch_id: str
    hash: str
    status: str
    reason: str = ""
    variant: str = ""
    anchors: list[AnchorResult] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    failure: str = ""
    failed_anchor: str = ""


@dataclass
class Plan:
    """Result of :func:`plan`.

    Attributes:
        source: the vLLM planned against.
        results: one PatchResult per patch, in series order.
        pristine: relpath -> pristine text, for every file a patch changed.
        patched: relpath -> new text (sentinels included), same keys.
        workspace: the parsed modules the plan used (``check`` re-resolves anchors in
            them instead of parsing files again).
    """

    source: CodeSource
    results: list[PatchResult]
    pristine: dict[str, str]
    patched: dict[str, str]
    workspace: Workspace | None = field(default=None, repr=False, compare=False)
    #: patch id -> what each of its edits changed (:class:`survival.EditChange`), for
    #: every edit patch that got as far as its transforms (also failed ones)
    changes: dict = field(default_factory=dict, repr=False, compare=False)
    #: patch id -> (verdict, reason) of its hand-written ``upstream_check``, as the plan ran it
    hand_checks: dict = field(default_factory=dict, repr=False, compare=False)
    #: relpath -> the top-level modules the code patches wrote there imports (absolute
    #: imports, every version of every edited definition: a superset of what the patched
    #: file imports outside its unchanged code), or None when unknown; None for the whole
    #: plan when not recorded (:func:`patchq.env.converge` then reads the texts)
    imports: dict[str, list[str] | None] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when no patch failed."""
        return all(r.status != FAILED for r in self.results)

    def failures(self) -> list[PatchResult]:
        """The failed results."""
        return [r for r in self.results if r.status == FAILED]

def journal_outcome(result: PatchResult, version: str) -> tuple[str, str] | None:
    """(outcome, reason) the journal records for a plan result, or None for none.

    ``applied`` for ``ok``; ``superseded`` with the reason naming the superseding patch;
    ``upstreamed`` with ``upstreamed on <version>, not applied: <reason>``.
    """
    if result.status == OK:
        return "applied", ""
    if result.status == SUPERSEDED:
        return "superseded", result.reason
    if result.status == UPSTREAMED:
        return "upstreamed", f"upstreamed on {version}, not applied: {result.reason}"
    return None
