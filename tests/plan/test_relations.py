"""Patches that know each other and know upstream, on real vLLM releases.

Evidence, all on real wheels' trees (patchq's release cache) and real libcst parses:

* constructed series (tiny patches written here, anchored on vLLM 0.23.0's
  ``unify_kv_cache_spec_page_size`` and ``LogitsProcessor``) where two patches touch one
  statement, a later patch rewrites an earlier one with and without ``supersedes``, and
  requirements are missing, out of order, cyclic or conflicting;
* source trees built from the real 0.23.0 release with one edit each: a release that
  already has page-scale's change (re-wrapped, with a comment), one that has only one
  of fp8-experts's edits, and one that already defines a method a patch adds;
* edits refused by meaning: a transform returning None / a string / a module / another
  definition, a pattern on a docstring, an undefined name, a redefinition;
* apply on a real 0.23.0 site whose file already carries the change (RECORD updated,
  as a release would ship it): skipped with a note, journalled, shown by ``status``;
  ``--strict`` refuses it;
* the stack fixture's five patches without their hand-written ``upstream_check`` (a copied
  series) on real releases and on trees where each change is already merged: no verdict
  applies a change a second time (``tests/testing/upstream_table.py`` prints the full table).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.compat import check
from patchq.errors import SeriesError
from patchq.plan import engine
from patchq.vllmdist import releases, sources

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "drift"))

import corpus  # noqa: E402
from support import replace_file  # noqa: E402
from testing import stack, upstream_table  # noqa: E402

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

KV = "vllm/v1/core/kv_cache_utils.py"
INC = "vllm/model_executor/layers/quantization/inc.py"
LOGITS = "vllm/model_executor/layers/logits_processor.py"
SCALED = "new_spec = replace(layer_spec, block_size=new_block_size)"
UNIFY_ANCHOR = {"module": "vllm.v1.core.kv_cache_utils", "qualname": "unify_kv_cache_spec_page_size",
                "node": SCALED}
PADDED = "new_spec = replace(new_spec, page_size_padded=max_page_size)"


def release_tree(version: str) -> Path:
    try:
        return releases.release_tree(version)
    except Exception as exc:  # offline without a cached wheel
        pytest.skip(f"vllm {version} not available: {exc}")


# ---------------------------------------------------------------------------
# constructed series


def write_series(root: Path, patches: dict[str, tuple[str, dict]], profiles: dict[str, list[str]]) -> Path:
    """A series directory under ``root``: patch id -> (body of its module after the
    imports, {anchor id: anchor table}); profile name -> patch ids."""
    (root / "series").mkdir(parents=True)
    (root / "anchors").mkdir()
    lines = []
    for name, ids in profiles.items():
        lines += [f"[profiles.{name}]", f"patches = {json.dumps(ids)}", ""]
    (root / "series" / "profiles.toml").write_text("\n".join(lines))
    for pid, (body, anchors) in patches.items():
        head = "import libcst as cst\nfrom patchq import edits\nfrom patchq.series import patch, variant\n\n"
        (root / "series" / (pid.replace("-", "_") + ".py")).write_text(head + textwrap.dedent(body))
        toml = []
        for aid, table in anchors.items():
            toml.append(f"[anchors.{aid}]")
            toml += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
            toml.append("")
        (root / "anchors" / f"{pid}.toml").write_text("\n".join(toml))
    return root / "series"


def patch_src(pid: str, fn: str, anchor: str = "a", **kw) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in kw.items())
    return f"""
    {fn}

    PATCH = patch(id={pid!r}, summary="t", why="t", applies=">=0.15",
                  variants=[variant(">=0.15", edits={{{anchor!r}: edit}})]{extra})
    """


INSERT_PADDED = f"""def edit(defn, found, ctx):
        (line,) = found
        return edits.insert_after(defn, line, edits.stmts({PADDED!r}))"""
SWAP_SCALED = """def edit(defn, found, ctx):
        (line,) = found
        return edits.replace(defn, line, edits.stmts(
            "new_spec = replace(layer_spec, block_size=new_block_size * 1)"))"""
REWRITE_PADDED = """def edit(defn, found, ctx):
        (line,) = found
        return edits.replace(defn, line, edits.stmts(
            "new_spec = replace(new_spec, page_size_padded=max_page_size, block_size=new_block_size)"))"""


def plan_rows(series_root: Path, profile: str, source=None) -> dict:
    s = series_mod.load(series_root)
    src = source or sources.release_source("0.23.0")
    return {r.id: r for r in check.check(src, s.patches_of(profile))}


@pytest.fixture
def rel_series(tmp_path):
    """pad-after (inserts PADDED after the scaled replace), swap (replaces the scaled
    replace), and three rewrites of pad-after's statement: undeclared, requires-only,
    supersedes."""
    padded_anchor = {"module": "vllm.v1.core.kv_cache_utils", "qualname": "unify_kv_cache_spec_page_size",
                     "node": PADDED}
    patches = {
        "pad-after": (patch_src("pad-after", INSERT_PADDED), {"a": UNIFY_ANCHOR}),
        "swap": (patch_src("swap", SWAP_SCALED), {"a": UNIFY_ANCHOR}),
        "rewrite-undeclared": (patch_src("rewrite-undeclared", REWRITE_PADDED), {"a": padded_anchor}),
        "rewrite-requires": (patch_src("rewrite-requires", REWRITE_PADDED, requires=["pad-after"]),
                             {"a": padded_anchor}),
        "rewrite-supersedes": (patch_src("rewrite-supersedes", REWRITE_PADDED, supersedes=["pad-after"]),
                               {"a": padded_anchor}),
    }
    profiles = {
        "swap-then-pad": ["swap", "pad-after"],
        "pad-then-swap": ["pad-after", "swap"],
        "undeclared": ["pad-after", "rewrite-undeclared"],
        "requires": ["pad-after", "rewrite-requires"],
        "supersedes": ["pad-after", "rewrite-supersedes"],
    }
    return write_series(tmp_path / "p", patches, profiles)


def test_two_patches_on_one_statement_replaced_is_an_interaction(rel_series):
    rows = plan_rows(rel_series, "swap-then-pad")
    assert rows["swap"].status == "applies-drifted" or rows["swap"].status == "applies"
    row = rows["pad-after"]
    assert (row.status, row.blocking) == ("interaction", True)
    assert "anchor a of pad-after matches `new_spec = replace(layer_spec, block_size=new_block_size)`" in row.reason
    assert "unify_kv_cache_spec_page_size (vllm/v1/core/kv_cache_utils.py:1063)" in row.reason
    assert "swap (earlier in the profile) replaced it" in row.reason
    assert check.exit_code(rows.values()) == 1


def test_two_patches_on_one_statement_both_surviving_apply(rel_series):
    rows = plan_rows(rel_series, "pad-then-swap")
    assert {r.status for r in rows.values()} <= {"applies", "applies-drifted"}
    s = series_mod.load(rel_series)
    plan = engine.plan(sources.release_source("0.23.0"), s.patches_of("pad-then-swap"))
    text = plan.patched[KV]
    assert "block_size=new_block_size * 1)" in text and PADDED in text


def test_rewrite_without_declaration_is_an_interaction(rel_series):
    row = plan_rows(rel_series, "undeclared")["rewrite-undeclared"]
    assert (row.status, row.blocking) == ("interaction", True)
    assert ("anchor a of rewrite-undeclared matches `new_spec = replace(new_spec, page_size_padded=max_page_size)` "
            "in unify_kv_cache_spec_page_size (vllm/v1/core/kv_cache_utils.py), which pad-after added") in row.reason


def test_rewrite_with_requires_only_fails_survival(rel_series):
    rows = plan_rows(rel_series, "requires")
    assert rows["pad-after"].status in ("applies", "applies-drifted")
    row = rows["rewrite-requires"]
    assert (row.status, row.blocking) == ("interaction", True)
    assert ("interaction: rewrite-requires removes what pad-after changed in unify_kv_cache_spec_page_size "
            "(vllm/v1/core/kv_cache_utils.py:1029): `new_spec = replace(new_spec, page_size_padded=max_page_size)` "
            "is gone from the planned text; declare supersedes=['pad-after']") in row.reason
    assert row.relations["requires"] == ["pad-after"]


def test_rewrite_with_supersedes_marks_the_earlier_patch_superseded(rel_series):
    rows = plan_rows(rel_series, "supersedes")
    first, later = rows["pad-after"], rows["rewrite-supersedes"]
    assert (first.status, first.blocking) == ("superseded", False)
    assert first.reason.startswith("superseded by rewrite-supersedes: it rewrites "
                                   "`new_spec = replace(new_spec, page_size_padded=max_page_size)`")
    assert first.relations["superseded_by"] == ["rewrite-supersedes"]
    assert later.status in ("applies", "applies-drifted") and later.relations["supersedes"] == ["pad-after"]
    assert check.exit_code(rows.values()) == 0


def test_superseded_patch_is_journalled_and_shown_by_status(rel_series, site, cli):
    res = cli("apply", "--profile", "supersedes", "--series", rel_series, "--site-packages", site, "--json")
    assert res.rc == 0, res
    assert {p["id"]: p["status"] for p in res.json["patches"]} == {"pad-after": "superseded",
                                                                   "rewrite-supersedes": "ok"}
    journal = json.loads((site / ".patchq" / "journal.json").read_text())
    assert journal["patches"]["pad-after"]["outcome"] == "superseded"
    assert journal["patches"]["rewrite-supersedes"]["outcome"] == "applied"
    st = cli("status", "--series", rel_series, "--site-packages", site, "--json")
    assert st.rc == 0, st
    rows = {p["id"]: p for p in st.json["patches"]}
    assert rows["pad-after"]["status"] == "superseded"
    assert rows["pad-after"]["reason"].startswith("superseded by rewrite-supersedes")
    assert rows["rewrite-supersedes"]["status"] == "applied"
    text = (site / KV).read_text()
    assert "page_size_padded=max_page_size, block_size=new_block_size)" in text and PADDED not in text


# ---------------------------------------------------------------------------
# declared relations: profile validation


@pytest.mark.parametrize("profile, message", [
    (["rewrite-requires"], "profile bad: patch rewrite-requires requires pad-after, which the profile does not "
                           "include (add pad-after before rewrite-requires)"),
    (["rewrite-requires", "pad-after"], "profile bad: patch rewrite-requires requires pad-after, which comes "
                                        "after it (put pad-after before rewrite-requires)"),
    (["rewrite-supersedes", "pad-after"], "profile bad: patch rewrite-supersedes supersedes pad-after, which "
                                          "comes after it"),
])
def test_requirement_missing_or_out_of_order(tmp_path, profile, message):
    padded_anchor = dict(UNIFY_ANCHOR, node=PADDED)
    root = write_series(tmp_path / "p", {
        "pad-after": (patch_src("pad-after", INSERT_PADDED), {"a": UNIFY_ANCHOR}),
        "rewrite-requires": (patch_src("rewrite-requires", REWRITE_PADDED, requires=["pad-after"]),
                             {"a": padded_anchor}),
        "rewrite-supersedes": (patch_src("rewrite-supersedes", REWRITE_PADDED, supersedes=["pad-after"]),
                               {"a": padded_anchor}),
    }, {"bad": profile})
    with pytest.raises(SeriesError) as err:
        series_mod.load(root).patches_of("bad")
    assert message in str(err.value)


def test_cycle_conflict_and_duplicate_are_series_errors(tmp_path, cli):
    root = write_series(tmp_path / "p", {
        "x": (patch_src("x", INSERT_PADDED, requires=["y"]), {"a": UNIFY_ANCHOR}),
        "y": (patch_src("y", INSERT_PADDED, requires=["x"]), {"a": UNIFY_ANCHOR}),
        "z": (patch_src("z", INSERT_PADDED, conflicts=["w"]), {"a": UNIFY_ANCHOR}),
        "w": (patch_src("w", INSERT_PADDED), {"a": UNIFY_ANCHOR}),
    }, {"cycle": ["x", "y"], "conflict": ["w", "z"]})
    s = series_mod.load(root)
    with pytest.raises(SeriesError, match=r"profile cycle: patches x and y form a requires/supersedes cycle: "
                                          r"x -> y -> x"):
        s.patches_of("cycle")
    with pytest.raises(SeriesError, match=r"profile conflict: patches z and w conflict \(declared by z\)"):
        s.patches_of("conflict")
    res = cli("check", "--vllm", "0.23.0", "--profile", "conflict", "--series", root)
    assert res.rc == 2 and "patches z and w conflict" in res.stderr, res
    (root / "profiles.toml").write_text('[profiles.twice]\npatches = ["w", "w"]\n')
    res = cli("list", "--series", root, "--json")
    assert res.rc == 2 and "profile twice lists patch w twice" in res.stdout, res


def test_list_shows_relations(rel_series, cli):
    (rel_series / "profiles.toml").write_text('[profiles.supersedes]\npatches = ["pad-after", "rewrite-supersedes"]\n')
    res = cli("list", "--series", rel_series, "--json")
    assert res.rc == 0, res
    rows = {p["id"]: p for p in res.json["patches"]}
    assert rows["rewrite-supersedes"]["supersedes"] == ["pad-after"]
    assert rows["rewrite-requires"]["requires"] == ["pad-after"]
    assert rows["pad-after"]["conflicts"] == []
    text = cli("list", "--series", rel_series)
    assert "supersedes pad-after" in text.stdout and "requires pad-after" in text.stdout


# ---------------------------------------------------------------------------
# generic upstream detection on trees built from the real 0.23.0 release


def tree_with(tmp_path: Path, version: str, name: str, edits: list[tuple[str, str, str]]) -> sources.CodeSource:
    """A hard-linked copy of a release's ``vllm/`` with text replacements (each found once)."""
    root = tmp_path / name
    corpus.link_tree(release_tree(version) / "vllm", root / "vllm")
    for rel, old, new in edits:
        corpus.apply_edit(root, "replace", {"file": rel, "old": old, "new": new})
    return sources.source_tree(root, version=version)


