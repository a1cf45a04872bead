"""patchq's import hook: serve the patched source of vLLM's target modules at import time.

``patchq run`` copies this file, as ``_patchq_hook.py``, into a private hook directory
beside a generated ``sitecustomize.py`` and a ``manifest.marshal``, and puts that
directory first on ``PYTHONPATH``. Every Python process started below it (spawn,
forkserver, ``subprocess`` of python; fork children inherit it) imports
``sitecustomize`` at startup (``site`` module), which calls :func:`boot`:

1. read the manifest (``marshal``: no json/re import on the way, see the benchmark),
   checked first (a tag, its length and CRC-32: :func:`read_manifest`);
2. fail loudly (exit 6) when a target module was imported before the hook (a ``.pth``
   file), or when the manifest is unreadable: never a silent unpatched run;
3. put a finder first on ``sys.meta_path`` that answers for exactly the target module
   names; everything else goes to the normal finders untouched;
4. run the ``sitecustomize`` this one shadows (the next one on ``sys.path``), as
   ``site`` would have.

Serving a module: the finder checks that the normal path finder resolves the name to
the very file the manifest was built from, and that the file is unchanged (size and
mtime, else its sha256), then returns a spec whose loader executes the patched text
compiled with the REAL file path as ``co_filename`` and registers that text in
``linecache``: tracebacks and ``inspect.getsource`` show the patched lines with their
line numbers. The patched text must hash to the manifest's sha256 before it is executed
(else the process stops, exit 6). Compiled code is cached per interpreter (``code/`` in
the hook directory), keyed by that sha256 and checked (CRC-32) before it is loaded.

The hook directory, its manifest and every ``code/`` file must belong to this user (or
root) and not be writable by others (:func:`untrusted`, the rule patchq applies to its
cache): an untrusted manifest stops the process (exit 6), an untrusted code file is
compiled again, never loaded.

Proof per process: the loaded module carries ``__patchq__`` (its ``"id:hash"`` patch
list); :data:`STATE` is the installed :class:`Hook` (``STATE.manifest``); and once a
process imports a target module (or the vLLM plugin calls :meth:`Hook.record`), it
writes ``<runtime dir>/<pid>.json`` (``patchq.runtime/1``), which ``patchq status
--runtime`` reads; it is removed at normal exit.

Standard library only, and cheap: a process that never imports a target module pays
one small file read and one ``sys.meta_path`` entry.
"""

import marshal
import os
import sys

SCHEMA = "patchq.hook/1"
RECORD_SCHEMA = "patchq.runtime/1"
MANIFEST = "manifest.marshal"
#: ``manifest.marshal`` and every ``code/`` file start with a tag and the CRC-32 and length
#: of their marshal payload: a damaged file is refused before ``marshal.loads`` (which may
#: crash the interpreter on corrupt input), never loaded.
MANIFEST_TAG = b"PQM1"
CODE_TAG = b"PQC1"
#: A file that marks a directory as a patchq hook directory (never chained to).
MARKER = ".patchq-hook"
#: Exit status of a process the hook stops (patchq's "state disagrees with the files").
EXIT_HOOK = 6

#: The :class:`Hook` installed in this process, or None.
STATE = None


class HookError(RuntimeError):
    """A target module cannot be served as prepared. Kept for importers of this name; the
    hook itself now stops the process with one line (:func:`_die`, exit 6) instead of
    raising it: a raised error became a 12-line traceback and exit 1 in a ``patchq run``
    child whose site ``apply``/``revert`` rewrote between preparation and import."""


def _die(message):
    """Print ``message`` and end the process at once (exit :data:`EXIT_HOOK`)."""
    try:
        sys.stderr.write("patchq run: " + message + "\n")
        sys.stderr.flush()
    except Exception:  # no usable stderr: the exit status still tells
        pass
    os._exit(EXIT_HOOK)


