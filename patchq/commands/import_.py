"""``patchq import FILE.patch --id NAME [--release VERSION]``: a diff becomes an anchored patch.

:func:`patchq.authoring.importer.build` parses and attributes the diff, :func:`~patchq.authoring.importer.write`
writes ``series/<id>.py`` and ``anchors/<id>.toml``, and :func:`~patchq.authoring.importer.verify`
plans the new patch on the release: when its result is not exactly the diff's, both files
are removed again and the import fails (exit 1), so a written patch always reproduces
its diff.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from patchq.authoring import importer
from patchq.errors import EXIT_OK, UsageError
from patchq.series import Series

if TYPE_CHECKING:
    from patchq.documents import ImportDoc

SCHEMA = "patchq.import/1"
#: The largest diff (or ``--replacement`` file) ``import`` reads, in bytes; ``$PATCHQ_IMPORT_MAX_BYTES``
#: overrides it. Importing costs about 30 s and 0.6 GB per MB of hunks.
MAX_BYTES = 1 << 20
MAX_ENV = "PATCHQ_IMPORT_MAX_BYTES"


def max_bytes() -> int:
    """The size bound: ``$PATCHQ_IMPORT_MAX_BYTES`` (a positive integer), else :data:`MAX_BYTES`.

    Raises:
        UsageError: the variable is not a positive integer.
    """
    import os

    raw = os.environ.get(MAX_ENV)
    if not raw:
        return MAX_BYTES
    if not raw.strip().isdigit() or int(raw) <= 0:
        raise UsageError(f"{MAX_ENV}={raw!r}: give a positive number of bytes")
    return int(raw)


def read_text(file: str | Path, what: str = "diff") -> str:
    """The text of the diff (or replacement) ``file`` a user gives ``import``: a regular
    file (a FIFO or device such as ``/dev/zero`` is refused, never read) of at most
    :func:`max_bytes` bytes, in UTF-8.

    Raises:
        UsageError: missing, unreadable, not a regular file, larger than the bound (exit 2).
        ImportRefused: not UTF-8: another encoding (UTF-16 is named) or a stray byte,
            with its line (exit 1: it cannot become a patch; vLLM's sources are UTF-8).
    """
    import os
    import stat

    from patchq.errors import ImportRefused

    limit = max_bytes()
    too_large = UsageError(f"{file} is larger than {limit} bytes, the most `patchq import` reads (a {what} that "
                           f"size takes minutes and gigabytes to import); set {MAX_ENV}=N to allow more")
    try:
        fd = os.open(str(file), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{file} is not a regular file (a FIFO, device or directory); give the {what} as a file")
        if st.st_size > limit:
            raise too_large
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # it grew while read
                raise too_large
            chunks.append(chunk)
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ImportRefused(f"{file} is UTF-16 text; patchq reads UTF-8 {what}s, as vLLM's sources are "
                            f"(convert it: iconv -f UTF-16 -t UTF-8)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ImportRefused(f"{file}:{line}: not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start}); "
                            f"vLLM's sources are UTF-8, so a {what} of them is too") from None


def installed_release(text: str) -> str | None:
    """The installed vLLM's version when every hunk of the diff applies exactly to its
    pristine release (the user's own vLLM comes first); else None (no vLLM installed, or
    the diff does not apply there)."""
    from patchq.errors import PatchqError
    from patchq.vllmdist.sources import installed, release_source

    try:
        target = installed(None, None)
        source = release_source(str(target.version))
        files = importer.parse(text, source.exists)
        for fp in files:
            pristine = source.read_text(fp.relpath)
            if pristine is None:
                return None
            importer.apply_exact(pristine, fp)
    except PatchqError:
        return None
    return str(target.version)


def _replacement_source(spec: str) -> tuple[str, str, str]:
    """(text, name, where) of a replacing definition: ``path/to/file.py:name`` or
    ``package.module:name`` (``name`` may be ``Class.method``). The module's file is found
    with :func:`importlib.util.find_spec` (its parent packages are imported, the module is not).

    Raises:
        UsageError: malformed, or the file or module is not found.
    """
    import importlib.util

    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise UsageError(f"--replacement {spec!r}: give FILE.py:NAME or package.module:NAME")
    path = Path(where)
    if not path.is_file():
        try:
            found = importlib.util.find_spec(where)
        except (ImportError, ValueError) as exc:
            raise UsageError(f"--replacement {spec!r}: module {where} not found ({exc})") from None
        if found is None or not found.origin or not found.origin.endswith(".py"):
            raise UsageError(f"--replacement {spec!r}: no Python file for module {where}")
        path = Path(found.origin)
    return read_text(path, "replacement"), name, str(path)


def monkeypatch_diff(replacement: str, replaces: str, release: str) -> tuple[str, str, list[str]]:
    """A unified diff that puts a monkeypatch's replacing definition in place of vLLM's.

    ``replaces`` is ``vllm.module:Qualname`` at ``release``. The replacement (see
    :func:`_replacement_source`) takes the place of the definition's lines, re-indented to
    it and renamed to its name; vLLM's decorators are kept when the replacement has none
    (a monkeypatch rebinds the function object; the decorators of the rebinding are
    vLLM's business). Returns (diff text, the replaced module's relpath, notes).

    Raises:
        UsageError: a malformed argument, or a name not found.
    """
    import textwrap

    from patchq.plan import diffs
    from patchq.plan.anchors import ast_index, definition_span, split_lines
    from patchq.vllmdist.sources import release_source

    text, name, where = _replacement_source(replacement)
    mod, sep, qualname = replaces.partition(":")
    if not sep or not qualname:
        raise UsageError(f"--replaces {replaces!r}: give vllm.module:Qualname")
    source = release_source(release)
    base = mod.replace(".", "/")
    rel = next((r for r in (base + ".py", base + "/__init__.py") if source.exists(r)), None)
    if rel is None:
        raise UsageError(f"--replaces {replaces!r}: no module {mod} in vllm {release}")
    pristine = source.read_text(rel) or ""
    found = ast_index(pristine).get(qualname, [])
    if len(found) != 1:
        raise UsageError(f"--replaces {replaces!r}: {qualname} is defined {len(found)} times in {rel} (vllm {release})")
    mine = ast_index(text).get(name, [])
    if len(mine) != 1:
        raise UsageError(f"--replacement {replacement!r}: {name} is defined {len(mine)} times in {where}")
    lines = split_lines(pristine)
    a, b = definition_span(found[0])
    c, d = definition_span(mine[0])
    new_def = textwrap.dedent("".join(split_lines(text)[c - 1:d]))
    notes = []
    target_name = qualname.rsplit(".", 1)[-1]
    node = mine[0]
    if node.name != target_name:  # type: ignore[attr-defined]
        head = f"def {node.name}" if not isinstance(node, __import__("ast").ClassDef) else f"class {node.name}"  # type: ignore[attr-defined]
        new_def = new_def.replace(head, head.split(" ")[0] + " " + target_name, 1)
        notes.append(f"the replacement {name} is renamed {target_name} (the name it rebinds)")
    if not getattr(node, "decorator_list", None) and found[0].decorator_list:  # type: ignore[attr-defined]
        keep = "".join(lines[a - 1:found[0].lineno - 1])  # type: ignore[attr-defined]
        new_def = textwrap.dedent(keep) + new_def
        notes.append(f"vLLM's decorators of {qualname} are kept")
    indent = lines[found[0].lineno - 1][: len(lines[found[0].lineno - 1]) - len(lines[found[0].lineno - 1].lstrip())]  # type: ignore[attr-defined]
    new_lines = textwrap.indent(new_def, indent, lambda ln: bool(ln.strip()))
    if not new_lines.endswith("\n"):
        new_lines += "\n"
    patched = "".join(lines[: a - 1]) + new_lines + "".join(lines[b:])
    return diffs.unified(rel, pristine, patched), rel, notes


def run(series: Series, file: str | None, patch_id: str, release: str | None = None,
        summary: str | None = None, force: bool = False, profile: str = "default",
        replacement: str | None = None, replaces: str | None = None) -> tuple[ImportDoc, int]:
    """Import ``file`` as patch ``patch_id`` and add it to ``profile``. Returns
    (``patchq.import/1`` document, exit code).

    The release is ``release``, else the installed vLLM's when the diff applies to it
    exactly, else the newest cached release it applies to (``release_from``: ``given`` |
    ``installed`` | ``guessed``).

    Raises:
        UsageError: unreadable file, bad id, existing patch without --force.
        ImportRefused: the diff cannot become an anchored patch, or the written patch does
            not reproduce it (nothing is left written).
    """
    from patchq.authoring import scaffold

    mp_notes: list[str] = []
    if replacement or replaces:  # a monkeypatch: its replacing definition against vLLM's
        if not (replacement and replaces) or file:
            raise UsageError("a monkeypatch import takes --replacement FILE.py:NAME (or module:NAME) and --replaces "
                             "vllm.module:Qualname, and no diff FILE")
        if release is None:
            from patchq.errors import PatchqError
            from patchq.vllmdist.sources import installed

            try:
                release = str(installed(None, None).version)
            except PatchqError:
                raise UsageError("a monkeypatch import needs --release VERSION (no vLLM installed)") from None
        text, _, mp_notes = monkeypatch_diff(replacement, replaces, release)
        path = Path(replacement.rpartition(":")[0])
    else:
        if not file:
            raise UsageError("give a diff FILE, or --replacement and --replaces for a monkeypatch")
        path = Path(file)
        text = read_text(path)

    scaffold.check_profile(profile)
    release_from = "given" if release else None
    if release is None:
        release = installed_release(text)
        release_from = "installed" if release else "guessed"
    plan = importer.build(text, patch_id, release, source_name=path.name)
    plan.notes[:0] = mp_notes
    written = importer.write_verified(plan, series, summary, force, path.name)
    added = scaffold.add_to_profile(series.root / "profiles.toml", profile, patch_id)
    doc: ImportDoc = {
        "schema": SCHEMA, "patch": patch_id, "file": str(path), "release": plan.release,
        "monkeypatch": {"replacement": replacement, "replaces": replaces} if replacement else None,
        "release_guessed": release_from == "guessed", "release_from": release_from,
        "profile": profile, "added_to_profile": added, "written": written, "verified": True,
        "summary": importer.summary_line(plan), "levels": importer.level_counts(plan),
        "hunks": [{"path": h.relpath, "header": h.header, "definitions": h.qualnames,
                   "module_level": h.module_level, "level": h.level} for h in plan.hunks],
        "anchors": [{"id": a.anchor_id, "path": a.relpath, "qualname": a.qualname,
                     "fingerprint": a.fingerprint, "ops": [o["op"] for o in a.ops]} for a in plan.anchors],
        "notes": plan.notes,
    }
    return doc, EXIT_OK