UNIFY_MERGED = (KV, "            new_spec = replace(layer_spec, block_size=new_block_size)\n",
                "            new_spec = replace(layer_spec, block_size=new_block_size)\n"
                "            # pad what scaling cannot reach (merged upstream)\n"
                "            if (new_spec.page_size_bytes\n"
                "                    != max_page_size):\n"
                "                new_spec = replace(\n"
                "                    layer_spec,\n"
                "                    block_size=new_block_size,\n"
                "                    page_size_padded=max_page_size,\n"
                "                )\n")


def test_release_with_the_exact_change_reformatted_is_upstreamed(tmp_path):
    source = tree_with(tmp_path, "0.23.0", "merged", [UNIFY_MERGED])
    rows = {r.id: r for r in check.check(source, series_mod.load(stack.SERIES).patches_of("full"))}
    row = rows["page-scale"]
    assert (row.status, row.blocking) == ("upstreamed", False)
    assert row.reason == ("every edit's change is already in vllm 0.23.0: scaled-replace: "
                          "`if new_spec.page_size_bytes != max_page_size: ...` (vllm/v1/core/kv_cache_utils.py:1065)")
    assert row.upstream_evidence == [{"anchor": "scaled-replace", "where": f"{KV}:1065",
                                      "statement": "if new_spec.page_size_bytes != max_page_size: ...",
                                      "by": "identity", "score": 1.0}]  # by, score: added fields
    assert {r.status for pid, r in rows.items() if pid != "page-scale"} == {"applies"}
    assert check.exit_code(rows.values()) == 0


