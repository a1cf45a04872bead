"""The one owner of patchq's state layout (standard library only: the fast path and the
vLLM plugin import it).

Where the state directory is
    ``<site-packages>/.patchq/`` by default. With ``$PATCHQ_STATE_DIR=BASE`` (state kept
    outside a read-only or shared image) it is ``BASE/env-<key>/``, ``key`` = the first
    16 hex of sha256 over the real path of site-packages, so environments sharing one
    ``BASE`` never see each other's journal. A flat ``BASE`` written before that (a
    ``journal.json`` or ``txn/`` directly in ``BASE``, no ``owner.json`` naming another
    environment) is still read by the environment it belongs to, and the first write
    (:meth:`patchq.env.state.StateDir.ensure`) moves it into ``env-<key>/``. ``owner.json``
    records the site-packages a directory belongs to: a keyed directory naming another one
    is refused (exit 6); ``<site-packages>/.patchq`` travels with its environment, so there
    another owner (the environment was moved or copied) is adopted.

What is in it (names below; only :mod:`patchq.env.state` writes them)
    ``journal.json`` the committed state; ``pristine/<relpath>`` pristine bytes of each
    changed file; ``txn/manifest.json`` + ``txn/files/<relpath>`` an in-flight write;
    ``foreign/<relpath>.<UTC>`` copies kept by ``revert --force``; ``owner.json`` the
    site-packages the directory belongs to; ``.write-probe.<pid>.<random>`` a per-process
    writability probe (taken under the lock). The inter-process lock is a ``flock`` of
    the state directory itself (:class:`patchq.env.state.StateLock`); a ``lock`` file left by
    older versions is ignored.

Rules every reader applies (:func:`relpath_problem`, :func:`journal_problem`,
:func:`manifest_problem`): a path read from state is a POSIX relpath, normalized, not
absolute, without ``..``; it must also be a RECORD path of the vLLM distribution (checked
by the callers that hold RECORD). A state directory that is a symlink is refused
(:func:`symlink_problem`), never followed.
"""

from __future__ import annotations

import os
import posixpath

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast path runs here)
if TYPE_CHECKING:
    from collections.abc import Mapping

ENV_VAR = "PATCHQ_STATE_DIR"
STATE_DIRNAME = ".patchq"
ENV_PREFIX = "env-"
JOURNAL = "journal.json"
PRISTINE = "pristine"
TXN = "txn"
TXN_MANIFEST = "manifest.json"
TXN_FILES = "files"
FOREIGN = "foreign"
OWNER = "owner.json"
LOCK = "lock"  # older versions' lock file: no longer used, never followed
PROBE_PREFIX = ".write-probe."
#: suffix of :func:`patchq.env.fsutil.atomic_write` temp files (``.<name>.<8 random>.patchq-tmp``)
TMP_SUFFIX = ".patchq-tmp"
OWNER_SCHEMA = "patchq.state-owner/1"
JOURNAL_SCHEMA = 1
#: what a legacy flat ``$PATCHQ_STATE_DIR`` holds and migration moves into ``env-<key>/``
LEGACY_ENTRIES = (JOURNAL, PRISTINE, TXN, FOREIGN)

# patterns, matched (and re imported) where used: the no-op fast path imports this module, not re
_TMP_RE = r"^\..+\.[A-Za-z0-9_]{8}\.patchq-tmp$"
_HEX64 = r"^[0-9a-f]{64}$"


