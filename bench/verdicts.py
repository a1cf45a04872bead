"""Verdicts: how right they are on the verdict corpus, and what ``check`` costs (issues 23 and 35).

Two measurements, each of this checkout against another commit (``--base``), both run
with each tree's own patchq (a ``git archive`` of ``--base`` unpacked in a temporary
directory and put first on ``PYTHONPATH``):

``--corpus`` (issue 35)
    every cell of the verdict corpus (``tests/verdicts/<stack>/``: each release's truth
    read from its code; the stacks of *this* checkout, for both trees) checked by each
    tree, and one table per tree: per stack the cells, matches, false applies (a
    non-blocking verdict where the truth is not ``apply`` and the verdict does not match
    it) and false blocks (a blocking verdict where the truth is ``apply``, or
    ``upstreamed``: the patch could be dropped), then the cells whose verdict changed.
    ``--stacks a,b`` limits the stacks; ``--json`` writes every cell of both trees.

timing (default)
    ``patchq check --profile P --vllm X --json`` of a series, alternating the two trees,
    ``--rounds`` times per release, each in a fresh interpreter, medians and the ratio new
    / old. ``--cold`` runs every check with nothing cached (an empty ``PATCHQ_CACHE_DIR``
    holding only the release trees, linked: no definition index, no plans, no verdicts), as the
    issue's target "check of a profile on a release with nothing cached" means; otherwise
    the caches are warm (the releases are fetched once before timing).

    python bench/verdicts.py --corpus --base 3b3b8de
    python bench/verdicts.py --base 092239c --releases 0.26.0,0.33.0 --rounds 7
    python bench/verdicts.py --base 3b3b8de --cold --releases 0.28.0,0.34.0 --rounds 5 \\
        --series tests/verdicts/genesis/series --profile genesis
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_EVALUATE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import patchq, verdict_corpus as vc
from pathlib import Path
assert Path(patchq.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()), patchq.__file__
vc.HERE = Path(sys.argv[2])
out = {s: vc.evaluate(s) for s in sys.argv[3].split(",")}
json.dump(out, sys.stdout)
"""


def unpack(commit: str, dest: Path) -> Path:
    """``git archive`` of ``commit`` unpacked under ``dest``."""
    tar = dest / "base.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "-C", str(REPO), "archive", commit], stdout=fh, check=True)
    with tarfile.open(tar) as t:
        t.extractall(dest / "tree")
    return dest / "tree"


def once(tree: Path, version: str, profile: str, series: str | None = None, env: dict | None = None) -> float:
    env = dict(env or os.environ, PYTHONPATH=str(tree))
    extra = ["--series", series] if series else []
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "patchq", "check", "--profile", profile, "--vllm", version,
                          "--json", *extra], cwd=tree, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    if out.returncode not in (0, 1):
        raise SystemExit(f"{tree}: exit {out.returncode}: {out.stderr[-400:]}")
    return took


def cold_cache(dest: Path) -> Path:
    """An empty patchq cache at ``dest`` holding only the release trees of the real cache
    (symlinked): nothing indexed, planned or judged yet, and no release to fetch."""
    from patchq.vllmdist import releases

    (dest / "releases").mkdir(parents=True, exist_ok=True)
    for tree in sorted((releases.cache_dir() / "releases").iterdir()):
        if tree.is_dir() and not (dest / "releases" / tree.name).exists():
            (dest / "releases" / tree.name).symlink_to(tree.resolve(), target_is_directory=True)
    return dest


def timing(args: argparse.Namespace, old: Path) -> None:
    series = str(Path(args.series).resolve()) if args.series else None
    versions = args.releases.split(",")
    for v in versions:
        once(REPO, v, args.profile, series)  # fetch the release; warm what warm runs may keep
        times: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(args.rounds):
            for name, tree in (("old", old), ("new", REPO)):
                if not args.cold:
                    times[name].append(once(tree, v, args.profile, series))
                    continue
                with tempfile.TemporaryDirectory(prefix="pq-cold-") as tmp:
                    env = dict(os.environ, PATCHQ_CACHE_DIR=str(cold_cache(Path(tmp))), PATCHQ_OFFLINE="1")
                    times[name].append(once(tree, v, args.profile, series, env))
        mo, mn = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"vllm {v}: check --profile {args.profile}{' (nothing cached)' if args.cold else ''}: old {mo:.3f} s, "
              f"new {mn:.3f} s (medians of {args.rounds}, interleaved): ratio {mn / mo:.3f}")