def test_release_with_one_of_two_edits_is_partially_upstreamed(tmp_path):
    source = tree_with(tmp_path, "0.23.0", "half", [(
        INC, "        self.pack_factor = Fraction(32, weight_bits)\n",
        "        self.pack_factor = Fraction(32, weight_bits)\n"
        "        self.fp8_config = None\n        self.fp8_layers: set[str] = set()\n")])
    rows = {r.id: r for r in check.check(source, series_mod.load(stack.SERIES).patches_of("full"))}
    row = rows["fp8-experts"]
    assert (row.status, row.blocking, row.level) == ("partially-upstreamed", True, None)
    assert row.reason.startswith("partially upstreamed in vllm 0.23.0: init-fields: `self.fp8_config = None` "
                                 f"({INC}:101); init-fields: `self.fp8_layers: set[str] = set()` ({INC}:102); "
                                 "not upstream: mapper, bits16-override, unquantized-branches, class-hooks")
    assert check.exit_code(rows.values()) == 1


def test_release_defining_a_method_the_patch_adds_is_never_given_a_second_one(tmp_path):
    source = tree_with(tmp_path, "0.23.0", "method", [(
        INC, "    def get_quant_method(self, layer: torch.nn.Module, prefix: str):\n",
        "    def _is_layer_fp8(self, prefix):\n        return False\n\n"
        "    def get_quant_method(self, layer: torch.nn.Module, prefix: str):\n")])
    rows = {r.id: r for r in check.check(source, series_mod.load(stack.SERIES).patches_of("full"))}
    row = rows["fp8-experts"]
    assert row.blocking and row.status == "conflict"
    assert row.reason == ("duplicate-member check: patch fp8-experts, anchor class-hooks: the edit gives "
                          "INCConfig a second definition of _is_layer_fp8 (upstream's: "
                          "vllm/model_executor/layers/quantization/inc.py:484)")


