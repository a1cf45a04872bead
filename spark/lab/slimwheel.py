"""Repack a vLLM wheel (plus dependency wheels) into one small tar.xz "bundle" for one GPU arch.

Why: the device machine takes at most 64 MiB per call and is given back 30 s after a call,
so every 60 MiB part of what must be carried is one more call that has to follow the last
at once. The vLLM 0.23.0 wheel is 274 MB (605 MB unpacked); xz alone barely shrinks it,
because its CUDA fat binaries are already compressed. What does shrink it is leaving out
what a boot on an H200 (sm_90) never loads:

* files dropped outright (``DROP_GLOBS``): the FlashAttention-2 extension
  (``vllm_flash_attn/_vllm_fa2_C.abi3.so``, 191 MB: on sm_90 vLLM picks FA3 and imports FA2
  inside ``try/except ImportError``), the Rust frontend binary ``vllm-rs`` (only used with
  ``VLLM_USE_RUST_FRONTEND``), DeepGEMM's extension builds for other Pythons
  (``_C.cpython-3{10,11,13,14}-*.so``; the device runs 3.12);
* inside the remaining extension modules, the payload bytes of every fat-binary entry that an
  sm_90 device can never select are overwritten with zeros (headers, sizes and offsets stay,
  so the ELF and fatbin layouts are unchanged and xz compresses the zeros away): SASS
  (cubin) entries for any other major arch (sm_75/80/86/89/100/120: SASS only runs on the
  major version it was built for), and PTX for archs above 9.0. PTX for archs <= 9.0 is kept,
  because a kernel without an sm_90 cubin is JIT-compiled from it.

The result is a tar.xz whose members are ``site/<top-level names>`` (vllm, its dist-info,
and every dependency wheel unpacked as ``pip install --target`` would), plus
``site/SLIM_MANIFEST.json`` recording what was dropped or zeroed. Extract it, put
``site`` on PYTHONPATH, run ``python -m vllm.entrypoints.cli.main serve``.

CLI::

    python spark/lab/slimwheel.py build WHEEL OUT.tar.xz [--deps-dir .whl] [--keep-sm 90] [--no-zero] [--xz-preset=-9]
    python spark/lab/slimwheel.py deps .whl OUT.tar.xz     # the dependency wheels alone, same layout
    python spark/lab/slimwheel.py probe FILE.so            # per-arch fatbin bytes, nothing written
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

DROP_GLOBS = [
    "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",
    "vllm/vllm-rs",
    "vllm/third_party/deep_gemm/_C.cpython-310-*.so",
    "vllm/third_party/deep_gemm/_C.cpython-311-*.so",
    "vllm/third_party/deep_gemm/_C.cpython-313-*.so",
    "vllm/third_party/deep_gemm/_C.cpython-314-*.so",
]

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2


class FatbinError(Exception):
    """An ELF or fat binary does not parse the way this module expects."""


def _elf_sections(buf: bytes | bytearray) -> dict[str, tuple[int, int]]:
    """Map section name -> (file offset, size) for a 64-bit little-endian ELF."""
    if buf[:4] != b"\x7fELF" or buf[4] != 2 or buf[5] != 1:
        raise FatbinError("not a 64-bit little-endian ELF")
    try:
        return _elf_sections_unchecked(buf)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as e:
        raise FatbinError(f"malformed ELF section table: {e}") from None


def _elf_sections_unchecked(buf: bytes | bytearray) -> dict[str, tuple[int, int]]:
    (e_shoff,) = struct.unpack_from("<Q", buf, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", buf, 0x3A)
    raw = []
    for i in range(e_shnum):
        name, _typ, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", buf, e_shoff + i * e_shentsize)
        raw.append((name, offset, size))
    stroff = raw[e_shstrndx][1]
    out = {}
    for name, offset, size in raw:
        end = buf.index(b"\0", stroff + name)
        out[bytes(buf[stroff + name : end]).decode()] = (offset, size)
    return out


def fatbin_entries(buf: bytes | bytearray):
    """Yield one dict per fat-binary entry in the ELF's ``.nv_fatbin`` section.

    Keys: ``pos`` (file offset of the entry header), ``kind`` (1 PTX, 2 ELF/cubin),
    ``header_size``, ``padded`` (payload bytes that follow the header), ``sm`` (e.g. 90).
    Layout (CUDA's fatbinary.h, stable since CUDA 4): a container header
    ``<u32 magic=0xBA55ED50, u16 version, u16 header_size, u64 fat_size>`` followed by
    entries ``<u16 kind, u16 version, u32 header_size, u32 padded_payload_size, ...,
    u32 sm_arch at +28>``, each payload directly after its header.

    Raises:
        FatbinError: no ``.nv_fatbin`` section, or an entry runs past its container.
    """
    secs = _elf_sections(buf)
    if ".nv_fatbin" not in secs:
        raise FatbinError("no .nv_fatbin section")
    off, size = secs[".nv_fatbin"]
    end = off + size
    p = off
    while p + 16 <= end:
        magic, _ver, hsz, fsz = struct.unpack_from("<IHHQ", buf, p)
        if magic != FATBIN_MAGIC:
            p += 8  # containers are 8-aligned; skip padding
            continue
        q = p + hsz
        qend = q + fsz
        if qend > end:
            raise FatbinError(f"fatbin container at {p} runs past the section")
        while q < qend:
            kind, _ev, ehsz, padded = struct.unpack_from("<HHII", buf, q)
            (sm,) = struct.unpack_from("<I", buf, q + 28)
            if q + ehsz + padded > qend:
                raise FatbinError(f"fatbin entry at {q} runs past its container")
            yield {"pos": q, "kind": kind, "header_size": ehsz, "padded": padded, "sm": sm}
            q += ehsz + padded
        p = qend


def _keep(entry: dict, keep_sm: set[int]) -> bool:
    if entry["kind"] == KIND_ELF:
        return entry["sm"] in keep_sm
    if entry["kind"] == KIND_PTX:
        return entry["sm"] <= max(keep_sm)
    return True  # unknown kinds: leave alone


def probe(path: str | os.PathLike) -> dict[str, dict[str, int]]:
    """Per-arch fat-binary payload bytes of an extension module: ``{"elf90": {"n":.., "bytes":..}, ...}``."""
    buf = Path(path).read_bytes()
    c: Counter = Counter()
    n: Counter = Counter()
    for e in fatbin_entries(buf):
        k = ("ptx" if e["kind"] == KIND_PTX else "elf" if e["kind"] == KIND_ELF else f"k{e['kind']}") + str(e["sm"])
        c[k] += e["padded"]
        n[k] += 1
    return {k: {"n": n[k], "bytes": c[k]} for k in sorted(c)}


def zero_foreign_entries(path: str | os.PathLike, keep_sm: set[int]) -> dict[str, int]:
    """Overwrite, in place, the payloads of fatbin entries an sm in ``keep_sm`` can't use.

    Kept: ELF (cubin) entries whose arch is in ``keep_sm``; PTX entries whose arch is
    <= max(keep_sm); entries of unknown kind. Everything else has its payload bytes set
    to 0; headers are untouched, so the file keeps its size and layout.

    Returns:
        ``{"entries": n, "zeroed": n, "zeroed_bytes": n}``; all zero when the file has no
        ``.nv_fatbin`` section (it is then left unchanged).
    """
    p = Path(path)
    buf = bytearray(p.read_bytes())
    try:
        entries = list(fatbin_entries(buf))
    except FatbinError:
        return {"entries": 0, "zeroed": 0, "zeroed_bytes": 0}
    zeroed = zeroed_bytes = 0
    for e in entries:
        if _keep(e, keep_sm):
            continue
        start = e["pos"] + e["header_size"]
        buf[start : start + e["padded"]] = bytes(e["padded"])
        zeroed += 1
        zeroed_bytes += e["padded"]
    if zeroed:
        p.write_bytes(bytes(buf))
    return {"entries": len(entries), "zeroed": zeroed, "zeroed_bytes": zeroed_bytes}


def _unpack_wheel(whl: Path, dest: Path) -> list[str]:
    with zipfile.ZipFile(whl) as z:
        z.extractall(dest)
        names = z.namelist()
    # zipfile drops the exec bit; restore it for files the wheel marked executable
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            mode = (info.external_attr >> 16) & 0o777
            if mode & 0o111:
                target = dest / info.filename
                if target.is_file():
                    target.chmod(mode)
    return names


PY_TAGS = ["--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none"]
PLATFORMS = ["manylinux1_x86_64", "manylinux2014_x86_64"] + [f"manylinux_2_{n}_x86_64" for n in range(5, 40)]


def install_target(wheels: list[Path], target: Path) -> None:
    """``pip install --no-deps --no-index --target`` the wheels for CPython 3.12 x86-64.

    Runs this interpreter's pip with the device machine's tags (any Python here), so
    ``.data`` folders and RECORDs are handled exactly as on the device. The local pip
    constraint file is switched off (PIP_CONSTRAINT='').

    Raises:
        subprocess.CalledProcessError: pip refused a wheel (wrong tag, duplicate name...).
    """
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
           "--only-binary=:all:", "--target", str(target), *PY_TAGS]
    for plat in PLATFORMS:
        cmd += ["--platform", plat]
    cmd += [str(w) for w in wheels]
    env = dict(os.environ, PIP_CONSTRAINT="", PIP_FIND_LINKS="", PIP_EXTRA_INDEX_URL="")
    subprocess.run(cmd, check=True, env=env)


def build(
    wheel: str | os.PathLike,
    out: str | os.PathLike,
    deps_dir: str | os.PathLike | None = None,
    keep_sm: set[int] | None = None,
    zero: bool = True,
    xz_preset: str = "-9",
    threads: int = 0,
) -> dict:
    """Build the slim bundle ``out`` (tar.xz) from a vLLM wheel and dependency wheels.

    Args:
        wheel: the vLLM wheel (any release; DROP_GLOBS that match nothing are ignored).
        out: output path, conventionally ``*.tar.xz``.
        deps_dir: folder of ``*.whl`` installed beside vLLM with
            ``pip install --no-deps --target`` for CPython 3.12 (see :func:`install_target`).
        keep_sm: GPU archs whose SASS is kept (default ``{90}``: H100/H200).
        zero: False keeps every fatbin entry (only files are dropped).
        xz_preset: xz compression flag; ``threads`` is passed as ``-T``.

    Returns:
        The manifest dict (also stored in the bundle as ``site/SLIM_MANIFEST.json``):
        dropped files, zeroed bytes per extension module, dependency wheels, sizes.

    Raises:
        FileNotFoundError: the wheel or deps_dir is missing.
        subprocess.CalledProcessError: ``tar``/``xz`` failed.
    """
    keep_sm = keep_sm or {90}
    wheel = Path(wheel)
    out = Path(out)
    manifest: dict = {
        "wheel": wheel.name,
        "keep_sm": sorted(keep_sm),
        "zeroed": zero,
        "dropped": [],
        "zeroed_files": {},
        "deps": [],
    }
    with tempfile.TemporaryDirectory(prefix="slimwheel-") as tmp:
        site = Path(tmp) / "site"
        site.mkdir()
        names = _unpack_wheel(wheel, site)
        for name in names:
            if any(fnmatch.fnmatch(name, g) for g in DROP_GLOBS):
                (site / name).unlink(missing_ok=True)
                manifest["dropped"].append(name)
        if zero:
            for so in sorted(site.rglob("*.so")):
                stats = zero_foreign_entries(so, keep_sm)
                if stats["zeroed"]:
                    manifest["zeroed_files"][str(so.relative_to(site))] = stats
        if deps_dir is not None:
            wheels = sorted(Path(deps_dir).glob("*.whl"))
            if wheels:
                install_target(wheels, site)
            manifest["deps"] = [w.name for w in wheels]
        manifest["unpacked_bytes"] = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
        (site / "SLIM_MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
        _tar_site(tmp, out, xz_preset, threads)
    manifest["bundle_bytes"] = out.stat().st_size
    return manifest


def _tar_site(tmp: str, out: Path, xz_preset: str, threads: int) -> None:
    """Write ``tmp/site`` as a reproducible tar.xz at ``out`` (sorted names, owner 0,
    mtime 0). Raises subprocess.CalledProcessError when tar fails."""
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, XZ_OPT=f"{xz_preset} -T{threads}")
    subprocess.run(
        ["tar", "--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0",
         "-cJf", str(out.resolve()), "site"],
        cwd=tmp, check=True, env=env,
    )


def build_deps(deps_dir: str | os.PathLike, out: str | os.PathLike, xz_preset: str = "-9", threads: int = 0) -> dict:
    """Bundle dependency wheels as one tar.xz of ``site/`` (``pip install --target`` layout).

    Kept apart from the vLLM bundle so that one deps bundle serves every vLLM release
    with the same requirements, and each vLLM bundle fits one call on its own.

    Returns:
        ``{"deps": [wheel names], "unpacked_bytes": n, "bundle_bytes": n}``.

    Raises:
        FileNotFoundError: no ``*.whl`` in ``deps_dir``.
        subprocess.CalledProcessError: pip or tar failed.
    """
    wheels = sorted(Path(deps_dir).glob("*.whl"))
    if not wheels:
        raise FileNotFoundError(f"no *.whl in {deps_dir}")
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="slimdeps-") as tmp:
        site = Path(tmp) / "site"
        install_target(wheels, site)
        manifest = {"deps": [w.name for w in wheels]}
        manifest["unpacked_bytes"] = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
        (site / "DEPS_MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
        _tar_site(tmp, out, xz_preset, threads)
    manifest["bundle_bytes"] = out.stat().st_size
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="slimwheel", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("wheel")
    b.add_argument("out")
    b.add_argument("--deps-dir", default=None)
    b.add_argument("--keep-sm", type=int, action="append", default=None)
    b.add_argument("--no-zero", action="store_true")
    b.add_argument("--xz-preset", default="-9")
    b.add_argument("--threads", type=int, default=0)
    d = sub.add_parser("deps", help="bundle the wheels of DEPS_DIR as one tar.xz")
    d.add_argument("deps_dir")
    d.add_argument("out")
    d.add_argument("--xz-preset", default="-9")
    d.add_argument("--threads", type=int, default=0)
    p = sub.add_parser("probe")
    p.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        m = build(a.wheel, a.out, a.deps_dir, set(a.keep_sm) if a.keep_sm else None, not a.no_zero, a.xz_preset, a.threads)
        summary = {k: m[k] for k in ("wheel", "keep_sm", "dropped", "unpacked_bytes", "bundle_bytes")}
        summary["zeroed_bytes"] = sum(v["zeroed_bytes"] for v in m["zeroed_files"].values())
        summary["deps"] = len(m["deps"])
        print(json.dumps(summary, indent=1))
    elif a.cmd == "deps":
        m = build_deps(a.deps_dir, a.out, a.xz_preset, a.threads)
        print(json.dumps({"deps": len(m["deps"]), "unpacked_bytes": m["unpacked_bytes"], "bundle_bytes": m["bundle_bytes"]}))
    else:
        for f in a.files:
            try:
                print(f, json.dumps(probe(f)))
            except FatbinError as e:
                print(f, f"no fatbin: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