def start_ticks(pid="self"):
    """Start time of a process in clock ticks since boot (``/proc/<pid>/stat`` field 22),
    or None off Linux. With the pid it identifies a process across pid reuse."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as fh:
            data = fh.read()
        return int(data.rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pack(tag, payload):
    """``tag`` + CRC-32 (4 bytes) + length (8 bytes) + ``payload`` (see :data:`MANIFEST_TAG`)."""
    import zlib

    return tag + zlib.crc32(payload).to_bytes(4, "big") + len(payload).to_bytes(8, "big") + payload


def unpack(tag, data):
    """The payload of :func:`pack`'s ``data``, or None when the tag, length or CRC-32 is off."""
    import zlib

    head = len(tag) + 12
    if len(data) < head or data[:len(tag)] != tag:
        return None
    payload = data[head:]
    if int.from_bytes(data[len(tag) + 4:head], "big") != len(payload):
        return None
    if zlib.crc32(payload) != int.from_bytes(data[len(tag):len(tag) + 4], "big"):
        return None
    return payload


def untrusted(path, st):
    """Why a hook file or directory with the stat ``st`` may not be used, or None: owned by
    another user than this process's (or root), or writable by others (the rule of
    ``patchq.trust.stat_problem``, restated here: this file runs without patchq)."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is None:  # pragma: no cover - not POSIX
        return None
    if st.st_uid not in (uid, 0):
        return "%s is owned by uid %d, not by you (uid %d) or root" % (path, st.st_uid, uid)
    if st.st_mode & 0o002:
        return "%s is writable by others (mode %o)" % (path, st.st_mode & 0o7777)
    return None


def _read_trusted(path):
    """The bytes of the regular file ``path``, read through one descriptor whose owner and
    mode are checked (:func:`untrusted`; a symlink is not followed).

    Raises:
        ValueError: not a regular file, or not trusted.
        OSError: it cannot be read.
    """
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("%s is not a regular file" % path)
        problem = untrusted(path, st)
        if problem:
            raise ValueError(problem)
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read()
    finally:
        os.close(fd)


def read_manifest(path):
    """The manifest dict of a hook directory's ``manifest.marshal``; the file and its
    directory must be this user's or root's and not writable by others (:func:`untrusted`).

    Raises:
        ValueError: the file is damaged (tag, length or CRC-32), not a manifest, or not
            trusted.
        OSError: it cannot be read.
    """
    directory = os.path.dirname(os.path.abspath(path))
    problem = untrusted(directory, os.stat(directory))
    if problem:
        raise ValueError(problem)
    payload = unpack(MANIFEST_TAG, _read_trusted(path))
    if payload is None:
        raise ValueError("damaged (checksum mismatch)")
    manifest = marshal.loads(payload)
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA or not isinstance(
            manifest.get("modules"), dict):
        raise ValueError("not a %s manifest" % SCHEMA)
    return manifest


def _magic():
    try:
        import _frozen_importlib_external

        return _frozen_importlib_external.MAGIC_NUMBER
    except (ImportError, AttributeError):  # not CPython: still keyed by cache_tag
        return b"PQ00"


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


class PatchedLoader:
    """Loader of one target module: patched text, real file path (PEP 451 loader plus
    the ``get_source``/``get_code``/``get_filename`` of PEP 302's InspectLoader)."""

    #: Marks modules served by patchq (the vLLM plugin looks for it).
    patchq_hook = True

    def __init__(self, hook, name, entry):
        self.hook = hook
        self.name = name
        self.entry = entry
        self.path = entry["path"]
        self._text = None

    def create_module(self, spec):
        return None  # the default module object

    def get_filename(self, name=None):
        return self.path

    def is_package(self, name=None):
        return bool(self.entry["package"])

    def get_data(self, path):
        with open(path, "rb") as fh:
            return fh.read()

    def get_resource_reader(self, name=None):
        """Resources of a served package are its directory's files (as for a plain file)."""
        if not self.entry["package"]:
            return None
        from importlib.readers import FileReader

        return FileReader(self)

    def get_source(self, name=None):
        """The patched text (str), exactly what ``patchq apply`` writes: its sha256 must be
        the manifest's (a damaged or replaced cached source stops the process, exit 6)."""
        if self._text is None:
            import hashlib

            try:
                with open(self.entry["source"], "rb") as fh:
                    data = fh.read()
            except OSError as exc:  # removed (a cache prune) or replaced by something unreadable
                _die("the patched source of %s (%s) cannot be read (%s); rerun `patchq run` (it prepares the hook "
                     "again)" % (self.name, self.entry["source"], exc.strerror or exc))
            if hashlib.sha256(data).hexdigest() != self.entry["patched_sha256"]:
                _die("the patched source of %s (%s) does not match the hook's manifest (damaged or replaced); "
                     "rerun `patchq run` (it prepares the hook again)" % (self.name, self.entry["source"]))
            self._text = data.decode("utf-8")
        return self._text

    def _code_path(self):
        opt = sys.flags.optimize
        tag = sys.implementation.cache_tag or "none"
        name = "%s.%s.%s.opt%d.code" % (self.name, self.entry["patched_sha256"][:16], tag, opt)
        return os.path.join(self.hook.hook_dir, "code", name)

    def get_code(self, name=None):
        """The module's code object, compiled with the real path as ``co_filename``
        (cached on disk per interpreter and optimisation level)."""
        path = self._code_path()
        # what the cached code was compiled from: this interpreter's magic and the patched
        # text's sha256; the payload's CRC-32 guards marshal.loads against a damaged file
        key = _magic() + self.entry["patched_sha256"].encode("ascii")
        self.get_source()  # verifies the patched text first
        try:  # another user's (or a world-writable) code file is never loaded: compiled again
            payload = unpack(CODE_TAG, _read_trusted(path))
            if payload is not None and payload[:len(key)] == key:
                return marshal.loads(payload[len(key):])
        except (OSError, ValueError, EOFError, TypeError):
            pass
        code = compile(self.get_source(), self.path, "exec", dont_inherit=True)
        try:  # best effort: a read-only cache only costs a compile per process
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = "%s.%d.tmp" % (path, os.getpid())
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(pack(CODE_TAG, key + marshal.dumps(code)))
            os.replace(tmp, path)
        except OSError:
            pass
        return code

    def exec_module(self, module):
        text = self.get_source()
        code = self.get_code()
        import linecache

        # mtime None: linecache.checkcache() leaves the entry alone, so tracebacks and
        # inspect show the patched lines, not the pristine file on disk
        linecache.cache[self.path] = (len(text), None, text.splitlines(True), self.path)
        module.__patchq__ = tuple(self.entry["patches"])
        exec(code, module.__dict__)
        self.hook.served(self.name)


class Finder:
    """The ``sys.meta_path`` entry: answers for the manifest's module names only."""

    def __init__(self, hook):
        self.hook = hook

    def find_spec(self, name, path=None, target=None):
        entry = self.hook.modules.get(name)
        if entry is None:
            return None
        return self.hook.spec(name, entry, path)

    def invalidate_caches(self):
        pass


class Hook:
    """The hook installed in one process (see the module docstring)."""

    def __init__(self, hook_dir, manifest):
        self.hook_dir = hook_dir
        self.manifest = manifest
        self.modules = manifest["modules"]
        self.finder = Finder(self)
        self.served_names = []
        self._record_pid = None

    # -- serving --------------------------------------------------------------

    def spec(self, name, entry, path):
        """A ModuleSpec with a :class:`PatchedLoader`. Stops the process (one line, exit
        :data:`EXIT_HOOK`) when the name resolves to another file than the manifest's, or
        the file changed since: never an unpatched run, never a traceback."""
        from _frozen_importlib import ModuleSpec
        from _frozen_importlib_external import PathFinder

        real = PathFinder.find_spec(name, path)
        origin = getattr(real, "origin", None)
        if origin is None or not _same_file(origin, entry["path"]):
            _die("%s resolves to %s, but the hook (profile %s) was prepared for %s; rerun `patchq run` for this "
                 "environment" % (name, origin, self.manifest["profile"], entry["path"]))
        self._check_unchanged(name, entry)
        loader = PatchedLoader(self, name, entry)
        spec = ModuleSpec(name, loader, origin=entry["path"], is_package=bool(entry["package"]))
        spec.has_location = True
        spec.cached = loader._code_path()  # not the pristine file's __pycache__ entry
        if entry["package"]:
            spec.submodule_search_locations = list(real.submodule_search_locations or [])
        return spec

    def _check_unchanged(self, name, entry):
        """Stop the process (one line, exit :data:`EXIT_HOOK`) when the target file changed
        since the hook was prepared (``patchq apply``/``revert`` rewrote the site, an
        upgrade): the patched text was made from other bytes."""
        try:
            st = os.stat(entry["path"])
            if st.st_size == entry["size"] and st.st_mtime_ns == entry["mtime_ns"]:
                return
            import hashlib

            with open(entry["path"], "rb") as fh:
                now = hashlib.sha256(fh.read()).hexdigest()
        except OSError as exc:
            now = "unreadable (%s)" % (exc.strerror or exc)
        if now != entry["disk_sha256"]:
            _die("%s changed since the hook was prepared (sha256 %s, was %s; `patchq apply` or `revert` rewrote "
                 "it?): the patched source no longer matches it; rerun `patchq run`"
                 % (entry["path"], now, entry["disk_sha256"]))

    def served(self, name):
        """Note that ``name`` was executed from patched source; update the record."""
        if name not in self.served_names:
            self.served_names.append(name)
        self.record()

    # -- the per-process record ----------------------------------------------

    def runtime_dir(self):
        """Where per-process records go: ``$PATCHQ_RUNTIME_DIR``, else the manifest's."""
        return os.environ.get("PATCHQ_RUNTIME_DIR") or self.manifest["runtime_dir"]

    def record_path(self):
        return os.path.join(self.runtime_dir(), "%d.json" % os.getpid())

    def document(self):
        """This process's ``patchq.runtime/1`` record (a JSON-ready dict)."""
        m = self.manifest
        return {
            "schema": RECORD_SCHEMA,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "start_ticks": start_ticks(),
            "argv": list(getattr(sys, "argv", []))[:16],
            "executable": sys.executable,
            "profile": m["profile"],
            "digest": m["digest"],
            "vllm": m["vllm"],
            "site_packages": m["site_packages"],
            "patches": m["patches"],
            "served": {n: {"path": self.modules[n]["path"], "kind": self.modules[n]["kind"],
                           "patched_sha256": self.modules[n]["patched_sha256"],
                           "patches": list(self.modules[n]["patches"])} for n in self.served_names},
            "hook_dir": self.hook_dir,
            "key": m["key"],
        }

    def record(self):
        """Write (or rewrite) this process's record atomically; never raises."""
        try:
            import json

            path = self.record_path()
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            import _thread

            tmp = "%s.%d.tmp" % (path, _thread.get_ident())  # two threads may serve at once
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(self.document(), fh, indent=1)
            os.replace(tmp, path)
        except Exception:  # a record is evidence, not a reason to break vLLM
            return
        if self._record_pid is None:
            import atexit

            atexit.register(self._unrecord)
        self._record_pid = os.getpid()

    def _unrecord(self):
        # atexit handlers are inherited by fork children: only the writer removes its file
        if self._record_pid == os.getpid():
            try:
                os.unlink(self.record_path())
            except OSError:
                pass

    def _after_fork(self):
        pid_was = self._record_pid
        self._record_pid = None
        if self.served_names or pid_was is not None:
            self.record()


def _is_hook_dir(path):
    return bool(path) and os.path.exists(os.path.join(path, MARKER))


def _chain_sitecustomize():
    """Import the ``sitecustomize`` this one shadows, with ``site``'s error handling."""
    # the frozen importlib modules are loaded already: importing the importlib package
    # would cost every process about half a millisecond
    import _frozen_importlib
    import _frozen_importlib_external

    paths = [p for p in sys.path if not _is_hook_dir(p)]
    spec = _frozen_importlib_external.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    module = _frozen_importlib.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        if exc.name != "sitecustomize":
            sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                             "%s: %s\n" % (type(exc).__name__, exc))
    except Exception as exc:
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                         "%s: %s\n" % (type(exc).__name__, exc))


def boot(sitecustomize_file):
    """Install the hook described by the manifest beside ``sitecustomize_file``, then
    chain to the shadowed ``sitecustomize``. Ends the process (exit 6) when the hook
    cannot be installed or a target module is already imported."""
    global STATE
    if STATE is not None:
        return
    hook_dir = os.path.dirname(os.path.abspath(sitecustomize_file))
    try:
        manifest = read_manifest(os.path.join(hook_dir, MANIFEST))
    except (OSError, ValueError, EOFError, TypeError) as exc:
        _die("cannot read the hook manifest in %s (%s); rerun `patchq run`" % (hook_dir, exc))
    early = sorted(n for n in manifest["modules"] if n in sys.modules)
    if early:
        _die("%s imported before patchq's import hook was installed (by a .pth file?): this process "
             "would run unpatched code (profile %s)" % (", ".join(early), manifest["profile"]))
    hook = Hook(hook_dir, manifest)
    sys.meta_path.insert(0, hook.finder)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=hook._after_fork)
    STATE = hook
    _chain_sitecustomize()
