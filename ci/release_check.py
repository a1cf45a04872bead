#!/usr/bin/env python3
"""One unattended turnaround of the series onto a new vLLM release.

    ci/release_check.py VERSION [--index-url URL] [--series DIR] [--out DIR] [--branch NAME]
                        [--matrix-releases SPEC] [--profiles a,b] [--boot FILE]... [--no-branch]
    ci/release_check.py --latest [--index-url URL]      # print the newest final release

Steps (each one line of progress on stderr):

1. **resolve** VERSION on the package index: ``--index-url``, else ``$PIP_INDEX_URL``, else
   PyPI. The index is read as PEP 691 JSON or PEP 503 HTML; an ``http(s)://`` URL and a
   ``file://`` directory (``<dir>/vllm/index.html``, or the wheels listed in ``<dir>/vllm/``)
   both work. VERSION must be a final, non-yanked release there. Its Linux x86_64 wheel
   (highest build tag) is downloaded once into ``<patchq cache>/wheels/`` and its sha256
   checked against the index's; a wheel already in the cache is used as it is. The tree is
   extracted by :func:`patchq.vllmdist.releases.release_tree`.
2. **check** every profile (and every patch alone) on VERSION, before anything changes.
3. **branch**: ``git checkout -b release/vX.Y.Z`` in the repository holding the series
   (refused when ``series/`` or ``anchors/`` has uncommitted changes, or the branch exists).
4. **rebase --write** onto VERSION every patch the series does not already call upstreamed
   or absent there. A conflict whose definition upstream only re-formatted (fingerprint
   unchanged), where the anchored transform still applies, is resolved with the
   transform's result (``--continue``): the AST anchors carry it, a line merge cannot.
   A patch whose own upstream check finds its change in VERSION gets an ``upstreamed``
   variant from VERSION on (:func:`patchq.authoring.seriesedit.add_verdict_variant`).
5. **fingerprints** of VERSION recorded for every anchor that verifies there, except for a
   patch that ``check`` blocks on VERSION (``review``, ``possibly-upstreamed``, ...): that
   is a person's review (``patchq review``), so it stays blocking and needs a human; and the
   **rendered diffs** regenerated (``patchq diff --release VERSION --write``).
6. **commit** series/, anchors/ and the conflict files (``.patchq-rebase/VERSION/``) on the
   branch; nothing is pushed.
7. **check** every profile again, and render the **matrix** (the releases of
   ``--matrix-releases`` among the verified ones, plus VERSION) into ``OUT/matrix/``.
8. **summary**: ``OUT/summary.md`` (the pull-request body) and ``OUT/summary.json``.

Verdict per patch (``summary.json`` ``patches[].verdict``):

``carried cleanly``      the patch applies on VERSION; fingerprints and diff recorded.
``new variant written``  the merge is clean but the transform does not give it: the new
                         variant's golden text and diff are in the work directory.
``conflict``             the merge conflicts (the file with markers is named), or the
                         anchored definition is gone.
``upstreamed``           the patch's own upstream check finds the change in VERSION; an
                         ``upstreamed`` variant was written.
``superseded``           the series already says the patch is upstreamed/absent at VERSION.

Exit codes: 0 no human needed (every patch carried cleanly, upstreamed or superseded,
and every profile checks clean on VERSION); 1 a human is needed (a conflict, a new
variant to write, or a profile that still blocks); 2 usage (bad arguments, a dirty series
repository, the branch exists); 3 the release or its wheel is not on the index (or its
hash is wrong); 4 a step failed (git, an unexpected error): one line names the step and the
error (``PATCHQ_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import hashlib
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

EXIT_OK, EXIT_HUMAN, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_STEP = 0, 1, 2, 3, 4
SCHEMA = "patchq.release-check/1"
PYPI_SIMPLE = "https://pypi.org/simple/"
PROJECT = "vllm"
HTTP_TIMEOUT = 60.0

CARRIED, NEW_VARIANT, CONFLICT, UPSTREAMED, SUPERSEDED = (
    "carried cleanly", "new variant written", "conflict", "upstreamed", "superseded")
NEEDS_HUMAN = (NEW_VARIANT, CONFLICT)


class Failure(Exception):
    """A loud, one-line failure with its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- the index


