"""Where this patchq came from, for every message that tells a user how to install it.

patchq is not on PyPI (a ``pip install patchq`` would install whatever someone else
registered under that name): it installs from its wheel or from a checkout. pip records
the file or directory it installed from in the dist-info's ``direct_url.json`` (PEP 610),
so a message can name exactly that. Standard library only.
"""

from __future__ import annotations

import json
import os
from urllib.parse import unquote, urlparse

#: The one sentence every install hint ends with when nothing better is known.
BUILD = "build the wheel from a checkout with `pip wheel --no-deps -w dist CHECKOUT` (patchq is not on PyPI)"


def installed_from(dist: str = "patchq") -> str | None:
    """The local wheel file or checkout directory this patchq (or the installed
    distribution ``dist``) was installed from (``direct_url.json``), or the checkout patchq
    runs from; None when unknown (a wheel installed from a URL, or the record is missing)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if dist == "patchq" and os.path.isfile(os.path.join(here, "pyproject.toml")):  # a checkout (editable, PYTHONPATH)
        return here
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        text = distribution(dist).read_text("direct_url.json")
    except (ImportError, PackageNotFoundError, OSError):
        return None
    try:
        record = json.loads(text or "{}")
        url = str(record.get("url", ""))
        vcs = record.get("vcs_info") or {}
    except (ValueError, AttributeError):
        return None
    if vcs.get("vcs") and vcs.get("commit_id"):  # pip install git+https://...@commit
        return f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return url or None
    return unquote(parsed.path)


def install_hint(python: str = "python") -> str:
    """``<python> -m pip install <what this patchq was installed from>``, or how to get a
    wheel when that is unknown."""
    source = installed_from()
    if source:
        return f"`{python} -m pip install {source}` (where this patchq was installed from)"
    return f"`{python} -m pip install patchq-X.Y.Z-py3-none-any.whl`; {BUILD}"
