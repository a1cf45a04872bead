"""The matrix's boot level: every boot run of a profile, grouped under that profile's row.

``lab/boot.py`` boots several runs per profile and release (``dflash`` with prefix caching on
and off, in disk and in runtime mode (``patchq run``), ``dense`` with the bf16 lm-head for a
greedy comparison) plus negative controls: profiles named ``<profile>-minus-<patch>`` that
revert one patch of ``<profile>`` and are expected to fail with a known error. This module
turns those records into one entry per (profile row, release)::

    {"result": "serves", "boot_s": 223.2, "error_line": "",   # the primary run (below)
     "primary": "dflash",
     "verdict": "ok" | "unexpected" | "fail",                 # worst verdict of the runs
     "runs": [RUN, ...]}                                      # every run, controls last

    RUN = {"run": "neg-unify", "profile": "dflash-minus-unify", "mode": "disk" | "runtime",
           "control": true, "reverted": ["unify-kv-page"], "prefix_caching": false,
           "result": "serves" | "fails", "expected": "fails", "expected_error": "…",
           "as_expected": false, "verdict": VERDICT, "boot_s": 132.1, "error_line": "",
           "drafts": 46.0, "draft_tokens": 552.0, "accepted": 0.0,
           "site_pristine": true,                         # runtime mode only
           "compare": {"with": "dense", "same_token_ids": false, "first_diff": 22},
           "note": "…",                                   # reverted patch's variant note
           "text": "neg-unify SERVES (expected to fail: …)"}

VERDICT: ``serves`` (served, as expected), ``fails-as-expected`` (a control failed with its
known error), ``serves-unexpectedly`` (a control served: without the reverted patch this
release no longer hits the error, evidence about upstream rather than a fault of patchq),
``fails-upstream`` (it failed, and an unpatched run of the same release and level, a record
with no profile and nothing applied such as ``lab/cpuboot.py run --pristine``'s, failed with
the same error line: the release's own failure; the RUN names it in ``upstream_control``),
``fails`` (failed though it should serve, or failed with another error than expected).

The primary run, whose result sets the cells' ``boot`` level (:func:`patchq.compat.matrix.merge_levels`),
is the non-control run named like the profile, else the first non-control run; a row with
only controls has no primary (``result`` null).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from patchq.report import clip

CONTROL_SEP = "-minus-"  # lab/boot.py's negseries: "<profile>-minus-<patch>"
#: the result (and verdict) of a run a CPU cannot boot (lab/cpuboot.py): never a failure
NOT_CPU = "not-cpu-bootable"
#: the levels boot records can carry (``level``; absent: ``boot``, the GPU lab's records)
BOOT_LEVELS = ("cpu-boot", "boot")
_SERVES = ("ok", "pass", "passed", "ready", "serves", "true")
#: a failure an unpatched run of the release shares (:func:`group`): upstream's, not the patches'
UPSTREAM = "fails-upstream"
_RANK = {"serves": 0, "fails-as-expected": 0, NOT_CPU: 0, "serves-unexpectedly": 1, UPSTREAM: 1, "fails": 2}
#: record fields a RUN keeps when present
_KEPT = ("drafts", "draft_tokens", "accepted", "site_pristine", "scope", "reason", "peak_rss_mb", "load")
_ROW_VERDICT = {0: "ok", 1: "unexpected", 2: "fail"}


def serves(result: object) -> bool:
    """Whether a boot ``result`` passes (``serves``, ``ok``, …)."""
    return str(result).lower() in _SERVES


def row_profile(profile: str) -> str:
    """The profile row a run belongs to: ``dflash-minus-unify`` -> ``dflash``."""
    return profile.split(CONTROL_SEP, 1)[0]


def _secs(value: object) -> str:
    if not isinstance(value, (int, float, str)):  # None, or not a number in the record's JSON
        return "? s"
    try:
        return f"{float(value):.0f} s"
    except (TypeError, ValueError):
        return "? s"


def _expectation(rec: dict, control: bool, result: str, error_line: str) -> tuple[str, str, bool]:
    """(expected result, expected error text, as_expected) of a record (:func:`summarize`)."""
    given = rec.get("expected")
    exp = given if isinstance(given, dict) else {}
    expected = str(exp.get("result") or ("fails" if control else "serves"))
    as_expected = rec.get("as_expected")
    if as_expected is None:
        as_expected = result == expected and (not exp.get("error") or exp["error"] in error_line)
    return expected, str(exp.get("error") or ""), bool(as_expected)


def _verdict(result: str, expected: str, as_expected: bool) -> str:
    if result == NOT_CPU:
        return NOT_CPU
    if result == "serves":
        return "serves" if expected == "serves" else "serves-unexpectedly"
    return "fails-as-expected" if expected == "fails" and as_expected else "fails"


def _result(value: object) -> str:
    return NOT_CPU if value == NOT_CPU else "serves" if serves(value) else "fails"


def _reverted(run: dict, rec: dict, row: str, release: str, series) -> None:
    """Name the patches a control reverted (the row's patches minus ``patches_applied``, less
    those ``patchq_status`` calls ``upstreamed``) and their variant notes into ``run``
    (``reverted``, ``note``)."""
    try:
        patches = list(series.profile(row).patches)
    except Exception:  # a row the series does not know: no patch names
        patches = []
    applied = rec.get("patches_applied")
    given = rec.get("patchq_status")
    status: dict = given if isinstance(given, dict) else {}
    if isinstance(applied, list):  # an upstreamed patch is in the control's profile, not reverted
        run["reverted"] = [p for p in patches if p not in applied and status.get(p) != "upstreamed"]
    notes = []
    for pid in run["reverted"]:
        variant = series.patch(pid).variant_for(release)
        if variant is not None and variant.note:
            notes.append(f"{pid} {variant.applies}: {variant.note}")
    if notes:
        run["note"] = "; ".join(notes)


def summarize(rec: dict, release: str, series=None) -> dict:
    """One run (a ``lab/boot.py`` or ``lab/cpuboot.py`` record) as a RUN entry (module
    docstring), with its ``text``.

    Args:
        rec: the record; ``expected`` may be a dict (``{"result", "error"}``) or absent
            (then controls are expected to fail, other runs to serve).
        release: normalized version, for the reverted patch's variant note.
        series: a loaded :class:`patchq.series.Series`, to name the reverted patches
            (profile patches minus ``patches_applied``) and their variant notes; optional.
    """
    profile = str(rec.get("profile") or "")
    row = row_profile(profile)
    control = profile != row
    result = _result(rec.get("result"))
    error_line = str(rec.get("error_line") or "")
    expected, expected_error, as_expected = _expectation(rec, control, result, error_line)
    run: dict[str, Any] = {
        "run": str(rec.get("run") or profile), "profile": profile,
        "mode": "runtime" if rec.get("mode") == "run" or "site_pristine" in rec else "disk",
        "control": control, "reverted": [], "prefix_caching": rec.get("prefix_caching"),
        "result": result, "expected": expected, "expected_error": expected_error,
        "as_expected": as_expected, "verdict": _verdict(result, expected, as_expected), "boot_s": rec.get("boot_s"),
        "error_line": error_line,
    }
    for key in _KEPT:
        if rec.get(key) is not None:
            run[key] = rec[key]
    cmp_ = rec.get("compare")
    if isinstance(cmp_, dict):
        other = [r for r in cmp_.get("runs", []) if r != run["run"]]
        run["compare"] = {"with": other[0] if other else None, "same_token_ids": cmp_.get("same_token_ids"),
                          "first_diff": cmp_.get("first_diff")}
    if control and series is not None:
        _reverted(run, rec, row, release, series)
    run["text"] = run_text(run, release)
    return run


def run_text(run: dict, release: str = "") -> str:
    """One line for a run, e.g. ``dflash-run (runtime) ok 203 s, site pristine`` or
    ``neg-unify fails as expected: assert new_spec.page_size_bytes == max_page_size``."""
    name = run["run"] + (" (runtime)" if run.get("mode") == "runtime" else "")
    if run.get("scope") == "engine-init":
        name += " (engine init only)"
    verdict = run["verdict"]
    if verdict == NOT_CPU:
        return f"{name} not CPU-bootable: {run.get('reason') or 'no reason recorded'}"
    if verdict == "serves":
        text = f"{name} ok {_secs(run.get('boot_s'))}"
        if run.get("mode") == "runtime" and "site_pristine" in run:
            text += ", site pristine" if run["site_pristine"] else ", SITE MODIFIED"
        cmp_ = run.get("compare")
        if cmp_:
            text += (f", greedy = {cmp_['with']}" if cmp_.get("same_token_ids")
                     else f", greedy differs from {cmp_['with']} at token {cmp_.get('first_diff')}")
        return text
    error = _clip(run["error_line"]) or "no error line"
    if verdict == UPSTREAM:
        return (f"{name} fails unpatched too: upstream ({run['upstream_control']}, nothing applied, fails the same "
                f"way on {release or 'this release'}: {error})")
    if verdict == "fails-as-expected":
        return f"{name} fails as expected: {error}"
    if verdict == "serves-unexpectedly":
        without = ", ".join(run.get("reverted") or []) or "the reverted patch"
        return (f"{name} {'INITS' if run.get('scope') == 'engine-init' else 'SERVES'}, not as expected: "
                f"without {without} no '{run['expected_error'] or 'error'}' on {release or 'this release'}")
    if run["expected"] == "fails":
        return f"{name} FAILS with another error than '{run['expected_error']}': {error}"
    return f"{name} FAILS: {error}"


def _clip(text: str, n: int = 160) -> str:
    return clip(text, n)


def _order(run: dict) -> tuple:
    # normal runs, then runtime mode, then negative controls; by name within each
    return (run["control"], run["mode"] == "runtime", run["run"])


def record_level(rec: dict) -> str:
    """A boot record's level: its ``level`` (``cpu-boot`` from ``lab/cpuboot.py``), else ``boot``."""
    return str(rec.get("level") or "boot")