def site_key(site: str) -> str:
    """16 hex identifying one site-packages (sha256 of its real path)."""
    import hashlib  # here: only a shared $PATCHQ_STATE_DIR needs it

    return hashlib.sha256(os.path.realpath(site).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def shared_base(environ: Mapping[str, str] | None = None) -> str | None:
    """``$PATCHQ_STATE_DIR`` (a base shared by environments), or None."""
    return (os.environ if environ is None else environ).get(ENV_VAR) or None


def keyed_root(base: str, site: str) -> str:
    """``BASE/env-<key>``: the state directory of ``site`` under a shared base."""
    return os.path.join(base, ENV_PREFIX + site_key(site))


def read_owner(root: str) -> str | None:
    """The site-packages named by ``root/owner.json`` (None when absent or unreadable)."""
    from patchq import jsonsafe

    try:
        data = jsonsafe.read_file(os.path.join(root, OWNER), max_bytes=1 << 16)
    except (OSError, ValueError):
        return None
    value = data.get("site_packages") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def owner_json(site: str) -> str:
    """The text of ``owner.json`` for ``site``."""
    import json

    return json.dumps({"schema": OWNER_SCHEMA, "site_packages": os.path.realpath(site)}, indent=1) + "\n"


def is_legacy(base: str, site: str) -> bool:
    """True when ``base`` itself holds a flat (pre-keyed) state that ``site`` may adopt:
    a journal or transaction directly in it, and no ``owner.json`` naming another site."""
    if not any(os.path.lexists(os.path.join(base, n)) for n in (JOURNAL, TXN)):
        return False
    owner = read_owner(base)
    return owner is None or owner == os.path.realpath(site)


def state_root(site: str, environ: Mapping[str, str] | None = None) -> str:
    """The state directory of ``site`` (see module docstring)."""
    base = shared_base(environ)
    if not base:
        return os.path.join(site, STATE_DIRNAME)
    keyed = keyed_root(base, site)
    if not os.path.lexists(keyed) and is_legacy(base, site):
        return base
    return keyed


def journal_path(root: str) -> str:
    """``root/journal.json``."""
    return os.path.join(root, JOURNAL)


def pristine_dir(root: str) -> str:
    """``root/pristine``."""
    return os.path.join(root, PRISTINE)


def pristine_path(root: str, relpath: str) -> str:
    """``root/pristine/<relpath>`` (``relpath`` checked by the caller)."""
    return os.path.join(root, PRISTINE, *relpath.split("/"))


def txn_dir(root: str) -> str:
    """``root/txn``."""
    return os.path.join(root, TXN)


def txn_manifest(root: str) -> str:
    """``root/txn/manifest.json``."""
    return os.path.join(root, TXN, TXN_MANIFEST)


def txn_file(root: str, relpath: str) -> str:
    """``root/txn/files/<relpath>``."""
    return os.path.join(root, TXN, TXN_FILES, *relpath.split("/"))


def foreign_dir(root: str) -> str:
    """``root/foreign``."""
    return os.path.join(root, FOREIGN)


def owner_path(root: str) -> str:
    """``root/owner.json``."""
    return os.path.join(root, OWNER)


def probe_path(root: str) -> str:
    """A write probe unique to this process and call."""
    return os.path.join(root, f"{PROBE_PREFIX}{os.getpid()}.{os.urandom(4).hex()}")


def is_temp_name(name: str) -> bool:
    """True for a temp file of :func:`patchq.env.fsutil.atomic_write` (left by a kill -9)."""
    import re

    return re.match(_TMP_RE, name) is not None


def has_pending(root: str) -> bool:
    """True when an interrupted write (``txn/manifest.json``, even a damaged one) is left."""
    return os.path.lexists(txn_manifest(root))


# -- what a reader accepts ---------------------------------------------------------


def relpath_problem(relpath: object) -> str | None:
    """Why ``relpath`` (read from state) is not an acceptable vLLM file path, or None.

    Acceptable: a non-empty POSIX relpath, normalized (``posixpath.normpath`` leaves it
    as is), not absolute, no ``..``, no NUL or backslash, not inside the state directory.
    """
    if not isinstance(relpath, str) or not relpath:
        return f"{relpath!r} is not a path"
    if "\0" in relpath or "\\" in relpath:
        return f"{relpath!r} holds a NUL or a backslash"
    if relpath.startswith("/") or posixpath.isabs(relpath):
        return f"{relpath!r} is absolute"
    if posixpath.normpath(relpath) != relpath or relpath.startswith("./"):
        return f"{relpath!r} is not normalized"
    parts = relpath.split("/")
    if ".." in parts or "." in parts:
        return f"{relpath!r} leaves site-packages"
    if parts[0] == STATE_DIRNAME:
        return f"{relpath!r} is inside the state directory"
    return None


def inside(site: str, relpath: str) -> str | None:
    """Why ``site/relpath`` is not a regular location inside ``site``, or None.

    A symlinked file or a directory on the way that leads out of site-packages is refused:
    patchq neither writes through a link nor replaces one (the link would be lost on
    revert). A missing file is fine (RECORD decides whether it should exist).
    """
    full = os.path.join(site, *relpath.split("/"))
    real_site = os.path.realpath(site)
    if os.path.islink(full):
        return f"{relpath} is a symlink (to {os.readlink(full)}); patchq does not write through links"
    real = os.path.realpath(full)
    if os.path.commonpath([real_site, real]) != real_site:
        return f"{relpath} resolves outside site-packages ({real})"
    return None


#: The kind each top-level entry of a state directory must be (``file`` or ``dir``).
ENTRY_KINDS = {JOURNAL: "file", PRISTINE: "dir", TXN: "dir", FOREIGN: "dir", OWNER: "file"}


def entry_problem(root: str, name: str) -> str | None:
    """Why the top-level state entry ``root/name`` is not what patchq keeps there (a
    symlink, a FIFO or device, a file where a directory belongs or the reverse), or None
    (also when it does not exist)."""
    import stat

    p = os.path.join(root, name)
    try:
        st = os.lstat(p)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.readlink(p)
        except OSError:
            to = "?"
        return f"{p} is a symlink (to {to}); refusing to follow it"
    want = ENTRY_KINDS.get(name)
    if want == "file" and not stat.S_ISREG(st.st_mode):
        return f"{p} is not a regular file (a directory, FIFO or device); refusing to read it"
    if want == "dir" and not stat.S_ISDIR(st.st_mode):
        return f"{p} is not a directory; refusing to use it"
    return None


def symlink_problem(root: str) -> str | None:
    """Why the state directory ``root`` (or one of its top-level entries) may not be used
    (a symlink: refused, never followed; an entry of the wrong kind: :func:`entry_problem`),
    or None."""
    if os.path.islink(root):
        return f"the state directory {root} is a symlink (to {os.readlink(root)}); refusing to follow it"
    if os.path.lexists(root) and not os.path.isdir(root):
        return f"the state directory {root} is not a directory; refusing to use it"
    for name in ENTRY_KINDS:
        problem = entry_problem(root, name)
        if problem:
            return problem
    return None


def confined(root: str, path: str) -> str | None:
    """Why ``path`` (to be written, read or removed inside the state directory ``root``)
    does not stay in it once symlinks are resolved (a symlinked subdirectory such as
    ``pristine/vllm``), or None."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.dirname(path))
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        return f"{path} leads out of the state directory {root} (to {real}) through a symlink; refusing it"
    if os.path.islink(path):
        return f"{path} is a symlink; refusing to follow it"
    return None


def _sha_text(value: object) -> bool:
    """True for a hex sha256 (not None, not :data:`patchq.hashing.NOT_REGULAR`)."""
    import re

    return isinstance(value, str) and re.match(_HEX64, value) is not None


def _sha(value: object, optional: bool = False) -> bool:
    import re

    return (optional and value is None) or (isinstance(value, str) and re.match(_HEX64, value) is not None)


def _str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def journal_problem(data: object) -> str | None:
    """Why ``data`` (parsed ``journal.json``) is not a journal of schema 1, or None.

    Checks every field's type and every path (:func:`relpath_problem`); RECORD membership is
    checked by callers that read RECORD.
    """
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("schema") != JOURNAL_SCHEMA:
        return f"schema {data.get('schema')!r} is not {JOURNAL_SCHEMA}"
    for key in ("vllm", "profile"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            return f"{key} is not a string"
    files, patches = data.get("files", {}), data.get("patches", {})
    if not isinstance(files, dict) or not isinstance(patches, dict):
        return "files/patches are not objects"
    bad = _file_entries_problem(files) or _patch_entries_problem(patches, files)
    if bad:
        return bad
    for key, kind in (("profile_hashes", dict), ("results", list), ("series", dict), ("updated", str),
                      ("applied_from", dict)):
        if key in data and not isinstance(data[key], kind):
            return f"{key} is not a {kind.__name__}"
    if not all(isinstance(v, str) for v in data.get("profile_hashes", {}).values()):
        return "profile_hashes has a non-string hash"
    if not all(isinstance(v, (str, type(None))) for v in data.get("applied_from", {}).values()):
        return "applied_from has a non-string value"
    return series_problem(data.get("series") or {})


_FILE_KEYS = {"record_sha256", "pristine_sha256", "patched_sha256", "patches"}
_PATCH_KEYS = {"hash", "variant", "files", "outcome", "reason"}


def _file_entries_problem(files: dict) -> str | None:
    """Why the journal's ``files`` {relpath: entry} are malformed, or None."""
    for rel, entry in files.items():
        bad = relpath_problem(rel)
        if bad:
            return f"files: {bad}"
        if not isinstance(entry, dict) or set(entry) - _FILE_KEYS:
            return f"files[{rel}] is not a file entry"
        if not (_sha(entry.get("record_sha256"), True) and _sha(entry.get("pristine_sha256"))
                and _sha(entry.get("patched_sha256")) and _str_list(entry.get("patches", []))):
            return f"files[{rel}] has a malformed hash or patch list"
    return None


def _patch_entry_ok(entry: object) -> bool:
    """``entry`` is a journal patch entry: typed fields, a known outcome, no other keys."""
    return (isinstance(entry, dict) and isinstance(entry.get("hash"), str)
            and isinstance(entry.get("variant", ""), str) and _str_list(entry.get("files", []))
            and entry.get("outcome", "applied") in ("applied", "superseded", "upstreamed")
            and isinstance(entry.get("reason", ""), str) and not set(entry) - _PATCH_KEYS)


def _patch_entries_problem(patches: dict, files: dict) -> str | None:
    """Why the journal's ``patches`` {id: entry} are malformed or name a file without an
    entry in ``files``, or None."""
    for pid, entry in patches.items():
        if not _patch_entry_ok(entry):
            return f"patches[{pid}] is not a patch entry"
        for rel in entry.get("files", []):
            if rel not in files:
                return f"patches[{pid}] names {rel!r}, which has no file entry"
    return None


def series_problem(cached: dict) -> str | None:
    """Why a journal's cached series summary (:func:`patchq.hashing.series_summary`) is
    malformed, or None (``{}`` is fine: nothing cached)."""
    if not cached:
        return None
    ok = (isinstance(cached.get("inputs"), dict) and isinstance(cached.get("profiles"), dict)
          and all(_str_list(v) for v in cached["profiles"].values()) and _str_list(cached.get("ids"))
          and isinstance(cached.get("hashes"), dict) and all(isinstance(v, str) for v in cached["hashes"].values())
          and isinstance(cached.get("modules"), dict) and all(_str_list(v) for v in cached["modules"].values())
          and all(pid in cached["hashes"] for pid in cached["ids"]))
    if not ok:
        return "series summary is malformed"
    for rels in cached["modules"].values():
        for rel in rels:
            bad = relpath_problem(rel)
            if bad:
                return f"series summary: {bad}"
    return None


def manifest_problem(data: object) -> str | None:
    """Why ``data`` (parsed ``txn/manifest.json``) is not a transaction manifest, or None."""
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return "not a transaction manifest"
    for rel, ends in data["files"].items():
        bad = relpath_problem(rel)
        if bad:
            return f"files: {bad}"
        if not isinstance(ends, dict) or not _sha(ends.get("from"), True) or not _sha(ends.get("to")):
            return f"files[{rel}] has malformed hashes"
    bad = journal_problem(data.get("journal"))
    return f"journal: {bad}" if bad else None


def same_series(ref: dict | None, series_dir: str) -> bool:
    """Whether the series reference ``ref`` (a document's ``series`` field, as the journal
    records it in ``applied_from``) names the series directory ``series_dir`` (compared as
    real paths)."""
    return bool(ref) and os.path.realpath(str(ref.get("dir"))) == os.path.realpath(series_dir)  # type: ignore[union-attr]