def test_patch_adding_an_existing_method_is_upstreamed_by_name(tmp_path):
    helper = {"module": "vllm.model_executor.layers.logits_processor", "qualname": "LogitsProcessor"}
    root = write_series(tmp_path / "p", {"helper": (patch_src("helper", '''def edit(defn, found, ctx):
        return edits.append_members(defn, edits.stmts("def _patchq_helper(self):\\n    return 1\\n"))'''),
        {"a": helper})}, {"h": ["helper"]})
    source = tree_with(tmp_path, "0.23.0", "helper", [(
        LOGITS, "    def _get_logits(\n", "    def _patchq_helper(self):\n        return 2  # other body\n\n"
                                        "    def _get_logits(\n")])
    row = plan_rows(root, "h", source)["helper"]
    assert (row.status, row.blocking) == ("upstreamed", False)
    assert "a: `def _patchq_helper(self): ...` (vllm/model_executor/layers/logits_processor.py:" in row.reason
    # on the real release it applies, and adds the method once
    assert plan_rows(root, "h")["helper"].status in ("applies", "applies-drifted")


def test_backwards_release_equal_to_the_patched_result_is_upstreamed(tmp_path):
    """head-gemv's anchor statement is gone where its result was merged: the release's
    definitions equal what the patch produced on the last verified release."""
    plan = engine.plan(sources.release_source("0.23.0"), [series_mod.load(stack.SERIES).patch("head-gemv")])
    merged = upstream_table._as_upstream(plan.patched[LOGITS])
    root = tmp_path / "bw"
    corpus.link_tree(release_tree("0.23.0") / "vllm", root / "vllm")
    replace_file(root / LOGITS, merged)
    row = {r.id: r for r in check.check(sources.source_tree(root, version="0.23.0"),
                                        series_mod.load(stack.SERIES).patches_of("full"))}["head-gemv"]
    assert (row.status, row.blocking) == ("upstreamed", False)
    assert row.reason == (f"LogitsProcessor._get_logits ({LOGITS}:89), LogitsProcessor.get_top_tokens ({LOGITS}:107) "
                          "equals what head-gemv produced on verified vllm 0.23.0 (normalized AST)")