class _Links(html.parser.HTMLParser):
    """The ``<a href>`` anchors of a PEP 503 page, with ``data-yanked``."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            a = dict(attrs)
            if a.get("href"):
                self.links.append({"href": a["href"], "yanked": "data-yanked" in a})


def _file_entry(href: str, base: str, yanked: Any) -> dict[str, Any]:
    url = urllib.parse.urljoin(base, href)
    path, _, frag = url.partition("#")
    sha = frag.split("=", 1)[1] if frag.startswith("sha256=") else None
    name = urllib.parse.unquote(path.rsplit("/", 1)[-1])
    return {"filename": name, "url": path, "sha256": sha, "yanked": yanked}


def index_url(explicit: str | None = None) -> str:
    """The simple index to use: ``explicit``, else ``$PIP_INDEX_URL``, else PyPI (ends with ``/``)."""
    url = explicit or os.environ.get("PIP_INDEX_URL") or PYPI_SIMPLE
    if "://" not in url:  # a bare directory
        url = Path(url).resolve().as_uri()
    return url.rstrip("/") + "/"


def index_files(url: str, project: str = PROJECT) -> list[dict[str, Any]]:
    """The files the index lists for ``project``: ``[{filename, url, sha256, yanked}]``.

    Raises:
        Failure: the index cannot be read (exit 3).
    """
    page = urllib.parse.urljoin(url, f"{project}/")
    if page.startswith("file:"):
        folder = Path(urllib.request.url2pathname(urllib.parse.urlparse(page).path))
        if not folder.is_dir():
            raise Failure(f"index {url}: no {project}/ directory at {folder}", EXIT_NOT_FOUND)
        html_page = folder / "index.html"
        if not html_page.is_file():  # a plain directory of files, as pip reads it
            return [{"filename": p.name, "url": p.as_uri(), "sha256": None, "yanked": False}
                    for p in sorted(folder.iterdir()) if p.is_file()]
        body, ctype = html_page.read_bytes(), "text/html"
    else:
        req = urllib.request.Request(page, headers={
            "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
            "User-Agent": "patchq release-check"})
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
                body, ctype = resp.read(), resp.headers.get("Content-Type", "")
                page = resp.geturl()
        except (urllib.error.URLError, OSError) as exc:
            raise Failure(f"cannot read the index page {page}: {exc}", EXIT_NOT_FOUND) from None
    if "json" in ctype:
        data = json.loads(body)
        return [{"filename": f["filename"], "url": urllib.parse.urljoin(page, f["url"]),
                 "sha256": (f.get("hashes") or {}).get("sha256"), "yanked": f.get("yanked", False)}
                for f in data.get("files", [])]
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    return [_file_entry(a["href"], page, a["yanked"]) for a in parser.links]


def final_releases(files: list[dict[str, Any]]) -> list[str]:
    """The final, non-yanked versions among ``files`` (ascending)."""
    from patchq.vllmdist import releases

    return [str(v) for v in releases.final_versions({"files": files}, package=PROJECT)]


def pick_wheel(files: list[dict[str, Any]], version: str) -> dict[str, Any] | None:
    """The Linux x86_64 wheel of ``version`` with the highest build tag, or None."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    best = None
    for f in files:
        if not f["filename"].endswith(".whl") or f.get("yanked"):
            continue
        try:
            name, ver, build, tags = parse_wheel_filename(f["filename"])
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name != PROJECT or ver != Version(version):
            continue
        if not any(t.platform.endswith("x86_64") and "linux" in t.platform for t in tags):
            continue
        if best is None or (build, f["filename"]) > best[0]:
            best = ((build, f["filename"]), f)
    return best[1] if best else None


