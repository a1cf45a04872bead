"""Sentinels: the comment patchq leaves on every definition a patch changed.

``# patchq:<patch-id>:<patch-hash> (...)`` sits above the definition. Standard library
only, so ``status`` can find sentinels without parsing.
"""

from __future__ import annotations

import re

#: ``# patchq:<patch-id>:<patch-hash>`` — one per patch on each definition it changed.
SENTINEL_RE = re.compile(r"# patchq:([a-z0-9][a-z0-9-]*):([0-9a-f]{12})\b")


def sentinel_comment(patch_id: str, patch_hash: str) -> str:
    """The sentinel comment text for a patch (see :data:`SENTINEL_RE`)."""
    return f"# patchq:{patch_id}:{patch_hash} (applied by patchq; `patchq status` explains)"


def find_sentinels(text: str) -> list[tuple[str, str]]:
    """All (patch id, patch hash) sentinels in a file's text, in order (no parsing)."""
    return [(m.group(1), m.group(2)) for m in SENTINEL_RE.finditer(text)]
