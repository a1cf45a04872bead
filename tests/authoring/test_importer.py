"""Patches as diffs on real releases: ``patchq import`` and ``patchq diff --release V --write``.

The imported diff is made in the test by a real edit of vLLM 0.23.0's
``unify_kv_cache_spec_page_size`` (the page-scale fix written as a plain text patch).
0.24.0 re-indents the lines it touches, so the text diff stops applying there; the
imported, anchored patch still applies (and at 0.33.0, where the function moved file).

The importer on real changes: the shapes people make (always) and a corpus of real hunks.

**Shapes** (committed: each is a text edit of vLLM 0.23.0 made here, turned into a diff):
the changes that used to fall back to whole-definition replacements or fail, each with the
level it must land at, verified byte-exactly on 0.23.0 by :func:`importer.write_verified`.

**Corpus** (real hunks from public vLLM patch stacks). Third-party code stays out of this
repository's commits, so the corpus is data beside it: ``$PATCHQ_IMPORT_CORPUS``, else
``shared/import-corpus/`` in or beside the checkout (``manifest.json``: ``[{id, release,
source, hunks}]`` and ``<id>.diff``). Each diff is imported on its release and must
reproduce the patched text byte-exactly; the level each hunk lands at must be the one in
``tests/authoring/importer_corpus_levels.json`` (``{id: [level per hunk]}``), and the aggregate targets
hold: >= 90% of hunks at statement level (block prepend/append counted: a statement
insert found by its block), 0 internal errors. Without the corpus the test skips, saying
where it looked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.authoring import importer
from patchq.authoring.merge import strip_sentinels
from patchq.plan import diffs, engine
from patchq.vllmdist import releases
from patchq.vllmdist.sources import release_source
from support import own_vllm

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

HERE = Path(__file__).resolve().parent

REL = "vllm/v1/core/kv_cache_utils.py"
SCALED = "            new_spec = replace(layer_spec, block_size=new_block_size)\n"
PAD = (
    "            if new_spec.page_size_bytes != max_page_size:\n"
    "                # keep the scaled block size and pad the rest of the page\n"
    "                new_spec = replace(\n"
    "                    layer_spec, block_size=new_block_size, page_size_padded=max_page_size\n"
    "                )\n"
)


def _edit(text: str) -> str:
    assert text.count(SCALED) == 1
    return text.replace(SCALED, SCALED + PAD)


@pytest.fixture
def empty_series(tmp_path) -> Path:
    (tmp_path / "series").mkdir()
    (tmp_path / "series" / "profiles.toml").write_text('[profiles.imported]\npatches = ["pad-page"]\n')
    return tmp_path / "series"


@pytest.fixture(scope="module")
def pad_diff(tmp_path_factory) -> tuple[Path, str, str]:
    """(diff file, pristine 0.23.0 text, edited text): a git-style diff of a real edit."""
    pristine = release_source("0.23.0").read_text(REL)
    edited = _edit(pristine)
    path = tmp_path_factory.mktemp("diffs") / "pad-page.patch"
    path.write_text(diffs.unified(REL, pristine, edited))
    return path, pristine, edited


def _git_apply_check(diff: Path | str, version: str) -> subprocess.CompletedProcess:
    data = Path(diff).read_bytes() if isinstance(diff, Path) else diff.encode()
    return subprocess.run(["git", "apply", "--check", "-p1", "-"], input=data,
                          cwd=releases.release_tree(version), capture_output=True)


def test_import_gives_exactly_the_diffs_result_on_its_release(pad_diff, empty_series, cli):
    path, pristine, edited = pad_diff
    res = cli("import", path, "--id", "pad-page", "--series", empty_series, "--json")
    assert res.rc == 0, res.stderr
    doc = res.json
    # with no --release: this environment's vLLM when it has one (README command 1 installs
    # 0.23.0), else the release guessed from the diff
    assert doc["release"] == "0.23.0" and doc["verified"] is True
    assert doc["release_from"] == ("installed" if own_vllm() else "guessed"), doc
    assert [(h["path"], h["definitions"], h["module_level"]) for h in doc["hunks"]] == \
        [(REL, ["unify_kv_cache_spec_page_size"], False)]
    (anchor,) = doc["anchors"]
    assert anchor["qualname"] == "unify_kv_cache_spec_page_size" and anchor["ops"] == ["insert"]
    patch = series_mod.load(empty_series).patch("pad-page")
    spec = patch.anchors["unify-kv-cache-spec-page-size"]
    assert spec.module == "vllm.v1.core.kv_cache_utils" and spec.node is None
    plan = engine.plan(release_source("0.23.0"), [patch])
    assert plan.results[0].status == "ok"
    assert spec.fingerprints == {"0.23.0": plan.results[0].anchors[0].fingerprint}
    assert strip_sentinels(plan.patched[REL]) == edited  # exactly the diff's result
    assert plan.patched[REL].count(f"# patchq:pad-page:{patch.hash}") == 1


@pytest.mark.parametrize("version, where", [("0.24.0", REL), ("0.33.0", "vllm/v1/core/kv_cache_planning.py")])
def test_imported_patch_applies_where_the_text_diff_does_not(pad_diff, empty_series, version, where):
    path, _, _ = pad_diff
    importer.write(importer.build(path.read_text(), "pad-page", "0.23.0", path.name),
                   empty_series, empty_series.parent / "anchors")
    check = _git_apply_check(path, version)
    assert check.returncode != 0 and b"patch does not apply" in check.stderr
    patch = series_mod.load(empty_series).patch("pad-page")
    plan = engine.plan(release_source(version), [patch])
    assert plan.results[0].status == "ok", plan.results[0].reason
    assert list(plan.patched) == [where]
    text = plan.patched[where]
    # inserted after the scaled replace, which 0.24.0 re-indented into an if-branch
    deeper = textwrap.indent(SCALED + PAD, "    ")
    assert deeper in text
    # and the rendered diff of the imported patch applies there
    assert _git_apply_check(diffs.unified_all(plan.pristine, plan.patched), version).returncode == 0


def test_diff_write_stores_validated_per_patch_diffs(pad_diff, empty_series, cli):
    path, _, _ = pad_diff
    importer.write(importer.build(path.read_text(), "pad-page", "0.23.0"), empty_series,
                   empty_series.parent / "anchors")
    res = cli("diff", "--release", "0.24.0", "--write", "--series", empty_series, "--json")
    assert res.rc == 0, res.stderr
    (row,) = res.json["patches"]
    assert row["action"] == "wrote" and row["stats"] == {"files": 1, "hunks": 2, "added": 6, "removed": 0}
    stored = empty_series / "diffs" / "0.24.0" / "pad-page.diff"
    assert Path(row["path"]) == stored
    assert _git_apply_check(stored, "0.24.0").returncode == 0
    again = cli("diff", "--release", "0.24.0", "--write", "--series", empty_series, "--json")
    assert again.json["patches"][0]["action"] == "unchanged"
    text = cli("diff", "--release", "0.24.0", "--write", "--series", empty_series).stdout
    assert "pad-page: unchanged (1 file(s), 2 hunk(s), +6 -0; unidiff ok, git apply --check ok)" in text


def test_diff_write_of_the_stack_at_0_23_0(tmp_path, series_copy, cli):
    res = cli("diff", "--release", "0.23.0", "--write", "--series", series_copy, "--json")
    assert res.rc == 0, res.stderr
    rows = {r["patch_id"]: r for r in res.json["patches"]}
    # the stack fixture's patches
    assert {"backend-tiles", "page-scale", "align-backoff", "fp8-experts", "head-gemv"} <= set(rows)
    for pid, r in rows.items():
        assert r["status"] == "ok" and r["action"] == "wrote"
        text = (series_copy / "diffs" / "0.23.0" / f"{pid}.diff").read_text()
        assert text.startswith("diff --git a/vllm/")
        assert r["stats"]["hunks"] == sum(ln.startswith("@@ ") for ln in text.splitlines())
        assert r["stats"]["added"] == sum(ln.startswith("+") and not ln.startswith("+++") for ln in text.splitlines())


@pytest.mark.parametrize("raw, want", [
    ("a/vllm/v1/core/kv_cache_utils.py", REL),
    ("b/vllm/v1/core/kv_cache_utils.py\t2026-06-15 04:12:42", REL),
    ("vllm-0.23.0.orig/vllm/v1/core/kv_cache_utils.py", REL),
    ("/venv/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", REL),
    ("a/node_modules/vllm/v1/core/kv_cache_utils.py", REL),
    ("vllm/v1/core/kv_cache_utils.py", REL),
    ("/dev/null", None),
])
def test_diff_paths_are_normalized_to_site_packages(raw, want):
    assert importer.normalize_path(raw, release_source("0.23.0").exists) == want


def test_quilt_style_diff_imports_the_same(pad_diff, empty_series):
    path, _, _ = pad_diff
    quilt = path.read_text().replace(
        "diff --git a/vllm/v1/core/kv_cache_utils.py b/vllm/v1/core/kv_cache_utils.py\n", "")
    quilt = quilt.replace(f"--- a/{REL}", f"--- vllm-0.23.0.orig/{REL}").replace(
        f"+++ b/{REL}", f"+++ vllm-0.23.0/{REL}")
    plan = importer.build(quilt, "pad-page", "0.23.0")
    assert [a.qualname for a in plan.anchors] == ["unify_kv_cache_spec_page_size"]
    assert plan.patched[REL] == _edit(release_source("0.23.0").read_text(REL))


HELPER = '''

def _patchq_page_ratio(max_page_size: int, layer_page_size: int) -> int:
    """Helper added by a diff (module level)."""
    return max_page_size // layer_page_size
'''


def test_module_level_changes_become_a_module_anchor(empty_series, tmp_path):
    """A helper inserted before a function, a new import and a changed import: one module-level
    anchor (anchors format 2) whose statement operations reproduce the file exactly."""
    src = release_source("0.23.0")
    pristine = src.read_text(REL)
    anchor_line = "def unify_kv_cache_spec_page_size(\n"
    edited = pristine.replace(anchor_line, HELPER.lstrip("\n") + "\n\n" + anchor_line, 1)
    edited = edited.replace("import copy\n", "import copy\nimport functools\n", 1)
    edited = edited.replace("from functools import partial\n", "from functools import partial, reduce\n", 1)
    plan = importer.build(diffs.unified(REL, pristine, edited), "pad-page", "0.23.0", "helper.patch")
    (anchor,) = plan.anchors
    assert anchor.qualname == "<module>" and {o["op"] for o in anchor.ops} <= {"insert", "replace"}
    importer.write(plan, empty_series, empty_series.parent / "anchors")
    assert (empty_series.parent / "anchors" / "pad-page.toml").read_text().count("format = 2") == 1
    ok, why = importer.verify(plan, series_mod.load(empty_series))
    assert ok, why
    result = engine.plan(src, [series_mod.load(empty_series).patch("pad-page")])
    assert strip_sentinels(result.patched[REL]) == edited


def test_refusals_are_explicit():
    src = release_source("0.23.0")
    pristine = src.read_text(REL)
    new_file = "--- /dev/null\n+++ b/vllm/new.py\n@@ -0,0 +1 @@\n+x = 1\n"
    with pytest.raises(importer.ImportRefused, match="adds or deletes a file"):
        importer.build(new_file, "x", "0.23.0")
    with pytest.raises(importer.ImportRefused, match="the diff expects"):  # made against 0.23.0, not 0.24.0
        importer.build(diffs.unified(REL, pristine, _edit(pristine)), "x", "0.24.0")


def test_a_comment_at_the_end_of_a_block_is_a_footer_operation(empty_series):
    pristine = release_source("0.23.0").read_text(REL)
    tail = "            new_kv_cache_spec[layer_name] = new_spec\n    return new_kv_cache_spec\n"
    edited = pristine.replace(tail, "            new_kv_cache_spec[layer_name] = new_spec\n"
                                    "            # trailing note\n    return new_kv_cache_spec\n", 1)
    plan = importer.build(diffs.unified(REL, pristine, edited), "x", "0.23.0")
    (anchor,) = plan.anchors
    assert [o["op"] for o in anchor.ops] == ["footer"] and not plan.notes
    importer.write(plan, empty_series, empty_series.parent / "anchors")
    assert importer.verify(plan, series_mod.load(empty_series)) == (True, "")
    later = engine.plan(release_source("0.24.0"), [series_mod.load(empty_series).patch("x")]).results[0]
    assert later.status == "ok", later.reason


def test_rebase_of_a_module_level_patch_merges_the_module_not_an_internal_error(empty_series, cli):
    """A changed module constant imports as a module-level anchor; rebase merges its module
    three-way (issue 35, item 4), where it used to say `unsupported` and, before that, stop
    on an AssertionError (exit 70) after writing other patches' results."""
    logger = "vllm/logger.py"
    pristine = release_source("0.23.0").read_text(logger)
    edited = pristine.replace('_DATE_FORMAT = "%m-%d %H:%M:%S"', '_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"', 1)
    assert edited != pristine
    (empty_series / "profiles.toml").write_text('[profiles.imported]\npatches = ["date-fmt"]\n')
    importer.write(importer.build(diffs.unified(logger, pristine, edited), "date-fmt", "0.23.0"), empty_series,
                   empty_series.parent / "anchors")
    text = cli("rebase", "--to", "0.26.0", "--from", "0.23.0", "--series", empty_series)
    assert text.rc == 0 and "date-fmt: CLEAN" in text.stdout and "internal error" not in text.stderr, text
    assert "module-level statements [vllm/logger.py]" in text.stdout
    res = cli("rebase", "--to", "0.26.0", "--from", "0.23.0", "--series", empty_series, "--write", "--json")
    (row,) = res.json["patches"]
    assert (res.rc, row["status"], row["transform"]) == (0, "clean", "carries-forward"), row
    assert str(empty_series.parent / "anchors" / "date-fmt.toml") in row["written"]


