"""patchq.probe.run: records of the import and probe levels (the wheel layer probes a real
release: tests/commands/test_probe.py)."""

from __future__ import annotations

from patchq.probe import run


def test_module_of():
    assert run.module_of("vllm/v1/core/kv_cache_utils.py") == "vllm.v1.core.kv_cache_utils"
    assert run.module_of("vllm/model_executor/layers/quantization/inc/__init__.py") == \
        "vllm.model_executor.layers.quantization.inc"


def test_case_result_fails_on_any_failure_and_never_passes_on_nothing():
    ok = {"name": "a", "result": "ok"}
    skip = {"name": "b", "result": "skip"}
    bad = {"name": "c", "result": "fail", "error": "AssertionError: x", "case_frame": "s.py:3 in c"}
    assert run._case_result([ok, skip]) == ("ok", "1 case(s) passed: a; skipped b")
    assert run._case_result([ok, bad])[0] == "fail" and "case c: AssertionError: x (s.py:3 in c)" in \
        run._case_result([ok, bad])[1]
    assert run._case_result([skip]) == ("skip", "every case is for other releases: b")
    assert run._case_result([]) == ("skip", "the patch carries no case")


def test_target_modules_name_the_variant_anchors_present(small):
    patches = {"p": [small.series.patch(pid) for pid in small.series.all_patch_ids()]}
    site = small.site
    mods = run.target_modules(patches, "0.1.0", site)
    assert mods and all((site / (m.replace(".", "/") + ".py")).is_file() or
                        (site / m.replace(".", "/") / "__init__.py").is_file() for m in mods)