def _unpatched_failures(records: list[dict], norm, level: str) -> dict[tuple[str, str], str]:
    """(release, error line) -> the run name of each failed unpatched run of ``level``: a
    record with no profile and an empty ``patches_applied`` (the release as it ships)."""
    out: dict[tuple[str, str], str] = {}
    for rec in records:
        if (not rec.get("profile") and rec.get("patches_applied") == [] and record_level(rec) == level
                and _result(rec.get("result")) == "fails" and rec.get("error_line")):
            out.setdefault((norm(rec.get("release")), str(rec["error_line"])), str(rec.get("run") or "unpatched"))
    return out


def group(records: Iterable[dict], profiles: Iterable[str], series=None, norm=str, level: str = "boot") -> dict:
    """Every boot record of ``level`` (:data:`BOOT_LEVELS`) under its profile row:
    ``{profile: {release: ENTRY}}`` (module docstring).

    Records of rows not in ``profiles`` and of another level are dropped. ``norm``
    normalizes release strings.
    """
    wanted = set(profiles)
    records = list(records)
    unpatched = _unpatched_failures(records, norm, level)
    per: dict[tuple[str, str], list[dict]] = {}
    for rec in records:
        row = row_profile(str(rec.get("profile") or ""))
        if row in wanted and record_level(rec) == level:
            release = norm(rec.get("release"))
            run = summarize(rec, release, series)
            control = unpatched.get((release, run["error_line"])) if run["verdict"] == "fails" else None
            if control is not None and run["error_line"]:
                run["verdict"], run["upstream_control"] = UPSTREAM, control
                run["text"] = run_text(run, release)
            per.setdefault((row, release), []).append(run)
    out: dict[str, dict] = {name: {} for name in profiles}
    for (row, release), runs in per.items():
        runs.sort(key=_order)
        plain = [r for r in runs if not r["control"]]
        primary = next((r for r in plain if r["run"] == row), plain[0] if plain else None)
        out[row][release] = {
            "result": primary["result"] if primary else None,
            "boot_s": primary["boot_s"] if primary else None,
            "error_line": primary["error_line"] if primary else "",
            "primary": primary["run"] if primary else None,
            "verdict": _ROW_VERDICT[max(_RANK[r["verdict"]] for r in runs)],
            "runs": runs,
        }
    return out
