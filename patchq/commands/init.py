"""``patchq init [DIR]`` and ``patchq new ID --at MODULE:QUALNAME [--node STATEMENT]``.

``patchq.init/1``: ``dir``, ``written`` [paths], ``series`` (as in ``list``), ``git`` (an
added field: ``initialized`` when init ran ``git init``, ``inside REPO`` when the directory
is already in a git work tree, ``no git`` when git is not installed).
``patchq.new/1``: ``patch``, ``anchor`` {``module``, ``qualname``, ``node``}, ``profile``,
``added_to_profile`` (false when it was there already), ``written`` [paths], ``series``.
Exit 0; 2 when a file exists (nothing is overwritten) or an argument is malformed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from patchq import discovery
from patchq.authoring import scaffold
from patchq.errors import EXIT_OK, UsageError
from patchq.series import Series, module_file

if TYPE_CHECKING:
    from collections.abc import Iterable

    import libcst as cst

    from patchq.documents import InitDoc, NewDoc
    from patchq.vllmdist.sources import CodeSource

INIT_SCHEMA = "patchq.init/1"
NEW_SCHEMA = "patchq.new/1"


def init(directory: str | None, action: str | None = None) -> tuple[InitDoc, int]:
    """Write a new series repo in ``directory`` (default: the working directory).

    ``action``: ``OWNER/NAME@COMMIT`` of the patchq repository, whose reusable action the CI
    workflow uses (default: from the repository variables PATCHQ_REPOSITORY and
    PATCHQ_COMMIT; :func:`patchq.authoring.scaffold.workflow`).

    Raises:
        UsageError: one of its files exists already (nothing is written); a malformed ``action``.
    """
    root = Path(directory or ".").resolve()
    files = scaffold.init_files(root.name, action)
    clash = [rel for rel in files if (root / rel).exists()]
    if clash:
        raise UsageError(f"{root} already has {', '.join(clash)}; nothing written (init writes a new series repo)")
    from patchq.authoring import repowrite

    written: list[str] = []
    with repowrite.Transaction(root, "patchq init") as txn:  # every file, or none
        for rel, text in files.items():
            scaffold.write_new(root / rel, text, written, txn)
    loc = discovery.find_config(root)
    assert loc is not None
    doc: InitDoc = {"schema": INIT_SCHEMA, "dir": str(root), "written": written,
                    "series": discovery.from_config(*loc).as_json(), "git": git_init(root)}
    return doc, EXIT_OK


def git_init(root: Path) -> str:
    """``git init`` ``root`` unless it is inside a git work tree already (a series repo is
    a git repo: CI, pre-commit and ``rebase`` work on its history).

    Returns:
        ``initialized``, ``inside <top level>`` or ``no git`` (git is not installed).
    Raises:
        PatchqError: ``git init`` failed (exit 1; the files are written).
    """
    import shutil
    import subprocess

    from patchq.errors import PatchqError

    git = shutil.which("git")
    if git is None:
        return "no git"
    top = subprocess.run([git, "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode == 0 and top.stdout.strip():
        return f"inside {top.stdout.strip()}"
    done = subprocess.run([git, "init", "-q", str(root)], capture_output=True, text=True)
    if done.returncode != 0:
        raise PatchqError(f"wrote the series repo in {root}, but `git init` failed: "
                          f"{(done.stderr or done.stdout).strip()}")
    return "initialized"


def render_init(doc: InitDoc) -> str:
    """What was written and what to do next."""
    lines = [f"initialized a patchq series repo in {doc['dir']}:"]
    lines += [f"  wrote {w}" for w in doc["written"]]
    git = doc.get("git", "")
    lines.append("  git: " + ("ran `git init`" if git == "initialized" else
                              f"already in the git repository at {git[7:]}" if git.startswith("inside ") else
                              "git is not installed: run `git init` there once it is"))
    if "PATCHQ_REPOSITORY" in Path(doc["dir"], ".github/workflows/patchq.yml").read_text(encoding="utf-8"):
        lines.append("  CI: set the repository variables PATCHQ_REPOSITORY (owner/name of the patchq repository) and "
                     "PATCHQ_COMMIT (a full commit hash), or re-run with --action OWNER/NAME@COMMIT")
    lines += ["next (in that directory):",
              "  patchq check --profile example --vllm 0.23.0     # the example patch on a release",
              "  patchq new ID --at vllm.module:Qualname --node 'statement'   # or: patchq edit ID --file vllm/x.py",
              "  patchq test && pytest -q                         # the expected output per release (series/diffs)"]
    return "\n".join(lines) + "\n"


def _did_you_mean(word: str, choices: Iterable[str], what: str) -> str:
    """``; did you mean a, b or c?`` with the nearest of ``choices`` (rapidfuzz), or ``""``."""
    from rapidfuzz import process

    best = [c for c, score, _ in process.extract(word, list(choices), limit=3) if score >= 50]
    if not best:
        return ""
    return f"; did you mean {', '.join(best[:-1]) + ' or ' if len(best) > 1 else ''}{best[-1]}?" \
        if what == "" else f"; nearest {what}: {', '.join(best)}"


def _module_names(text: str) -> list[str]:
    """Names a module binds at top level by assignment or import (what a module-level anchor names)."""
    import ast

    out: list[str] = []
    for stmt in ast.parse(text).body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
        out += [t.id for t in targets if isinstance(t, ast.Name)]
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out += [(a.asname or a.name).split(".")[0] for a in stmt.names]
    return out


def pristine_text(source: CodeSource, rel: str) -> str | None:
    """The pristine text of ``rel`` in ``source`` (None: no such file), what an anchor is
    checked against: an installed vLLM's file may carry applied patches or a hand edit.

    A release or source tree is read as is. For an installed vLLM: the RECORD-verified
    bytes (the installed file when it equals RECORD, else patchq's pristine copy of a file
    it patched: :func:`patchq.commands.edit.pristine_bytes`, as ``edit`` hands out); a file
    modified by someone else is read from the release itself (patchq's cache, fetched once).

    Raises:
        TargetNotFound: RECORD has no sha256 for ``rel``, or the release of a hand-edited
            file cannot be had.
        StateError: patchq's pristine copy is damaged.
    """
    from patchq.errors import ForeignEditError

    if source.kind != "installed" or not source.exists(rel):
        return source.read_text(rel)
    from patchq.commands.edit import pristine_bytes
    from patchq.vllmdist.sources import release_source

    try:
        return pristine_bytes(source, rel)[0].decode("utf-8")
    except ForeignEditError:  # a hand edit: the release's own bytes are the pristine ones
        return release_source(str(source.version), source.dist or "vllm").read_text(rel)


def validate_new(source: CodeSource, module: str, qualname: str,
                 node: str | None) -> tuple[str, str | None, int]:
    """Check a ``new`` anchor against a vLLM's pristine text (:func:`pristine_text`; module
    docstring of ``patchq new``).

    Returns:
        (qualname to write: the definition's, or :data:`patchq.model.MODULE_QUALNAME` for a
        module-level name; the node pattern; the number of matches, 1).
    Raises:
        UsageError: the module, the qualname or the pattern is not found there (or the
            pattern matches more than once), with the nearest candidates.
    """
    import ast

    from patchq.errors import AnchorError
    from patchq.model import MODULE_QUALNAME
    from patchq.plan.anchors import Pattern, ast_index, cut_segment, find_statements, module_segment

    base = module.replace(".", "/")
    rel = next((r for r in (base + ".py", base + "/__init__.py") if source.exists(r)), None)
    where = f"{'pristine ' if source.kind == 'installed' else ''}vllm {source.version}"
    if rel is None:
        mods = [p[:-3].replace("/", ".").removesuffix(".__init__") for p in source.py_files()]
        raise UsageError(f"--at {module}:{qualname}: no module {module} in {where}{_did_you_mean(module, mods, '')}")
    text = pristine_text(source, rel) or ""
    index = ast_index(text)
    if qualname in index:
        if len(index[qualname]) != 1:
            raise UsageError(f"--at {module}:{qualname}: {qualname} is defined {len(index[qualname])} times in {rel} "
                             f"(conditional definitions): anchor a statement inside one with --node")
        seg = cut_segment(text, rel, qualname, index[qualname][0])
        anchored = qualname
    elif "." not in qualname and qualname in _module_names(text):
        seg = module_segment(text, rel)
        anchored = MODULE_QUALNAME
        if node is None:  # a module-level name: the statement that binds it
            stmt = next(st for st in ast.parse(text).body if qualname in _module_names(ast.unparse(st)))
            node = f"{qualname} = ..." if isinstance(stmt, ast.Assign) else ast.unparse(stmt)
    else:
        names = list(index) + _module_names(text)
        raise UsageError(f"--at {module}:{qualname}: {rel} in {where} defines no {qualname}"
                         f"{_did_you_mean(qualname, names, '')}")
    if node is None:
        return anchored, None, 1
    try:
        pattern = Pattern.compile(node)
    except AnchorError as exc:
        raise UsageError(f"--node: {exc}") from None
    found = find_statements(seg.node, pattern)
    if len(found) != 1:
        from patchq.plan.anchors import node_code

        lines = [" ".join(node_code(f).split())[:80] for f in _statements(seg.node)]
        near = _did_you_mean(" ".join(node.split()), lines, "statements")
        raise UsageError(f"--node {node!r} matches {len(found)} statement(s) in {qualname} ({rel}, {where}), "
                         f"not 1{near if not found else ': narrow the pattern'}")
    return anchored, node, 1


def _statements(defn: cst.CSTNode) -> list:
    import libcst as cst

    out: list = []

    class _V(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and n is not defn:
                out.append(n)
            return not isinstance(n, cst.SimpleStatementLine)

    defn.visit(_V())
    return out


def new(series: Series, patch_id: str, at: str, node: str | None, profile: str,
        applies: str, summary: str | None, vllm: str | None = None, source: CodeSource | None = None,
        site_packages: str | None = None, python: str | None = None) -> tuple[NewDoc, int]:
    """Scaffold ``series/<id>.py`` + ``anchors/<id>.toml`` and add the id to ``profile``.

    Everything is checked first against the target release (``vllm``, else the installed
    vLLM of ``site_packages``/``python`` or of this interpreter, else ``source``), its
    pristine text (:func:`pristine_text`: never the patches applied there): the
    applies-range parses, the module exists, the qualname is a definition of it (or a
    module-level name: a module-level anchor, anchors format 2), the pattern matches exactly
    one statement. A refusal names the nearest candidates and writes nothing.

    Raises:
        UsageError: a malformed ``--at``, id or ``--applies``, a check above fails, no vLLM
            to check against, or the patch exists.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(applies)
    except InvalidSpecifier:
        raise UsageError(f"--applies {applies!r} is not a version range (e.g. '>=0.23' or '>=0.20,<0.30')") from None
    if ":" not in at:
        raise UsageError(f"--at {at!r}: give MODULE:QUALNAME "
                         f"(e.g. vllm.v1.core.kv_cache_utils:unify_kv_cache_spec_page_size)")
    module, qualname = at.split(":", 1)
    if not module.replace(".", "").replace("_", "").isalnum() or not qualname:
        raise UsageError(f"--at {at!r}: MODULE is a dotted module path, QUALNAME a (Class.)name")
    if node is not None:
        import ast

        try:
            ast.parse(node)
        except SyntaxError as exc:
            raise UsageError(f"--node {node!r} is not a Python statement: {exc.msg}") from None
    scaffold.check_id(patch_id)
    scaffold.check_profile(profile)
    if source is None:
        from patchq.errors import PatchqError
        from patchq.vllmdist.sources import installed, release_source

        if vllm:
            source = release_source(vllm)
        else:
            try:
                source = installed(site_packages, python)
            except PatchqError as exc:
                raise UsageError(f"no vLLM to check the anchor against ({exc}); pass --vllm VERSION") from None
    qualname_w, node, _ = validate_new(source, module, qualname, node)
    mod_path = module_file(series.root, patch_id)
    anchor_path = series.anchors_root / f"{patch_id}.toml"
    if mod_path.exists() or anchor_path.exists():
        raise UsageError(f"patch {patch_id} exists ({mod_path if mod_path.exists() else anchor_path})")
    text, anchors = scaffold.new_patch_files(patch_id, module, qualname_w, node, applies, summary, profile)
    from patchq.authoring import repowrite

    written: list[str] = []
    with repowrite.series_transaction(series, f"patchq new {patch_id}") as txn:  # the three files, or none
        scaffold.write_new(mod_path, text, written, txn)
        scaffold.write_new(anchor_path, anchors, written, txn)
        added = scaffold.add_to_profile(series.root / "profiles.toml", profile, patch_id, txn=txn)
    doc: NewDoc = {"schema": NEW_SCHEMA, "patch": patch_id,
                   "anchor": {"module": module, "qualname": qualname_w, "node": node},
                   "vllm": str(source.version),
                   "profile": profile, "added_to_profile": added, "written": written,
                   "series": series.location.as_json() if series.location else None}
    return doc, EXIT_OK


def render_new(doc: NewDoc) -> str:
    """What was written and what to do next."""
    lines = [f"new patch {doc['patch']} at {doc['anchor']['module']}:{doc['anchor']['qualname']}"
             + (f" (node {doc['anchor']['node']!r})" if doc["anchor"]["node"] else "")]
    lines += [f"  wrote {w}" for w in doc["written"]]
    lines.append(f"  profile {doc['profile']}: " + ("added" if doc["added_to_profile"] else "already there"))
    pid, rel = doc["patch"], doc["vllm"]
    lines.append(f"next: write the change in {doc['written'][0]}, then `patchq diff --profile {doc['profile']} "
                 f"--vllm {rel}`, `patchq fingerprint --patch {pid} --releases {rel}` (vllm {rel}, where the "
                 f"anchor was checked, becomes its reviewed release) and `patchq test --regen --patch {pid}`")
    return "\n".join(lines) + "\n"