# -- the importer on real changes: shapes and the corpus ----------------------------------------

LEVELS_FILE = HERE / "importer_corpus_levels.json"


def _series(tmp_path: Path) -> series_mod.Series:
    (tmp_path / "series").mkdir(parents=True)
    (tmp_path / "series" / "profiles.toml").write_text("[profiles.default]\npatches = []\n")
    return series_mod.load(tmp_path / "series")


def _import(tmp_path: Path, text: str, release: str, pid: str = "shape") -> importer.ImportPlan:
    plan = importer.build(text, pid, release, source_name=pid)
    importer.write_verified(plan, _series(tmp_path), None, False, pid)  # raises unless byte-exact
    return plan


def _shape_diff(rel: str, *pairs: tuple[str, str], release: str = "0.23.0") -> str:
    text = release_source(release).read_text(rel)
    assert text is not None
    new = text
    for old, repl in pairs:
        assert new.count(old) == 1, old
        new = new.replace(old, repl)
    return diffs.unified(rel, text, new)


PARALLEL = "vllm/config/parallel.py"
SHAPES = {
    # the same statement text (three times in the method) edited twice, in one hunk
    "same-statement-twice": (_shape_diff, (PARALLEL, (
        "        if not current_platform.use_custom_allreduce():\n            self.disable_custom_all_reduce = True\n",
        "        if not current_platform.use_custom_allreduce():\n"
        "            self.disable_custom_all_reduce = bool(1)\n"),
        ("        if self.nnodes > 1:\n            self.disable_custom_all_reduce = True\n",
         "        if self.nnodes > 1:\n            self.disable_custom_all_reduce = bool(1)\n")), ["statement"]),
    # a one-token change of a class attribute: one statement of the class, not the class
    "class-attribute": (_shape_diff, ("vllm/model_executor/models/qwen3_vl_moe.py", (
        "):\n    is_3d_moe_weight: bool = True\n", "):\n    # not 3d here\n    is_3d_moe_weight: bool = False\n")),
        ["statement"]),
    # a module-level constant (module-level anchor)
    "module-constant": (_shape_diff, ("vllm/logger.py", ('_DATE_FORMAT = "%m-%d %H:%M:%S"\n',
                                                   '_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"\n')), ["module"]),
    # a module-level helper added together with its use (the name the patch defines is defined)
    "helper-and-use": (_shape_diff, ("vllm/logger.py", ('_DATE_FORMAT = "%m-%d %H:%M:%S"\n',
                                                  '_DATE_FORMAT = "%m-%d %H:%M:%S"\n\n\ndef _patchq_quiet(name):\n'
                                                  '    return name.endswith(".quiet")\n'),
                                                 ("    logger = logging.getLogger(name)\n",
                                                  "    logger = logging.getLogger(name)\n    if _patchq_quiet(name):\n"
                                                  "        logger.disabled = True\n")), ["module", "statement"]),
    # an insert at the top of a method body: a block prepend
    "method-top": (_shape_diff, (PARALLEL, ("    def _verify_args(self) -> Self:\n        # Lazy import",
                                      "    def _verify_args(self) -> Self:\n        assert self is not None\n"
                                      "        # Lazy import")), ["block"]),
    # a comment after the last statement of a block (its footer)
    "block-footer": (_shape_diff, (PARALLEL, ("            ray_utils.assert_ray_available()\n",
                                        "            ray_utils.assert_ray_available()\n            # ray checked\n")),
                     ["statement"]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_lands_at_its_level(name, tmp_path):
    make, (rel, *pairs), want = SHAPES[name]
    plan = _import(tmp_path, make(rel, *pairs), "0.23.0")
    assert [h.level for h in plan.hunks] == want, importer.summary_line(plan)
    assert not any(o["op"] == "definition" for a in plan.anchors for o in a.ops)


def _corpus_dir() -> Path | None:
    env = os.environ.get("PATCHQ_IMPORT_CORPUS")
    cands = [Path(env)] if env else []
    cands += [HERE.parents[1] / "shared" / "import-corpus", HERE.parents[2] / "shared" / "import-corpus"]
    return next((c for c in cands if (c / "manifest.json").is_file()), None)


def test_corpus_of_real_hunks(tmp_path):
    corpus = _corpus_dir()
    if corpus is None:
        pytest.skip("no import corpus: set PATCHQ_IMPORT_CORPUS or put it in shared/import-corpus/ "
                    "(third-party hunks are kept out of this repository's commits)")
    expected = json.loads(LEVELS_FILE.read_text())
    manifest = json.loads((corpus / "manifest.json").read_text())
    got: dict[str, list[str]] = {}
    errors = []
    for n, entry in enumerate(manifest):
        try:
            plan = _import(tmp_path / str(n), (corpus / f"{entry['id']}.diff").read_text(), entry["release"], "c")
        except Exception as exc:  # noqa: BLE001 - every failure is collected and reported
            errors.append(f"{entry['id']}: {type(exc).__name__}: {exc}")
            continue
        got[entry["id"]] = [h.level for h in plan.hunks]
    assert not errors, "\n".join(errors)
    assert {k: got[k] for k in expected if k in got} == {k: v for k, v in expected.items() if k in got}
    levels = [lvl for v in got.values() for lvl in v]
    precise = sum(lvl in ("statement", "expression", "block") for lvl in levels)
    assert len(levels) >= 60 and precise >= 0.9 * len(levels), (precise, len(levels))


MONKEYPATCH = '''import logging


def my_init_logger(name):
    """A stack's copy of init_logger that quiets one logger."""
    logger = logging.getLogger(name)
    if name.endswith(".quiet"):
        logger.disabled = True

    for method_name, method in _METHODS_TO_PATCH.items():
        setattr(logger, method_name, MethodType(method, logger))

    return cast(_VllmLogger, logger)
'''


def test_import_a_monkeypatch_as_statement_edits(tmp_path, cli):
    """A replacing definition (file + name) against vLLM's init_logger at 0.23.0: statement edits, not a copy."""
    (tmp_path / "stack.py").write_text(MONKEYPATCH)
    series = _series(tmp_path / "s")
    res = cli("import", "--id", "quiet", "--replacement", f"{tmp_path / 'stack.py'}:my_init_logger",
              "--replaces", "vllm.logger:init_logger", "--release", "0.23.0", "--series", series.root, "--json")
    assert res.rc == 0, res.stderr
    doc = res.json
    assert doc["levels"] == {"statement": 1} and doc["profile"] == "default" and doc["added_to_profile"]
    assert "definition" not in doc["anchors"][0]["ops"]
    text = (series.root / "quiet.py").read_text()
    assert "from patchq.statements import statement_edit" in text and "logger.disabled = True" in text


# -- an edit keeps its place (issue 35 class 1, issue 37 items 1, 6, 7) ---------------------------------


def _check(series_root: Path, pid: str, version: str):
    from patchq.compat import check

    (row,) = check.check(release_source(version), [series_mod.load(series_root).patch(pid)])
    return row


def _edit_in(rel: str, release: str, definition: str, old: str, new: str) -> str:
    """A diff of ``old`` -> ``new`` at its first place after ``definition`` in ``rel`` at ``release``."""
    text = release_source(release).read_text(rel)
    assert text is not None
    at = text.index(definition)
    i = text.index(old, at)
    return diffs.unified(rel, text, text[:i] + new + text[i + len(old):])


def test_an_insertion_followed_by_a_blank_line_imports_as_an_insertion(tmp_path):
    """issue 37 items 1 and 6: a line added with a PEP 8 blank line after it became a replace of
    the next statement (here the whole ``if current_platform.is_cuda(): ... else:`` chain of
    TopKTopPSampler.__init__), which conflicted on 0.27.0, where upstream changed that chain."""
    diff = _edit_in("vllm/v1/sample/ops/topk_topp_sampler.py", "0.26.0", "class TopKTopPSampler",
                    "        self.use_fp64_gumbel = use_fp64_gumbel\n",
                    "        self.use_fp64_gumbel = use_fp64_gumbel\n        self.num_topk_calls = 0\n\n")
    plan = _import(tmp_path, diff, "0.26.0", "count-topk")
    assert [o["op"] for a in plan.anchors for o in a.ops] == ["insert"]
    row = _check(tmp_path / "series", "count-topk", "0.27.0")
    assert row.status == "applies-drifted" and not row.blocking, (row.status, row.reason)


def test_a_block_insert_whose_if_changed_places_and_is_judged_three_way(tmp_path):
    """issue 35, 1b: a line at the start of get_computed_blocks' early-return branch (0.26.0).
    0.27.0 rewrote the condition and kept the ``return`` the insert is found by: the patch
    places, and the three-way verdict (review, with the view) replaces ``conflict``."""
    diff = _edit_in("vllm/v1/core/kv_cache_manager.py", "0.26.0", "    def get_computed_blocks(",
                    "            return self.empty_kv_cache_blocks, 0, 0\n",
                    "            logger.debug(\"prefix cache lookup skipped for %s\", request.request_id)\n"
                    "            return self.empty_kv_cache_blocks, 0, 0\n")
    _import(tmp_path, diff, "0.26.0", "log-skip")
    row = _check(tmp_path / "series", "log-skip", "0.27.0")
    assert row.status == "review" and row.threeway and "prefix_cache_lookup_enabled" in row.reason, row.reason


def test_an_insert_at_the_top_of_a_body_survives_its_docstring_and_first_statement_changing(tmp_path):
    """issue 35, 1c: a guard at the top of MediaConnector.fetch_image (0.26.0) was anchored on
    the docstring and the first statement; 0.27.0 and 0.34.0 changed both, and it conflicted
    (rebase too). At the top of the body it places; the verdict is the three-way engine's."""
    diff = _edit_in("vllm/multimodal/media/connector.py", "0.26.0", "    def fetch_image(",
                    "        \"\"\"\n        image_io", "        \"\"\"\n        if image_url.startswith(\"file:\"):\n"
                    "            raise ValueError(\"local image files are not served\")\n\n        image_io")
    plan = _import(tmp_path, diff, "0.26.0", "no-file-urls")
    assert [(o["op"], o.get("at")) for a in plan.anchors for o in a.ops] == [("insert", "top")]
    assert [h.level for h in plan.hunks] == ["block"]
    for version in ("0.27.0", "0.34.0"):
        row = _check(tmp_path / "series", "no-file-urls", version)
        assert row.status != "conflict" and row.threeway, (version, row.status, row.reason)


def test_a_multi_hunk_diff_is_anchored_per_definition(tmp_path):
    """issue 37 item 7: a field added to SamplingParams and its check in _verify_args (0.33.0)
    were one anchor on the whole class; now the check is anchored on _verify_args (its own
    fingerprint: 0.34.0 changed the class, not the method) and the field on the class."""
    rel = "vllm/sampling_params.py"
    text = release_source("0.33.0").read_text(rel)
    doc_end = "    still computed. Conflict checking is performed at the engine level.\"\"\"\n"
    verify = "        _verify_num_sequences(self.n, \"n\")\n"
    assert text.count(doc_end) == 1 and text.count(verify) == 1
    edited = text.replace(doc_end, doc_end + "\n    max_think_lines: int | None = None\n"
                          "    \"\"\"Stop thinking after this many newline tokens (None: no limit).\"\"\"\n")
    edited = edited.replace(verify, verify +
                            "        if self.max_think_lines is not None and self.max_think_lines < 1:\n"
                            "            raise VLLMValidationError(\n"
                            "                f\"max_think_lines must be at least 1, got {self.max_think_lines}.\"\n"
                            "            )\n")
    plan = _import(tmp_path, diffs.unified(rel, text, edited), "0.33.0", "think-lines")
    assert [(a.qualname, [o["op"] for o in a.ops]) for a in plan.anchors] == \
        [("SamplingParams._verify_args", ["insert"]), ("SamplingParams", ["insert"])]
    row = _check(tmp_path / "series", "think-lines", "0.34.0")
    assert not row.blocking and {a["qualname"]: a["verified"] for a in row.anchors} == \
        {"SamplingParams._verify_args": "0.33.0", "SamplingParams": None}, row.anchors


def test_a_name_the_runtime_does_not_provide_is_refused_not_declared(empty_series):
    """Issue 37 items 3/9: names undefined in the diff's result were declared runtime_names by
    themselves and the import said 'verified' (the patched code raised NameError). Now: refused,
    naming the name, its line and where the release binds it; declared only when asked."""
    pristine = release_source("0.23.0").read_text(REL)
    edited = _edit(pristine).replace("                # keep the scaled block size",
                                     "                SomeHelper.cleanup(current_platform)\n"
                                     "                # keep the scaled block size", 1)
    diff = diffs.unified(REL, pristine, edited)
    with pytest.raises(importer.ImportRefused) as info:
        importer.build(diff, "x", "0.23.0")
    msg = str(info.value)
    assert "`SomeHelper` (vllm/v1/core/kv_cache_utils.py:" in msg and "it would raise NameError" in msg
    assert "`current_platform` (vllm/v1/core/kv_cache_utils.py:" in msg and "vllm.platforms" in msg
    plan = importer.build(diff, "x", "0.23.0", runtime_names=["SomeHelper", "current_platform"])
    assert plan.runtime_names == ["SomeHelper", "current_platform"]
    assert "runtime_names=['SomeHelper', 'current_platform']" in importer.render_module(plan)


def test_a_name_only_in_a_local_annotation_is_no_runtime_name(empty_series):
    """A local variable's annotation is never evaluated (PEP 526): Optional there needs no
    import and is no runtime name; in a parameter's annotation it would fail at import."""
    pristine = release_source("0.23.0").read_text(REL)
    local = _edit(pristine).replace("                # keep the scaled block size",
                                    "                padded: Optional[int] = max_page_size\n"
                                    "                # keep the scaled block size", 1)
    plan = importer.build(diffs.unified(REL, pristine, local), "x", "0.23.0")
    assert not plan.runtime_names
    importer.write(plan, empty_series, empty_series.parent / "anchors")
    assert importer.verify(plan, series_mod.load(empty_series)) == (True, "")
    param = pristine.replace("def unify_kv_cache_spec_page_size(\n", "def unify_kv_cache_spec_page_size(\n"
                             "    padding: Optional[int],\n", 1)
    with pytest.raises(importer.ImportRefused, match=r"`Optional` \(vllm/v1/core/kv_cache_utils\.py:"):
        importer.build(diffs.unified(REL, pristine, param), "x", "0.23.0")


def test_git_quoted_paths_are_unquoted():
    """git writes a path with non-ASCII bytes C-quoted: "a/foo\\303\\251.py" is a/fooé.py."""
    assert importer.git_unquote('"a/vllm/foo\\303\\251.py"') == "a/vllm/fooé.py"
    assert importer.git_unquote('"b/vllm/a\\tb\\"c\\\\d.py"') == 'b/vllm/a\tb"c\\d.py'
    assert importer.git_unquote("a/vllm/plain.py") == "a/vllm/plain.py"
    assert importer.normalize_path('"a/vllm/foo\\303\\251.py"') == "vllm/fooé.py"
    with pytest.raises(importer.ImportRefused, match="bad escape"):
        importer.git_unquote('"a/vllm/x\\q.py"')


@pytest.mark.parametrize("path", ["/etc/passwd", "../x.py", "b/other/x.py", "b/vllm/../x.py", "/abs/x.py"])
def test_every_path_outside_vllm_is_one_refusal(path):
    """../, absolute and other-package paths were exit 2 or exit 1 by chance: all are
    ImportRefused (exit 1) naming the header's path."""
    diff = f"--- {path}\n+++ {path}\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    with pytest.raises(importer.ImportRefused, match=f"^{re.escape(path)}: outside the vllm package"):
        importer.parse(diff, lambda rel: True)
