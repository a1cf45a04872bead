#!/usr/bin/env python3
"""A new vLLM release, handled unattended: a thin caller of ``patchq upgrade`` for the workflow.

    ci/release_check.py VERSION [--index-url URL] [--series DIR] [--out DIR] [--branch NAME]
                        [--matrix-releases SPEC] [--no-branch] [--json]
    ci/release_check.py --latest [--index-url URL]

``VERSION`` runs, in the repository holding the series::

    patchq upgrade --to VERSION --write --branch release/vVERSION --commit --out release-check/VERSION

(``--no-branch``: ``--write`` only, nothing committed), whose steps, pull-request body and
``upgrade.json`` are :mod:`patchq.commands.upgrade`'s and ``docs/release-check.md``'s.
``--latest`` prints the newest final release the index lists (asked now). ``--index-url``
sets ``$PIP_INDEX_URL`` for patchq (the index the release list and the wheel come from).

Exit codes are patchq's (``docs/exit-codes.md``): 0 no person needed, 1 a person is needed,
2 usage (a dirty series, an existing branch), 3 the release cannot be had, 5 git refused the
commit; never a code of its own.
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(prog="ci/release_check.py", description=(__doc__ or "").splitlines()[0],
                                 epilog="exit codes: patchq's (docs/exit-codes.md)")
    ap.add_argument("version", nargs="?", help="the new vLLM release, e.g. 0.34.0")
    ap.add_argument("--latest", action="store_true", help="print the newest final release on the index and exit")
    ap.add_argument("--index-url", help="simple index (default: $PIP_INDEX_URL, else PyPI)")
    ap.add_argument("--series", help="series directory or repo (default: the one patchq finds from here)")
    ap.add_argument("--out", help="output directory (default: release-check/VERSION)")
    ap.add_argument("--branch", help="branch to create (default: release/vVERSION)")
    ap.add_argument("--no-branch", action="store_true", help="write in the current checkout; commit nothing")
    ap.add_argument("--matrix-releases", help="the matrix's releases (default: patchq matrix's, and VERSION)")
    ap.add_argument("--json", action="store_true", help="print upgrade.json instead of the text")
    args = ap.parse_args(argv)
    if args.latest == bool(args.version):
        ap.error("give VERSION or --latest")
    return args


def upgrade_argv(args: argparse.Namespace) -> list[str]:
    """The ``patchq`` arguments of a VERSION run."""
    out = args.out or f"release-check/{args.version}"
    argv = ["upgrade", "--to", args.version, "--write", "--out", out, "--matrix"]
    if not args.no_branch:
        argv += ["--branch", args.branch or f"release/v{args.version}", "--commit"]
    if args.matrix_releases:
        argv += ["--matrix-releases", args.matrix_releases]
    if args.series:
        argv += ["--series", args.series]
    return argv + (["--json"] if args.json else [])


def main(argv: list[str] | None = None) -> int:
    """Run patchq (in this process, through its one error edge); its exit code."""
    from patchq.__main__ import dispatch
    from patchq.edge import guard
    from patchq.errors import EXIT_OK, EXIT_USAGE

    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    if args.index_url:
        os.environ["PIP_INDEX_URL"] = args.index_url
    if args.latest:
        def newest(_argv: list[str]) -> int:
            from patchq.vllmdist import releases

            print(releases.newest(refresh=True))
            return EXIT_OK
        return guard(newest, [])
    return guard(dispatch, upgrade_argv(args))


if __name__ == "__main__":
    sys.exit(main())
