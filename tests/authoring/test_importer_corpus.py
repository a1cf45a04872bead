"""The importer on real changes: the shapes people make (always) and a corpus of real hunks.

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
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.authoring import importer
from patchq.plan import diffs
from patchq.vllmdist.sources import release_source

pytestmark = pytest.mark.wheel

HERE = Path(__file__).resolve().parent
LEVELS_FILE = HERE / "importer_corpus_levels.json"


def _series(tmp_path: Path) -> series_mod.Series:
    (tmp_path / "series").mkdir(parents=True)
    (tmp_path / "series" / "profiles.toml").write_text("[profiles.default]\npatches = []\n")
    return series_mod.load(tmp_path / "series")


def _import(tmp_path: Path, text: str, release: str, pid: str = "shape") -> importer.ImportPlan:
    plan = importer.build(text, pid, release, source_name=pid)
    importer.write_verified(plan, _series(tmp_path), None, False, pid)  # raises unless byte-exact
    return plan


def _edit(rel: str, *pairs: tuple[str, str], release: str = "0.23.0") -> str:
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
    "same-statement-twice": (_edit, (PARALLEL, (
        "        if not current_platform.use_custom_allreduce():\n            self.disable_custom_all_reduce = True\n",
        "        if not current_platform.use_custom_allreduce():\n            self.disable_custom_all_reduce = bool(1)\n"),
        ("        if self.nnodes > 1:\n            self.disable_custom_all_reduce = True\n",
         "        if self.nnodes > 1:\n            self.disable_custom_all_reduce = bool(1)\n")), ["statement"]),
    # a one-token change of a class attribute: one statement of the class, not the class
    "class-attribute": (_edit, ("vllm/model_executor/models/qwen3_vl_moe.py", (
        "):\n    is_3d_moe_weight: bool = True\n", "):\n    # not 3d here\n    is_3d_moe_weight: bool = False\n")),
        ["statement"]),
    # a module-level constant (module-level anchor)
    "module-constant": (_edit, ("vllm/logger.py", ('_DATE_FORMAT = "%m-%d %H:%M:%S"\n',
                                                   '_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"\n')), ["module"]),
    # a module-level helper added together with its use (the name the patch defines is defined)
    "helper-and-use": (_edit, ("vllm/logger.py", ('_DATE_FORMAT = "%m-%d %H:%M:%S"\n',
                                                  '_DATE_FORMAT = "%m-%d %H:%M:%S"\n\n\ndef _patchq_quiet(name):\n'
                                                  '    return name.endswith(".quiet")\n'),
                                                 ("    logger = logging.getLogger(name)\n",
                                                  "    logger = logging.getLogger(name)\n    if _patchq_quiet(name):\n"
                                                  "        logger.disabled = True\n")), ["module", "statement"]),
    # an insert at the top of a method body: a block prepend
    "method-top": (_edit, (PARALLEL, ("    def _verify_args(self) -> Self:\n        # Lazy import",
                                      "    def _verify_args(self) -> Self:\n        assert self is not None\n"
                                      "        # Lazy import")), ["block"]),
    # a comment after the last statement of a block (its footer)
    "block-footer": (_edit, (PARALLEL, ("            ray_utils.assert_ray_available()\n",
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
