"""An installed distribution's metadata, read without importing it (standard library only).

The ``<name>-<version>.dist-info`` directory and its ``RECORD`` (PEP 376, PEP 627; the
wheel spec's ``sha256=<urlsafe base64 without padding>`` hashes). Used by the fast
paths (status, no-op apply), so it imports nothing beyond the standard library.

Several ``vllm-*.dist-info`` in one site-packages (an interrupted or buggy installer):
the one whose RECORD owns the installed files (:data:`OWNER_PROBES` hash as RECORD says)
is used; when none or several do, :class:`patchq.errors.TargetNotFound` names them
(exit 3). Directory names are never compared as strings to pick "the newest".
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import re

#: files whose RECORD hashes decide which of several dist-infos owns the installed package
OWNER_PROBES = ("{package}/_version.py", "{package}/version.py", "{package}/__init__.py")


def dist_info_names(site: str, package: str = "vllm") -> list[str]:
    """Every ``<package>-*.dist-info`` directory name in ``site``, sorted."""
    try:
        return sorted(n for n in os.listdir(site) if n.startswith(package + "-") and n.endswith(".dist-info")
                      and os.path.isdir(os.path.join(site, n)))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def _owns(site: str, name: str, package: str) -> bool:
    """True when the RECORD of ``name`` lists the probe files with their current hashes."""
    probes = {p.format(package=package) for p in OWNER_PROBES}
    try:
        rec = read_record(os.path.join(site, name), probes)
    except Exception:  # an unreadable RECORD owns nothing
        return False
    if not rec:
        return False
    for rel, want in rec.items():
        try:
            with open(os.path.join(site, rel), "rb") as fh:
                if hashlib.sha256(fh.read()).hexdigest() != want:
                    return False
        except OSError:
            return False
    return True


def dist_info_name(site: str, package: str = "vllm") -> str | None:
    """The name of the ``<package>-*.dist-info`` of ``site`` (None when there is none).

    Raises:
        TargetNotFound: several, and not exactly one of them owns the installed files.
    """
    found = dist_info_names(site, package)
    if len(found) <= 1:
        return found[0] if found else None
    owners = [n for n in found if _owns(site, n, package)]
    if len(owners) == 1:
        return owners[0]
    from patchq.errors import TargetNotFound

    raise TargetNotFound(f"{len(found)} {package} distributions in {site} ({', '.join(found)}) and "
                         f"{'none' if not owners else 'more than one'} of them owns the installed files; "
                         f"reinstall {package} (pip install --force-reinstall --no-deps {package}==X)")


def version_of(dist_info: str, package: str = "vllm") -> str:
    """The version in a dist-info directory name: ``vllm-0.23.0.dist-info`` -> ``0.23.0``."""
    return os.path.basename(dist_info)[len(package) + 1: -len(".dist-info")]


_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)((?:[-_.]?[a-z]+[-_.]?\d*)*)(\+[a-z0-9.]+)?")


def same_version(a: str | None, b: str | None) -> bool:
    """True when two version strings name the same PEP 440 version (``0.23`` equals
    ``0.23.0``; ``0.10.0`` is not ``0.1.0``). A standard-library subset of PEP 440
    normalization for the fast path; strings it cannot parse compare as strings."""
    if a == b:
        return True
    if a is None or b is None:
        return False

    def key(v: str):
        m = _VERSION.fullmatch(v.strip().lower())
        if not m:
            return v
        release = [int(x) for x in m.group(1).split(".")]
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        rest = re.sub(r"[-_.]", "", m.group(2) or "")
        return (tuple(release), rest, (m.group(3) or "").replace("-", ".").replace("_", "."))

    return key(a) == key(b)


def hash_to_hex(value: str) -> str | None:
    """A RECORD hash field (``sha256=<urlsafe b64, no padding>``) as hex, or None."""
    algo, _, b64 = value.partition("=")
    if algo != "sha256" or not b64:
        return None
    try:
        return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
    except (ValueError, TypeError):
        return None


def read_record(dist_info: str, wanted: set[str] | None = None) -> dict[str, str]:
    """``dist_info/RECORD`` as relpath -> hex sha256 (rows without a hash left out;
    only the ``wanted`` relpaths when given).

    Raises:
        TargetNotFound: RECORD is missing, unreadable, not UTF-8 or not CSV (the
            distribution is damaged: reinstall it).
    """
    out: dict[str, str] = {}
    path = os.path.join(dist_info, "RECORD")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                if len(row) >= 2 and row[1] and (wanted is None or row[0] in wanted):
                    h = hash_to_hex(row[1])
                    if h:
                        out[row[0]] = h
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        from patchq.errors import TargetNotFound

        why = "missing" if isinstance(exc, FileNotFoundError) else f"unreadable ({exc.__class__.__name__}: {exc})"
        raise TargetNotFound(f"{path} is {why}: the vllm install is damaged; reinstall it "
                             f"(pip install --force-reinstall --no-deps vllm==X)") from None
    return out
