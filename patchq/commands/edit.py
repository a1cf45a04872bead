"""``patchq edit ID`` and ``patchq record ID``: author a patch by editing vLLM's code.

The way patch-package, quilt (``add`` + ``refresh``) and pnpm (``patch`` +
``patch-commit``) work, on top of patchq's importer:

``patchq edit ID [--file F]... [--in-place]``
    A working copy of the target file(s) of the installed vLLM in
    ``<series repo>/.patchq-edit/<ID>/vllm/...`` (``--dir`` moves it), with the pristine
    bytes kept beside them (``.pristine/``) and a manifest. The copy is pristine (RECORD-
    verified: the installed file when it equals RECORD, else patchq's kept pristine copy);
    for an existing patch it is the patch's result on that release, so editing it
    refines the patch. ``F`` is a relpath (``vllm/logger.py``) or a module
    (``vllm.logger``); for an existing patch the default is its anchors' modules. With
    ``--in-place`` nothing is copied: edit the installed file itself (it must be
    pristine now).
``patchq record ID [--file F]... [--profile P] [--apply/--no-apply]``
    The difference between the pristine bytes and the edit (the working copy, the
    installed file after ``edit --in-place``, or, without ``edit``, installed files
    that differ from RECORD: a hand edit) becomes a unified diff, and the importer
    (:mod:`patchq.authoring.importer`) turns it into ``series/<id>.py`` +
    ``anchors/<id>.toml`` (node-scoped statement edits, fingerprints of the release it
    was made against), verified to reproduce the edit exactly. The id is added to the
    profile. Then the environment is made consistent through patchq's converge: after an
    in-place edit the hand-edited files first go back to their RECORD-verified pristine
    bytes (the applied patches stay; a copy of each edit is kept in ``.patchq/foreign/``),
    and with ``--apply`` (the default for an in-place edit) the profile is then applied,
    so the file carries the patch: the same code as the hand edit plus its sentinel.

Documents: ``patchq.edit/1``: ``patch``, ``mode`` (``copy`` | ``in-place``), ``dir``,
``vllm``, ``files`` [{``path``, ``edit`` (the file to edit), ``base`` (``pristine`` |
``patched``)}], ``series``. ``patchq.record/1``: ``patch``, ``mode`` (``copy`` |
``in-place``), ``vllm``, ``files``, ``diff`` (the recorded diff), ``written``,
``profile``, ``added_to_profile``, ``profile_created`` (the profile is new: a typo shows
as a new profile, with the nearest known one), ``known_profiles``, ``import`` {``release``,
``anchors`` [{``id``, ``path``, ``qualname``, ``fingerprint``, ``ops``}], ``notes``}, ``environment`` {``action``
(``applied`` | ``restored`` | ``untouched`` | ``failed``), ``apply`` ({``ok``, ``error``,
``exit_code``, ``profile``, ``written``, ``added``, ``removed``, ``foreign_kept``} or null)},
``variant`` {``action`` (:data:`VARIANT_ACTIONS`), ``range``, ``capped`` ({``from``, ``to``} or
null)} (added: how the edit went into the series; :func:`_refinement`).
Exit codes: 0; 1 the edit cannot become an anchored patch (nothing written); 2 usage (no
edit found, patch exists); 3 no vLLM; 4 a target file is modified by someone else (``edit``).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchq.errors import EXIT_OK, ForeignEditError, PatchqError, UsageError, did_you_mean
from patchq.model import Patch, Variant
from patchq.series import Series
from patchq.vllmdist.sources import CodeSource, sha256_hex

if TYPE_CHECKING:
    from patchq.authoring.importer import ImportPlan
    from patchq.authoring.repowrite import Transaction
    from patchq.documents import EditDoc, RecordDoc

EDIT_SCHEMA = "patchq.edit/1"
RECORD_SCHEMA = "patchq.record/1"
MANIFEST = ".patchq-edit.json"


#: ``schema`` of the manifest that marks a directory as a working copy patchq made.
MANIFEST_SCHEMA = "patchq.edit-copy/1"


#: The directory of the working copies in a series repo (``<repo>/.patchq-edit/<ID>/``).
EDIT_DIR = ".patchq-edit"


def workdir(series: Series, patch_id: str, directory: str | None = None) -> Path:
    """Where the working copy of ``patch_id`` lives (``--dir``, else
    ``<series repo>/.patchq-edit/<ID>/``).

    Raises:
        UsageError: ``.patchq-edit`` or ``.patchq-edit/<ID>`` is a symlink or not a
            directory (never followed: a symlinked one made ``edit`` write outside the
            repo), as for ``.patchq-txn``.
        UnsafeConfig: of a series found by walking up, one of them (or the manifest in it)
            is owned by another user or writable by others (the trust rule of its modules).
    """
    if directory:
        return Path(os.path.abspath(directory))
    from patchq import discovery
    from patchq.errors import UnsafeConfig

    top = series.root.parent / EDIT_DIR
    wd = top / patch_id
    for path in (top, wd):
        if os.path.islink(path) or (os.path.lexists(path) and not path.is_dir()):
            raise UsageError(f"{path} is a symlink or not a directory: patchq keeps working copies only in a "
                             f"directory of the series repo it made, never through a link; remove it")
    for path in (top, wd, wd / MANIFEST):
        problem = discovery.module_problem(series.location, str(path))
        if problem:
            raise UnsafeConfig(f"refusing {path}: {problem} (add its repo to {discovery.SAFE_ENV}, or pass --series, "
                               f"if you trust it)")
    return wd


def _read_manifest(wd: Path) -> dict | None:
    """The working-copy manifest of ``wd`` (the marker patchq writes), checked; None when
    there is none.

    Raises:
        UsageError: it is damaged, or names a path that is not a vLLM file relpath.
    """
    from patchq import jsonsafe
    from patchq.env import layout

    path = wd / MANIFEST
    if not os.path.lexists(path):
        return None
    try:
        data = jsonsafe.read_file(path, max_bytes=1 << 20)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} is damaged ({exc}); patchq does not trust it: remove the edit directory "
                         f"{wd} by hand (check it for your own files first)") from None
    ok = (isinstance(data, dict) and isinstance(data.get("patch"), str) and isinstance(data.get("vllm"), str)
          and data.get("mode") in ("copy", "in-place") and isinstance(data.get("files"), list)
          and all(isinstance(r, str) and r.startswith("vllm/") and layout.relpath_problem(r) is None
                  for r in data["files"])
          and isinstance(data.get("made", []), list) and all(isinstance(m, str) for m in data.get("made", [])))
    if not ok:
        raise UsageError(f"{path} is not a patchq working-copy manifest; patchq does not trust it: remove {wd} "
                         f"by hand (check it for your own files first)")
    return data


def _owned_files(wd: Path, manifest: dict) -> list[Path]:
    """The files patchq put in ``wd`` for ``manifest`` (working copies and pristine copies)."""
    out = []
    for rel in manifest["files"]:
        out.append(wd / ".pristine" / rel)
        if manifest["mode"] == "copy":
            out.append(wd / rel)
    return out


def _remove_owned(wd: Path, manifest: dict) -> None:
    """Remove what patchq put in ``wd`` (module docstring): the files it lists, the
    manifest, then the directories patchq made, if they are empty. Anything else in
    ``wd`` (a user's file) stays, and so does ``wd`` then. Never follows a symlinked
    directory out of ``wd``."""
    from patchq.authoring import repowrite

    real_wd = os.path.realpath(wd)
    for path in _owned_files(wd, manifest):
        parent = os.path.realpath(path.parent)
        if parent != real_wd and not parent.startswith(real_wd + os.sep):
            continue  # a symlinked directory leads elsewhere: not patchq's file
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                continue
            repowrite.remove_file(path)
        except PatchqError:
            continue
    repowrite.remove_file(wd / MANIFEST)
    inner = {parent for rel in manifest["files"] for top in (wd, wd / ".pristine")
             for parent in (top / rel).parents if str(parent).startswith(str(wd) + os.sep)}
    outer = [Path(m) for m in manifest.get("made", []) if Path(m) != wd] if manifest.get("made_dir") else []
    tops = [wd] if manifest.get("made_dir") else []
    for d in sorted(inner, key=lambda p: len(p.parts), reverse=True) + tops + sorted(outer, key=lambda p: len(p.parts),
                                                                                       reverse=True):
        try:
            if not os.path.islink(d):
                os.rmdir(d)  # only an empty directory goes
        except OSError:
            pass  # not empty (a user's file) or already gone


def _prepare_dir(wd: Path, patch_id: str, explicit: bool) -> list[str]:
    """Check ``wd`` may hold a new working copy and create it; returns the directories
    made (outermost first), for :func:`_remove_owned`.

    Raises:
        UsageError: an edit is in progress there, or it is not empty and patchq did not
            make it (``--dir`` never takes over a directory holding other files).
    """
    from patchq.authoring import repowrite

    manifest = _read_manifest(wd) if wd.is_dir() else None
    if manifest is not None:
        if manifest.get("complete", True):
            raise UsageError(f"an edit of {manifest['patch']} is in progress in {wd}: `patchq record "
                             f"{manifest['patch']}` it, or remove that directory")
        _remove_owned(wd, {**manifest, "made_dir": False})  # an interrupted `edit`: start over
    if os.path.lexists(wd):
        if os.path.islink(wd) or not wd.is_dir():
            raise UsageError(f"{wd} is not a directory; give --dir a new or empty directory")
        if any(os.scandir(wd)):
            how = "--dir" if explicit else "the edit directory"
            raise UsageError(f"{how} {wd} is not empty and was not made by `patchq edit` (no {MANIFEST}); "
                             f"patchq never writes into (or later removes) a directory holding other files: "
                             f"give a new or empty directory")
        return []
    made = []
    for parent in reversed([wd, *wd.parents]):
        if not os.path.lexists(parent):
            made.append(str(parent))
    try:
        wd.mkdir(parents=True)
    except OSError as exc:
        raise repowrite.env_error(wd, exc, "create") from None
    return made


def _relpath(target: CodeSource, name: str) -> str:
    """``vllm/x.py`` from a relpath, a path inside site-packages, or a module ``vllm.x``."""
    raw = name.strip()
    if raw.endswith(".py") or "/" in raw:
        path = Path(raw)
        if path.is_absolute():
            try:
                raw = path.resolve().relative_to(target.root).as_posix()
            except ValueError:
                raise UsageError(f"{name} is not inside {target.root}") from None
        rel = raw
    else:
        base = raw.replace(".", "/")
        rel = base + ".py" if target.exists(base + ".py") else base + "/__init__.py"
    if not rel.startswith("vllm/") or not target.exists(rel):
        raise UsageError(f"{name}: no such file in vllm {target.version} ({target.root})")
    return rel


def _patch_files(series: Series, patch_id: str, target: CodeSource) -> list[str]:
    """The target modules of an existing patch (its anchors' hints that exist)."""
    from patchq.hashing import anchor_modules

    return [rel for rel in anchor_modules(series.anchors_root / f"{patch_id}.toml") if target.exists(rel)]


def pristine_bytes(target: CodeSource, rel: str) -> tuple[bytes, str]:
    """The RECORD-verified pristine bytes of ``rel`` and the file's state now
    (``pristine`` | ``patched``). Raises ForeignEditError for any other edit."""
    from patchq.env.state import StateDir

    now = target.read_bytes(rel)
    record = target.record().get(rel)
    if record is None or len(record) != 64:
        from patchq.errors import TargetNotFound

        raise TargetNotFound(f"vllm's RECORD has no sha256 for {rel} (malformed or incomplete): its pristine bytes "
                             f"cannot be verified; reinstall vllm")
    if now is not None and sha256_hex(now) == record:
        return now, "pristine"
    state = StateDir(target.root)
    entry = state.read().files.get(rel)
    if entry is not None and now is not None and sha256_hex(now) == entry.patched_sha256:
        data = state.read_pristine(rel)
        if sha256_hex(data) == record:
            return data, "patched"
    raise ForeignEditError(f"{rel} is modified by someone else (neither RECORD nor patchq's journal matches); "
                           f"record it with `patchq record ID --file {rel}`, or restore it with "
                           f"`patchq revert --all --force`")


def edit(series: Series, target: CodeSource, patch_id: str, files: list[str], in_place: bool,
         directory: str | None = None) -> tuple[EditDoc, int]:
    """Prepare an edit of ``patch_id`` (see module docstring). Returns (document, exit code)."""
    from patchq.authoring.scaffold import check_id

    check_id(patch_id)
    exists = patch_id in series.all_patch_ids()
    rels = [_relpath(target, f) for f in files] or (_patch_files(series, patch_id, target) if exists else [])
    if not rels:
        what = (f"the anchors of {patch_id} name no module of vllm {target.version}" if exists
                else f"patch {patch_id} is new")
        raise UsageError(f"{what}: name the file(s) to edit with --file vllm/x.py (or a module)")
    wd = workdir(series, patch_id, directory)
    rows, base = [], {}
    for rel in rels:
        data, state = pristine_bytes(target, rel)
        if in_place and state != "pristine":
            raise UsageError(f"{rel} carries patchq patches now; `patchq revert --all` first, or edit a working "
                             f"copy (without --in-place)")
        base[rel] = data
    start = dict(base)
    if exists and not in_place:  # refine the patch: start from its result on the pristine release
        from patchq.authoring.merge import strip_sentinels
        from patchq.plan import engine

        plan = engine.plan(target, [series.patch(patch_id)], read=lambda r: base[r].decode("utf-8")
                           if r in base else pristine_bytes(target, r)[0].decode("utf-8"))
        for rel, text in plan.patched.items():
            if rel in start:
                start[rel] = strip_sentinels(text).encode("utf-8")
    from patchq.authoring import repowrite

    made = _prepare_dir(wd, patch_id, directory is not None)
    mode = "in-place" if in_place else "copy"
    manifest = {"schema": MANIFEST_SCHEMA, "patch": patch_id, "mode": mode,
                "vllm": str(target.version), "site_packages": str(target.root), "files": rels,
                "replaces": exists, "made_dir": bool(made), "made": made, "complete": False}
    try:
        # the marker first (incomplete), then the copies, then the marker again (complete):
        # whatever a crash leaves, the directory says which files are patchq's
        repowrite.write_file(wd / MANIFEST, json.dumps(manifest, indent=2) + "\n")
        for rel in rels:
            repowrite.write_file(wd / ".pristine" / rel, base[rel])
            if in_place:
                rows.append({"path": rel, "edit": str(target.path(rel)), "base": "pristine"})
            else:
                repowrite.write_file(wd / rel, start[rel])
                rows.append({"path": rel, "edit": str(wd / rel),
                             "base": "patched" if start[rel] != base[rel] else "pristine"})
        manifest["complete"] = True
        repowrite.write_file(wd / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        _remove_owned(wd, manifest)
        raise
    doc: EditDoc = {"schema": EDIT_SCHEMA, "patch": patch_id, "mode": mode,
                    "dir": str(wd), "vllm": str(target.version), "files": rows,
                    "series": series.location.as_json() if series.location else None}
    return doc, EXIT_OK


def render_edit(doc: EditDoc) -> str:
    """Where to edit, and the next command."""
    lines = [f"edit {doc['patch']} on vllm {doc['vllm']} ({doc['mode']}):"]
    lines += [f"  {r['edit']}" + ("  (the patch's current result)" if r["base"] == "patched" else "")
              for r in doc["files"]]
    lines.append(f"then: patchq record {doc['patch']}")
    return "\n".join(lines) + "\n"


def _modified_files(target: CodeSource) -> list[str]:
    """Installed vllm/*.py files whose bytes differ from RECORD and that patchq did not write."""
    from patchq.env.state import StateDir

    journal = StateDir(target.root).read()
    out = []
    for rel, sha in target.record().items():
        if not (rel.startswith("vllm/") and rel.endswith(".py")) or rel in journal.files:
            continue
        data = target.read_bytes(rel)
        if data is not None and sha256_hex(data) != sha:
            out.append(rel)
    return sorted(out)


def _modified_patched_files(target: CodeSource) -> list[str]:
    """Files patchq patched whose bytes now equal neither the journal nor RECORD (a hand edit on top)."""
    from patchq.env.state import StateDir

    out = []
    for rel, entry in StateDir(target.root).read().files.items():
        data = target.read_bytes(rel)
        if data is not None and sha256_hex(data) not in (entry.patched_sha256, target.record().get(rel)):
            out.append(rel)
    return sorted(out)


def _release_pristine(target: CodeSource, rel: str) -> bytes:
    from patchq.vllmdist.sources import release_source

    data = release_source(str(target.version)).read_bytes(rel)
    if data is None or sha256_hex(data) != target.record().get(rel):
        raise UsageError(f"{rel}: the vllm {target.version} release's bytes do not match RECORD; reinstall vllm")
    return data


def _diff(pairs: dict[str, tuple[bytes, bytes]]) -> str:
    out: list[str] = []
    for rel, (old, new) in sorted(pairs.items()):
        if old == new:
            continue
        out += difflib.unified_diff(old.decode("utf-8").splitlines(True), new.decode("utf-8").splitlines(True),
                                    f"a/{rel}", f"b/{rel}")
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n\\ No newline at end of file\n"
    return "".join(out)


def record(series: Series, target: CodeSource, patch_id: str, files: list[str], profile: str | None,
           apply: bool | None, summary: str | None = None,
           directory: str | None = None) -> tuple[RecordDoc, int]:
    """Turn the edit into patch ``patch_id`` (see module docstring). Returns (document, exit code).

    ``profile`` None: ``default`` for a new patch; a refined patch stays in its profiles
    (the one applied now, else the first that lists it, is the one ``--apply`` applies).

    Raises:
        UsageError: no edit found, nothing changed, or the patch exists (not started by ``edit``).
        ImportRefused: the edit cannot become an anchored patch (nothing written).
    """
    from patchq.authoring import importer, scaffold

    scaffold.check_id(patch_id)
    wd = workdir(series, patch_id, directory)
    manifest = _read_manifest(wd) if wd.is_dir() else None
    pairs, mode, replaces = _edit_pairs(series, target, patch_id, files, wd, manifest, directory)
    text = _diff(pairs)
    from patchq.authoring import repowrite

    old = series.patch(patch_id) if replaces else None
    action, covering = _refinement(old, str(target.version), wd) if old is not None else ("created", None)
    plan = importer.build(text, patch_id, str(target.version), source_name=f"patchq record ({mode} edit)",
                          runtime_names=old.runtime_names if old is not None else ())
    if old is not None and covering is not None:
        _check_runtime_names(plan, old, wd)
    profile = _record_profile(series, target, patch_id, profile, replaces)
    known_profiles = list(series.profiles)
    # the patch module, its anchors and the profile entry land together, verified, or not at all
    with repowrite.series_transaction(series, f"patchq record {patch_id}") as txn:
        if old is not None and covering is not None:
            written, variant = _write_variant(plan, series, old, covering, action, mode, txn)
        elif old is not None and old.variants and old.variants[0].kind == "edit":
            written = _replace_edits(plan, series, old, summary, mode, txn)
            variant = {"action": action, "range": f">={plan.release}", "capped": None}
        else:
            written = importer.write_verified(plan, series, summary, replaces, "the edit",
                                              after_write=_keeper(series, patch_id) if replaces else None, txn=txn)
            variant = {"action": action, "range": f">={plan.release}", "capped": None}
        added = scaffold.add_to_profile(series.root / "profiles.toml", profile, patch_id, txn=txn)
    import_doc = _import_document(plan)
    env = _settle(series, target, profile, mode, list(pairs), apply)
    if manifest:  # only the files patchq put there: a user's file in the directory stays
        _remove_owned(wd, manifest)
        if directory is None:  # .patchq-edit/ goes too once no edit is left in it
            with contextlib.suppress(OSError):
                wd.parent.rmdir()
    doc: RecordDoc = {"schema": RECORD_SCHEMA, "patch": patch_id, "mode": mode, "vllm": str(target.version),
                      "files": sorted(pairs), "diff": text, "written": written, "profile": profile,
                      "added_to_profile": added, "import": import_doc, "environment": env, "variant": variant,
                      "profile_created": profile not in known_profiles, "known_profiles": known_profiles,
                      "series": series.location.as_json() if series.location else None}
    code = env["apply"]["exit_code"] if env["apply"] and not env["apply"]["ok"] else EXIT_OK
    return doc, code


def _edit_pairs(series: Series, target: CodeSource, patch_id: str, files: list[str], wd: Path,
                manifest: dict | None, directory: str | None) -> tuple[dict[str, tuple[bytes, bytes]], str, bool]:
    """The edit ``record`` turns into ``patch_id``: (relpath -> (pristine, edited) bytes, the
    mode, whether it refines the existing patch).

    Raises:
        UsageError: no edit (``--dir`` without one), nothing changed, or the patch exists
            and the edit did not start from it (``edit``).
    """
    if directory is not None and manifest is None:
        raise UsageError(f"--dir {wd} holds no edit (no {MANIFEST}): give the directory that `patchq "
                         f"edit {patch_id} --dir DIR` made")
    if manifest:
        pairs = _working_copy_pairs(target, wd, manifest, patch_id)
        mode, replaces = manifest["mode"], bool(manifest.get("replaces", False))
    else:
        pairs = _in_place_pairs(target, files, wd, patch_id)
        mode, replaces = "in-place", False
    if all(old == new for old, new in pairs.values()):
        raise UsageError(f"nothing changed in {', '.join(pairs)}: edit the file(s) first")
    if patch_id in series.all_patch_ids() and not replaces:
        raise UsageError(f"patch {patch_id} exists; `patchq edit {patch_id}` to change it, or pick another id")
    return pairs, mode, replaces


def _working_copy_pairs(target: CodeSource, wd: Path, manifest: dict,
                        patch_id: str) -> dict[str, tuple[bytes, bytes]]:
    """relpath -> (pristine, edited) bytes of the edit ``patchq edit`` started in ``wd``.

    Raises:
        UsageError: the edit is of another patch, interrupted, made on another vLLM, or
            its pristine or working copies are missing or damaged.
    """
    from patchq.authoring.repowrite import read_regular

    if manifest["patch"] != patch_id:
        raise UsageError(f"the edit in {wd} is of {manifest['patch']}, not {patch_id}")
    if not manifest.get("complete", True):
        raise UsageError(f"the edit in {wd} was interrupted; run `patchq edit {patch_id}` again")
    if manifest["vllm"] != str(target.version):
        raise UsageError(f"the edit in {wd} was made on vllm {manifest['vllm']}; vllm {target.version} is "
                         f"installed now")
    mode = manifest["mode"]
    pairs: dict[str, tuple[bytes, bytes]] = {}
    for rel in manifest["files"]:
        try:
            old = read_regular(wd / ".pristine" / rel)
            new = target.read_bytes(rel) if mode == "in-place" else read_regular(wd / rel)
        except PatchqError as exc:
            raise UsageError(f"the edit in {wd}: {exc}") from None
        if old is None or sha256_hex(old) != target.record().get(rel):
            raise UsageError(f"the pristine copy of {rel} in {wd / '.pristine'} is missing or does not match "
                             f"RECORD; run `patchq edit {patch_id}` again")
        if new is None:
            raise UsageError(f"the working copy {wd / rel} is missing; run `patchq edit {patch_id}` again")
        pairs[rel] = (old, new)
    return pairs


def _in_place_pairs(target: CodeSource, files: list[str], wd: Path, patch_id: str) -> dict[str, tuple[bytes, bytes]]:
    """relpath -> (the release's pristine, installed) bytes of installed files edited by
    hand without ``patchq edit``: ``files``, else every vllm file that differs from RECORD.

    Raises:
        UsageError: no edited file, or one carries patchq patches or is pristine.
    """
    rels = [_relpath(target, f) for f in files] or _modified_files(target)
    if not rels:
        on_patched = _modified_patched_files(target)
        if on_patched:
            raise UsageError(f"{', '.join(on_patched)} carries patchq patches and was edited by hand on top of "
                             f"them (status: modified); an edit on top of applied patches cannot be recorded in "
                             f"place: `patchq revert --all --force` (keeps the hand edit in .patchq/foreign/), "
                             f"then "
                             f"`patchq edit {patch_id} --file {on_patched[0]}` and redo it on the working copy")
        raise UsageError(f"no edit to record: no `patchq edit {patch_id}` in progress ({wd}) and no installed "
                         f"vllm file differs from RECORD; edit one, "
                         f"or run `patchq edit {patch_id} --file vllm/x.py`")
    from patchq.env.state import StateDir

    journalled = set(StateDir(target.root).read().files)
    pairs: dict[str, tuple[bytes, bytes]] = {}
    for rel in rels:
        now = target.read_bytes(rel) or b""
        if rel in journalled:
            raise UsageError(f"{rel} carries patchq patches: an edit on top of them cannot be recorded in "
                             f"place; `patchq edit {patch_id} --file {rel}` gives a pristine copy to edit")
        if sha256_hex(now) == target.record().get(rel):
            raise UsageError(f"{rel} is pristine (equals RECORD): nothing to record")
        pairs[rel] = (_release_pristine(target, rel), now)
    return pairs


def _record_profile(series: Series, target: CodeSource, patch_id: str, profile: str | None, replaces: bool) -> str:
    """The profile a recorded patch goes to: ``profile``; for a refined patch, the applied
    profile that lists it, else the first that does; else ``default``."""
    if profile is None and replaces:
        owners = [name for name, prof in series.profiles.items() if patch_id in prof.patches]
        from patchq.env.state import StateDir

        applied = StateDir(target.root).read().profile
        profile = applied if applied in owners else (owners[0] if owners else "default")
    return profile or "default"


def _import_document(plan: ImportPlan) -> dict:
    """The ``import`` field of ``patchq.record/1``: what the import made of the edit."""
    from patchq.authoring import importer

    return {"release": plan.release, "anchors": [{"id": a.anchor_id, "path": a.relpath, "qualname": a.qualname,
                                                  "fingerprint": a.fingerprint, "ops": [o["op"] for o in a.ops]}
                                                 for a in plan.anchors], "notes": plan.notes,
            "summary": importer.summary_line(plan), "levels": importer.level_counts(plan)}


#: ``variant.action`` of ``patchq.record/1``: how the edit went into the series
#: (:func:`_refinement`; ``created`` for a new patch)
VARIANT_ACTIONS = ("created", "replaced", "added", "edits-replaced")
#: the operators of a range ``record`` splits at a release (an upper bound carries over to the new variant)
_SPLITTABLE = frozenset({">=", ">", "<", "<="})


def _refinement(old: Patch, release: str, wd: Path) -> tuple[str, Variant | None]:
    """How ``record`` carries an edit of the existing patch ``old`` made on ``release``
    without losing what the patch says about other releases (docs/authoring.md):

    - ``replaced``: the patch starts at ``release`` (``>=release``) and has one variant:
      the edit replaces the patch (the fingerprints it had are kept);
    - ``added``: ``release`` is above the start of the edit variant covering it: that
      variant is capped below ``release`` and the edit becomes a new variant from
      ``release`` on (the shape ``rebase --continue --write`` writes);
    - ``edits-replaced``: the edit variant covering ``release`` starts there: it gets the
      edit's operations, its range and the other variants stay.

    Returns:
        (the action, the covering variant; None for ``replaced``).
    Raises:
        UsageError: no edit variant covers ``release`` (outside the applies-range, or a
            verdict variant says upstreamed/absent there), or the covering range is not one
            ``record`` splits (``==``, ``!=``, ``~=``); nothing is written, the edit stays in ``wd``.
    """
    from packaging.version import InvalidVersion, Version

    rel = Version(release)

    def at(spec: Any) -> bool:  # a lower bound (or pin) at the edit's release
        try:
            return spec.operator in (">=", "==", "~=", "===") and Version(spec.version) == rel
        except InvalidVersion:
            return False

    if len(old.variants) <= 1 and len(list(old.applies)) == 1 and all(at(s) for s in old.applies):
        return "replaced", None
    where = f"{old.source_file or 'its series file'}"
    ranges = ", ".join(str(v.applies) or "all" for v in old.variants)
    covering = old.variant_for(rel)
    if covering is None or covering.kind != "edit":
        why = (f"vllm {release} is outside its applies-range {old.applies or 'everywhere'}" if rel not in old.applies
               else f"no variant covers vllm {release}" if covering is None
               else f"its variant {covering.applies} says {covering.kind} there")
        raise UsageError(
            f"patch {old.id} (variants {ranges}): {why}, so the edit has no variant to go into; nothing was "
            f"written, the edit stays in {wd}. Give the patch an edit variant covering vllm {release} in {where} "
            f"by hand (one that starts there may start empty, `variant(\">={release},<NEXT\", edits={{}})`; the "
            f"applies-range must hold {release}), then `patchq record {old.id}` writes the edit into it")
    if any(at(s) for s in covering.applies):
        return "edits-replaced", covering
    odd = [str(s) for s in covering.applies if s.operator not in _SPLITTABLE]
    if odd:
        raise UsageError(
            f"patch {old.id}: the variant {covering.applies} covering vllm {release} has {', '.join(odd)}, a range "
            f"record does not split at {release}; nothing was written, the edit stays in {wd}. Split it in {where} "
            f"by hand (a variant \">={release},...\" of its own, it may start with edits={{}}), then `patchq record "
            f"{old.id}` writes the edit into it")
    return "added", covering


def _write_variant(plan: ImportPlan, series: Series, old: Patch, covering: Variant, action: str, mode: str,
                   txn: Transaction) -> tuple[list[str], dict]:
    """Write the edit ``plan`` into ``old`` as ``action`` says (:func:`_refinement`:
    ``added`` or ``edits-replaced``): the variant's statement operations in
    ``series/<id>.py`` (:mod:`patchq.authoring.seriesedit`), its anchors in
    ``anchors/<id>.toml`` (:func:`patchq.authoring.importer.variant_anchors`: fingerprinted
    on the edit's release only; the anchors only the replaced edits used go, and so do
    fingerprints on that release of anchors that no longer edit there), staged in ``txn``,
    landed, then verified: the patch must give exactly the edit on its release.

    Returns:
        (the written paths, the ``variant`` field of ``patchq.record/1``).
    Raises:
        ImportRefused: the written patch does not reproduce the edit (``txn`` rolls back).
    """
    from packaging.version import Version

    from patchq import tomlsafe
    from patchq.authoring import fingerprints, importer, repowrite, seriesedit
    from patchq.errors import ImportRefused
    from patchq.series import module_file

    mod, path = module_file(series.root, old.id), series.anchors_root / f"{old.id}.toml"
    data = tomlsafe.parse(txn.staged(path) or repowrite.read_regular(path) or b"", path)
    table = data.setdefault("anchors", {})
    if action == "edits-replaced":
        kept = {a for v in old.variants if v is not covering for a in v.edits} | set(old.removes)
        for aid in set(covering.edits) - kept:
            table.pop(aid, None)
    for aid in covering.edits:  # the covering variant no longer edits on the edit's release
        table.get(aid, {}).get("fingerprints", {}).pop(plan.release, None)
    ops = importer.variant_anchors(plan, data)
    note = f"recorded by `patchq record` from the {mode} edit"
    variant: dict[str, Any]
    if action == "added":
        old_range, capped, new_range = seriesedit.add_edit_variant(mod, covering.applies, Version(plan.release),
                                                                   ops, note, txn=txn)
        variant = {"action": action, "range": new_range, "capped": {"from": old_range, "to": capped}}
    else:
        new_range = seriesedit.replace_variant_edits(mod, covering.applies, Version(plan.release), ops, note, txn=txn)
        variant = {"action": action, "range": new_range, "capped": None}
    txn.write(path, fingerprints.render(old.id, data))
    txn.apply()
    ok, why = importer.verify(plan, Series(series.root, series.anchors_root, series.profiles, {}))
    if not ok:
        raise ImportRefused(f"the written variant does not reproduce the edit on vllm {plan.release} "
                            f"(nothing written): {why}")
    return [str(mod), str(path)], variant


def _replace_edits(plan: ImportPlan, series: Series, old: Patch, summary: str | None, mode: str,
                   txn: Transaction) -> list[str]:
    """Write the edit ``plan`` as the edits of ``old``, a patch that starts at the edit's
    release with one edit variant (``replaced``): the variant's statement operations change
    in ``series/<id>.py`` (:func:`patchq.authoring.seriesedit.replace_variant_edits`), and
    everything else the user wrote stays: summary (unless ``summary`` is given), why,
    upstream links, applies-range, relations, comments; ``runtime_names`` gains the names the
    edit needs and the patch did not declare. ``anchors/<id>.toml`` gets the edit's anchors,
    with the fingerprints and the ``[reviews]`` the old anchors of the same definitions had.
    Staged in ``txn``, landed, then verified: the patch must give exactly the edit.

    Returns:
        The written paths.
    Raises:
        ImportRefused: the written patch does not reproduce the edit (``txn`` rolls back).
    """
    from packaging.version import Version

    from patchq.authoring import importer, seriesedit
    from patchq.errors import ImportRefused
    from patchq.series import module_file

    mod, path = module_file(series.root, old.id), series.anchors_root / f"{old.id}.toml"
    keep = _keeper(series, old.id)
    seriesedit.replace_variant_edits(mod, old.variants[0].applies, Version(plan.release),
                                     {a.anchor_id: a.ops for a in plan.anchors},
                                     f"recorded by `patchq record` from the {mode} edit", txn=txn)
    values: dict[str, str | list[str]] = {"summary": summary} if summary else {}
    more = [n for n in plan.runtime_names if n not in old.runtime_names]
    if more:
        values["runtime_names"] = [*old.runtime_names, *more]
    if values:
        seriesedit.set_patch_arguments(mod, values, txn=txn)
    txn.write(path, importer.render_anchors(plan))
    if keep is not None:
        keep(txn)
    txn.apply()
    ok, why = importer.verify(plan, Series(series.root, series.anchors_root, series.profiles, {}))
    if not ok:
        raise ImportRefused(f"the written patch does not reproduce the edit on vllm {plan.release} "
                            f"(nothing written): {why}")
    return [str(mod), str(path)]


def _settle(series: Series, target: CodeSource, profile: str, mode: str, rels: list[str],
            apply: bool | None) -> dict:
    """Make the environment consistent after recording (see module docstring): restore, then apply."""
    from patchq import series as series_mod
    from patchq.env.converge import converge
    from patchq.env.state import StateDir
    from patchq.hashing import series_summary

    if apply is None:
        apply = mode == "in-place"
    if not apply and mode != "in-place":
        return {"action": "untouched", "apply": None}
    fresh = series_mod.Series(series.root, series.anchors_root,
                              series_mod.load_profiles(series.root / "profiles.toml"), {}, series.location)
    summary = series_summary(fresh.root, fresh.anchors_root)
    journal = StateDir(target.root).read()
    known = set(fresh.all_patch_ids())
    loadable = set(journal.patches) <= known
    if not apply and not loadable:
        raise UsageError(f"the environment carries patches of another series ({', '.join(sorted(journal.patches))}); "
                         f"record with --apply, or restore {', '.join(rels)} with `patchq revert --all --force`")
    steps: list[tuple[list[Patch], str | None, Sequence[str]]] = []  # (patches, profile, files to restore)
    if mode == "in-place":  # first the hand edit goes back to RECORD-verified bytes; the rest stays
        keep = [fresh.patch(pid) for pid in fresh.all_patch_ids() if pid in journal.patches] if loadable else []
        steps.append((keep, journal.profile if loadable else None, rels))
    if apply:
        steps.append((fresh.patches_of(profile), profile, ()))
    from patchq.commands.apply import series_ref

    ref = series_ref(fresh)
    doc: dict[str, Any] = {"ok": True, "error": None, "exit_code": EXIT_OK, "profile": None, "written": [],
                           "added": [], "removed": [], "foreign_kept": {}}
    for patches, name, restore in steps:
        try:
            # the apply step is an apply of this series: the journal records where it came from;
            # live patches this series does not have are refused as `patchq apply` refuses them
            result = converge(target, patches, profile=name, force=bool(restore), restore_foreign=restore,
                              summary=summary, series_ref=None if restore else ref,
                              replace=None if restore else loadable)
        except PatchqError as exc:
            doc.update(ok=False, error=str(exc), exit_code=exc.exit_code)
            return {"action": "failed", "apply": doc}
        doc["profile"] = name
        doc["written"] = sorted(set(doc["written"]) | set(result.written))
        doc["added"] += [p for p in result.added if p not in doc["added"]]
        doc["removed"] += [p for p in result.removed if p not in doc["removed"]]
        doc["foreign_kept"].update(result.foreign_kept)
    return {"action": "applied" if apply else "restored", "apply": doc}


def render_record(doc: RecordDoc) -> str:
    """What was recorded, and what happened to the environment."""
    imp = doc["import"]
    lines = [f"recorded {doc['patch']} from the {doc['mode']} edit of {', '.join(doc['files'])} "
             f"(vllm {doc['vllm']}): {imp.get('summary', '')}"]
    for a in imp["anchors"]:
        lines.append(f"  anchor {a['id']}: {a['qualname']} ({a['path']}) fingerprint {a['fingerprint']} "
                     f"on {imp['release']}: {', '.join(a['ops'])}")
    lines += [f"  note: {n}" for n in imp["notes"]]
    variant = doc.get("variant") or {}
    if variant.get("action") == "added":
        lines.append(f"  variant {variant['range']} added: the edit, from vllm {doc['vllm']} on; variant "
                     f"{variant['capped']['from']} capped to {variant['capped']['to']} (as it was below {doc['vllm']})")
    elif variant.get("action") == "edits-replaced":
        lines.append(f"  variant {variant['range']}: its edits replaced by the edit (the other variants as they were)")
    lines += [f"  wrote {w}" for w in doc["written"]]
    lines.append(f"  profile {doc['profile']}: " + ("added" if doc["added_to_profile"] else "already there")
                 + (f" (a new profile{did_you_mean(doc['profile'], doc['known_profiles'])})"
                    if doc.get("profile_created") else ""))
    env = doc["environment"]
    if env["action"] == "untouched":
        lines.append("  environment untouched (the edit was a working copy); "
                     f"`patchq apply --profile {doc['profile']}` applies it")
    elif env["apply"] and env["apply"]["ok"]:
        a = env["apply"]
        what = (f"profile {doc['profile']} applied" if env["action"] == "applied"
                else "hand edit restored to pristine (RECORD-verified)")
        lines.append(f"  environment: {what}; written {', '.join(a['written']) or 'nothing'}")
        if a["removed"]:
            lines.append(f"  reverted (not in profile {doc['profile']}): {', '.join(a['removed'])}")
        lines += [f"  hand edit kept: {p} -> {c}" for p, c in a["foreign_kept"].items()]
    else:
        lines.append(f"  environment: FAILED: {env['apply']['error']}")
        lines += [f"  hand edit moved to {c} (restore it from there if needed): {p}"
                  for p, c in env["apply"].get("foreign_kept", {}).items()]
    return "\n".join(lines) + "\n"


def _check_runtime_names(plan: ImportPlan, old: Patch, wd: Path) -> None:
    """Refuse a variant whose code uses names the patch does not declare (``runtime_names=``
    is the patch's, which ``record`` leaves as written).

    Raises:
        UsageError: the edit uses undeclared names; nothing is written, the edit stays.
    """
    missing = sorted(set(plan.runtime_names) - set(old.runtime_names))
    if missing:
        raise UsageError(f"the edit uses {', '.join(missing)}, defined nowhere in vllm {plan.release}, and patch "
                         f"{old.id} does not declare {'them' if len(missing) > 1 else 'it'}: add "
                         f"runtime_names={missing!r} to its patch(...) in {old.source_file or 'its series file'}, "
                         f"then `patchq record {old.id}` again (nothing was written, the edit stays in {wd})")


def _keeper(series: Series, patch_id: str):
    """The ``after_write`` of a replaced patch: its fingerprints carried over (:func:`_keep_fingerprints`)."""
    from patchq.authoring import repowrite

    path = series.anchors_root / f"{patch_id}.toml"
    raw = repowrite.read_regular(path)
    if raw is None:
        return None
    old_text = raw.decode("utf-8")
    return lambda txn: _keep_fingerprints(patch_id, old_text, path, txn)


def _keep_fingerprints(patch_id: str, old_text: str, path: Path, txn: Transaction) -> None:
    """Carry the fingerprints a re-recorded patch had over to its new anchors file: a
    fingerprint is of the pristine definition on a release, so an anchor on the same
    qualname keeps every release it verified on (the new recording's release wins).
    Reads and stages ``path`` in the transaction ``txn``."""
    from patchq import tomlsafe
    from patchq.authoring import fingerprints

    old_data = tomlsafe.loads(old_text, path)
    old = {t.get("qualname"): t.get("fingerprints", {}) for t in old_data.get("anchors", {}).values()}
    new_text = (txn.staged(path) or b"").decode("utf-8")
    data = tomlsafe.loads(new_text, path)
    changed = False
    for table in data.get("anchors", {}).values():
        kept = {v: fp for v, fp in old.get(table.get("qualname"), {}).items()
                if v not in table.get("fingerprints", {})}
        if kept:
            table["fingerprints"] = fingerprints.merged(kept, table.get("fingerprints", {}),
                                                        table.get("fingerprints", {}))
            changed = True
    versions = {v for table in data.get("anchors", {}).values() for v in table.get("fingerprints", {})}
    reviews = {v: r for v, r in old_data.get("reviews", {}).items() if v in versions}
    if reviews:  # who reviewed a release the kept fingerprints still record
        data["reviews"] = {**reviews, **data.get("reviews", {})}
        data["format"] = max(2, int(data.get("format", 1)))
        changed = True
    if changed:
        txn.write(path, fingerprints.rewrite(patch_id, new_text, data))
