"""Tests of patchq_runtime.int8_lmhead (the int8 lm-head w8a16 GEMV).

CPU tests check the quantization math and the module plumbing (eligibility, fallback,
freeing, drafter sharing) against plain-torch references; they need torch (skipped
with a reason when it is absent). GPU tests (``-m gpu``) need CUDA and Triton and run
through the device tool::

    PYTHONPATH=spark:. python -m pytest spark/tests/test_int8_lmhead.py -m gpu -q -s

They print their accuracy figures (max error, argmax agreement and every mismatch
with its logit gap) with ``-s``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the Spark series repo: tests/ is one below
RUNTIME = ROOT  # where patchq_runtime/ lives
if str(RUNTIME) not in sys.path:
    sys.path.insert(0, str(RUNTIME))

ENV_KEYS = (
    "PATCHQ_INT8_LMHEAD_MIN_ROWS",
    "PATCHQ_INT8_LMHEAD_KEEP_BF16",
    "PATCHQ_INT8_LMHEAD_DISABLE",
    "PATCHQ_INT8_LMHEAD_FORCE",
    "PATCHQ_INT8_LMHEAD_WARMUP",
    "PATCHQ_INT8_LMHEAD_FREE_ANY",
    "PATCHQ_INT8_LMHEAD_CONFIG",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)
    yield


def _torch():
    return pytest.importorskip("torch", reason="torch is not installed: the int8 lm-head math tests need it")


# ---------------------------------------------------------------------------
# import hygiene (no torch needed)
# ---------------------------------------------------------------------------
def test_module_imports_without_torch_or_triton():
    code = textwrap.dedent(
        """
        import sys
        import patchq_runtime.int8_lmhead as m
        assert 'torch' not in sys.modules, 'torch imported at module import'
        assert 'triton' not in sys.modules, 'triton imported at module import'
        assert m.MIN_ROWS_DEFAULT == 100000
        assert set(m.LAUNCH_CONFIGS) >= {'sm90', 'sm121', 'default'}
        assert m.KEEP_BF16_DEFAULT is True
        for arch, table in m.LAUNCH_CONFIGS.items():
            assert {'1', '16', '32', '64'} <= set(table) <= set(m.TABLE_KEYS), arch
            mins = [e['min_B'] for e in table.get('gemm', [])]
            assert mins == sorted(mins) and all(e['kernel'] in ('gemm', 'wgmma') for e in table.get('gemm', [])), arch
            # kept-weight crossovers: ascending, disjoint [lo, hi] ranges, hi None only last
            kept = table['kept_bf16']
            for i, (lo, hi) in enumerate(kept):
                assert lo >= 1 and (hi is None and i == len(kept) - 1 or hi >= lo), arch
                assert i == 0 or lo > kept[i - 1][1], arch
        import patchq_runtime.int8_kernels as k
        import patchq_runtime.int8_wgmma as wg
        assert 'torch' not in sys.modules and 'triton' not in sys.modules
        print('ok')
        """
    )
    env = dict(os.environ, PYTHONPATH=str(RUNTIME))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


# ---------------------------------------------------------------------------
# helpers: fake vLLM modules
# ---------------------------------------------------------------------------
def _fake_classes():
    torch = _torch()
    import torch.nn.functional as F

    class UnquantizedEmbeddingMethod:
        calls = 0

        def apply(self, layer, x, bias=None):
            type(self).calls += 1
            return F.linear(x, layer.weight, bias)

    class Fp8LinearMethod(UnquantizedEmbeddingMethod):
        pass

    class ParallelLMHead(torch.nn.Module):
        def __init__(self, weight, qm=None, bias=None):
            super().__init__()
            self.weight = torch.nn.Parameter(weight, requires_grad=False)
            self.quant_method = qm if qm is not None else UnquantizedEmbeddingMethod()

    class VocabParallelEmbedding(ParallelLMHead):
        pass

    return UnquantizedEmbeddingMethod, Fp8LinearMethod, ParallelLMHead, VocabParallelEmbedding


def _naive_quant(w):
    """Row-by-row float64 restatement of the documented quantization."""
    torch = _torch()
    V, H = w.shape
    q = torch.empty((V, H), dtype=torch.int8)
    s = torch.empty((V,), dtype=torch.float16)
    for n in range(V):
        row = w[n].double()
        amax = float(row.abs().max())
        s32 = max(float(torch.tensor(amax / 127.0, dtype=torch.float32)), 1e-12)
        s32 = float(torch.tensor(s32, dtype=torch.float32))
        s16 = torch.tensor(s32, dtype=torch.float32).to(torch.float16)
        div = float(s16.float())
        if div <= 0:
            div = s32
        qr = torch.round(w[n].float() / torch.tensor(div, dtype=torch.float32)).clamp(-127, 127)
        q[n] = qr.to(torch.int8)
        s[n] = s16
    return q, s


def _weights(torch, V, H, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(V, H, generator=g) * 0.02
    w[0] = 0.0  # all-zero row
    w[1] = 0.0
    w[1, 3] = 0.5  # a single large entry
    w[2] *= 1e-6  # fp16 scale underflows to 0
    w[3, :7] = torch.tensor([127.0, -127.0, 63.5, -63.5, 0.5, -0.5, 1.0]) * 1e-3  # exact .5 ties
    return w.to(dtype)


# ---------------------------------------------------------------------------
# CPU: quantization math
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16", "float32"])
def test_quantize_rows_matches_naive_reference(dtype_name):
    torch = _torch()
    from patchq_runtime.int8_lmhead import quantize_rows

    dtype = getattr(torch, dtype_name)
    w = _weights(torch, 97, 61, dtype)
    q, s = quantize_rows(w, chunk_rows=10)
    qn, sn = _naive_quant(w)
    assert q.dtype == torch.int8 and q.shape == (97, 61)
    assert s.dtype == torch.float16 and s.shape == (97,)
    assert torch.equal(q, qn)
    assert torch.equal(s.view(torch.int16), sn.view(torch.int16))
    # chunking does not change anything
    q2, s2 = quantize_rows(w, chunk_rows=1000)
    assert torch.equal(q, q2) and torch.equal(s, s2)


def test_quantize_rows_properties():
    torch = _torch()
    from patchq_runtime.int8_lmhead import quantize_rows

    w = _weights(torch, 300, 128, torch.bfloat16, seed=3)
    q, s = quantize_rows(w)
    assert int(q.abs().max()) <= 127
    assert int(q.min()) >= -127  # -128 never used (symmetric)
    wf = w.float()
    amax = wf.abs().amax(dim=1)
    live = s.float() > 0
    # the row's largest magnitude maps to +-127
    assert torch.all(q[live].abs().amax(dim=1) == 127)
    # all-zero row: q = 0 (scale clamps to 1e-12, which is 0 in fp16)
    assert torch.all(q[0] == 0) and float(s[0]) == 0.0
    # fp16-underflow row dequantizes to zero, error bounded by its absmax
    assert float(s[2]) == 0.0 and float(amax[2]) < 1e-4
    # dequantization error <= half a step (+ fp16 rounding of the stored scale)
    deq = q.float() * s.float()[:, None]
    err = (deq - wf).abs().amax(dim=1)
    bound = s.float() * 0.5 * (1 + 2**-10) + amax * 2**-10
    assert torch.all(err[live] <= bound[live] + 1e-12)


def test_quantize_rows_rejects_bad_input():
    torch = _torch()
    from patchq_runtime.int8_lmhead import quantize_rows

    with pytest.raises(ValueError):
        quantize_rows(torch.zeros(3))
    with pytest.raises(ValueError):
        quantize_rows(torch.zeros(3, 4, dtype=torch.int32))


@pytest.mark.parametrize("with_bias", [False, True])
def test_int8_linear_reference_matches_float64(with_bias):
    torch = _torch()
    from patchq_runtime.int8_lmhead import int8_linear_reference, quantize_rows

    w = _weights(torch, 211, 96, torch.bfloat16, seed=5)
    q, s = quantize_rows(w)
    x = torch.randn(2, 3, 96, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    bias = (torch.randn(211) * 0.1).to(torch.bfloat16) if with_bias else None
    out = int8_linear_reference(x, q, s, bias, chunk_rows=50)
    assert out.shape == (2, 3, 211) and out.dtype == torch.bfloat16
    exact = (x.double() @ q.double().t()) * s.double()
    if bias is not None:
        exact = exact + bias.double()
    exact_bf16 = exact.to(torch.bfloat16)
    # fp32 accumulation then one rounding: at most one bf16 ulp from the exact value
    diff = (out.float() - exact_bf16.float()).abs()
    ulp = exact.abs().float().clamp_min(1e-30) * 2**-7
    assert torch.all(diff <= ulp + 1e-6)
    out32 = int8_linear_reference(x, q, s, bias, out_dtype=torch.float32)
    acc_bound = 96 * 2**-24 * ((x.double().abs() @ q.double().abs().t()) * s.double()) + 1e-7
    assert torch.all((out32.double() - exact).abs() <= acc_bound + exact.abs() * 2**-24)
    with pytest.raises(ValueError):
        int8_linear_reference(torch.zeros(2, 95), q, s)


# ---------------------------------------------------------------------------
# CPU: module plumbing (lm_head_logits)
# ---------------------------------------------------------------------------
def _head(torch, cls, V=257, H=64, dtype=None, qm=None, seed=0):
    dtype = dtype or torch.bfloat16
    w = (torch.randn(V, H, generator=torch.Generator().manual_seed(seed)) * 0.02).to(dtype)
    return cls(w, qm=qm), w.clone()


def test_fallback_below_threshold_is_exactly_stock():
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    UQ, _, Head, _ = _fake_classes()
    head, w = _head(torch, Head)  # 257 rows <= 100000
    x = torch.randn(5, 64).to(torch.bfloat16)
    before = UQ.calls
    out = m.lm_head_logits(head, x, None)
    assert UQ.calls == before + 1
    assert torch.equal(out, torch.nn.functional.linear(x, w))
    assert getattr(head, "_patchq_int8_state") == "fallback"
    assert getattr(head, "_patchq_int8", None) is None
    assert head.weight.stride() == (64, 1)  # untouched


def test_fallback_reasons(monkeypatch):
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    UQ, Fp8, Head, _ = _fake_classes()
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_MIN_ROWS", "100")
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_FORCE", "1")
    x = torch.randn(3, 64).to(torch.bfloat16)
    # quantized lm-head (not vLLM's unquantized method)
    head, w = _head(torch, Head, qm=Fp8())
    assert m.is_eligible(head) == (False, "quant_method Fp8LinearMethod")
    assert torch.equal(m.lm_head_logits(head, x), torch.nn.functional.linear(x, w))
    # fp32 weight
    head, w = _head(torch, Head, dtype=torch.float32)
    assert not m.is_eligible(head)[0]
    xf = x.float()
    assert torch.equal(m.lm_head_logits(head, xf), torch.nn.functional.linear(xf, w))
    # disabled by env
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_DISABLE", "1")
    head, w = _head(torch, Head)
    assert torch.equal(m.lm_head_logits(head, x), torch.nn.functional.linear(x, w))
    monkeypatch.delenv("PATCHQ_INT8_LMHEAD_DISABLE")
    # not forced on CPU: needs CUDA
    monkeypatch.delenv("PATCHQ_INT8_LMHEAD_FORCE")
    head, w = _head(torch, Head)
    assert m.is_eligible(head) == (False, "weight not on CUDA")
    # bad threshold
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_MIN_ROWS", "many")
    with pytest.raises(ValueError):
        m.is_eligible(_head(torch, Head)[0])


@pytest.mark.parametrize("with_bias", [False, True])
def test_forced_int8_path_on_cpu_frees_and_matches_reference(monkeypatch, with_bias):
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    UQ, _, Head, _ = _fake_classes()
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_MIN_ROWS", "100")
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_FORCE", "1")
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_KEEP_BF16", "0")
    head, w = _head(torch, Head, V=301)
    x = torch.randn(2, 4, 64).to(torch.bfloat16)
    bias = (torch.randn(301) * 0.1).to(torch.bfloat16) if with_bias else None
    calls = UQ.calls
    out = m.lm_head_logits(head, x, bias)
    assert UQ.calls == calls  # int8 path, not the stock apply
    q, s = m.quantize_rows(w)
    assert torch.equal(out, m.int8_linear_reference(x, q, s, bias))
    assert out.shape == (2, 4, 301) and out.dtype == torch.bfloat16
    # freed: same Parameter object, same shape/dtype, no storage, writes raise
    wp = head.weight
    assert isinstance(wp, torch.nn.Parameter)
    assert tuple(wp.shape) == (301, 64) and wp.dtype == torch.bfloat16
    assert wp.stride() == (0, 0)
    assert wp.untyped_storage().nbytes() == 2
    with pytest.raises(RuntimeError):
        wp.data.add_(1)
    # second call reuses the copy
    q_id = id(head._patchq_int8[0])
    out2 = m.lm_head_logits(head, x, bias)
    assert torch.equal(out, out2) and id(head._patchq_int8[0]) == q_id
    # the int8 copy is not registered as a parameter/buffer
    assert set(dict(head.named_parameters())) == {"weight"}
    assert not list(head.buffers())


def test_keep_bf16_switch(monkeypatch):
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    _, _, Head, _ = _fake_classes()
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_MIN_ROWS", "100")
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_FORCE", "1")
    for value in ("", "1", "yes"):  # unset or empty: the default, keep
        monkeypatch.setenv("PATCHQ_INT8_LMHEAD_KEEP_BF16", value)
        head, w = _head(torch, Head, V=150)
        x = torch.randn(3, 64).to(torch.bfloat16)
        m.lm_head_logits(head, x)
        assert head._patchq_int8_state == "int8"
        assert torch.equal(head.weight, w)  # still there
        assert head.weight.stride() == (64, 1)
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_KEEP_BF16", "off")
    head, w = _head(torch, Head, V=150)
    m.lm_head_logits(head, torch.randn(3, 64).to(torch.bfloat16))
    assert head.weight.stride() == (0, 0)
    # a typo must not pick a memory mode silently
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_KEEP_BF16", "maybe")
    with pytest.raises(ValueError, match="PATCHQ_INT8_LMHEAD_KEEP_BF16"):
        m.prepare(_head(torch, Head, V=150)[0])


def test_bf16_serves_ranges():
    """The kept-weight dispatch reads the table's "kept_bf16" ranges exactly at their
    ends; a table without the key sends every batch to the int8 kernels."""
    from patchq_runtime import int8_lmhead as m

    ranges = [[65, 100], [300, None]]
    got = [b for b in (1, 64, 65, 100, 101, 299, 300, 10**6) if m._in_ranges(ranges, b)]
    assert got == [65, 100, 300, 10**6]
    assert not m._in_ranges(None, 10**6) and not m._in_ranges([], 1)
    table = {"kept_bf16": ranges}
    assert m._all_bf16(table, 65, 100) and m._all_bf16(table, 300, None) and m._all_bf16(table, 70, 80)
    assert not m._all_bf16(table, 64, 100) and not m._all_bf16(table, 65, 101) and not m._all_bf16(table, 65, None)
    assert m._all_bf16({"kept_bf16": [[65, 128], [129, None]]}, 65, None)
    assert not m._all_bf16({}, 1, 1)


def test_kept_weight_dispatch_cpu(monkeypatch, tmp_path):
    """bf16 weight kept: batches in the table's "kept_bf16" ranges take vLLM's own call
    (bit-identical to stock), the others the int8 path; with the weight freed every
    batch takes the int8 path. On CPU the "default" table applies (65 rows and up:
    bf16); the override file moves the crossover."""
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    UQ, _, Head, _ = _fake_classes()
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_MIN_ROWS", "100")
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_FORCE", "1")
    assert m.LAUNCH_CONFIGS["default"]["kept_bf16"] == [[65, None]]
    kept, w = _head(torch, Head, V=150)
    freed, _ = _head(torch, Head, V=150)
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_KEEP_BF16", "0")
    m.prepare(freed)
    monkeypatch.delenv("PATCHQ_INT8_LMHEAD_KEEP_BF16")
    g = torch.Generator().manual_seed(5)
    for lead in ((64,), (65,), (4, 16), (5, 13), (300,)):
        x = torch.randn(*lead, 64, generator=g).to(torch.bfloat16)
        rows = x.numel() // 64
        calls = UQ.calls
        out = m.lm_head_logits(kept, x)
        q, s = kept._patchq_int8
        if rows >= 65:
            assert UQ.calls == calls + 1, rows
            assert torch.equal(out, torch.nn.functional.linear(x, w)), rows
        else:
            assert UQ.calls == calls, rows
            assert torch.equal(out, m.int8_linear_reference(x, q, s)), rows
        calls = UQ.calls
        assert torch.equal(m.lm_head_logits(freed, x), m.int8_linear_reference(x, q, s)), rows
        assert UQ.calls == calls
    assert m.bf16_serves("cpu", 65) and not m.bf16_serves(torch.device("cpu"), 64)
    cfg = tmp_path / "table.json"
    cfg.write_text('{"kept_bf16": [[1, 8]]}')
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_CONFIG", str(cfg))
    assert m.bf16_serves("cpu", 8) and not m.bf16_serves("cpu", 9) and not m.bf16_serves("cpu", 300)


def test_tied_embedding_is_not_freed(monkeypatch):
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    _, _, _, Emb = _fake_classes()
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_MIN_ROWS", "100")
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_FORCE", "1")
    head, w = _head(torch, Emb, V=150)
    m.lm_head_logits(head, torch.randn(1, 64).to(torch.bfloat16))
    assert head._patchq_int8_state == "int8"
    assert torch.equal(head.weight, w)  # the embedding lookup still needs it


def test_drafter_shares_the_int8_copy(monkeypatch):
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    UQ, _, Head, _ = _fake_classes()
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_MIN_ROWS", "100")
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_FORCE", "1")
    target, _w = _head(torch, Head, V=180)
    x = torch.randn(2, 64).to(torch.bfloat16)
    out_t = m.lm_head_logits(target, x)
    # drafter holding the same module object: same copy, same logits
    assert torch.equal(m.lm_head_logits(target, x), out_t)
    # drafter with its own module whose weight is the same Parameter object (freed)
    drafter = Head.__new__(Head)
    torch.nn.Module.__init__(drafter)
    drafter.weight = target.weight
    drafter.quant_method = UQ()
    calls = UQ.calls
    out_d = m.lm_head_logits(drafter, x)
    assert UQ.calls == calls
    assert drafter._patchq_int8 is target._patchq_int8
    assert torch.equal(out_d, out_t)


def test_release_requires_int8_copy():
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    _, _, Head, _ = _fake_classes()
    head, _ = _head(torch, Head)
    with pytest.raises(RuntimeError):
        m.release_bf16_weight(head)


def test_argmax_agreement_small_cpu(monkeypatch):
    """Quantization alone (no kernel) keeps greedy argmax on peaked logits."""
    torch = _torch()
    from patchq_runtime import int8_lmhead as m

    g = torch.Generator().manual_seed(7)
    V, H, B = 8192, 512, 256
    w = (torch.randn(V, H, generator=g) * 0.02).to(torch.bfloat16)
    x = _realistic_hidden(torch, w, B, g, lead=(0.5, 6.0))
    q, s = m.quantize_rows(w)
    ref = torch.nn.functional.linear(x, w)
    got = m.int8_linear_reference(x, q, s)
    agree = (ref.float().argmax(-1) == got.float().argmax(-1)).float().mean().item()
    assert agree >= 0.999, agree


# ---------------------------------------------------------------------------
# Triton interpreter (CPU): kernel indexing and masking, fp16 only
# ---------------------------------------------------------------------------
def test_kernels_in_triton_interpreter():
    """Runs the kernels under TRITON_INTERPRET=1 on odd shapes (fp16: the
    3.6 interpreter mis-handles bf16 dot operands and int8->bf16 casts, so bf16 and
    the PTX conversion are covered by the GPU tests only)."""
    _torch()
    pytest.importorskip("triton", reason="triton is not installed: interpreter test skipped")
    np = pytest.importorskip("numpy", reason="the triton interpreter needs numpy")
    if tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 4):
        pytest.skip(f"numpy {np.__version__}: triton 3.6's interpreter turns 1-element arrays into "
                    "loop bounds with int(), which numpy >= 2.4 refuses")
    code = textwrap.dedent(
        """
        import sys
        import torch
        from patchq_runtime import int8_lmhead as m
        sys.path.insert(0, %r)
        import int8_kernels_dev
        int8_kernels_dev.register()
        torch.manual_seed(0)
        bad = []
        for V, H, B in [(1000, 320, 1), (777, 200, 13), (300, 256, 33), (130, 96, 64)]:
            w = torch.randn(V, H) * 0.02
            q, s = m.quantize_rows(w)
            x = torch.randn(B, H).to(torch.float16)
            for bias in (None, torch.randn(V).to(torch.float16)):
                ref = m.int8_linear_reference(x, q, s, bias)
                kinds = [("dot", 64, 128), ("dott", 64, 128), ("dott", 32, 64), ("imma", 64, 64), ("gemm", 64, 64)]
                if B == 1:
                    kinds.append(("gemv", 32, 128))
                for kind, bn, bk in kinds:
                    out = torch.full((B, V), float("nan"), dtype=torch.float16)
                    cfg = dict(kernel=kind, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=2, BLOCK_B=32)
                    if kind != "gemm":
                        cfg.pop("BLOCK_B")
                    m._launch(x, q, s, bias, out, cfg)
                    d = (out.float() - ref.float()).abs().max().item()
                    tol = 2e-3 * max(1.0, ref.float().abs().max().item())
                    if not d <= tol:
                        bad.append((V, H, B, kind, bias is not None, d))
        # outlier channels (the imma path takes them out of the digit planes): H = 3072
        V, H, B = 130, 3072, 40
        w = torch.randn(V, H) * 0.02
        q, s = m.quantize_rows(w)
        x = torch.randn(B, H)
        x[:, [5, 700, 2900]] *= torch.tensor([300.0, 50.0, 1000.0])
        x[3, 1234] = 200.0
        x[7] = 0.0
        x = x.to(torch.float16)
        ref = m.int8_linear_reference(x, q, s)
        out = torch.full((B, V), float("nan"), dtype=torch.float16)
        calls = m._kernel_calls(dict(kernel="imma", NP="auto", BLOCK_N=64, BLOCK_K=256, num_warps=4, num_stages=2),
                                x, q, s, None, out)
        for fn, args, kw, grid in calls:
            fn[grid](*args, **kw)
        split = [c for c in calls if "x_ptr" in c[0].arg_names and "xq_ptr" in c[0].arg_names][0][1]
        n = int(split[7][0])
        assert n == 4 and sorted(split[6][:n].tolist()) == [5, 700, 1234, 2900], split[6]
        assert int(split[4].max()) == 0  # two planes for the dense part
        d = (out.float() - ref.float()).abs().max().item()
        if not d <= 2e-3 * ref.float().abs().max().item():
            bad.append(("outliers", d))
        assert torch.equal(out[7], torch.zeros_like(out[7]))
        print("BAD", bad)
        assert not bad
        """ % str(ROOT / "bench")
    )
    env = dict(os.environ, PYTHONPATH=str(RUNTIME), TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]


def test_imma_launch_plan():
    """The adaptive imma mode plans a split and two gated launches; the 3-plane one
    takes NP3's tile (STACK 0 unless NP3 says otherwise); fixed NP plans one launch."""
    torch = _torch()
    pytest.importorskip("triton", reason="triton is not installed: launch planning needs its jit kernels")
    from patchq_runtime import int8_lmhead as m

    x = torch.zeros(40, 3072, dtype=torch.bfloat16)
    q = torch.zeros(1000, 3072, dtype=torch.int8)
    s = torch.ones(1000, dtype=torch.float16)
    out = torch.empty(40, 1000, dtype=torch.bfloat16)
    cfg = dict(m.LAUNCH_CONFIGS["sm90"]["64"], BLOCK_B=64)
    stats, split, two, three = m._kernel_calls(cfg, x, q, s, None, out)
    assert stats[3] == (64,) and stats[2]["L1_OVER_MAX"] == 256.0
    assert (two[2]["ZERO_CMAP"], three[2]["ZERO_CMAP"]) == (False, True)  # the last launch clears the map
    assert split[3] == (64,) and split[2]["NP"] == 3 and split[1][2].shape == (3, 64, 3072)
    assert split[2]["NC"] == two[2]["NC"] == three[2]["NC"] == 16 and split[1][5].shape == (64, 16)
    assert (two[2]["NP"], two[2]["GATE"], two[2]["STACK"], two[2]["NP_SPLIT"]) == (2, 2, cfg["STACK"], 3)
    assert (three[2]["NP"], three[2]["GATE"], three[2]["STACK"]) == (3, 3, cfg["NP3"].get("STACK", 0))
    assert three[2]["BLOCK_N"] == cfg["NP3"]["BLOCK_N"] and three[3] == (-(-1000 // cfg["NP3"]["BLOCK_N"]),)
    no_stack = {k: v for k, v in cfg["NP3"].items() if k != "STACK"}
    three = m._kernel_calls(dict(cfg, STACK=1, NP3=no_stack), x, q, s, None, out)[-1]
    assert three[2]["STACK"] == 0
    calls = m._kernel_calls(dict(cfg, NP=3, STACK=0), x, q, s, None, out)
    assert len(calls) == 3 and calls[2][2]["GATE"] == 0 and calls[2][2]["ZERO_CMAP"]
    calls = m._kernel_calls(dict(cfg, NP=3, STACK=0, NC=0), x, q, s, None, out)
    assert len(calls) == 2 and calls[1][2]["NC"] == 0 and not calls[1][2]["ZERO_CMAP"]
    # the Triton-level gemm kernel: one launch over weight-row x batch tiles, any batch
    g = {"min_B": 1025, "kernel": "gemm", "BLOCK_N": 128, "BLOCK_B": 256, "BLOCK_K": 128, "num_warps": 8,
         "num_stages": 2}
    xb = torch.zeros(600, 3072, dtype=torch.bfloat16)
    (fn, args, kw, grid), = m._kernel_calls(g, xb, q, s, None, torch.empty(600, 1000, dtype=torch.bfloat16))
    assert grid == (-(-1000 // g["BLOCK_N"]) * -(-600 // g["BLOCK_B"]),) and kw["BLOCK_B"] == g["BLOCK_B"]
    # sm90 serves 129+ rows with the persistent Gluon wgmma kernel
    sm90 = m.LAUNCH_CONFIGS["sm90"]
    assert m._gemm_cfg(sm90, 128) is None and m._gemm_cfg(sm90, 129) is sm90["gemm"][0]
    assert m._gemm_cfg(sm90, 4096) is sm90["gemm"][-1] and sm90["gemm"][-1]["WS"] == 2
    assert all(e["kernel"] == "wgmma" and e["BLOCK_V"] == 128 for e in sm90["gemm"])
    assert m._gemm_cfg(m.LAUNCH_CONFIGS["sm121"], 4096) is None
    with pytest.raises(ValueError, match="STACK"):
        m._kernel_calls(dict(cfg, NP=3, STACK=1), x, q, s, None, out)
    with pytest.raises(ValueError, match="NP"):
        m._kernel_calls(dict(cfg, NP=5), x, q, s, None, out)


# ---------------------------------------------------------------------------
# realistic hidden states
# ---------------------------------------------------------------------------
def _realistic_hidden(torch, w, B, g, lead=(0.25, 6.0), device=None):
    """Hidden states whose greedy token has a given lead over the runner-up.

    ``h = z + c * w[t] / |w[t]|`` with ``z ~ N(0, I)``: ``z`` alone gives "bulk"
    logits ``L = z @ W^T`` with spread ``sigma`` (std over the vocabulary, ~1.2 here);
    ``c`` lifts a random token ``t`` to ``max(L) + u * sigma`` with
    ``u ~ U(lead)``, i.e. it wins by ``u`` sigma over the best other token, as the
    greedy token of a trained LM does (``lead=(0.25, 6)`` ~ 0.3 to 7 logits; the
    "near-tie" set uses ``(0, 0.25)``). The lead is set against the measured
    runner-up, so it does not depend on the weight's row norms or tails.
    """
    device = device or w.device
    V, H = w.shape
    wf = w.float()
    z = torch.randn(B, H, generator=g, device=device)
    bulk = z @ wf.t()
    sigma = bulk.std(dim=1, keepdim=True)
    t = torch.randint(0, V, (B,), generator=g, device=device)
    bulk_t = bulk.gather(1, t[:, None])
    bulk.scatter_(1, t[:, None], float("-inf"))
    runner_up = bulk.amax(dim=1, keepdim=True)
    lo, hi = lead
    u = lo + (hi - lo) * torch.rand(B, 1, generator=g, device=device)
    rows = wf[t]
    norm = rows.norm(dim=1, keepdim=True)
    c = (runner_up + u * sigma - bulk_t) / norm
    return (z + c * rows / norm).to(w.dtype)


# ---------------------------------------------------------------------------
# GPU tests
# ---------------------------------------------------------------------------
def _cuda():
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available: GPU tests run through the device tool")
    pytest.importorskip("triton", reason="triton is not installed: the w8a16 kernel needs it")
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


BIG = (248320, 3072)


@pytest.fixture(scope="module")
def big():
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    g = torch.Generator(device="cuda").manual_seed(0)
    V, H = BIG
    # Student-t (5 d.o.f.) entries: heavier tails than a Gaussian, so a row's
    # absmax is ~6-8 of its std as in trained lm-heads (int8 error grows with it);
    # log-normal row norms (frequent and rare tokens differ).
    w = torch.empty(V, H, device="cuda")
    for i in range(0, V, 16384):
        zz = torch.randn(min(16384, V - i), H, device="cuda", generator=g)
        chi = torch.randn(5, zz.shape[0], H, device="cuda", generator=g).pow_(2).mean(0)
        w[i : i + zz.shape[0]] = zz / chi.sqrt_() * (0.02 / (5 / 3) ** 0.5)
        del zz, chi
    w *= torch.exp(0.2 * torch.randn(V, 1, device="cuda", generator=g))
    w = w.to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    return w, q, s


def _split_bound(torch, x, q, s, n_planes=3):
    """Worst-case error of the imma kernel's digit split: each activation is kept
    to within half of step = absmax / (127 * 254^(NP-1)) (plus fp32 roundings of
    the steps, ~2^-23 * absmax), so a logit moves by at most that times
    sum_k |q[n, k]| * s[n]."""
    amax = x.float().abs().amax(dim=1)
    half_step = amax / (127.0 * 254.0 ** (n_planes - 1)) / 2 + amax * 2.0**-22
    qsum = q.abs().sum(dim=1, dtype=torch.int64).float() * s.float()
    return half_step[:, None] * qsum[None, :]


def _check_against_reference(torch, m, x, q, s, bias, out, label, extra_tol=None):
    """out (kernel, x.dtype) vs the fp32 dequantized reference; returns figures.

    ``extra_tol`` (``[B, V]``) widens the bound by a documented extra error term
    (the imma kernel's digit split); the figures then also give the ratio to the
    plain bound."""
    ref32 = m.int8_linear_reference(x, q, s, bias, out_dtype=torch.float32)
    absmag = m.int8_linear_reference(x.abs(), q.abs(), s, None, out_dtype=torch.float32)
    K = q.shape[1]
    unit = 2.0**-8 if x.dtype == torch.bfloat16 else 2.0**-11  # unit roundoff of the output dtype
    # |kernel - ref32| <= rounding of the output + both fp32 summations (worst case K*u each)
    # (+ a few fp32 roundings of the scale multiply and bias add on each side)
    tol = ref32.abs() * unit * (1 + 2.0**-7) + 2.1 * K * 2.0**-24 * absmag
    if bias is not None:
        tol = tol + 2.0**-21 * bias.float().abs()
    tol = tol + 2.0**-21 * ref32.abs() + 1e-30
    err = (out.float() - ref32).abs()
    plain = (err / tol).max().item()
    if extra_tol is not None:
        tol = tol + extra_tol
    ratio = (err / tol).max().item()
    same = (out == ref32.to(x.dtype)).float().mean().item()
    fig = {"label": label, "max_abs_err": err.max().item(), "max_err_over_bound": ratio,
           "frac_equal_to_rounded_ref": same, "max_abs_logit": ref32.abs().max().item()}
    if extra_tol is not None:
        fig["max_err_over_plain_bound"] = plain
    print(f"[accuracy] {fig}")
    assert torch.isfinite(out).all(), f"{label}: NaN/Inf in output"
    assert ratio <= 1.0, f"{label}: error beyond fp32-accumulation bound ({fig})"
    return fig


@pytest.mark.gpu
@pytest.mark.parametrize("B", [1, 2, 7, 13, 16, 33, 64, 100, 129, 300, 1000])
def test_big_shape_matches_dequantized_reference(big, B):
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    w, q, s = big
    g = torch.Generator(device="cuda").manual_seed(100 + B)
    x = torch.randn(B, w.shape[1], device="cuda", generator=g).to(torch.bfloat16)
    out = m.int8_linear(x, q, s)
    assert out.shape == (B, w.shape[0]) and out.dtype == torch.bfloat16
    fig = _check_against_reference(torch, m, x, q, s, None, out, f"[248320,3072] B={B}")
    assert fig["frac_equal_to_rounded_ref"] > 0.95
    # quantization error against bf16 F.linear, for the record
    ref16 = torch.nn.functional.linear(x, w).float()
    print(f"[accuracy] B={B} max |int8 - bf16 F.linear| = {(out.float() - ref16).abs().max().item():.4g} "
          f"(logit std {ref16.std().item():.3g})")


@pytest.mark.gpu
def test_big_shape_bias_and_fp16(big):
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    w, q, s = big
    g = torch.Generator(device="cuda").manual_seed(5)
    bias = (torch.randn(w.shape[0], device="cuda", generator=g) * 0.5).to(torch.bfloat16)
    for B in (1, 16, 64):
        x = torch.randn(B, w.shape[1], device="cuda", generator=g).to(torch.bfloat16)
        out = m.int8_linear(x, q, s, bias)
        _check_against_reference(torch, m, x, q, s, bias, out, f"bias B={B}")
    x16 = torch.randn(9, w.shape[1], device="cuda", generator=g).to(torch.float16)
    out16 = m.int8_linear(x16, q, s, bias.to(torch.float16))
    assert out16.dtype == torch.float16
    _check_against_reference(torch, m, x16, q, s, bias.to(torch.float16), out16, "fp16 B=9 bias")


@pytest.mark.gpu
@pytest.mark.parametrize("VH", [(100003, 3001), (4099, 1000), (257, 72), (1000, 4104)])
@pytest.mark.parametrize("B", [1, 5, 31, 64, 100, 300, 1100])
def test_odd_shapes(VH, B):
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    V, H = VH
    g = torch.Generator(device="cuda").manual_seed(V + B)
    w = (torch.randn(V, H, device="cuda", generator=g) * 0.03).to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    x = torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16)
    bias = (torch.randn(V, device="cuda", generator=g)).to(torch.bfloat16) if B % 2 else None
    out = m.int8_linear(x, q, s, bias)
    assert out.shape == (B, V)
    gcfg = m._gemm_cfg(m._configs_for(x.device), B)
    if B > m.MAX_LOOP_ROWS and (gcfg is None or gcfg["kernel"] == "wgmma" and H % 16):
        # dequantize + F.linear path: bf16 weights, bf16 GEMM (cuBLAS): compare loosely
        ref = m.int8_linear_reference(x, q, s, bias, out_dtype=torch.float32)
        assert torch.isfinite(out).all()
        scale = ref.abs().max().item()
        assert (out.float() - ref).abs().max().item() <= 2e-2 * scale
    else:
        _check_against_reference(torch, m, x, q, s, bias, out, f"[{V},{H}] B={B}")


WGMMA_CFGS = {
    "ws": {"kernel": "wgmma", "BLOCK_V": 128, "BLOCK_B": 256, "BLOCK_K": 64, "STAGES": 4, "WS": 1, "num_warps": 4},
    "persistent": {"kernel": "wgmma", "BLOCK_V": 128, "BLOCK_B": 256, "BLOCK_K": 64, "STAGES": 5, "WS": 2,
                   "num_warps": 4},
    "persistent-k128": {"kernel": "wgmma", "BLOCK_V": 128, "BLOCK_B": 256, "BLOCK_K": 128, "STAGES": 2, "WS": 2,
                        "num_warps": 4},
    "persistent-b64-k128": {"kernel": "wgmma", "BLOCK_V": 128, "BLOCK_B": 64, "BLOCK_K": 128, "STAGES": 6, "WS": 2,
                            "num_warps": 4},
    "persistent-v256-b128-k128": {"kernel": "wgmma", "BLOCK_V": 256, "BLOCK_B": 128, "BLOCK_K": 128, "STAGES": 3,
                                  "WS": 2, "num_warps": 4},
    "persistent-v256-b128-k64": {"kernel": "wgmma", "BLOCK_V": 256, "BLOCK_B": 128, "BLOCK_K": 64, "STAGES": 6,
                                 "WS": 2, "num_warps": 4},
    "persistent-smem-a": {"kernel": "wgmma", "BLOCK_V": 128, "BLOCK_B": 256, "BLOCK_K": 64, "STAGES": 4, "WS": 2,
                          "RS": 0, "num_warps": 4},
    "ws-smem-a-b128": {"kernel": "wgmma", "BLOCK_V": 128, "BLOCK_B": 128, "BLOCK_K": 128, "STAGES": 3, "WS": 1,
                       "RS": 0, "num_warps": 4},
    "single-smem-a": {"kernel": "wgmma", "BLOCK_V": 128, "BLOCK_B": 256, "BLOCK_K": 64, "STAGES": 4, "WS": 0,
                      "RS": 0, "num_warps": 8},
    "single-reg-a": {"kernel": "wgmma", "BLOCK_V": 256, "BLOCK_B": 128, "BLOCK_K": 64, "STAGES": 4, "WS": 0,
                     "RS": 1, "num_warps": 8},
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(WGMMA_CFGS))
@pytest.mark.parametrize("VHB", [(4099, 208, 7), (777, 3072, 259), (100003, 1040, 513), (257, 64, 300)])
def test_wgmma_matches_dequantized_reference(name, VHB):
    """The Gluon wgmma kernels on shapes that are not tile multiples (weight-row
    tail, K tail inside the last K step, batch tail, more than one batch tile)."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m
    from patchq_runtime import int8_wgmma as wg

    if torch.cuda.get_device_capability()[0] != 9 or not wg.available():
        pytest.skip("the wgmma kernels need sm90 and Triton with Gluon")
    V, H, B = VHB
    g = torch.Generator(device="cuda").manual_seed(V + H + B)
    w = (torch.randn(V, H, device="cuda", generator=g) * 0.03).to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.randn(B, H, device="cuda", generator=g).to(dtype)
        bias = torch.randn(V, device="cuda", generator=g).to(dtype) if B % 2 else None
        out = torch.full((B, V), float("nan"), device="cuda", dtype=dtype)
        wg.launch(x, q, s, bias, out, WGMMA_CFGS[name])
        _check_against_reference(torch, m, x, q, s, bias, out, f"wgmma {name} [{V},{H}] B={B} {dtype}")


@pytest.mark.gpu
def test_wgmma_dispatch_and_fallback(big):
    """int8_linear takes the wgmma kernel above 128 rows on sm90, and falls back to
    the looped buckets for operands it cannot take (hidden size not a multiple of
    16, which TMA needs); a non-contiguous batch is copied, not refused."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m
    from patchq_runtime import int8_wgmma as wg

    if torch.cuda.get_device_capability()[0] != 9 or not wg.available():
        pytest.skip("the wgmma kernels need sm90 and Triton with Gluon")
    _w, q, s = big
    V, H = q.shape
    g = torch.Generator(device="cuda").manual_seed(11)
    wide = torch.randn(300, 2 * H, device="cuda", generator=g).to(torch.bfloat16)
    x = wide[:, :H]  # row stride 2H: not contiguous
    assert not x.is_contiguous()
    out = m.int8_linear(x, q, s)
    ref = torch.empty_like(out)
    wg.launch(x.contiguous(), q, s, None, ref, m._gemm_cfg(m._configs_for(x.device), 300))
    assert torch.equal(out, ref)
    with pytest.raises(ValueError, match="128 or 256 weight rows"):
        wg.launch(x.contiguous(), q, s, None, ref, dict(WGMMA_CFGS["ws"], BLOCK_V=64))
    w72 = (torch.randn(1000, 72, device="cuda", generator=g) * 0.03).to(torch.bfloat16)
    q72, s72 = m.quantize_rows(w72)
    x72 = torch.randn(300, 72, device="cuda", generator=g).to(torch.bfloat16)
    assert not wg.supported(x72, q72)
    with pytest.raises(ValueError, match="divisible by 16"):
        m._launch(x72, q72, s72, None, torch.empty(300, 1000, device="cuda", dtype=torch.bfloat16),
                  m._gemm_cfg(m._configs_for(x72.device), 300))
    _check_against_reference(torch, m, x72, q72, s72, None, m.int8_linear(x72, q72, s72), "fallback K=72 B=300")


@pytest.mark.gpu
@pytest.mark.parametrize("kind,convert", [("gemv", 0), ("gemv", 1), ("dot", 0), ("dot", 1), ("dott", 0)])
def test_every_kernel_variant(big, kind, convert):
    """Each kernel/conversion variant (not only the ones in the launch table; "gemv",
    "dot" and CONVERT=1 are the benchmark's development kernels)."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    sys.path.insert(0, str(ROOT / "bench"))
    import int8_kernels_dev

    int8_kernels_dev.register()

    _w, q, s = big
    V, H = q.shape
    for B in ((1,) if kind == "gemv" else (1, 16, 64)):
        x = torch.randn(B, H, device="cuda").to(torch.bfloat16)
        out = torch.empty(B, V, device="cuda", dtype=torch.bfloat16)
        cfg = {"kernel": kind, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3, "CONVERT": convert}
        m._launch(x, q, s, None, out, cfg)
        _check_against_reference(torch, m, x, q, s, None, out, f"{kind} CONVERT={convert} B={B}")


@pytest.mark.gpu
@pytest.mark.parametrize("B,block_b,sub_b", [(64, 64, 16), (64, 64, 32), (50, 64, 64), (128, 128, 64), (97, 128, 32)])
def test_dott_subtiles(big, B, block_b, sub_b):
    """The activation tile split into 1/2/4 MMAs sharing one converted weight tile."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    _w, q, s = big
    V, H = q.shape
    x = torch.randn(B, H, device="cuda").to(torch.bfloat16)
    bias = torch.randn(V, device="cuda").to(torch.bfloat16)
    out = torch.empty(B, V, device="cuda", dtype=torch.bfloat16)
    cfg = {"kernel": "dott", "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3, "CONVERT": 0,
           "BLOCK_B": block_b, "SUB_B": sub_b}
    m._launch(x, q, s, bias, out, cfg)
    _check_against_reference(torch, m, x, q, s, bias, out, f"dott B={B} BLOCK_B={block_b} SUB_B={sub_b}")


IMMA_CFG = {"kernel": "imma", "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3, "NP": 3}


def _imma_cfg(B, **over):
    cfg = dict(IMMA_CFG, BLOCK_B=max(16, 1 << (B - 1).bit_length()))
    cfg.update(over)
    return cfg


@pytest.mark.gpu
@pytest.mark.parametrize("n_planes,stack", [(3, 0), (4, 0), (4, 1), (2, 0), (2, 1)])
@pytest.mark.parametrize("B", [1, 17, 33, 64, 128])
def test_imma_matches_dequantized_reference(big, n_planes, stack, B):
    """The int8-tensor-core kernel (activations split into NP int8 digit planes):
    NP >= 3 is within the same fp32-accumulation bound as the conversion kernels;
    NP = 2 (14 bits per row) only within that bound plus the split's own bound."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    _w, q, s = big
    V, H = q.shape
    g = torch.Generator(device="cuda").manual_seed(200 + B + n_planes)
    x = torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16)
    bias = (torch.randn(V, device="cuda", generator=g) * 0.5).to(torch.bfloat16) if B % 2 else None
    out = torch.full((B, V), float("nan"), device="cuda", dtype=torch.bfloat16)
    over = {"NP": n_planes, "STACK": stack}
    if n_planes * max(B, 16) > 256:
        # shared memory and registers: NP * 128 activation rows per stage and accumulator
        over.update(num_stages=2, BLOCK_N=64)
    m._launch(x, q, s, bias, out, _imma_cfg(B, **over))
    extra = _split_bound(torch, x, q, s, n_planes) if n_planes == 2 else None
    _check_against_reference(torch, m, x, q, s, bias, out, f"imma NP={n_planes} STACK={stack} B={B}",
                             extra_tol=extra)


@pytest.mark.gpu
@pytest.mark.parametrize("VH", [(100003, 3001), (4099, 1000), (257, 72), (1000, 4104)])
@pytest.mark.parametrize("B", [1, 5, 31, 64, 100])
def test_imma_odd_shapes(VH, B):
    """Tails in V, K not a multiple of BLOCK_K (masked K loop), padded batch rows."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    V, H = VH
    g = torch.Generator(device="cuda").manual_seed(V + 7 * B)
    w = (torch.randn(V, H, device="cuda", generator=g) * 0.03).to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    x = torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16)
    bias = (torch.randn(V, device="cuda", generator=g)).to(torch.bfloat16) if B % 2 else None
    for over in ({}, {"BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4}):
        out = torch.full((B, V), float("nan"), device="cuda", dtype=torch.bfloat16)
        m._launch(x, q, s, bias, out, _imma_cfg(B, **over))
        _check_against_reference(torch, m, x, q, s, bias, out, f"imma [{V},{H}] B={B} {over}")


@pytest.mark.gpu
def test_imma_outliers_zero_rows_and_non_finite(big):
    """Rows with a massive activation (the digit split's worst case), an all-zero
    row (gives exactly the bias), fp16 input, and NaN/Inf rows (whole output row
    NaN, other rows unaffected)."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    _w, q, s = big
    V, H = q.shape
    g = torch.Generator(device="cuda").manual_seed(77)
    x = torch.randn(48, H, device="cuda", generator=g)
    x[:16, 5] = 3000.0  # one channel ~1000x the others
    x[16:32] *= torch.exp(4 * torch.randn(16, H, device="cuda", generator=g))  # magnitudes over ~e^+-12
    x[32] = 0.0
    bias = torch.randn(V, device="cuda", generator=g).to(torch.bfloat16)
    xb = x.to(torch.bfloat16)
    out = torch.full((48, V), float("nan"), device="cuda", dtype=torch.bfloat16)
    m._launch(xb, q, s, bias, out, _imma_cfg(48))
    _check_against_reference(torch, m, xb, q, s, bias, out, "imma outliers/wide range/zero row",
                             extra_tol=_split_bound(torch, xb, q, s))
    assert torch.equal(out[32], bias), "an all-zero row must give exactly the bias"
    x16 = torch.cat([x[:16], x[32:48]]).to(torch.float16)  # rows 16-31 overflow fp16
    out16 = torch.empty((32, V), device="cuda", dtype=torch.float16)
    m._launch(x16, q, s, bias.to(torch.float16), out16, _imma_cfg(32))
    _check_against_reference(torch, m, x16, q, s, bias.to(torch.float16), out16, "imma fp16",
                             extra_tol=_split_bound(torch, x16, q, s))
    xn = torch.randn(6, H, device="cuda", generator=g).to(torch.bfloat16)
    xn[1, 7] = float("nan")
    xn[3, 9] = float("inf")
    outn = torch.empty((6, V), device="cuda", dtype=torch.bfloat16)
    m._launch(xn, q, s, None, outn, _imma_cfg(6))
    assert torch.isnan(outn[1]).all() and torch.isnan(outn[3]).all()
    keep = [0, 2, 4, 5]
    _check_against_reference(torch, m, xn[keep], q, s, None, outn[keep], "imma rows beside NaN/Inf rows")


AUTO_CFG = {"kernel": "imma", "NP": "auto", "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3,
            "STACK": 1, "NP3": {"BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3, "STACK": 0}}


@pytest.mark.gpu
def test_imma_adaptive_planes(big):
    """NP="auto": Gaussian rows at H=3072 take the two-plane launch (same digits as a
    plain NP=2 launch), a batch with one row holding a massive activation takes the
    three-plane launch (bit-identical to a plain NP=3 launch), and both are within
    the plain fp32-accumulation bound."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    _w, q, s = big
    V, H = q.shape
    g = torch.Generator(device="cuda").manual_seed(404)
    x = torch.randn(64, H, device="cuda", generator=g).to(torch.bfloat16)
    scattered = x.clone()
    for r in range(64):  # 64 rows with a massive activation each in its own channel: > NC outlier channels
        scattered[r, 40 * r + 3] = 2000.0
    for label, xb, planes, n_out in (("gaussian", x, 2, 0), ("one massive activation", None, 2, 1),
                                     ("scattered massive activations", scattered, 3, 0)):
        if xb is None:
            xb = x.clone()
            xb[17, 100] = 2000.0
        cfg = dict(AUTO_CFG, BLOCK_B=64)
        out = torch.full((64, V), float("nan"), device="cuda", dtype=torch.bfloat16)
        calls = m._kernel_calls(cfg, xb, q, s, None, out)
        for fn, args, kw, grid in calls:
            fn[grid](*args, **kw)
        split = _split_call(calls)
        need = split[4]
        assert int(need.max()) == (planes == 3), (label, need.nonzero().flatten().tolist())
        assert int(split[7][0]) == n_out, (label, int(split[7][0]))
        _check_against_reference(torch, m, xb, q, s, None, out, f"imma auto ({label}: {planes} planes)")
        fixed = torch.full_like(out, float("nan"))
        over = dict(AUTO_CFG, NP=planes, BLOCK_B=64)
        over.update(AUTO_CFG["NP3"] if planes == 3 else {})
        over.pop("NP3")
        m._launch(xb, q, s, None, fixed, over)
        same = (out == fixed).float().mean().item()
        print(f"[adaptive] {label}: {planes} planes, fraction equal to a plain NP={planes} launch {same:.6f}")
        if planes == 3:
            assert same == 1.0, f"{label}: the adaptive launch differs from a plain NP=3 launch"
        else:
            # same digits; the step differs by fp32 rounding (absmax/127/254/254*254 vs /254)
            assert same > 0.999, f"{label}: the adaptive launch is not the two-plane one ({same})"


@pytest.mark.gpu
@pytest.mark.parametrize("VH", [(257, 72), (4099, 1000), (100003, 3001)])
def test_imma_adaptive_rule_on_odd_shapes(VH):
    """The plane rule per row (three planes when sum |x| < 256 * absmax: short rows
    such as H=72, where two planes were measured beyond the bound) on shapes with
    V and K tails, and the result within the plain fp32-accumulation bound."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    V, H = VH
    g = torch.Generator(device="cuda").manual_seed(V + H)
    w = (torch.randn(V, H, device="cuda", generator=g) * 0.03).to(torch.bfloat16)
    q, s = m.quantize_rows(w)
    for B in (5, 64, 100):
        x = torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16)
        cfg = dict(AUTO_CFG, BLOCK_B=max(16, 1 << (B - 1).bit_length()))
        if B > 64:
            cfg["NP3"] = dict(cfg["NP3"], num_stages=2)
        out = torch.full((B, V), float("nan"), device="cuda", dtype=torch.bfloat16)
        calls = m._kernel_calls(cfg, x, q, s, None, out)
        for fn, args, kw, grid in calls:
            fn[grid](*args, **kw)
        split = _split_call(calls)
        need = split[4][:B]
        ratio = (x.float().abs().sum(1) / x.float().abs().amax(1))
        if int(split[7][0]) == 0:  # no outlier channels taken out: the plain rule per row
            assert torch.equal(need.bool(), ratio < 256), (ratio.tolist(), need.tolist())
        _check_against_reference(torch, m, x, q, s, None, out, f"imma auto [{V},{H}] B={B}")


def _split_call(calls):
    """Args of the digit-split launch of an imma plan: (x, cmap, xq, xs, need, xo,
    cidx, ncnt, B, K, stride)."""
    return [c for c in calls if "xq_ptr" in c[0].arg_names and "x_ptr" in c[0].arg_names][0][1]


def _heavy(torch, x, g, n_channels=4):
    """Rows with ``n_channels`` fixed channels at 20-1000x the row RMS (random sign):
    the massive activations of trained models' final hidden states."""
    B, H = x.shape
    chans = torch.randperm(H, generator=torch.Generator().manual_seed(1234))[:n_channels].to(x.device)
    rms = x.float().pow(2).mean(1, keepdim=True).sqrt()
    mag = torch.exp(torch.empty(B, n_channels, device=x.device).uniform_(3.0, 6.9078, generator=g)) * rms
    sign = torch.where(torch.rand(B, n_channels, device=x.device, generator=g) < 0.5, -1.0, 1.0)
    xh = x.float().clone()
    xh[:, chans] = mag * sign
    return xh.to(x.dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("B", [17, 33, 64, 100, 128, 300])
def test_heavy_tailed_rows(big, B):
    """Rows with massive activations in a few channels: the imma path takes them out
    of the digit planes (two planes stay within the plain fp32-accumulation bound), the
    gemm path does not care; both within the bound, no NaN/Inf."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    _w, q, s = big
    g = torch.Generator(device="cuda").manual_seed(900 + B)
    x = _heavy(torch, torch.randn(B, q.shape[1], device="cuda", generator=g).to(torch.bfloat16), g)
    out = m.int8_linear(x, q, s)
    _check_against_reference(torch, m, x, q, s, None, out, f"heavy-tailed rows B={B}")
    from patchq_runtime import int8_kernels as k

    for key, scratch in k._SCRATCH.items():
        assert int(scratch[3].abs().sum()) == 0, f"outlier-channel map {key} not cleared after the call"
    # a Gaussian batch right after: same as with fresh (per-call) scratch
    xg = torch.randn(B, q.shape[1], device="cuda", generator=g).to(torch.bfloat16)
    got = m.int8_linear(xg, q, s)
    if B <= 128:
        fresh = torch.empty_like(got)
        cfg = m._bucket_cfg(m._configs_for(xg.device), B)
        for fn, args, kw, grid in k.kernel_calls(cfg, xg, q, s, None, fresh,
                                                 alloc=lambda shape, dt: torch.empty(shape, dtype=dt, device="cuda")):
            fn[grid](*args, **kw)
        assert torch.equal(got, fresh)


def _argmax_report(torch, m, w, q, s, lead, n_rows, seed, label, heavy=False):
    """Greedy argmax of the int8 kernel vs bf16 F.linear; prints every mismatch
    with its logit gap and the agreement by the reference's top-2 gap."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    mism = []
    gaps_all = []
    agree_all = []
    total = 0
    for start in range(0, n_rows, 64):
        x = _realistic_hidden(torch, w, 64, g, lead=lead) if lead else \
            torch.randn(64, w.shape[1], device="cuda", generator=g).to(w.dtype)
        if heavy:
            x = _heavy(torch, x, g)
        ref = torch.nn.functional.linear(x, w)
        got = m.int8_linear(x, q, s)
        assert torch.isfinite(got).all()
        a_ref = ref.argmax(-1)
        a_got = got.argmax(-1)
        top2 = ref.float().topk(2, dim=-1).values
        gaps_all.append(top2[:, 0] - top2[:, 1])
        agree_all.append(a_ref == a_got)
        bad = (a_ref != a_got).nonzero().flatten().tolist()
        total += x.shape[0]
        if bad:
            exact = (x[bad].float() @ w.float().t())
            for i, r in enumerate(bad):
                gap16 = (ref[r, a_ref[r]].float() - ref[r, a_got[r]].float()).item()
                gap32 = (exact[i, a_ref[r]] - exact[i, a_got[r]]).item()
                mism.append({"row": start + r, "bf16_argmax": int(a_ref[r]), "int8_argmax": int(a_got[r]),
                             "bf16_logit_gap": gap16, "fp32_logit_gap": gap32,
                             "top_logit": ref[r, a_ref[r]].float().item()})
    agree = 1 - len(mism) / total
    gaps = torch.cat(gaps_all)
    ok = torch.cat(agree_all)
    bins = [(0.0, 0.0), (0.0, 0.1), (0.1, 0.3), (0.3, float("inf"))]
    parts = []
    for lo, hi in bins:
        sel = (gaps == 0) if hi == 0.0 else ((gaps > lo) & (gaps <= hi))
        n = int(sel.sum())
        if n:
            parts.append(f"gap{'=0' if hi == 0.0 else f' in ({lo},{hi}]'}: {int(ok[sel].sum())}/{n}")
    print(f"[argmax] {label}: {total} rows, agreement {agree * 100:.3f}%, {len(mism)} mismatches; "
          f"by bf16 top-2 gap (logits): {'; '.join(parts)}")
    for mm in mism:
        print(f"[argmax]   mismatch {mm}")
    return agree, mism


@pytest.mark.gpu
def test_greedy_argmax_agreement(big):
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    w, q, s = big
    agree, mism = _argmax_report(torch, m, w, q, s, (0.25, 6.0), 4096, 11, "realistic (lead 0.25-6 sigma)")
    # For information (not asserted): near-ties and unstructured Gaussian hidden states.
    _argmax_report(torch, m, w, q, s, (0.0, 0.25), 1024, 12, "near-tie (lead 0-0.25 sigma)")
    _argmax_report(torch, m, w, q, s, None, 1024, 13, "pure Gaussian hidden states")
    # for information: the massive channels amplify the int8 weight's own rounding
    _argmax_report(torch, m, w, q, s, (0.25, 6.0), 2048, 14, "realistic + 4 massive-activation channels",
                   heavy=True)
    assert agree >= 0.999, mism


@pytest.mark.gpu
def test_lm_head_logits_gpu_free_keep_and_fallback(monkeypatch):
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    UQ, Fp8, Head, _ = _fake_classes()
    V, H = 120000, 1024
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(4, H, device="cuda", generator=g).to(torch.bfloat16)

    # fallback: quantized method, and below threshold
    w = (torch.randn(V, H, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
    head = Head(w, qm=Fp8())
    assert torch.equal(m.lm_head_logits(head, x), torch.nn.functional.linear(x, w))
    small = Head(w[:5000].clone())
    assert torch.equal(m.lm_head_logits(small, x), torch.nn.functional.linear(x, w[:5000]))
    assert small.weight.stride() == (H, 1)

    # default: keep. int8 logits at 4 rows, bf16 weight intact
    kept = Head(w.clone())
    out_k = m.lm_head_logits(kept, x)
    assert kept._patchq_int8_state == "int8" and torch.equal(kept.weight, w)
    q, s = kept._patchq_int8
    _check_against_reference(torch, m, x, q, s, None, out_k, "keep_bf16 module")

    # the switch: free
    monkeypatch.setenv("PATCHQ_INT8_LMHEAD_KEEP_BF16", "0")
    wf = w.clone()
    del head, small, kept
    freed = Head(wf)
    del wf
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    out_f = m.lm_head_logits(freed, x)
    torch.cuda.synchronize()
    after = torch.cuda.memory_allocated()
    delta = after - before - out_f.numel() * out_f.element_size()
    expect = V * H + 2 * V - 2 * V * H  # + int8 weight + fp16 scales - bf16 weight
    print(f"[memory] module [{V},{H}]: allocated change {delta} B (expected {expect} B)")
    assert abs(delta - expect) < 4 * 1024 * 1024
    assert freed.weight.shape == (V, H) and freed.weight.stride() == (0, 0)
    assert torch.equal(out_f, out_k)
    # drafter sharing the Parameter
    drafter = Head.__new__(Head)
    torch.nn.Module.__init__(drafter)
    drafter.weight = freed.weight
    drafter.quant_method = UQ()
    assert torch.equal(m.lm_head_logits(drafter, x), out_f)
    assert drafter._patchq_int8 is freed._patchq_int8


@pytest.mark.gpu
@pytest.mark.parametrize("B", [1, 16, 40, 64, 100, 300, 1100])
def test_planned_launches_and_cuda_graph(big, B):
    """int8_linear's cached launch plans: new activations each call give the same bits
    as an unplanned launch; a CUDA graph captured around int8_linear replays with
    new input data (graph-safe: no host sync, scratch reused in place)."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    _w, q, s = big
    V, H = q.shape
    g = torch.Generator(device="cuda").manual_seed(7000 + B)
    table = m._configs_for(torch.device("cuda"))
    for heavy in (False, True):
        for _ in range(2):
            x = torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16)
            if heavy:
                x = _heavy(torch, x, g)
            got = m.int8_linear(x, q, s)
            gcfg = m._gemm_cfg(table, B)
            if gcfg is not None or B <= m._buckets(table)[-1]:
                ref = torch.empty_like(got)
                m._launch(x, q, s, None, ref, gcfg if gcfg is not None else m._bucket_cfg(table, B))
                assert torch.equal(got, ref), (B, heavy)
    static = torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        m.int8_linear(static, q, s)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gout = m.int8_linear(static, q, s)
    for heavy in (False, True):
        xn = torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16)
        if heavy:
            xn = _heavy(torch, xn, g)
        static.copy_(xn)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(gout, m.int8_linear(xn, q, s)), (B, heavy)


@pytest.mark.gpu
def test_kept_weight_dispatch_and_cuda_graph(big):
    """The default (bf16 weight kept) on the full head: each batch size goes where the
    sm90 table's crossover says, bit-identical to stock ``F.linear`` there and to
    ``int8_linear`` elsewhere; a CUDA graph captured around ``lm_head_logits``
    replays with new inputs to the same bits (the choice is made from the shape on
    the host: nothing to sync, nothing that changes between capture and replay)."""
    torch = _cuda()
    from patchq_runtime import int8_lmhead as m

    UQ, _, Head, _ = _fake_classes()
    w, q, s = big
    V, H = q.shape
    dev = torch.device("cuda")
    head = Head(w)
    if m._arch_key(dev) == "sm90":
        assert m.bf16_serves(dev, 65) and not m.bf16_serves(dev, 64) and m.bf16_serves(dev, 4096)
    g = torch.Generator(device="cuda").manual_seed(99)
    for B in (1, 16, 64, 65, 128, 300, 1100):
        x = torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16)
        calls = UQ.calls
        out = m.lm_head_logits(head, x)
        bf16 = m.bf16_serves(dev, B)
        assert UQ.calls == calls + bf16, B
        ref = torch.nn.functional.linear(x, w) if bf16 else m.int8_linear(x, q, s)
        assert torch.equal(out, ref), B
        static = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            m.lm_head_logits(head, static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            gout = m.lm_head_logits(head, static)
        xn = _heavy(torch, torch.randn(B, H, device="cuda", generator=g).to(torch.bfloat16), g)
        static.copy_(xn)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(gout, m.lm_head_logits(head, xn)), B
        del graph, gout
    assert head.weight.stride() == (H, 1) and head._patchq_int8_state == "int8"
