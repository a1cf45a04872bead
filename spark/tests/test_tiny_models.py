"""CPU tests for the boot lab (lab/): tiny model generator + checker, wheelsplit, slimwheel.

The model tests need torch, safetensors, numpy and tokenizers (skipped with the reason
otherwise); the rest is stdlib.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

from lab import slimwheel, tiny_models, wheelsplit

ROOT = Path(__file__).resolve().parents[1]  # the Spark series repo: tests/ is one below

_MISSING = [m for m in ("torch", "safetensors", "numpy", "tokenizers") if importlib.util.find_spec(m) is None]
needs_torch = pytest.mark.skipif(
    bool(_MISSING), reason=f"tiny model generation needs {', '.join(_MISSING)} (pip install torch safetensors numpy tokenizers)"
)
VLLM_SRC = Path(os.environ.get("PATCHQ_VLLM_SRC", "/tmp/v/0.23.0/vllm"))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    if _MISSING:
        pytest.skip(f"tiny model generation needs {', '.join(_MISSING)}")
    out = tmp_path_factory.mktemp("tiny")
    rec = tiny_models.generate(out, seed=0)
    return out, rec


# ---------------------------------------------------------------- tiny models


@needs_torch
def test_generate_and_check_all_variants(models):
    out, rec = models
    assert set(rec["models"]) == set(tiny_models.ALL_VARIANTS)
    for v in tiny_models.ALL_VARIANTS:
        r = tiny_models.check(out / v)
        assert r["tensors"] > 0
        assert r["bytes"] < 16 * 1024 * 1024, f"{v} is {r['bytes']} bytes: should be a few MB"
    # the KV page relation that triggers the unify bug: drafter page per token = 2 x target's
    assert tiny_models.check(out / "drafter")["kv_page_bytes_per_token"] == 2 * tiny_models.check(out / "target")["kv_page_bytes_per_token"]


@needs_torch
def test_geometry_is_boot_md(models):
    out, _ = models
    t = json.loads((out / "target" / "config.json").read_text())
    tc = t["text_config"]
    assert t["architectures"] == ["Qwen3_5MoeForConditionalGeneration"] and t["model_type"] == "qwen3_5_moe"
    assert tc["model_type"] == "qwen3_5_moe_text"
    assert tc["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    assert (tc["hidden_size"], tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]) == (128, 4, 2, 256)
    assert tc["attn_output_gate"] is True and tc["mamba_ssm_dtype"] == "float32"
    assert (tc["linear_num_key_heads"], tc["linear_num_value_heads"], tc["linear_key_head_dim"], tc["linear_conv_kernel_dim"]) == (4, 8, 128, 4)
    assert (tc["num_experts"], tc["num_experts_per_tok"], tc["moe_intermediate_size"], tc["shared_expert_intermediate_size"]) == (8, 2, 128, 128)
    assert tc["mtp_num_hidden_layers"] == 1 and tc["vocab_size"] == 1024 and tc["tie_word_embeddings"] is False
    assert tc["rope_parameters"]["mrope_section"] == [11, 11, 10] and tc["rope_parameters"]["mrope_interleaved"] is True
    assert t["vision_config"]["depth"] == 1
    d = json.loads((out / "drafter" / "config.json").read_text())
    assert d["architectures"] == ["DFlashDraftModel"] and d["model_type"] == "qwen3"
    assert d["num_hidden_layers"] == 1 and d["layer_types"] == ["full_attention"]
    assert (d["num_attention_heads"], d["num_key_value_heads"], d["head_dim"]) == (8, 8, 128)
    assert d["dflash_config"]["block_size"] == 16 and d["dflash_config"]["mask_token_id"] == tiny_models.TOK["<|dflash_mask|>"]
    q = json.loads((out / "target-int4-fp8" / "config.json").read_text())["quantization_config"]
    assert (q["quant_method"], q["packing_format"], q["bits"], q["sym"]) == ("auto-round", "auto_round:auto_gptq", 4, True)
    assert all(v["bits"] == 16 for v in q["extra_config"].values())


@needs_torch
def test_weights_names_and_dtypes(models):
    out, _ = models
    h = tiny_models.read_safetensors_header(out / "target" / "model.safetensors")
    assert "model.language_model.layers.0.linear_attn.in_proj_qkv.weight" in h
    assert h["model.language_model.layers.0.linear_attn.A_log"]["dtype"] == "F32"
    assert h["model.language_model.layers.3.self_attn.q_proj.weight"]["shape"] == [4 * 256 * 2, 128]
    assert h["model.language_model.layers.0.linear_attn.conv1d.weight"]["shape"] == [2 * 512 + 1024, 1, 4]
    assert any(k.startswith("mtp.layers.0.") for k in h) and "mtp.fc.weight" in h
    assert not any(k.startswith("mtp.") and "linear_attn" in k for k in h)
    d = tiny_models.read_safetensors_header(out / "drafter" / "model.safetensors")
    assert not any("embed_tokens" in k or "lm_head" in k for k in d)
    assert d["fc.weight"]["shape"] == [128, 128 * 2]
    q = tiny_models.read_safetensors_header(out / "target-int4-fp8" / "model.safetensors")
    p = "model.language_model.layers.0."
    assert q[p + "mlp.experts.0.gate_proj.qweight"] == {**q[p + "mlp.experts.0.gate_proj.qweight"], "dtype": "I32", "shape": [128 // 8, 128]}
    assert q[p + "mlp.experts.0.gate_proj.scales"]["dtype"] == "F16"
    assert q[p + "mlp.shared_expert.down_proj.weight"]["dtype"] == "F8_E4M3"
    assert q[p + "mlp.shared_expert.down_proj.weight_scale_inv"]["shape"] == [1, 1]
    assert q[p + "linear_attn.in_proj_a.weight"]["dtype"] == "BF16"  # bits 16 in extra_config
    assert "lm_head.weight" in q and q["lm_head.weight"]["dtype"] == "BF16"
    b = tiny_models.read_safetensors_header(out / "target-int4" / "model.safetensors")
    assert b[p + "mlp.shared_expert.down_proj.weight"]["dtype"] == "BF16"


@needs_torch
def test_deterministic(models, tmp_path):
    out, rec = models
    rec2 = tiny_models.generate(tmp_path, seed=0, variants=("drafter", "target-int4-fp8"))
    for v in ("drafter", "target-int4-fp8"):
        assert rec2["models"][v]["files"] == rec["models"][v]["files"]
    rec3 = tiny_models.generate(tmp_path / "s1", seed=1, variants=("drafter",))
    assert rec3["models"]["drafter"]["files"]["model.safetensors"] != rec["models"]["drafter"]["files"]["model.safetensors"]


@needs_torch
def test_check_catches_problems(models, tmp_path):
    out, _ = models
    bad = tmp_path / "target"
    shutil.copytree(out / "target", bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["text_config"]["num_key_value_heads"] = 4  # k/v shapes no longer match
    del cfg["text_config"]["attn_output_gate"]
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(tiny_models.CheckError) as e:
        tiny_models.check(bad)
    msg = str(e.value)
    assert "attn_output_gate" in msg and "k_proj" in msg
    # an extra and a missing tensor
    from safetensors.torch import load_file, save_file

    dd = tmp_path / "drafter"
    shutil.copytree(out / "drafter", dd)
    (dd / "model.safetensors.index.json").unlink()
    t = load_file(str(dd / "model.safetensors"))
    t["model.embed_tokens.weight"] = t.pop("fc.weight")
    save_file(t, str(dd / "model.safetensors"))
    with pytest.raises(tiny_models.CheckError) as e:
        tiny_models.check(dd)
    assert "missing tensor fc.weight" in str(e.value) and "unexpected tensor model.embed_tokens.weight" in str(e.value)


@needs_torch
def test_gptq_pack_roundtrip():
    import numpy as np

    w = np.random.default_rng(3).normal(0, 0.05, size=(64, 256)).astype(np.float32)
    qw, qz, sc, gi = tiny_models.gptq_pack(w, group_size=128)
    assert qw.shape == (32, 64) and qw.dtype == np.int32
    assert qz.shape == (2, 8) and (qz.view(np.uint32) == 0x77777777).all()
    assert sc.shape == (2, 64) and sc.dtype == np.float16 and gi.tolist() == [k // 128 for k in range(256)]
    u = qw.view(np.uint32)
    q = np.stack([(u >> (4 * j)) & 0xF for j in range(8)], axis=1).reshape(256, 64).astype(np.int64)  # [K, N]
    deq = (q - 8) * sc.astype(np.float32)[gi]
    assert np.abs(deq - w.T).max() <= sc.astype(np.float32).max() / 2 + 1e-6


@needs_torch
def test_fp8_block_quant_roundtrip():
    import numpy as np
    import torch

    w = np.random.default_rng(4).normal(0, 0.05, size=(256, 128)).astype(np.float32)
    q, s = tiny_models.fp8_block_quant(w)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (2, 1) and s.dtype == torch.float32
    deq = q.float().numpy() * np.repeat(s.numpy(), 128, axis=0)
    assert np.abs(deq - w).max() < 0.07 * np.abs(w).max()


@needs_torch
def test_tokenizer_with_transformers(models):
    tr = pytest.importorskip("transformers")
    out, _ = models
    tok = tr.AutoTokenizer.from_pretrained(str(out / "target"))
    assert len(tok) == 1024 and tok.eos_token_id == tiny_models.TOK["<|im_end|>"]
    s = tok.apply_chat_template([{"role": "user", "content": "capital of France?"}], tokenize=False, add_generation_prompt=True)
    assert s == "<|im_start|>user\ncapital of France?<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(tok(s).input_ids) == s


@pytest.mark.skipif(not VLLM_SRC.is_dir(), reason=f"no vLLM 0.23.0 source at {VLLM_SRC} (set PATCHQ_VLLM_SRC)")
def test_source_anchors_hold_in_vllm_023():
    assert tiny_models.check_source_anchors(VLLM_SRC) == []


@pytest.mark.skipif(not VLLM_SRC.is_dir(), reason=f"no vLLM 0.23.0 source at {VLLM_SRC} (set PATCHQ_VLLM_SRC)")
def test_configs_parse_with_vllm_config_classes(models):
    tr = pytest.importorskip("transformers")
    out, _ = models
    spec = importlib.util.spec_from_file_location("_q35moe", VLLM_SRC / "transformers_utils/configs/qwen3_5_moe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    c = mod.Qwen3_5MoeConfig.from_pretrained(str(out / "target-int4-fp8"))
    assert c.text_config.layer_types[-1] == "full_attention" and c.text_config.mtp_num_hidden_layers == 1
    d = tr.AutoConfig.from_pretrained(str(out / "drafter"))
    assert type(d).__name__ == "Qwen3Config" and d.dflash_config["target_layer_ids"] == [1, 2]


# ---------------------------------------------------------------- wheelsplit


def test_wheelsplit_roundtrip(tmp_path):
    data = os.urandom(2500) + b"x" * 1
    src = tmp_path / "vllm-x.whl"
    src.write_bytes(data)
    m = wheelsplit.split(src, tmp_path / "parts", limit=1000)
    man = json.loads(m.read_text())
    assert [p["size"] for p in man["parts"]] == [1000, 1000, 501]
    assert man["sha256"] == hashlib.sha256(data).hexdigest()
    out = wheelsplit.join(m, tmp_path / "joined.whl")
    assert out.read_bytes() == data
    assert wheelsplit.check(m) == {"present": [p["file"] for p in man["parts"]], "missing": [], "corrupt": []}
    # parts spread over several folders (one per device call) are found
    other = tmp_path / "other"
    other.mkdir()
    shutil.move(str(tmp_path / "parts" / man["parts"][1]["file"]), other)
    assert wheelsplit.join(m, tmp_path / "j2.whl", [tmp_path / "parts", other]).read_bytes() == data


def test_wheelsplit_exact_multiple_and_empty(tmp_path):
    src = tmp_path / "a.bin"
    src.write_bytes(b"y" * 2000)
    man = json.loads(wheelsplit.split(src, tmp_path / "p", limit=1000).read_text())
    assert [p["size"] for p in man["parts"]] == [1000, 1000]
    e = tmp_path / "empty.bin"
    e.write_bytes(b"")
    me = wheelsplit.split(e, tmp_path / "pe", limit=1000)
    assert wheelsplit.join(me, tmp_path / "e2").read_bytes() == b""


def test_wheelsplit_detects_corruption_and_missing(tmp_path):
    src = tmp_path / "w.whl"
    src.write_bytes(os.urandom(3000))
    m = wheelsplit.split(src, tmp_path / "parts", limit=1024)
    man = json.loads(m.read_text())
    p1 = tmp_path / "parts" / man["parts"][1]["file"]
    raw = bytearray(p1.read_bytes())
    raw[10] ^= 0xFF
    p1.write_bytes(bytes(raw))
    with pytest.raises(wheelsplit.SplitError, match="part"):
        wheelsplit.join(m, tmp_path / "out.whl")
    assert not (tmp_path / "out.whl").exists()
    assert wheelsplit.check(m)["corrupt"] == [man["parts"][1]["file"]]
    p1.unlink()
    with pytest.raises(wheelsplit.SplitError, match="missing"):
        wheelsplit.join(m, tmp_path / "out.whl")
    assert wheelsplit.main(["check", str(m)]) == 1


def test_wheelsplit_cli(tmp_path, capsys):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(5000))
    assert wheelsplit.main(["split", str(src), str(tmp_path / "o"), "--limit", "2048"]) == 0
    assert json.loads(capsys.readouterr().out)["parts"] == 3
    assert wheelsplit.main(["join", str(tmp_path / "o" / "f.bin.manifest.json"), str(tmp_path / "g.bin")]) == 0
    assert (tmp_path / "g.bin").read_bytes() == src.read_bytes()


# ---------------------------------------------------------------- slimwheel (fatbin zeroing)


def _fake_elf(entries: list[tuple[int, int, bytes]], section: bytes = b".nv_fatbin") -> bytes:
    """A minimal ELF64 with a .nv_fatbin section holding one container of (kind, sm, payload)."""
    body = b""
    for kind, sm, payload in entries:
        hdr = bytearray(64)
        struct.pack_into("<HHII", hdr, 0, kind, 0x101, 64, len(payload))
        struct.pack_into("<I", hdr, 16, len(payload))
        struct.pack_into("<I", hdr, 28, sm)
        body += bytes(hdr) + payload
    fatbin = struct.pack("<IHHQ", slimwheel.FATBIN_MAGIC, 1, 16, len(body)) + body
    shstr = b"\0" + section + b"\0.shstrtab\0"
    ehdr_size = 64
    fat_off = ehdr_size
    str_off = fat_off + len(fatbin)
    sh_off = (str_off + len(shstr) + 7) // 8 * 8
    ehdr = bytearray(64)
    ehdr[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", ehdr, 0x28, sh_off)
    struct.pack_into("<HHH", ehdr, 0x3A, 64, 3, 2)

    def sh(name, off, size):
        return struct.pack("<IIQQQQIIQQ", name, 1, 0, 0, off, size, 0, 0, 1, 0)

    shdrs = bytes(64) + sh(1, fat_off, len(fatbin)) + sh(2 + len(section), str_off, len(shstr))
    pad = bytes(sh_off - (str_off + len(shstr)))
    return bytes(ehdr) + fatbin + shstr + pad + shdrs


def test_fatbin_zeroing_keeps_only_what_sm90_can_use(tmp_path):
    entries = [
        (slimwheel.KIND_ELF, 80, b"A" * 32),
        (slimwheel.KIND_ELF, 90, b"B" * 32),
        (slimwheel.KIND_PTX, 80, b"C" * 32),
        (slimwheel.KIND_ELF, 120, b"D" * 32),
        (slimwheel.KIND_PTX, 100, b"E" * 32),
        (slimwheel.KIND_ELF, 89, b"F" * 32),
    ]
    so = tmp_path / "_C.abi3.so"
    orig = _fake_elf(entries)
    so.write_bytes(orig)
    assert slimwheel.probe(so) == {
        "elf120": {"n": 1, "bytes": 32}, "elf80": {"n": 1, "bytes": 32}, "elf89": {"n": 1, "bytes": 32},
        "elf90": {"n": 1, "bytes": 32}, "ptx100": {"n": 1, "bytes": 32}, "ptx80": {"n": 1, "bytes": 32},
    }
    stats = slimwheel.zero_foreign_entries(so, {90})
    assert stats == {"entries": 6, "zeroed": 4, "zeroed_bytes": 128}
    new = so.read_bytes()
    assert len(new) == len(orig)
    for ch, kept in zip(b"ABCDEF", [False, True, True, False, False, False]):
        assert (bytes([ch]) * 32 in new) is kept
    # headers intact: the file still parses to the same entries
    assert [(e["kind"], e["sm"]) for e in slimwheel.fatbin_entries(new)] == [(k, s) for k, s, _ in entries]
    # a file without a fatbin is left alone
    plain = tmp_path / "plain.so"
    plain.write_bytes(_fake_elf([(slimwheel.KIND_ELF, 80, b"G" * 32)], section=b".rodata"))
    assert slimwheel.zero_foreign_entries(plain, {90}) == {"entries": 0, "zeroed": 0, "zeroed_bytes": 0}
    assert b"G" * 32 in plain.read_bytes()
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF\x02\x01" + bytes(20))
    assert slimwheel.zero_foreign_entries(junk, {90})["zeroed"] == 0


# ---------------------------------------------------------------- boot runner, against a fake vLLM

FAKE_MAIN = r'''
"""Stand-in for vllm.entrypoints.cli.main: fails or serves the way vLLM 0.23.0 does, by patch state."""
import json, os, sys, time, multiprocessing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

def applied():
    site = Path(__file__).resolve().parents[3]
    try:
        return set(json.loads((site / ".patchq" / "journal.json").read_text()).get("patches", {}))
    except FileNotFoundError:
        return set()

def unify_kv_cache_spec_page_size():
    new_spec_page_size_bytes, max_page_size = 1, 2
    assert new_spec_page_size_bytes == max_page_size

def child():
    time.sleep(3600)

def main():
    a = sys.argv[1:]
    port = int(a[a.index("--port") + 1])
    spec = json.loads(a[a.index("--speculative-config") + 1]) if "--speculative-config" in a else None
    prefix = "--enable-prefix-caching" in a
    multiprocessing.Process(target=child, daemon=False).start()  # an engine-core-like child
    time.sleep(0.5)
    p = applied()
    if spec and spec["method"] == "dflash" and "unify-kv-page" not in p:
        print("(EngineCore_DP0 pid=1) ERROR 11-30 12:00:00 [core.py:1] EngineCore failed to start.", flush=True)
        print("Traceback (most recent call last):", flush=True)
        print('  File "/x/vllm/v1/core/kv_cache_utils.py", line 1064, in unify_kv_cache_spec_page_size', flush=True)
        print("    assert new_spec.page_size_bytes == max_page_size", flush=True)
        print("AssertionError", flush=True)
        print("RuntimeError: Engine core initialization failed. See root cause above.", flush=True)
        os._exit(1)
    if spec and prefix and "prefix-align" not in p:
        print("AssertionError: block_size must be divisible by hash_block_size", flush=True)
        os._exit(1)
    n = {"drafts": 0}
    class H(BaseHTTPRequestHandler):
        def log_message(self, *x): pass
        def _send(self, code, body, ctype="application/json"):
            b = body.encode(); self.send_response(code); self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
        def do_GET(self):
            if self.path == "/health": return self._send(200, "")
            if self.path == "/metrics":
                k = spec["num_speculative_tokens"] if spec else 0
                return self._send(200, "# HELP x\nvllm:spec_decode_num_drafts_total{engine=\"0\"} %d\n"
                                  "vllm:spec_decode_num_draft_tokens_total{engine=\"0\"} %d\n"
                                  "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 0.0\n"
                                  "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 5\n" % (n["drafts"], n["drafts"] * k), "text/plain")
            self._send(404, "{}")
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if spec: n["drafts"] += 23
            flip = os.environ.get("PATCHQ_INT8_LMHEAD_DISABLE") == "1"
            if self.path == "/v1/completions":
                ids = [5, 6, 7] + ([9] if flip else [8])
                return self._send(200, json.dumps({"choices": [{"text": " Paris" + ("!" if flip else "."), "token_ids": ids}], "usage": {}}))
            return self._send(200, json.dumps({"choices": [{"message": {"content": "Paris"}}], "usage": {}}))
    print("INFO 11-30 12:00:00 [api_server.py:1] Starting vLLM API server on port %d" % port, flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()

if __name__ == "__main__":
    main()
'''

_PATCHQ_DEPS = [m for m in ("libcst", "typer", "filelock", "rich", "packaging") if importlib.util.find_spec(m) is None]
VLLM_SITE = Path(os.environ.get("PATCHQ_VLLM_SITE", "/tmp/sitetest"))


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="the fake `vllm serve` imports the real vllm package, whose __init__ imports torch")
@pytest.mark.skipif(bool(_PATCHQ_DEPS) or not (VLLM_SITE / "vllm-0.23.0.dist-info").is_dir(),
                    reason=f"needs patchq's deps ({', '.join(_PATCHQ_DEPS) or 'ok'}) and a vLLM 0.23.0 .py tree with "
                           f"its dist-info at {VLLM_SITE} (set PATCHQ_VLLM_SITE)")
def test_boot_runner_against_fake_vllm(tmp_path):
    from lab import boot

    root = tmp_path / "pq"
    site = root / "rel" / "0.23.0" / "site"
    shutil.copytree(VLLM_SITE, site, ignore=shutil.ignore_patterns("__pycache__", ".patchq"))
    (site / "vllm" / "entrypoints" / "cli" / "main.py").write_text(FAKE_MAIN)
    boot.write_plugin_dist(root)
    boot.make_neg_series(root)
    (root / "models").mkdir()
    plan = [r for r in boot.default_plan("0.23.0") if r["id"] in ("dflash", "neg-unify", "neg-prefix-align", "dense", "dense-bf16head", "base")]
    planf = tmp_path / "plan.json"
    planf.write_text(json.dumps(plan))
    env_before = dict(os.environ)
    try:
        rc = boot.main(["--root", str(root), "run", "--release", "0.23.0", "--plan", str(planf), "--jobs", "3",
                        "--stagger", "0", "--boot-timeout", "60", "--base-port", "18400"])
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    recs = {r["run"]: r for r in map(json.loads, (root / "results" / "0.23.0.jsonl").read_text().splitlines())}
    assert rc == 0, {k: (v["result"], v["error_line"]) for k, v in recs.items()}
    assert recs["dflash"]["result"] == "serves" and recs["dflash"]["drafts"] == 46 and recs["dflash"]["draft_tokens"] == 46 * 12
    assert recs["dflash"]["patches_applied"] == ["fla-shmem", "unify-kv-page", "prefix-align"]
    assert recs["neg-unify"]["result"] == "fails" and recs["neg-unify"]["as_expected"]
    assert recs["neg-unify"]["error_line"].startswith("AssertionError: `assert new_spec.page_size_bytes == max_page_size` in unify_kv_cache_spec_page_size")
    assert recs["neg-unify"]["patches_applied"] == ["fla-shmem", "prefix-align"]
    assert recs["neg-prefix-align"]["error_line"] == "AssertionError: block_size must be divisible by hash_block_size"
    assert recs["base"]["drafts"] == 0 and recs["base"]["patches_applied"] == ["fla-shmem"]
    assert recs["dense-bf16head"]["compare"]["first_diff"] == 3 and not recs["dense-bf16head"]["compare"]["same_text"]
    assert "--kv-cache-memory-bytes" in recs["dense"]["flags"]
    # every server and its child are gone
    import subprocess as sp

    left = sp.run(["pgrep", "-f", str(root)], capture_output=True, text=True).stdout.split()
    assert left == []
    out = tmp_path / "out"
    assert boot.main(["--root", str(root), "wait", "--out", str(out), "--max-wait", "1"]) == 0
    assert len(list(out.iterdir())) <= 8 and (out / "logs.tgz").is_file()
    assert len((out / "results.jsonl").read_text().splitlines()) == len(plan)


def test_boot_error_line_and_metrics():
    from lab import boot

    log = "\n".join([
        "(EngineCore_DP0 pid=7) ERROR 11-30 10:00:00 [core.py:900] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=7) ERROR 11-30 10:00:00 [core.py:900]   File "/s/vllm/v1/core/kv_cache_coordinator.py", line 507, in __init__',
        "(EngineCore_DP0 pid=7) ERROR 11-30 10:00:00 [core.py:900]     assert block_size % hash_block_size == 0, (",
        "(EngineCore_DP0 pid=7) ERROR 11-30 10:00:00 [core.py:900] AssertionError: block_size must be divisible by hash_block_size",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ])
    assert boot.error_line(log) == "AssertionError: block_size must be divisible by hash_block_size"
    assert boot.error_line("foo\nValueError: bad thing\nRuntimeError: Engine core initialization failed.") == "ValueError: bad thing"
    m = boot.parse_spec_metrics('vllm:spec_decode_num_drafts_total{a="1"} 3.0\nvllm:spec_decode_num_drafts_total{a="2"} 2\n'
                                "vllm:spec_decode_num_accepted_tokens_per_pos_total{p=\"0\"} 9\n# c\n")
    assert m == {"drafts": 5.0, "draft_tokens": 0.0, "accepted": 0.0}
