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
``series``. Exit 0; 2 for an unknown profile or a malformed table.
"""

from __future__ import annotations

import os
import re
import sys

from patchq.errors import EXIT_OK, SeriesError
from patchq.series import Series

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

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
    path = series.root / "profiles.toml"
    table = tomllib.loads(path.read_text(encoding="utf-8"))["profiles"][profile].get("serve", {})
    if not isinstance(table, dict):
        raise SeriesError(f"{path}: profiles.{profile}.serve must be a table")
    args, env = table.get("args", []), table.get("env", {})
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise SeriesError(f"{path}: profiles.{profile}.serve.args must be a list of strings")
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise SeriesError(f"{path}: profiles.{profile}.serve.env must map names to strings")
    return {"args": args, "env": env}


def run(series: Series, profile: str, environ: dict | None = None) -> tuple[dict, int]:
    """The expanded flags of ``profile``. Returns (document, exit code)."""
    table = serve_table(series, profile)
    doc = {"schema": SCHEMA, "profile": profile,
           "args": [expand(a, environ) for a in table["args"]],
           "env": {k: expand(v, environ) for k, v in table["env"].items()},
           "series": series.location.as_json() if series.location else None}
    return doc, EXIT_OK


def render_text(doc: dict, env: bool = False) -> str:
    """One argument (or ``NAME=value``) per line."""
    rows = [f"{k}={v}" for k, v in doc["env"].items()] if env else doc["args"]
    return "".join(r + "\n" for r in rows)
