"""Benchmark of ``patchq upstream sync``: git plumbing against a work tree with ``git add -A``.

Usage (from the repo root; the release wheels must be cached)::

    python bench/upstream_sync.py [--releases 0.23.0,0.24.0,0.26.0] [--json out.json]

Both methods build the same history (one commit per release, in order) in fresh
temporary repositories, from the same extracted release trees
(:func:`patchq.vllmdist.releases.release_tree`, extracted before timing):

* **plumbing** -- :func:`patchq.authoring.upstream.sync`: ``hash-object -w --stdin-paths``,
  ``update-index --index-info`` into a throw-away index, ``write-tree``, ``commit-tree``;
* **worktree** -- the obvious way: replace a work tree's ``vllm/`` with the release's
  (``shutil.copytree``), ``git add -A``, ``git commit``.

It checks that both give the same tree id per release, then prints seconds per method
and the ratio worktree / plumbing, measured in the same run. An incremental re-sync
(every release already tagged) is timed too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from patchq.vllmdist import releases
from patchq.authoring import upstream


def worktree_sync(versions: list[str], path: Path) -> dict[str, str]:
    """The naive history: copy each release into a work tree, ``git add -A``, commit. Returns trees."""
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    env = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    trees = {}
    for v in versions:
        shutil.rmtree(path / "vllm", ignore_errors=True)
        src = releases.release_tree(v)
        shutil.copytree(src / "vllm", path / "vllm", ignore=lambda d, names: [n for n in names if
                        (Path(d) / n).is_file() and not n.endswith(".py")])
        subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(path), *env, "commit", "-q", "-m", f"vllm {v}"], check=True)
        subprocess.run(["git", "-C", str(path), "tag", f"v{v}"], check=True)
        trees[v] = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD^{tree}"], check=True,
                                  capture_output=True, text=True).stdout.strip()
    return trees


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", default="0.23.0,0.24.0,0.26.0")
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    versions = [v.strip() for v in args.releases.split(",") if v.strip()]
    for v in versions:  # extraction is not what is measured
        releases.release_tree(v)
    with tempfile.TemporaryDirectory(prefix="patchq-bench-") as tmp:
        t0 = time.perf_counter()
        upstream.sync(versions, Path(tmp) / "plumbing.git")
        plumbing = time.perf_counter() - t0
        t0 = time.perf_counter()
        upstream.sync(versions, Path(tmp) / "plumbing.git")
        resync = time.perf_counter() - t0
        import git

        repo = git.Repo(Path(tmp) / "plumbing.git")
        trees_p = {v: repo.commit(f"v{v}").tree.hexsha for v in versions}
        t0 = time.perf_counter()
        trees_w = worktree_sync(versions, Path(tmp) / "worktree")
        worktree = time.perf_counter() - t0
    assert trees_p == trees_w, "the two methods built different trees"
    out = {"releases": versions, "plumbing_s": round(plumbing, 3), "worktree_s": round(worktree, 3),
           "ratio_worktree_over_plumbing": round(worktree / plumbing, 2), "resync_s": round(resync, 3),
           "same_trees": True}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