def fetch_wheel(entry: dict[str, Any], version: str) -> tuple[Path, str]:
    """The wheel in ``<patchq cache>/wheels/``: (path, how: ``cached`` or ``downloaded``).

    Downloads ``entry['url']`` next to the cache, checks its sha256 against the index's
    (when the index gives one), then moves it in. Raises Failure (exit 3) on a bad hash.
    """
    from patchq.vllmdist import releases

    wdir = releases.cache_dir() / "wheels"
    found = releases.find_wheel(wdir, version, package=PROJECT)
    if found is not None:
        return found, "cached"
    wdir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=wdir, prefix=f".dl-{version}-", suffix=".part")
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(entry["url"], timeout=HTTP_TIMEOUT) as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                h.update(block)
                out.write(block)
        if entry.get("sha256") and h.hexdigest() != entry["sha256"].lower():
            raise Failure(f"{entry['filename']}: sha256 {h.hexdigest()} differs from the index's {entry['sha256']}",
                          EXIT_NOT_FOUND)
        final = wdir / entry["filename"]
        os.replace(tmp, final)
        return final, "downloaded"
    except (urllib.error.URLError, OSError) as exc:
        raise Failure(f"cannot download {entry['url']}: {exc}", EXIT_NOT_FOUND) from None
    finally:
        Path(tmp).unlink(missing_ok=True)


# --------------------------------------------------------------------------- git


def git(repo: Path, *args: str) -> str:
    """Run ``git -C repo ARGS``; its stdout. Raises Failure (exit 4) naming the command."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        raise Failure(f"git {' '.join(args)} failed: {tail[-1] if tail else proc.returncode}", EXIT_STEP)
    return proc.stdout.strip()


# --------------------------------------------------------------------------- the turnaround


@dataclass
class Step:
    """One line of progress: its name, seconds, and what it said."""

    name: str
    seconds: float
    said: str


class Progress:
    """The progress display on stderr (rich): a spinner per step, then one line when done."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, quiet=quiet, highlight=False, soft_wrap=True)
        self.steps: list[Step] = []
        self.started = time.perf_counter()
        self.current = "start"

    def run(self, name: str, fn: Callable[[], Any], said: Callable[[Any], str] = lambda r: "") -> Any:
        """Run ``fn`` under a spinner named ``name``; print ``said(result)`` when done."""
        t0 = time.perf_counter()
        self.current = name
        with self.console.status(f"[bold]{name}[/] ..."):
            result = fn()
        dt = time.perf_counter() - t0
        text = said(result)
        self.steps.append(Step(name, round(dt, 2), text))
        self.console.print(f"[green]done[/] {name} [dim]({dt:.1f} s)[/]" + (f": {text}" if text else ""))
        return result


def _load_series(series_dir: Path):
    from patchq import series as series_mod

    return series_mod.load(str(series_dir))


def _check_all(series_dir: Path, version: str, profiles: list[str]) -> dict[str, Any]:
    """{'patches': {id: row}, 'profiles': {name: patchq.check/1 document}} on ``version``."""
    from patchq.commands import check as check_cmd
    from patchq.compat import check as checking
    from patchq.vllmdist.sources import release_source

    s = _load_series(series_dir)
    source = release_source(version)
    rows = checking.check(source, [s.patch(pid) for pid in s.all_patch_ids()])
    alone = checking.document(source, None, rows)
    out = {"patches": {p["id"]: p for p in alone["patches"]}, "profiles": {}}
    for name in profiles:
        doc, _code = check_cmd.run(source, s, name)
        out["profiles"][name] = doc
    return out


def _matrix_versions(spec: str, series_dir: Path, version: str) -> list[str]:
    """The verified releases (a fingerprint recorded in anchors/) matching ``spec``, plus ``version``."""
    from patchq.vllmdist import releases

    s = _load_series(series_dir)
    seen = {v for pid in s.all_patch_ids() for a in s.patch(pid).anchors.values() for v in a.fingerprints}
    seen.add(version)
    try:
        chosen = releases.filter_releases(seen, spec)
    except releases.ReleaseError as exc:
        raise Failure(f"--matrix-releases: {exc}", EXIT_USAGE) from None
    out = [str(v) for v in chosen]
    return out if version in out else out + [version]


def _rel(path: str | Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)


