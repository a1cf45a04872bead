"""Split a large file into parts under a byte limit, and join them back with a sha256 check.

The device machine of this workplace receives at most 64 MiB of working tree per call,
so a 274 MB vLLM wheel (or the slim bundle made by ``lab/slimwheel.py``) travels as
parts, one per call, while the machine stays warm. This module is deliberately
stdlib-only: it runs on the device machine's bare Python 3.12 before anything is
installed there.

CLI::

    python spark/lab/wheelsplit.py split FILE OUTDIR [--limit BYTES]   # writes OUTDIR/NAME.partNN + NAME.manifest.json
    python spark/lab/wheelsplit.py join MANIFEST OUTFILE [--parts-dir DIR ...]
    python spark/lab/wheelsplit.py check MANIFEST [--parts-dir DIR ...]  # which parts are present and intact

Manifest (JSON)::

    {"name": str, "size": int, "sha256": str, "limit": int,
     "parts": [{"file": str, "size": int, "sha256": str}, ...]}

Exit codes: 0 success; 1 a sha256 or size mismatch or a missing part; 2 bad usage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

DEFAULT_LIMIT = 60 * 1024 * 1024  # 60 MiB: leaves room under the 64 MiB per-call transfer
CHUNK = 1024 * 1024


class SplitError(Exception):
    """A part is missing, or a size or sha256 does not match its manifest."""


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes (streamed in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def split(path: str | os.PathLike, outdir: str | os.PathLike, limit: int = DEFAULT_LIMIT) -> Path:
    """Split ``path`` into ``outdir/<name>.partNN`` files of at most ``limit`` bytes each.

    Args:
        path: the file to split.
        outdir: created if missing; existing parts of the same name are overwritten.
        limit: maximum bytes per part (> 0). The last part holds the remainder.

    Returns:
        The path of the manifest written beside the parts, ``outdir/<name>.manifest.json``.

    Raises:
        ValueError: ``limit`` is not positive.
        OSError: the file cannot be read or the parts cannot be written.
    """
    if limit <= 0:
        raise ValueError(f"limit must be positive, got {limit}")
    src = Path(path)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256()
    parts = []
    size = 0
    with open(src, "rb") as f:
        index = 0
        while True:
            ph = hashlib.sha256()
            written = 0
            part_path = out / f"{src.name}.part{index:02d}"
            with open(part_path, "wb") as pf:
                while written < limit:
                    block = f.read(min(CHUNK, limit - written))
                    if not block:
                        break
                    pf.write(block)
                    ph.update(block)
                    whole.update(block)
                    written += len(block)
            if written == 0:
                part_path.unlink()
                if index == 0:  # an empty file still gets one (empty) part
                    part_path.touch()
                    parts.append({"file": part_path.name, "size": 0, "sha256": hashlib.sha256().hexdigest()})
                break
            parts.append({"file": part_path.name, "size": written, "sha256": ph.hexdigest()})
            size += written
            index += 1
            if written < limit:
                break
    manifest = {
        "name": src.name,
        "size": size,
        "sha256": whole.hexdigest(),
        "limit": limit,
        "parts": parts,
    }
    mpath = out / f"{src.name}.manifest.json"
    mpath.write_text(json.dumps(manifest, indent=1) + "\n")
    return mpath


def _find_part(name: str, dirs: list[Path]) -> Path | None:
    for d in dirs:
        p = d / name
        if p.is_file():
            return p
    return None


def check(manifest: str | os.PathLike, parts_dirs: list[str | os.PathLike] | None = None) -> dict:
    """Report which parts of a manifest are present and intact (no joining).

    Args:
        manifest: path of a ``*.manifest.json``.
        parts_dirs: folders searched in order for each part; default: the manifest's folder.

    Returns:
        ``{"present": [file...], "missing": [file...], "corrupt": [file...]}``.
    """
    mpath = Path(manifest)
    m = json.loads(mpath.read_text())
    dirs = [Path(d) for d in (parts_dirs or [])] or [mpath.parent]
    res = {"present": [], "missing": [], "corrupt": []}
    for part in m["parts"]:
        p = _find_part(part["file"], dirs)
        if p is None:
            res["missing"].append(part["file"])
        elif p.stat().st_size != part["size"] or sha256_file(p) != part["sha256"]:
            res["corrupt"].append(part["file"])
        else:
            res["present"].append(part["file"])
    return res


def join(
    manifest: str | os.PathLike,
    outfile: str | os.PathLike,
    parts_dirs: list[str | os.PathLike] | None = None,
) -> Path:
    """Reassemble the parts listed in ``manifest`` into ``outfile`` and verify it.

    Each part's size and sha256 are checked before it is appended, and the whole
    file's size and sha256 after; on any mismatch the partial output is removed.

    Args:
        manifest: path of a ``*.manifest.json`` written by :func:`split`.
        outfile: where the joined file goes (overwritten).
        parts_dirs: folders searched in order for each part; default: the manifest's folder.

    Returns:
        ``Path(outfile)``.

    Raises:
        SplitError: a part is missing, or a part or the whole does not match.
    """
    mpath = Path(manifest)
    m = json.loads(mpath.read_text())
    dirs = [Path(d) for d in (parts_dirs or [])] or [mpath.parent]
    out = Path(outfile)
    out.parent.mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256()
    size = 0
    try:
        with open(out, "wb") as of:
            for part in m["parts"]:
                p = _find_part(part["file"], dirs)
                if p is None:
                    raise SplitError(f"missing part {part['file']} (searched {', '.join(map(str, dirs))})")
                ph = hashlib.sha256()
                psize = 0
                with open(p, "rb") as pf:
                    for block in iter(lambda: pf.read(CHUNK), b""):
                        ph.update(block)
                        whole.update(block)
                        of.write(block)
                        psize += len(block)
                if psize != part["size"] or ph.hexdigest() != part["sha256"]:
                    raise SplitError(
                        f"part {part['file']}: size {psize} sha256 {ph.hexdigest()[:16]}..., "
                        f"manifest says size {part['size']} sha256 {part['sha256'][:16]}..."
                    )
                size += psize
        if size != m["size"] or whole.hexdigest() != m["sha256"]:
            raise SplitError(
                f"joined {m['name']}: size {size} sha256 {whole.hexdigest()}, "
                f"manifest says size {m['size']} sha256 {m['sha256']}"
            )
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wheelsplit", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("split", help="split FILE into OUTDIR/NAME.partNN + manifest")
    s.add_argument("file")
    s.add_argument("outdir")
    s.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="bytes per part (default 60 MiB)")
    j = sub.add_parser("join", help="join the parts of MANIFEST into OUTFILE, checking sha256")
    j.add_argument("manifest")
    j.add_argument("outfile")
    j.add_argument("--parts-dir", action="append", default=None, help="where to look for parts (repeatable)")
    c = sub.add_parser("check", help="report which parts of MANIFEST are present and intact")
    c.add_argument("manifest")
    c.add_argument("--parts-dir", action="append", default=None)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "split":
            mpath = split(a.file, a.outdir, a.limit)
            m = json.loads(mpath.read_text())
            print(json.dumps({"manifest": str(mpath), "parts": len(m["parts"]), "size": m["size"], "sha256": m["sha256"]}))
        elif a.cmd == "join":
            out = join(a.manifest, a.outfile, a.parts_dir)
            print(json.dumps({"joined": str(out), "sha256": sha256_file(out)}))
        else:
            res = check(a.manifest, a.parts_dir)
            print(json.dumps(res))
            return 0 if not (res["missing"] or res["corrupt"]) else 1
    except SplitError as e:
        print(f"wheelsplit: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
