"""Whom patchq trusts with files it reads back: the rule of git's ``safe.directory`` (standard library only).

A file or directory another user could have planted or can change is not trusted to hold
code, or anything that decides what runs or what is reported: it must be owned by the
current user or root and not writable by others (``o+w``). Group write is accepted, as
git's ``safe.directory`` accepts it (a group is a deliberate share). Since CVE-2022-24765
git refuses repositories owned by someone else for the same reason.

Users: a project config found by walking up (:mod:`patchq.discovery`, and the series it
names), and patchq's cache (:mod:`patchq.vllmdist.cache`: the root, plans, verdicts, stamps,
release trees, wheels, the definition index, hook directories). ``PATCHQ_SAFE_DIRECTORIES``
(:data:`SAFE_ENV`: directories, ``os.pathsep``-separated, or ``*``) opts a config's
directory or a cache root in. The import hook (``patchq/runtime/hook.py``) restates the rule
in its own words: it runs without patchq.
"""

from __future__ import annotations

import os
import stat

#: Directories whose walked-up config (or cache root) is trusted whoever owns it (``os.pathsep`` list, or ``*``).
SAFE_ENV = "PATCHQ_SAFE_DIRECTORIES"


def opted_in(directory: str) -> bool:
    """True when ``$PATCHQ_SAFE_DIRECTORIES`` lists ``directory`` (or is ``*``)."""
    value = os.environ.get(SAFE_ENV, "")
    for entry in value.split(os.pathsep):
        entry = entry.strip()
        if entry == "*" or (entry and os.path.realpath(os.path.expanduser(entry)) == directory):
            return True
    return False


def stat_problem(path: str, st: os.stat_result) -> str | None:
    """Why an entry with the stat ``st`` (of ``path``, named in the message) may not be
    trusted, or None: owned by someone other than the current user or root, or writable by
    others (``o+w``; a symlink's own mode is not looked at). Group write is accepted, as git's
    ``safe.directory`` accepts it: a group is a deliberate share. The one rule for walked-up
    configs (:mod:`patchq.discovery`) and patchq's cache (:mod:`patchq.vllmdist.cache`)."""
    me = os.geteuid() if hasattr(os, "geteuid") else None
    if me is None:  # pragma: no cover - not POSIX
        return None
    if st.st_uid not in (me, 0):
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {me}) or root"
    if st.st_mode & stat.S_IWOTH and not stat.S_ISLNK(st.st_mode):
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def ownership_problem(path: str) -> str | None:
    """Why ``path`` (a file or directory; a symlink is judged by itself and its target)
    may not be trusted to hold code for this user, or None: owned by someone other than
    the current user or root, or writable by others (:func:`stat_problem`)."""
    try:
        stats = [os.lstat(path)]
        if stat.S_ISLNK(stats[0].st_mode):
            stats.append(os.stat(path))
    except OSError:
        return None  # missing: nothing there to run
    for st in stats:
        problem = stat_problem(path, st)
        if problem:
            return problem
    return None
