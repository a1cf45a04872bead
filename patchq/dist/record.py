"""An installed distribution's metadata, read without importing it (standard library only).

The ``<name>-<version>.dist-info`` directory and its ``RECORD`` (PEP 376, PEP 627; the
wheel spec's ``sha256=<urlsafe base64 without padding>`` hashes). Used by the fast
paths (status, no-op apply), so it imports nothing beyond the standard library.
"""

from __future__ import annotations

import base64
import csv
import os


def dist_info_name(site: str, package: str = "vllm") -> str | None:
    """The name of ``<package>-*.dist-info`` in ``site`` (the newest if several), or None."""
    try:
        found = sorted(n for n in os.listdir(site) if n.startswith(package + "-") and n.endswith(".dist-info"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return found[-1] if found else None


def version_of(dist_info: str, package: str = "vllm") -> str:
    """The version in a dist-info directory name: ``vllm-0.23.0.dist-info`` -> ``0.23.0``."""
    return os.path.basename(dist_info)[len(package) + 1: -len(".dist-info")]


def hash_to_hex(value: str) -> str | None:
    """A RECORD hash field (``sha256=<urlsafe b64, no padding>``) as hex, or None."""
    algo, _, b64 = value.partition("=")
    if algo != "sha256" or not b64:
        return None
    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()


def read_record(dist_info: str, wanted: set[str] | None = None) -> dict[str, str]:
    """``dist_info/RECORD`` as relpath -> hex sha256 (rows without a hash left out;
    only the ``wanted`` relpaths when given)."""
    out: dict[str, str] = {}
    with open(os.path.join(dist_info, "RECORD"), newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            if len(row) >= 2 and row[1] and (wanted is None or row[0] in wanted):
                h = hash_to_hex(row[1])
                if h:
                    out[row[0]] = h
    return out
