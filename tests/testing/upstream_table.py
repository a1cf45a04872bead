"""Verdicts of the stack fixture's patches with and without their hand-written ``upstream_check``s.

Two series are compared on real vLLM releases from patchq's cache:

* ``hand``: the stack fixture as it is (:mod:`testing.stack`: backend-tiles and align-backoff
  carry an ``upstream_check``);
* ``generic``: a copy of it with every ``upstream_check=upstream_check,`` argument
  removed, so only the generic detection of :mod:`patchq.plan.engine` /
  :mod:`patchq.plan.backward` speaks.

On each release the ``full`` profile (all five patches) is checked on

* the release itself (``real``): no patch is upstream there except align-backoff from
  0.28.0 (an ``upstreamed`` variant);
* a tree built from that release in which one patch's change is already made, as if
  upstream had merged it (``merged``): the patch's own result on that release with its
  sentinel comments and ``# patchq`` comments removed.
  A verdict there must never be ``applies``/``applies-drifted``/``moved`` (that would
  apply the change a second time).

``python tests/testing/upstream_table.py [VERSION ...]`` prints the Markdown table (default: every
release of 0.15.1-0.33.0 in the cache; the stack's variants cover 0.15-0.25). Tests import :func:`merged_tree`,
:func:`generic_series` and :func:`verdict`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "drift"))

import corpus  # noqa: E402
from patchq import series as series_mod  # noqa: E402
from patchq.compat import check  # noqa: E402
from patchq.plan import engine  # noqa: E402
from patchq.vllmdist import releases, sources  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from testing import stack  # noqa: E402

PATCHES = stack.FULL
APPLYING = ("applies", "applies-drifted", "moved")


def generic_series(dst: Path) -> Path:
    """A copy of the stack's series and anchors under ``dst`` without hand-written upstream checks."""
    stack.copy(dst)
    for path in (dst / "series").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        new = re.sub(r"^\s*upstream_check=upstream_check,\n", "", text, flags=re.M)
        if new != text:
            path.write_text(new, encoding="utf-8")
    return dst / "series"


def _as_upstream(text: str) -> str:
    """A patched module as upstream would have merged it: no sentinel lines, no
    ``# patchq ...`` comments, double-quoted strings of the inserted code single-quoted."""
    out = []
    for line in text.splitlines(keepends=True):
        if re.match(r"\s*# patchq:", line):
            continue
        line = re.sub(r"\s+# patchq\b[^\n]*", "", line.rstrip("\n")) + ("\n" if line.endswith("\n") else "")
        if re.match(r"\s*# patchq\b", line):
            continue
        out.append(line)
    return "".join(out)


def merged_tree(version: str, patch_id: str, dst: Path) -> sources.CodeSource | None:
    """A source tree of ``version`` where ``patch_id``'s change is already made (module
    docstring); None when the patch does not edit anything on that release."""
    s = series_mod.load(stack.SERIES)
    src = sources.release_source(version)
    plan = engine.plan(src, [s.patch(patch_id)])
    if plan.results[0].status != engine.OK or not plan.patched:
        return None
    tree = releases.release_tree(version)
    corpus.link_tree(tree / "vllm", dst / "vllm")
    for rel, text in plan.patched.items():
        path = dst / rel
        path.unlink()
        path.write_text(_as_upstream(text), encoding="utf-8")
    return sources.source_tree(dst, version=version)


def verdict(source: sources.CodeSource, series_root: Path | None, patch_id: str) -> tuple[str, bool, str]:
    """(status, blocking, reason) of ``patch_id`` in a check of ``full`` on ``source`` (``series_root``
    None: the stack itself)."""
    s = series_mod.load(series_root or stack.SERIES)
    rows = {r.id: r for r in check.check(source, s.patches_of("full"))}
    r = rows[patch_id]
    return r.status, r.blocking, r.reason


def _cell(status: str, blocking: bool) -> str:
    return f"{status}{' (blocking)' if blocking else ''}"


def table(versions: list[str], work: Path) -> str:
    """The Markdown table (one row per release and patch)."""
    generic = generic_series(work / "generic")
    lines = ["| release | patch | real: hand | real: generic | merged: hand | merged: generic |",
             "|---|---|---|---|---|---|"]
    for v in versions:
        src = sources.release_source(v)
        s_hand = series_mod.load(stack.SERIES)
        s_gen = series_mod.load(generic)
        real_hand = {r.id: r for r in check.check(src, s_hand.patches_of("full"))}
        real_gen = {r.id: r for r in check.check(src, s_gen.patches_of("full"))}
        for pid in PATCHES:
            merged = merged_tree(v, pid, work / f"{v}-{pid}")
            if merged is None:
                mh = mg = "-"
            else:
                mh = _cell(*verdict(merged, None, pid)[:2])
                mg = _cell(*verdict(merged, generic, pid)[:2])
            lines.append(f"| {v} | {pid} | {_cell(real_hand[pid].status, real_hand[pid].blocking)} | "
                         f"{_cell(real_gen[pid].status, real_gen[pid].blocking)} | {mh} | {mg} |")
    return "\n".join(lines)


def cached_versions(lo: str = "0.15.1", hi: str = "0.33.0") -> list[str]:
    """Releases in patchq's cache between ``lo`` and ``hi`` (inclusive), ascending."""
    from packaging.version import Version

    root = releases.cache_dir() / "releases"
    found = [p.name for p in root.iterdir() if (p / "vllm").is_dir()] if root.is_dir() else []
    ok = []
    for name in found:
        try:
            v = Version(name)
        except Exception:
            continue
        if Version(lo) <= v <= Version(hi):
            ok.append(name)
    return sorted(ok, key=Version)


if __name__ == "__main__":
    import tempfile

    versions = sys.argv[1:] or cached_versions()
    with tempfile.TemporaryDirectory() as tmp:
        print(table(versions, Path(tmp)))
