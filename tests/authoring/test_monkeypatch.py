"""patchq.authoring.monkeypatch: ``import --replacement`` of real monkeypatches (issue 37) on real
vLLM releases: wrappers become before/after edits and result wrappers, copies the statements they
change, names the runtime lacks are refused; and the corpus of real changes
(:mod:`testing.monkeypatch_corpus`, re-expressed from public stacks, each citing its source).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.authoring import importer, monkeypatch
from patchq.errors import ImportRefused, UsageError
from patchq.plan import engine
from patchq.vllmdist.sources import release_source
from testing.monkeypatch_corpus import CASES, Case, run, source_text

#: the wheel layer: every test here reads real vLLM releases
pytestmark = pytest.mark.wheel

BY_ID = {c.id: c for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_corpus_case(case: Case, tmp_path):
    got = run(case, tmp_path / "first")
    if case.refused is not None:
        assert got.ops is None and case.refused in got.refusal, got
        assert got.refusal.count("\n") == 0 or "does not reproduce" not in got.refusal
        if case.fixed is not None:
            fixed = run(case, tmp_path / "fixed", fixed=True)
            assert fixed.ops == case.fixed_want and not fixed.runtime_names, fixed
        return
    assert got.ops == case.want, got.refusal or got
    assert not got.runtime_names  # never a name the runtime lacks, declared by itself


def test_corpus_targets():
    """Issue 37's targets on this corpus: at least 30 real changes; the share imported clean
    (no hand fix); none written with a name the runtime lacks. The refused ones are the names
    item 3 refuses (closure variables, a module's own router) and a wrapper with no
    before/after form; docs/import.md's table lists them."""
    clean = [c for c in CASES if c.want is not None]
    fixed = [c for c in CASES if c.refused is not None and c.fixed is not None]
    assert len(CASES) >= 30
    assert len(clean) + len(fixed) + sum(c.refused is not None and c.fixed is None for c in CASES) == len(CASES)
    assert len(clean) / len(CASES) >= 0.85, (len(clean), len(CASES))


def _write(tmp_path: Path, text: str, name: str = "stack.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _build(tmp_path: Path, text: str, name: str, replaces: str, release: str = "0.24.0"):
    src = _write(tmp_path, text)
    return monkeypatch.build(f"{src}:{name}", replaces, release, "p")[0]


INIT = "vllm.model_executor.layers.logits_processor:LogitsProcessor.__init__"


@pytest.mark.parametrize("idiom, text", [
    ("saved attribute, called on self", '''
        from vllm.model_executor.layers.logits_processor import LogitsProcessor

        LogitsProcessor._orig_init = LogitsProcessor.__init__


        def init(self, *args, **kwargs):
            self._orig_init(*args, **kwargs)
            self.fp32 = True


        LogitsProcessor.__init__ = init
        '''),
    ("functools.wraps of a saved original", '''
        import functools

        from vllm.model_executor.layers.logits_processor import LogitsProcessor

        original = LogitsProcessor.__init__


        @functools.wraps(original)
        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            self.fp32 = True


        LogitsProcessor.__init__ = init
        '''),
    ("super() in a subclass", '''
        from vllm.model_executor.layers.logits_processor import LogitsProcessor


        class Fp32LogitsProcessor(LogitsProcessor):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.fp32 = True
        '''),
])
def test_wrapper_idioms_become_a_result_wrapper(idiom, text, tmp_path):
    """Every way a monkeypatch calls the original (issue 37 item 1): the code after the call
    runs on every way out of vLLM's __init__; nothing refers to the saved original."""
    plan = _build(tmp_path, text, "__init__" if "super" in idiom else "init", INIT)
    (anchor,) = plan.anchors
    assert anchor.qualname == "LogitsProcessor.__init__" and [o["op"] for o in anchor.ops] == ["result"], idiom
    assert anchor.ops[0]["new"] == "self.fp32 = True\n"
    rel = "vllm/model_executor/layers/logits_processor.py"
    assert "_orig_init" not in plan.patched[rel] and "original(" not in plan.patched[rel]
    importer.write_verified(plan, _series(tmp_path), None, False, idiom)


def _series(tmp_path: Path) -> series_mod.Series:
    root = tmp_path / "series"
    root.mkdir(exist_ok=True)
    (root / "profiles.toml").write_text("[profiles.default]\npatches = []\n")
    return series_mod.load(root)


def test_the_original_saved_by_a_framework_is_the_original(tmp_path):
    """Issue 37 why-2: `self._orig_method(...)`, saved by a framework the source does not show,
    became vLLM's whole body (an AttributeError on every call). Its name says what it is."""
    text = '''
        def init(self, *args, **kwargs):
            self._original_init(*args, **kwargs)
            self.fp32 = True
        '''
    plan = _build(tmp_path, text, "init", INIT)
    assert [o["op"] for a in plan.anchors for o in a.ops] == ["result"]
    assert any("`self._original_init`, taken for the original saved by a framework" in n for n in plan.notes)


def test_a_call_of_a_method_the_class_lacks_is_refused(tmp_path):
    """corpus-b: the DSpark wrapper's code calls self.use_dspark(), which SpeculativeConfig has
    only from 0.25.0: imported on 0.24.0 it is refused, naming the method and the release."""
    case = BY_ID["ascend-dspark-post-init"]
    src = _write(tmp_path, source_text(case))
    with pytest.raises(ImportRefused, match=r"calls `self\.use_dspark\(\.\.\.\)` .*which vLLM's SpeculativeConfig "
                                            r"does not define in vllm 0\.24\.0: it would raise AttributeError"):
        monkeypatch.build(f"{src}:{case.name}", case.replaces, "0.24.0", "p")


def test_a_helper_class_of_the_source_is_refused_with_its_line(tmp_path):
    """Issue 37 why-3: a copy calling the source project's own helper class got it declared as
    a runtime name and 'verified'; the patched code raised NameError."""
    text = '''
        class CacheJanitor:
            @staticmethod
            def sweep(requests):
                requests.clear()


        def update(self, kv_connector_output):
            CacheJanitor.sweep(self.requests)
        '''
    with pytest.raises(ImportRefused, match=r"`CacheJanitor` is a class of stack\.py \(stack\.py:2\)"):
        _build(tmp_path, text, "update", "vllm.v1.core.sched.scheduler:Scheduler._update_from_kv_xfer_finished")


def test_definitions_per_branch_are_picked_by_line(tmp_path):
    """Issue 37 item 8: a definition per branch of an `if` is found; the user picks one."""
    text = '''
        import sys

        from vllm.model_executor.layers.logits_processor import LogitsProcessor


        def install():
            original = LogitsProcessor.__init__
            if sys.version_info >= (3, 12):
                def init(self, *args, **kwargs):
                    original(self, *args, **kwargs)
                    self.fp32 = True
            else:
                def init(self, *args, **kwargs):
                    original(self, *args, **kwargs)
                    self.fp32 = False
            LogitsProcessor.__init__ = init
        '''
    src = _write(tmp_path, text)
    with pytest.raises(UsageError, match=r"2 definitions match \(install\.init \(line 10\), install\.init \(line "
                                         r"14\)\), e\.g\. one per branch of an `if`: pick one with .*:init@LINE"):
        monkeypatch.build(f"{src}:init", INIT, "0.24.0", "p")
    plan, notes = monkeypatch.build(f"{src}:install.init@14", INIT, "0.24.0", "p")
    assert plan.anchors[0].ops[0]["new"] == "self.fp32 = False\n"
    assert any("defined inside install()" in n for n in notes)


def test_annotations_are_no_change_and_new_ones_never_runtime_names(tmp_path):
    """Issue 37 why-9: a copy's Optional/List annotations became runtime names and the patched
    module failed to import. vLLM's annotations stay; a new parameter's unbound one goes."""
    text = '''
        from typing import List, Optional


        def check(self, tokenizer: Optional[object], tokens: List[int], strict: Optional[bool] = None):
            max_input_tokens = self.max_total_tokens
            if max_input_tokens is None:
                return tokens
            if len(tokens) > max_input_tokens and strict is not False:
                raise ValueError("prompt too long")
            return tokens
        '''
    plan = _build(tmp_path, text, "check", "vllm.renderers.params:TokenizeParams._token_len_check")
    (anchor,) = plan.anchors
    assert [o["op"] for o in anchor.ops] == ["header", "replace", "replace"] and not plan.runtime_names
    header = anchor.ops[0]["new"]
    assert "(self, tokenizer: TokenizerLike | None, tokens: _S, strict=None) -> _S:" in header, header
    assert any("annotation of the new parameter strict is left out" in n for n in plan.notes)
    importer.write_verified(plan, _series(tmp_path), None, False, "check")


def test_the_result_wrapper_plans_where_the_returned_call_changed(tmp_path):
    """Issue 37 item 2 / corpus-a D9: the harmony wrapper recorded on 0.24.0 applies on 0.17.0,
    whose `return SamplingParams.from_optional(...)` passes other arguments (the replace of that
    return conflicted there), and revert gives the pristine file back byte for byte."""
    case = BY_ID["prime-harmony-stop-tokens"]
    root = tmp_path / "h"
    assert run(case, root).ops == case.want
    path = root / "series" / "prime_harmony_stop_tokens.py"
    path.write_text(path.read_text().replace("'>=0.24.0'", "'>=0.15'"))
    patch = series_mod.load(root / "series").patch(case.id)
    rel = "vllm/entrypoints/openai/chat_completion/protocol.py"
    for version in ("0.17.0", "0.24.0"):
        plan = engine.plan(release_source(version), [patch])
        assert plan.results[0].status == "ok", plan.results[0].reason
        text = plan.patched[rel]
        assert "        sp = SamplingParams.from_optional(\n" in text and text.count(f"# patchq:{case.id}:") == 1
        assert "            sp.stop_token_ids = list(set(sp.stop_token_ids or []) | set(server_ids))\n" in text


def test_check_compares_the_result_wrapper_as_such(tmp_path):
    """The verdict corpus' truth for prime-rl's harmony wrapper: apply on 0.17.0 (the returned
    call only got other keyword arguments), upstream on 0.25.0 (upstream merges the stop ids
    itself, right before the return, and passes them as stop_token_ids): applies-drifted and
    blocking, where the hand-written diff's replace of the return conflicted on both."""
    from patchq.compat import check

    case = BY_ID["prime-harmony-stop-tokens"]
    root = tmp_path / "c"
    assert run(case, root).ops == case.want
    path = root / "series" / "prime_harmony_stop_tokens.py"
    path.write_text(path.read_text().replace("'>=0.24.0'", "'>=0.15'"))
    patch = series_mod.load(root / "series").patch(case.id)
    (row,) = check.check(release_source("0.17.0"), [patch])
    assert row.status == "applies-drifted", row.reason
    (row,) = check.check(release_source("0.25.0"), [patch])  # alike the patch's merge: possibly upstreamed
    assert row.blocking and row.status in ("review", "possibly-upstreamed"), row.reason
    assert "protocol.py:618-626" in row.reason


def test_check_reports_a_method_the_release_lacks(tmp_path):
    """corpus-b: the DSpark code calls self.use_dspark(), which SpeculativeConfig defines only
    from 0.25.0: check said applies-drifted on 0.22.0-0.24.0 (four false applies)."""
    case = BY_ID["ascend-dspark-post-init"]
    root = tmp_path / "d"
    assert run(case, root).ops == case.want
    path = root / "series" / "ascend_dspark_post_init.py"
    path.write_text(path.read_text().replace("'>=0.27.1'", "'>=0.22'"))
    patch = series_mod.load(root / "series").patch(case.id)
    r = engine.plan(release_source("0.24.0"), [patch]).results[0]
    assert (r.status, r.failure) == ("failed", "invalid")
    assert "undefined-method check" in r.reason and "self.use_dspark()" in r.reason
    assert engine.plan(release_source("0.25.0"), [patch]).results[0].status == "ok"


def test_the_corpus_sources_hold_no_copied_stack_code():
    """Every monkeypatch module of the corpus cites its source and is this project's own text:
    a copy of a vLLM definition is made from vLLM's text at test time (never stored)."""
    for case in CASES:
        repo, path, commit = case.cite
        assert repo.count("/") == 1 and path and len(commit) >= 8, case.id
        if case.copy is not None:
            assert "@COPY@" in (case.source or ""), case.id
    text = source_text(BY_ID["prime-kv-xfer-tolerate-freed"])
    assert "def update_from_kv_xfer_finished(self, kv_connector_output):" in text  # made from vLLM's, bare
