"""Import and probe records into verdicts: a failing level makes a cell blocking.

A record (:mod:`patchq.probe.run`) whose ``result`` is ``fail`` at the ``import`` level
gives the cell the status ``fails-import``, at the ``probe`` level ``fails-probe``: the
patched vLLM does not import, or a case the patch carries fails, so applying it is not
safe, however cleanly it applies. ``not-probeable``, ``skip`` and ``stale`` records are
never a failure, and never a pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: the statuses a failed level gives a cell (added values of ``patchq.check/1``)
FAILS = {"import": "fails-import", "probe": "fails-probe"}
#: record results that are neither passed nor failed
NEUTRAL = ("skip", "stale", "not-probeable")


def failure(levels: Mapping[str, Mapping[str, Any]]) -> tuple[str, str] | None:
    """(status, reason) of the shallowest failed level among ``levels`` ({level: {"result",
    "detail"}}), or None."""
    for level in ("import", "probe"):
        rec = levels.get(level)
        if rec is not None and rec.get("result") not in ("ok", *NEUTRAL):
            return FAILS[level], f"{level} level failed: {rec.get('detail', '')}"
    return None


def block(row: dict[str, Any], levels: Mapping[str, Mapping[str, Any]]) -> None:
    """Make a check row (or matrix cell) blocking when a level of ``levels`` failed: its
    ``status`` becomes ``fails-import``/``fails-probe`` and its ``reason`` names the level,
    the case and the error; the source check's status stays in ``source_status`` (added)."""
    found = failure(levels)
    if found is None or row.get("blocking") and row.get("status") in FAILS.values():
        return
    status, reason = found
    row["source_status"] = row.get("status")
    row["status"], row["reason"], row["blocking"] = status, reason, True


def by_cell(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """{(target, patch): {level: record}} (the pristine records left out)."""
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in records:
        if r.get("profile") != "pristine":
            out.setdefault((str(r.get("profile")), str(r.get("patch"))), {})[str(r.get("level"))] = dict(r)
    return out


def cells(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One summary per (target, patch) (``patchq.probe/1``'s ``cells``)."""
    out = []
    for (target, patch), levels in by_cell(records).items():
        imp, probe = levels.get("import", {}).get("result"), levels.get("probe", {}).get("result")
        found = failure(levels)
        status = found[0] if found else "probe" if probe == "ok" and imp == "ok" else "import" if imp == "ok" \
            else imp or "skip"
        out.append({"target": target, "patch": patch, "import": imp, "probe": probe, "blocking": found is not None,
                    "status": status})
    return out


#: the ``--level`` values of ``check`` and ``matrix``
LEVELS = ("source", "probe")


def check_level(level: str | None) -> str:
    """``--level`` as given (default ``source``).

    Raises:
        UsageError: not one of :data:`LEVELS`.
    """
    from patchq.errors import UsageError

    value = level or "source"
    if value not in LEVELS:
        raise UsageError(f"--level {value!r}: use one of {', '.join(LEVELS)}")
    return value


def deepen_check(doc: dict[str, Any], records: Iterable[Mapping[str, Any]], target_of: Mapping[str, str],
                 why: str | None) -> None:
    """A ``patchq.check/1`` document with the import and probe levels: each row gets
    ``levels`` (added: {level: {"result", "detail"}}) from the records of its target
    (``target_of``: patch id -> the record's profile), and blocks as ``fails-import`` /
    ``fails-probe`` when a level failed (:func:`block`); ``counts``, ``ok`` and
    ``exit_code`` follow. ``why``: the release is not probeable (``probe`` added to the
    document: {"probeable", "why"})."""
    cells_ = by_cell(records)
    for row in doc["patches"]:
        levels = cells_.get((target_of.get(row["id"], ""), row["id"]), {})
        row["levels"] = {k: {"result": v.get("result"), "detail": v.get("detail", ""),
                             **({"cases": v["cases"]} if v.get("cases") else {})} for k, v in levels.items()}
        if not row.get("blocking"):
            block(row, levels)
    counts: dict[str, int] = {}
    for row in doc["patches"]:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    doc["counts"] = counts
    if any(r["blocking"] for r in doc["patches"]):
        doc["ok"], doc["exit_code"] = False, 1
    doc["probe"] = {"probeable": why is None, "why": why}