# ---------------------------------------------------------------------------
# edits validated by meaning


@pytest.mark.parametrize("body, message", [
    ("def edit(defn, found, ctx):\n        return None",
     "result check: patch bad, anchor a: the transform returned None, not a definition of "
     "unify_kv_cache_spec_page_size (a transform returns the edited libcst FunctionDef)"),
    ("def edit(defn, found, ctx):\n        return 'def f(): pass'",
     "result check: patch bad, anchor a: the transform returned a str, not a definition"),
    ("def edit(defn, found, ctx):\n        return cst.parse_module('x = 1')",
     "result check: patch bad, anchor a: the transform returned a Module, not a definition"),
    ("def edit(defn, found, ctx):\n        return defn.with_changes(name=cst.Name('other'))",
     "result check: patch bad, anchor a: the transform returned FunctionDef other, not the FunctionDef "
     "unify_kv_cache_spec_page_size it was given"),
    ("def edit(defn, found, ctx):\n        (line,) = found\n"
     "        return edits.insert_after(defn, line, edits.stmts('new_spec = pad_page(new_spec)'))",
     "undefined-name check: patch bad in unify_kv_cache_spec_page_size: undefined name 'pad_page'"),
    ("def edit(defn, found, ctx):\n        (line,) = found\n"
     "        return edits.insert_after(defn, line, edits.stmts('def _h():\\n    pass\\ndef _h():\\n    pass'))",
     "redefinition check: patch bad in unify_kv_cache_spec_page_size: redefinition of unused '_h'"),
])
def test_edit_refused_by_meaning(tmp_path, body, message):
    root = write_series(tmp_path / "p", {"bad": (patch_src("bad", body), {"a": UNIFY_ANCHOR})}, {"b": ["bad"]})
    row = plan_rows(root, "b")["bad"]
    assert row.blocking and row.status == "conflict"
    assert row.reason.startswith(message), row.reason


