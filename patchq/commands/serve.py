"""``patchq serve-args --profile NAME``: the ``vllm serve`` flags a profile declares.

A profile of ``series/profiles.toml`` may carry a ``serve`` table::

    [profiles.dflash.serve]
    args = ["--speculative-config", '{"method":"dflash","model":"${DRAFTER:-/drafter}","num_speculative_tokens":${NUM_SPEC_TOKENS:-12}}']
    env = {VLLM_USE_V1 = "1"}

``args`` are appended to ``vllm serve MODEL ...`` by ``runtime/serve.sh``; ``env`` is
exported first. ``${NAME}`` and ``${NAME:-default}`` in either are expanded from the
environment (``$$`` is a literal ``$``), so a profile's defaults stay overridable. A
profile without a ``serve`` table serves with the generic flags only.

Output: one argument per line; with ``--env``, ``NAME=value`` lines instead. The JSON
document ``patchq.serve-args/1``: ``profile``, ``args`` [text], ``env`` {name: value},
``env_withheld`` (null, or why ``env`` is empty: :func:`env_withheld`), ``series``. Exit
0; 2 for an unknown profile or a malformed table, and for ``--env`` when the env of a
series found by walking up is withheld.
"""

from __future__ import annotations

import os
import re

from patchq.errors import EXIT_OK, SeriesError, UsageError
from patchq.series import Series

SCHEMA = "patchq.serve-args/1"
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand(text: str, environ: dict | None = None) -> str:
    """``text`` with ``${NAME}`` / ``${NAME:-default}`` expanded (``$$``: a literal ``$``)."""
    env = os.environ if environ is None else environ

    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        value = env.get(m.group(1))
        return value if value else (m.group(2) or "")

    return _VAR.sub(one, text)


def serve_table(series: Series, profile: str) -> dict:
    """The raw ``serve`` table of ``profile`` ({} when none). Raises UsageError / SeriesError."""
    series.profile(profile)  # unknown profile: UsageError listing the known ones
    from patchq.hashing import read_toml

    path = series.root / "profiles.toml"
    table = read_toml(path)["profiles"][profile].get("serve", {})
    if not isinstance(table, dict):
        raise SeriesError(f"{path}: profiles.{profile}.serve must be a table")
    args, env = table.get("args", []), table.get("env", {})
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise SeriesError(f"{path}: profiles.{profile}.serve.args must be a list of strings")
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise SeriesError(f"{path}: profiles.{profile}.serve.env must map names to strings")
    return {"args": args, "env": env}


def env_withheld(series: Series) -> str | None:
    """Why the ``serve.env`` of ``series`` is not passed on, or None.

    A series found by walking up to a ``patchq.toml`` (origin ``config``) was not chosen
    explicitly: its environment (which ``runtime/serve.sh`` exports: ``LD_PRELOAD``,
    ``PYTHONPATH``, ...) is withheld unless the series is named with ``--series`` or
    ``$PATCHQ_SERIES`` (``SERIES=DIR`` for ``serve.sh``); the bundled series is patchq's own.
    """
    loc = series.location
    if loc is None or loc.origin != "config":
        return None
    where = os.path.dirname(loc.config_str or loc.series_str)
    return (f"the serve env of this series is withheld: it was found by walking up to {loc.config_str}, not "
            f"chosen explicitly; pass --series {where} (serve.sh: SERIES={where}) to use it")


def run(series: Series, profile: str, environ: dict | None = None, want_env: bool = False) -> tuple[dict, int]:
    """The expanded flags of ``profile``. Returns (document, exit code).

    ``env`` is ``{}`` and ``env_withheld`` says why when :func:`env_withheld` (an added
    field, null otherwise).

    Raises:
        UsageError: ``want_env`` (``--env``) and the profile's env is withheld.
    """
    table = serve_table(series, profile)
    withheld = env_withheld(series) if table["env"] else None
    if withheld and want_env:
        raise UsageError(withheld)
    doc = {"schema": SCHEMA, "profile": profile,
           "args": [expand(a, environ) for a in table["args"]],
           "env": {} if withheld else {k: expand(v, environ) for k, v in table["env"].items()},
           "env_withheld": withheld,
           "series": series.location.as_json() if series.location else None}
    return doc, EXIT_OK


def render_text(doc: dict, env: bool = False) -> str:
    """One argument (or ``NAME=value``) per line."""
    rows = [f"{k}={v}" for k, v in doc["env"].items()] if env else doc["args"]
    return "".join(r + "\n" for r in rows)