def evaluate(tree: Path, stacks: list[str]) -> dict:
    """Every cell of ``stacks`` as ``tree``'s patchq judges it (the corpus of this checkout)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", _EVALUATE, str(tree), str(REPO / "tests" / "verdicts"),
                          ",".join(stacks)], cwd=tree, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{tree}: exit {out.returncode}: {out.stderr[-800:]}")
    return json.loads(out.stdout)


def false_block(c: dict) -> bool:
    """A blocking verdict where applying is right, or where the patch could be dropped."""
    return c["blocking"] and c["truth"] in ("apply", "upstreamed")


def table(cells: dict) -> str:
    """The per-stack table (Markdown) of one tree's cells."""
    lines = ["| stack | cells | matches | false applies | false blocks (apply) | false blocks (upstreamed) |",
             "|---|---:|---:|---:|---:|---:|"]
    tot = [0, 0, 0, 0, 0]
    for stack, cs in cells.items():
        row = [len(cs), sum(c["match"] for c in cs), sum(c["false_apply"] for c in cs),
               sum(false_block(c) and c["truth"] == "apply" for c in cs),
               sum(false_block(c) and c["truth"] == "upstreamed" for c in cs)]
        tot = [a + b for a, b in zip(tot, row, strict=True)]
        lines.append(f"| {stack} | " + " | ".join(map(str, row)) + " |")
    n = max(1, tot[0])
    lines.append(f"| **all** | {tot[0]} | {tot[1]} ({100 * tot[1] / n:.1f}%) | {tot[2]} ({100 * tot[2] / n:.1f}%) | "
                 f"{tot[3]} ({100 * tot[3] / n:.1f}%) | {tot[4]} ({100 * tot[4] / n:.1f}%) |")
    return "\n".join(lines)


def corpus(args: argparse.Namespace, old: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "verdicts"))
    import verdict_corpus

    stacks = args.stacks.split(",") if args.stacks else verdict_corpus.stacks()
    got = {"old": evaluate(old, stacks), "new": evaluate(REPO, stacks)}
    for name, label in (("old", f"--base {args.base}"), ("new", "this checkout")):
        print(f"\n{label}:\n\n{table(got[name])}")
    print("\ncells whose verdict changed (truth: old -> new):")
    for stack in stacks:
        for a, b in zip(got["old"][stack], got["new"][stack], strict=True):
            if (a["status"], a["blocking"]) != (b["status"], b["blocking"]):
                mark = "fixed" if b["match"] and not a["match"] else "broken" if a["match"] and not b["match"] else ""
                print(f"  {stack} {a['patch']} {a['version']} ({a['truth']}): {a['status']} -> {b['status']} {mark}")
    if args.json:
        Path(args.json).write_text(json.dumps(got, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="092239c")
    ap.add_argument("--corpus", action="store_true", help="the verdict corpus's tables instead of timings")
    ap.add_argument("--stacks", help="corpus stacks to judge (default: all)")
    ap.add_argument("--json", help="with --corpus: write every cell of both trees here")
    ap.add_argument("--releases", default="0.26.0,0.33.0")
    ap.add_argument("--profile", default="dense")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cold", action="store_true", help="time checks with nothing cached but the release trees")
    ap.add_argument("--series", help="another series directory (e.g. tests/drift/series-0.23/series: drifted "
                                     "releases, where the three-way comparison runs)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = unpack(args.base, Path(tmp))
        if args.corpus:
            corpus(args, old)
        else:
            timing(args, old)
    return 0


if __name__ == "__main__":
    sys.exit(main())