def verdict_of(p: dict[str, Any], repo: Path) -> tuple[str, list[str], list[str]]:
    """The verdict of one ``patchq.rebase/1`` patch row: (verdict, files relative to ``repo``, notes).

    ``clean`` and ``skipped`` (already carried) are carried cleanly; ``needs-variant`` (the
    merge is clean, the transform does not give it) is a new variant written (its golden
    text and diff in the work directory); ``upstreamed``/``absent`` (the series' verdict) is
    superseded; ``conflict``, ``gone`` and ``failed-at-base`` are conflicts.
    """
    notes = [p["notes_extra"]] if p.get("notes_extra") else []
    for u in p.get("units", []):
        if u.get("target_path") and u["target_path"] != u["base_path"]:
            notes.append(f"{u['qualname']} moved: {u['base_path']} -> {u['target_path']}")
        if u.get("resolution") == "renamed":
            notes.append(f"{u['qualname']} followed by similarity to {u['target_qualname']}")
    status = p["status"]
    files: list[str] = []
    if status in ("clean", "skipped"):
        verdict = CARRIED
        if status == "skipped":
            notes.append(p["reason"])
    elif status == "needs-variant":
        verdict = NEW_VARIANT
        notes += [f"{u['qualname']}: transform {u['transform']}" + (f" ({u['transform_reason']})"
                                                                    if u.get("transform_reason") else "")
                  for u in p.get("units", []) if u.get("transform") not in ("carries-forward", "")]
    elif status in ("upstreamed", "absent"):
        verdict = SUPERSEDED
    else:  # conflict, gone, failed-at-base
        verdict = CONFLICT
        files += [_rel(f, repo) for u in p.get("units", []) for f in u["files"]]
        notes += [u["reason"] for u in p.get("units", []) if u.get("reason")]
        if not p.get("units"):
            notes.append(p["reason"])
    files += [_rel(w, repo) for w in p.get("written", []) if _rel(w, repo) not in files]
    return verdict, files, notes