def test_runtime_names_accept_a_name_provided_at_run_time(tmp_path):
    body = ("def edit(defn, found, ctx):\n        (line,) = found\n"
            "        return edits.insert_after(defn, line, edits.stmts('new_spec = pad_page(new_spec)'))")
    root = write_series(tmp_path / "p", {"ok": (patch_src("ok", body, runtime_names=["pad_page"]),
                                                {"a": UNIFY_ANCHOR})}, {"b": ["ok"]})
    assert plan_rows(root, "b")["ok"].status in ("applies", "applies-drifted")


def test_pattern_matching_a_docstring_is_refused(tmp_path):
    import ast

    text = (release_tree("0.23.0") / KV).read_text()
    func = next(n for n in ast.parse(text).body if getattr(n, "name", "") == "unify_kv_cache_spec_page_size")
    anchor = dict(UNIFY_ANCHOR, node=repr(ast.get_docstring(func, clean=False)))  # the docstring, as a pattern
    body = ("def edit(defn, found, ctx):\n        return edits.insert_after(defn, found[0], edits.stmts('pass'))")
    root = write_series(tmp_path / "p", {"doc": (patch_src("doc", body), {"a": anchor})}, {"b": ["doc"]})
    row = plan_rows(root, "b")["doc"]
    assert row.blocking
    assert row.reason.startswith("docstring check: patch doc, anchor a: the statement pattern matches a docstring")


# ---------------------------------------------------------------------------
# apply: an upstreamed patch is skipped, journalled and shown by status