def turnaround(args: argparse.Namespace, progress: Progress) -> tuple[dict[str, Any], int]:
    """Run every step (module docstring). Returns (``patchq.release-check/1`` document, exit code)."""
    from packaging.version import InvalidVersion, Version

    from patchq.authoring import fingerprints, seriesedit
    from patchq.commands import diffwrite, rebase
    from patchq.compat import matrix
    from patchq.vllmdist import releases
    from patchq.series import module_file

    try:
        version = str(Version(args.version))
    except InvalidVersion:
        raise Failure(f"not a version: {args.version!r}", EXIT_USAGE) from None
    url = index_url(args.index_url)
    series_dir = Path(args.series).resolve() if args.series else None
    if series_dir is None:
        from patchq import series as series_mod

        series_dir = series_mod.series_dir(None)
    s = _load_series(series_dir)
    anchors_dir = s.anchors_root.resolve()
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()] if args.profiles else list(s.profiles)
    unknown = [p for p in profiles if p not in s.profiles]
    if unknown:
        raise Failure(f"unknown profile(s) {', '.join(unknown)}; known: {', '.join(s.profiles)}", EXIT_USAGE)
    out = Path(args.out or f"release-check/{version}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    branch = None if args.no_branch else (args.branch or f"release/v{version}")
    if branch or subprocess.run(["git", "-C", str(series_dir), "rev-parse"], capture_output=True).returncode == 0:
        repo = Path(git(series_dir, "rev-parse", "--show-toplevel")).resolve()
    else:  # --no-branch outside a git repository: the series' parent is the root
        repo = series_dir.parent
    workdir = repo / ".patchq-rebase"
    if branch:
        dirty = git(repo, "status", "--porcelain", "--", str(series_dir), str(anchors_dir))
        if dirty:
            raise Failure(f"uncommitted changes under the series in {repo}: commit or stash them first "
                          f"({dirty.splitlines()[0].strip()})", EXIT_USAGE)
        if subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
                          capture_output=True).returncode == 0:
            raise Failure(f"branch {branch} already exists in {repo}", EXIT_USAGE)

    # 1. resolve
    def resolve():
        files = index_files(url)
        known = final_releases(files)
        if version not in known:
            raise Failure(f"vllm {version} is not a final release on {url} "
                          f"(newest there: {known[-1] if known else 'none'})", EXIT_NOT_FOUND)
        entry = pick_wheel(files, version)
        if entry is None:
            raise Failure(f"vllm {version} has no Linux x86_64 wheel on {url}", EXIT_NOT_FOUND)
        wheel, how = fetch_wheel(entry, version)
        try:
            tree = releases.release_tree(version)
        except releases.ReleaseError as exc:
            raise Failure(str(exc), EXIT_NOT_FOUND) from None
        return {"index": url, "wheel": wheel.name, "sha256": entry.get("sha256"), "fetched": how,
                "tree": str(tree), "newest_on_index": known[-1]}
    resolved = progress.run(f"resolve vllm {version}", resolve,
                            lambda r: f"{r['wheel']} ({r['fetched']}) from {r['index']}")

    # 2. check before
    before = progress.run(f"check {len(profiles)} profile(s) on {version}",
                          lambda: _check_all(series_dir, version, profiles),
                          lambda r: ", ".join(f"{k}: {v['status']}" for k, v in r["patches"].items()))

    # 3. branch
    if branch:
        progress.run(f"branch {branch}", lambda: git(repo, "checkout", "-q", "-b", branch))

    # 4. verdicts that need no merge, then rebase --write
    patches: dict[str, dict[str, Any]] = {}
    to_rebase: list[str] = []
    for pid in s.all_patch_ids():
        p = s.patch(pid)
        variant = p.variant_for(Version(version))
        row = before["patches"][pid]
        entry = {"id": pid, "check_before": row["status"], "reason": row["reason"], "files": [], "notes": []}
        patches[pid] = entry
        if variant is not None and variant.kind in ("upstreamed", "absent"):
            entry["verdict"] = SUPERSEDED
            entry["notes"].append(f"the series says {variant.kind} from {variant.applies}")
        elif row["status"] == "upstreamed" and variant is not None and variant.kind == "edit":
            reason = (row.get("upstream_check") or {}).get("reason") or row["reason"]
            def write_verdict(p=p, variant=variant, reason=reason):
                return seriesedit.add_verdict_variant(module_file(s.root, p.id), variant.applies,
                                                      Version(version), "upstreamed", f"vLLM {version}: {reason}")
            old, capped = progress.run(f"{pid}: upstreamed variant", write_verdict, lambda r: f"{r[0]} -> {r[1]}")
            entry["verdict"] = UPSTREAMED
            entry["notes"].append(f"upstream check: {reason}")
            entry["notes"].append(f"wrote variant \">={version}\" upstreamed; the edit variant now ends: \"{capped}\"")
            entry["files"].append(_rel(module_file(s.root, p.id), repo))
        elif variant is None and row["status"] == "not-applicable":
            entry["verdict"] = SUPERSEDED
            entry["notes"].append(f"vllm {version} is outside the patch's applies-range")
        else:
            to_rebase.append(pid)

    def do_rebase():
        return rebase.run(_load_series(series_dir), version, None, to_rebase, True, workdir)[0] if to_rebase else \
            {"patches": []}
    rb = progress.run(f"rebase --write {len(to_rebase)} patch(es) onto {version}", do_rebase,
                      lambda d: ", ".join(f"{p['id']}: {p['status']}" for p in d["patches"]))
    rebased = {p["id"]: p for p in rb["patches"]}

    # formatting-only conflicts: the transform's result is the resolution
    for pid, p in list(rebased.items()):
        if p["status"] != "conflict":
            continue
        units = [u for u in p["units"] if u["merge"] == "conflict"]
        if not units or any(u["upstream_changed"] or len(u["files"]) < 2 for u in units) or p["transform"] != "applies":
            continue
        kept = {}
        for u in units:
            conflict_file, transform_file = Path(u["files"][0]), Path(u["files"][1])
            kept[conflict_file] = conflict_file.read_text(encoding="utf-8")
            shutil.copyfile(transform_file, conflict_file)

        def resume(pid=pid):
            return rebase.run(_load_series(series_dir), version, None, [pid], True, workdir, True)[0]["patches"][0]
        again = progress.run(f"{pid}: take the transform (upstream re-formatted only)", resume,
                             lambda r: r["status"])
        if again["status"] == "clean":
            shutil.rmtree(workdir / version / pid, ignore_errors=True)
            again["notes_extra"] = ("upstream only re-formatted the anchored definition (same fingerprint); "
                                    "the line merge conflicted, the anchored transform's result was taken")
            rebased[pid] = again
        else:  # not carried after all: the conflict stays as the first rebase wrote it
            for path, text in kept.items():
                path.write_text(text, encoding="utf-8")

    for pid, p in rebased.items():
        verdict, files, notes = verdict_of(p, repo)
        entry = patches[pid]
        entry["verdict"] = verdict
        entry["files"] += [f for f in files if f not in entry["files"]]
        entry["notes"] += notes
        entry["rebase"] = {k: p.get(k) for k in ("status", "merge", "transform", "from", "to", "reason", "next_steps")}

    # 5. fingerprints (never where check blocks a patch: recording there is a person's review) and rendered diffs
    from patchq.commands.fingerprint import blocking_rows

    unreviewed = progress.run(f"check every patch on {version} before recording",
                              lambda: blocking_rows(_load_series(series_dir), list(s.all_patch_ids()), [version]),
                              lambda r: f"{len(r)} blocked" if r else "none blocked")
    for pid, by_release in unreviewed.items():
        row = by_release[version]
        patches[pid]["notes"].append(f"not fingerprinted on {version}: check says {row['status']} ({row['reason']}); "
                                     f"`patchq review {pid} --vllm {version}` records it once a person accepts it")

    def record_fps():
        return fingerprints.record(_load_series(series_dir), [version],
                                   patch_ids=[pid for pid in s.all_patch_ids() if pid not in unreviewed])
    fps = progress.run(f"fingerprints of {version}", record_fps, lambda r: f"{len(r)} anchor file(s) changed")

    def diffs():
        return diffwrite.run(_load_series(series_dir), version, None)[0]
    dw = progress.run(f"diff --release {version} --write", diffs,
                      lambda d: ", ".join(f"{r['patch_id']}: {r['action'] or r['status']}" for r in d["patches"]))

    # 6. commit
    commit = None
    if branch:
        def do_commit():
            paths = [str(series_dir), str(anchors_dir)]
            git(repo, "add", "-A", "--", *paths)
            if (workdir / version).is_dir():  # the conflict files: the work dir is often git-ignored
                paths.append(str(workdir / version))
                git(repo, "add", "-A", "-f", "--", paths[-1])
            if not git(repo, "status", "--porcelain", "--", *paths):
                return None
            msg = _commit_message(version, patches)
            git(repo, "-c", "user.name=patchq release-check", "-c", "user.email=release-check@patchq.invalid",
                "commit", "-q", "-m", msg, "--", *paths)
            return git(repo, "rev-parse", "--short", "HEAD")
        commit = progress.run(f"commit on {branch}", do_commit, lambda c: c or "nothing to commit")

    # 7. check after, matrix
    after = progress.run(f"check {len(profiles)} profile(s) on {version} again",
                         lambda: _check_all(series_dir, version, profiles),
                         lambda r: ", ".join(f"{k}: {'ok' if d['ok'] else 'blocks'}" for k, d in r["profiles"].items()))
    for pid, entry in patches.items():
        row = after["patches"][pid]
        entry["check_after"] = row["status"]
        if entry["verdict"] == CARRIED and row["status"] not in ("applies", "upstreamed"):
            entry["notes"].append(f"check on {version}: {row['status']}: {row['reason']}")
    mversions = _matrix_versions(args.matrix_releases, series_dir, version)

    def do_matrix():
        boot_recs = [r for path in args.boot for r in matrix.load_records(path)]
        doc = matrix.build(mversions, profiles, str(series_dir), args.workers, [], boot_recs)
        return doc, matrix.write(doc, out / "matrix")
    mdoc, _paths = progress.run(f"matrix: {len(mversions)} release(s) x {len(profiles)} profile(s)", do_matrix,
                                lambda r: f"{r[1]['md']}" + (f"; not checked: {', '.join(r[0]['errors'])}"
                                                             if r[0]["errors"] else ""))

    blocking = {name: [p["id"] for p in d["patches"] if p["blocking"]] for name, d in after["profiles"].items()}
    human = sorted({pid for pid, e in patches.items() if e["verdict"] in NEEDS_HUMAN}
                   | {pid for ids in blocking.values() for pid in ids})
    code = EXIT_HUMAN if human else EXIT_OK
    doc = {
        "schema": SCHEMA, "version": version, "exit_code": code, "needs_human": bool(human),
        "needs_human_for": human, "resolved": resolved, "series": str(series_dir), "repo": str(repo),
        "branch": branch, "commit": commit, "workdir": str(workdir / version),
        "patches": [patches[pid] for pid in s.all_patch_ids()],
        "profiles": {name: {"ok": d["ok"], "blocking": blocking[name],
                            "statuses": {p["id"]: p["status"] for p in d["patches"]}}
                     for name, d in after["profiles"].items()},
        "fingerprints_written": [_rel(p, repo) for p in fps],
        "diffs": [{"patch": r["patch_id"], "status": r["status"], "action": r["action"],
                   "path": _rel(r["path"], repo) if r.get("path") else None} for r in dw["patches"]],
        "matrix": {"releases": mversions, "dir": str(out / "matrix"), "exit_code": mdoc["exit_code"],
                   "errors": mdoc["errors"],
                   "column": {name: {pid: row.get(version, {}).get("status", "not checked")
                                     for pid, row in mdoc["cells"][name].items()} for name in profiles}},
        "steps": [{"name": st.name, "seconds": st.seconds, "said": st.said} for st in progress.steps],
        "wall_s": round(time.perf_counter() - progress.started, 1),
    }
    (out / "summary.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(render_markdown(doc), encoding="utf-8")
    return doc, code


def _commit_message(version: str, patches: dict[str, dict[str, Any]]) -> str:
    lines = [f"release-check: carry the series to vLLM {version}", ""]
    lines += [f"{pid}: {e['verdict']}" for pid, e in patches.items()]
    return "\n".join(lines) + "\n"


def render_markdown(doc: dict[str, Any]) -> str:
    """The summary (the pull-request body): verdict per patch, profiles, matrix column, next steps."""
    v, r = doc["version"], doc["resolved"]
    head = ("**A human is needed** (exit 1): " + ", ".join(doc["needs_human_for"])) if doc["needs_human"] \
        else "**No human needed** (exit 0): every patch is carried, upstreamed or superseded"
    out = [f"# vLLM {v}: release check", "",
           head, "",
           f"- wheel: `{r['wheel']}` ({r['fetched']}) from `{r['index']}`"
           + (f", sha256 `{r['sha256'][:16]}…`" if r.get("sha256") else ""),
           f"- branch: `{doc['branch']}`" + (f" at `{doc['commit']}`" if doc.get("commit") else "")
           if doc["branch"] else "- branch: none (`--no-branch`)",
           "", "| patch | verdict | check before → after | details |", "|---|---|---|---|"]
    for p in doc["patches"]:
        details = [n.replace("|", "\\|") for n in p["notes"]]
        if p["verdict"] == CONFLICT:
            details = [f"conflict file: `{f}`" for f in p["files"] if not f.endswith(".transform.py")] + \
                      [f"the transform's result beside it: `{f}`" for f in p["files"] if f.endswith(".transform.py")] \
                      + details
        elif p["files"]:
            details += [f"`{f}`" for f in p["files"]]
        out.append(f"| {p['id']} | **{p['verdict']}** | {p['check_before']} → {p.get('check_after', '-')} | "
                   f"{'<br>'.join(details) or '-'} |")
    out += ["", f"## Profiles on {v} (after the turnaround)", "", "| profile | apply | per patch |", "|---|---|---|"]
    for name, pr in doc["profiles"].items():
        per = ", ".join(f"{k}: {s}" for k, s in pr["statuses"].items())
        out.append(f"| {name} | {'ok' if pr['ok'] else 'blocks: ' + ', '.join(pr['blocking'])} | {per} |")
    m = doc["matrix"]
    out += ["", f"## Matrix column {v}", "",
            f"{len(m['releases'])} releases ({m['releases'][0]} .. {m['releases'][-1]}) x {len(doc['profiles'])} "
            f"profiles, written to `matrix/` (matrix.md, matrix.html, matrix.json).", "",
            "| patch | " + " | ".join(m["column"]) + " |", "|---|" + "---|" * len(m["column"])]
    for p in doc["patches"]:
        out.append(f"| {p['id']} | " + " | ".join(col.get(p["id"], "-") for col in m["column"].values()) + " |")
    steps = [p for p in doc["patches"] if p["verdict"] in NEEDS_HUMAN]
    if steps:
        out += ["", "## Next steps", ""]
        for p in steps:
            for s in (p.get("rebase") or {}).get("next_steps") or []:
                out.append(f"- {p['id']}: {s.replace(doc['repo'] + '/', '')}")
        out.append(f"- then: `patchq rebase --to {v} --patch ID --continue --write`, "
                   f"`patchq diff --release {v} --write`, `git rm -r .patchq-rebase/{v}`")
    out += ["", "<details><summary>steps</summary>", "", "| step | s | |", "|---|---|---|"]
    out += [f"| {st['name']} | {st['seconds']} | {st['said'].replace('|', '/')} |" for st in doc["steps"]]
    out += ["", f"wall time {doc['wall_s']} s", "", "</details>", ""]
    return "\n".join(out)


def latest(url: str) -> str:
    """The newest final release of vLLM on the index."""
    known = final_releases(index_files(url))
    if not known:
        raise Failure(f"no final vllm release on {url}", EXIT_NOT_FOUND)
    return known[-1]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(prog="ci/release_check.py", description=__doc__.splitlines()[0],
                                 epilog="exit codes: 0 no human needed; 1 a human is needed; 2 usage; "
                                        "3 release/wheel not on the index; 4 a step failed")
    ap.add_argument("version", nargs="?", help="the new vLLM release, e.g. 0.33.1")
    ap.add_argument("--latest", action="store_true", help="print the newest final release on the index and exit")
    ap.add_argument("--index-url", help="simple index (default: $PIP_INDEX_URL, else PyPI); file:// or a directory works")
    ap.add_argument("--series", help="series directory (default: the checkout's series/)")
    ap.add_argument("--out", help="output directory (default: release-check/VERSION)")
    ap.add_argument("--branch", help="branch to create in the series repository (default: release/vVERSION)")
    ap.add_argument("--no-branch", action="store_true", help="write in the current checkout; create and commit nothing")
    ap.add_argument("--profiles", help="comma-separated profiles (default: all)")
    ap.add_argument("--matrix-releases", default=">=0.20.2",
                    help="range or list among the verified releases for the matrix (default: '>=0.20.2'); VERSION is always added")
    ap.add_argument("--boot", action="append", default=[], help="boot records to merge into the matrix (repeatable)")
    ap.add_argument("--workers", type=int, default=2, help="releases checked in parallel by the matrix")
    ap.add_argument("--json", action="store_true", help="print summary.json on stdout instead of summary.md")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)
    if args.latest == bool(args.version):
        ap.error("give VERSION or --latest")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the turnaround, print the summary, return the exit code."""
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    progress = Progress(args.quiet)
    try:
        if args.latest:
            print(latest(index_url(args.index_url)))
            return EXIT_OK
        doc, code = turnaround(args, progress)
    except Failure as exc:
        print(f"release-check: error: {exc}", file=sys.stderr)
        return exc.code
    except Exception as exc:  # noqa: BLE001 - one loud line, whatever broke, and which step
        from patchq.errors import PatchqError

        if isinstance(exc, PatchqError):
            code = exc.exit_code if exc.exit_code in (EXIT_USAGE, EXIT_NOT_FOUND) else EXIT_STEP
            print(f"release-check: error in step '{progress.current}': {exc}", file=sys.stderr)
            return code
        print(f"release-check: error in step '{progress.current}': {type(exc).__name__}: {exc}", file=sys.stderr)
        if os.environ.get("PATCHQ_DEBUG"):
            raise
        return EXIT_STEP
    out = Path(args.out or f"release-check/{doc['version']}")
    sys.stdout.write(json.dumps(doc, indent=1) + "\n" if args.json else (out / "summary.md").read_text())
    return code


if __name__ == "__main__":
    sys.exit(main())