def _record_row(site: Path, rel: str) -> None:
    """Make RECORD describe the current bytes of ``rel`` (as a release shipping them would)."""
    from support import dist_info

    record = dist_info(site) / "RECORD"
    data = (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    rows = list(csv.reader(io.StringIO(record.read_text())))
    for row in rows:
        if row and row[0] == rel:
            row[1], row[2] = f"sha256={digest}", str(len(data))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    replace_file(record, out.getvalue())


def test_apply_skips_an_upstreamed_patch_and_status_says_so(site, cli):
    path = site / KV
    _, old, new = UNIFY_MERGED
    replace_file(path, path.read_text().replace(old, new, 1))
    _record_row(site, KV)
    res = cli("apply", "--profile", "kv", "--site-packages", site, "--json")
    assert res.rc == 0, res
    rows = {p["id"]: p for p in res.json["patches"]}
    assert rows["page-scale"]["status"] == "upstreamed"
    assert "page-scale" not in res.json["added"]
    assert path.read_text().count("page_size_padded=max_page_size") == 1  # never applied a second time
    journal = json.loads((site / ".patchq" / "journal.json").read_text())
    assert journal["patches"]["page-scale"]["outcome"] == "upstreamed"
    st = cli("status", "--site-packages", site, "--json")
    assert st.rc == 0, st
    row = {p["id"]: p for p in st.json["patches"]}["page-scale"]
    assert row["status"] == "upstreamed"
    assert row["reason"].startswith("upstreamed on 0.23.0, not applied: every edit's change is already in vllm 0.23.0")
    text = cli("status", "--site-packages", site)
    assert re.search(r"page-scale +upstreamed +\w+  \(upstreamed on 0.23.0, not applied", text.stdout), text
    strict = cli("apply", "--profile", "kv", "--strict", "--site-packages", site, "--json")
    assert strict.rc == 1, strict
    row = {p["id"]: p for p in strict.json["patches"]}["page-scale"]
    assert (row["status"], row["failure"]) == ("failed", "upstreamed")
    assert row["reason"].endswith("--strict asks patchq to apply every patch")


# ---------------------------------------------------------------------------
# the stack's patches without their hand-written checks


@pytest.mark.parametrize("version", ["0.23.0", "0.28.0"])
def test_patches_without_hand_checks_never_apply_twice(version, tmp_path):
    generic = upstream_table.generic_series(tmp_path / "generic")
    assert "upstream_check=" not in (generic / "align_backoff.py").read_text().split("PATCH = patch(")[1]
    real = {r.id: r for r in check.check(sources.release_source(version),
                                         series_mod.load(generic).patches_of("full"))}
    s = series_mod.load(stack.SERIES)
    hand = {r.id: r for r in check.check(sources.release_source(version), s.patches_of("full"))}
    assert {p: r.status for p, r in real.items()} == {p: r.status for p, r in hand.items()}
    for pid in upstream_table.PATCHES:
        merged = upstream_table.merged_tree(version, pid, tmp_path / pid)
        if merged is None:  # nothing to merge: an upstreamed variant (align-backoff from 0.28.0), or none
            assert real[pid].status == "upstreamed" or s.patch(pid).variant_for(version) is None, pid
            continue
        status, blocking, reason = upstream_table.verdict(merged, generic, pid)
        assert (status, blocking) == ("upstreamed", False), (pid, reason)
        status, blocking, reason = upstream_table.verdict(merged, None, pid)
        assert status not in upstream_table.APPLYING, (pid, reason)


@pytest.mark.parametrize("declared", [False, True])
def test_removal_only_when_declared(tmp_path, declared):
    anchor = {"module": "vllm.v1.core.kv_cache_utils", "qualname": "is_kv_cache_type_attention_free"}
    body = "def edit(defn, found, ctx):\n        return cst.RemovalSentinel.REMOVE"
    kw = {"removes": ["a"]} if declared else {}
    root = write_series(tmp_path / "p", {"rm": (patch_src("rm", body, **kw), {"a": anchor})}, {"b": ["rm"]})
    s = series_mod.load(root)
    plan = engine.plan(sources.release_source("0.23.0"), s.patches_of("b"))
    r = plan.results[0]
    if declared:
        assert r.status == "ok", r.reason
        assert "def is_kv_cache_type_attention_free" not in plan.patched[KV]
    else:
        assert (r.status, r.failure) == ("failed", "invalid")
        assert r.reason == ("result check: patch rm, anchor a: the transform removes is_kv_cache_type_attention_free; "
                            "declare removes=['a'] in patch(...) if that is intended")


def test_matrix_cells_carry_relations_and_views_stay_exact(rel_series):
    from patchq.compat import matrix, matrix_render

    with open(rel_series / "profiles.toml", "a") as fh:
        fh.write('\n[profiles.pad-only]\npatches = ["pad-after"]\n')
    doc = matrix.build(["0.23.0"], ["supersedes", "pad-only"], series_dir=str(rel_series), workers=1)
    sup = doc["cells"]["supersedes"]
    assert sup["pad-after"]["0.23.0"]["status"] == "superseded"
    assert sup["pad-after"]["0.23.0"]["relations"]["superseded_by"] == ["rewrite-supersedes"]
    assert sup["rewrite-supersedes"]["0.23.0"]["relations"]["supersedes"] == ["pad-after"]
    # alone, pad-after is applied: the view of the larger plan is not reused
    assert doc["cells"]["pad-only"]["pad-after"]["0.23.0"]["status"] in ("applies", "applies-drifted")
    page = matrix_render.html(doc)
    assert "<small>supersedes pad-after</small>" in page and "superseded by rewrite-supersedes" in page
    assert doc["exit_code"] == 0
