"""Benchmark of the int8 lm-head in both memory modes against bf16 ``F.linear``.

Usage (from the repo root, on a CUDA machine)::

    PYTHONPATH=spark:. python spark/bench/int8_lmhead.py --json out.json --plot out.png
    PYTHONPATH=spark:. python spark/bench/int8_lmhead.py --sweep --sweep-json cfg.json --json out.json

For each batch B and two kinds of rows (Gaussian; heavy-tailed, with 4 massive
channels) it times, call by call in turn (CUDA events, median of ``--reps`` calls
after ``--warmup``), on the same [V, H] weight in the same process:

* ``bf16``: ``F.linear(x, w)``, the stock call;
* ``kept``: ``lm_head_logits`` on a ``ParallelLMHead``-like module whose bf16 weight is
  kept (the default): each batch goes to the int8 kernels or to the stock call, as the
  launch table's ``kept_bf16`` crossovers say;
* ``freed``: ``lm_head_logits`` on a module whose bf16 weight was freed
  (``PATCHQ_INT8_LMHEAD_KEEP_BF16=0``): the int8 kernels only;

as eager calls and as CUDA-graph replays, over ``--rounds`` passes of the whole B list
(each figure is the median over the passes: clock transients hit one pass, not all),
with ``--settle`` seconds idle before each B: from about 256 rows the GEMMs hold the
H200 at its 700 W power cap (SM clock ~1.5 GHz instead of 1.98), the clocks take
about half a second to come back, and the int8 kernels at B <= 16 run ~10% slower
at the capped clock while bf16 ``F.linear`` (memory-bound there) does not.
It prints the effective GB/s of the weight read (int8 weight + fp16 scales for the
freed path, bf16 weight for ``F.linear``), TFLOP/s, the speed-ups, which path served
each batch, the targets met, and the memory figures of both modes' first call
(bytes freed, int8 + scales, allocation peak while quantizing). A device-to-device
copy of the bf16 weight gives the bandwidth ceiling.

``--sweep`` first times a fixed list of launch configurations per batch bucket
(1, 16, 32, 64), picks the fastest of each, writes them as a launch table (JSON, the
format of ``LAUNCH_CONFIGS[arch]``) and uses that table for the rest of the run. It
is how the sm90 entries of ``LAUNCH_CONFIGS`` were chosen; it is a development tool,
never run at server start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import int8_kernels_dev as dev_kernels  # noqa: E402  (bench-only kernels; imports no torch/triton)

V_DEFAULT = 248320
H_DEFAULT = 3072
BATCHES_DEFAULT = (1, 2, 4, 8, 13, 16, 26, 32, 52, 64, 104, 128, 208, 256, 512, 1024, 2048, 4096)


def _candidates(buckets=("1", "16", "32", "64", "128")):
    """Launch configurations tried by --sweep, per bucket (a fixed list)."""
    out = {}
    if "1" in buckets:
        out["1"] = []
        for bn, bk, w in ((16, 512, 4), (32, 256, 4), (32, 512, 8), (64, 256, 8), (64, 128, 4), (128, 128, 8)):
            for conv in (0, 1):
                out["1"].append({"kernel": "gemv", "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": 1,
                                 "CONVERT": conv})
    for bucket in ("16", "32", "64", "128"):
        if bucket not in buckets:
            continue
        bb = int(bucket)
        lst = out[bucket] = []
        subs = [s for s in (64, 32, 16) if s <= bb and bb // s in (1, 2, 4)]
        if bb == 16:
            subs = [16]
        bks = (128, 256) if bb == 16 else (64, 128, 256)
        for sub in subs:
            for bn in (64, 128, 256):
                for bk in bks:
                    for w in (4, 8):
                        for st in (3, 4):
                            smem = st * (bn * bk + bb * bk * 2) + (bn * bk * 2 if sub == 64 else 0)
                            if smem > 220 * 1024:
                                continue
                            if bb >= 64 and bn * bb > 128 * 64 * (w // 4) * 2:
                                continue  # accumulators would not fit in registers
                            lst.append({"kernel": "dott", "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w,
                                        "num_stages": st, "SUB_B": sub})
        if bb <= 64:
            for bn, bk, w, st in ((128, 128, 4, 3), (128, 64, 4, 4), (256, 64, 8, 3)):
                for conv in (0, 1):
                    lst.append({"kernel": "dot", "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": st,
                                "CONVERT": conv})
    for bucket in ("32", "64", "128"):
        if bucket not in buckets:
            continue
        out[bucket].extend(_imma_candidates(int(bucket)))
    return out


def _imma_candidates(bb):
    """The int8-tensor-core kernel: NP=3 activation digit planes over tile shapes,
    NP=2 (separate or stacked into one operand) and NP=4 stacked. Filters: shared
    memory per CTA, and int32 accumulators within 192 registers per thread."""
    lst = []
    for n_planes, stack in ((3, 0), (2, 0), (2, 1), (4, 1)):
        for bn in (64, 128, 256, 512):
            for bk in (64, 128, 256):
                for w in (4, 8, 16):
                    for st in (2, 3, 4, 5):
                        smem = st * (bn * bk + n_planes * bb * bk)
                        if smem > 225 * 1024 or n_planes * bb * bn > 192 * 32 * w or bn * bb < 64 * 32 * w // 4:
                            continue
                        if n_planes != 3 and (bk != 128 or st not in (3, 4) or bn == 64):
                            continue
                        lst.append({"kernel": "imma", "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w,
                                    "num_stages": st, "NP": n_planes, "STACK": stack})
    return lst


class _Fake:
    """Stands for a tensor in Triton's warmup (dtype, shape, strides, aligned ptr)."""

    def __init__(self, dtype, shape, strides):
        self.dtype = dtype
        self.shape = tuple(shape)
        self._strides = tuple(strides)

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    @staticmethod
    def data_ptr():
        return 0


def _compile_one(cfg, B, V, H, dtype_name):
    """Worker: compile one (config, batch) into Triton's disk cache."""
    import torch

    from patchq_runtime import int8_lmhead as m

    dev_kernels.register()
    dt = getattr(torch, dtype_name)
    x2 = _Fake(dt, (B, H), (H, 1))
    q = _Fake(torch.int8, (V, H), (H, 1))
    s = _Fake(torch.float16, (V,), (1,))
    out = _Fake(dt, (B, V), (V, 1))
    t = time.time()
    try:
        def alloc(shape, dtype):
            strides = [1]
            for n in reversed(shape[1:]):
                strides.insert(0, strides[0] * n)
            return _Fake(dtype, shape, strides)

        for fn, args, kw, grid in m._kernel_calls(cfg, x2, q, s, None, out, alloc=alloc):
            fn.warmup(*args, grid=grid, **kw)
        return None, time.time() - t
    except Exception as e:  # noqa: BLE001 - reported in the sweep table
        return f"{type(e).__name__}: {str(e)[:200]}", time.time() - t


def _time_call(fn, reps, warmup):
    import torch

    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))  # ms


def _graph_time(fn, reps, warmup):
    """Median time of one replay of a CUDA graph holding one ``fn()`` (no host launch cost)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return _time_call(graph.replay, reps, warmup)


def _sweep(q, s, H, dtype, reps, workers, log, buckets, kernels=()):
    import concurrent.futures as cf
    import multiprocessing as mp

    import torch

    from patchq_runtime import int8_lmhead as m

    V = q.shape[0]
    cands = _candidates(buckets)
    if kernels:
        # keep the named kernels, plus the built-in table's entry to beat
        table = m.LAUNCH_CONFIGS.get(m._arch_key(q.device), {})
        for bucket, lst in cands.items():
            keep = [c for c in lst if c["kernel"] in kernels]
            if bucket in table and table[bucket] not in keep:
                keep.append(dict(table[bucket]))
            cands[bucket] = keep
    jobs = []
    for bucket, lst in cands.items():
        for cfg in lst:
            jobs.append((bucket, cfg))
    t0 = time.time()
    errors = {}
    if workers > 1:
        ctx = mp.get_context("spawn")
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
            futs = {ex.submit(_compile_one, cfg, int(b), V, H, str(dtype).split(".")[-1]): (b, json.dumps(cfg, sort_keys=True))
                    for b, cfg in jobs}
            for f in cf.as_completed(futs):
                try:
                    err, _dt = f.result()
                except Exception as e:  # noqa: BLE001
                    err = f"{type(e).__name__}: {e}"
                if err:
                    errors[futs[f]] = err
    log(f"sweep: precompiled {len(jobs)} configs in {time.time() - t0:.1f}s ({len(errors)} failed)")
    results = {}
    best = {}
    for bucket, lst in cands.items():
        B = int(bucket)
        x = torch.randn(B, H, device=q.device).to(dtype)
        out = torch.empty(B, V, device=q.device, dtype=dtype)
        rows = []
        for cfg in lst:
            key = (bucket, json.dumps(cfg, sort_keys=True))
            if key in errors:
                log(f"    precompile failed for {cfg}: {errors[key]} (trying the JIT path)")
            c = dict(cfg)
            if c["kernel"] != "gemv":
                c["BLOCK_B"] = max(16, B)
            try:
                ms = _time_call(lambda: m._launch(x, q, s, None, out, c), reps, 3)
                rows.append((ms, cfg, None))
            except Exception as e:  # noqa: BLE001
                rows.append((float("inf"), cfg, f"{type(e).__name__}: {str(e)[:160]}"))
        rows.sort(key=lambda r: r[0])
        results[bucket] = [{"ms": r[0], "cfg": r[1], "error": r[2]} for r in rows]
        # a fixed imma config with fewer than three planes is never chosen on its own
        # (two planes are within the accuracy bound only for some rows: see below)
        ok = [r for r in rows if r[2] is None and not (r[1]["kernel"] == "imma" and r[1].get("NP", 3) in (1, 2))]
        best_ms, best[bucket] = (ok[0][0], ok[0][1]) if ok else (rows[0][0], rows[0][1])
        log(f"sweep bucket {bucket} (B={B}): fastest {rows[0][0]:.4f} ms {rows[0][1]}; "
            f"best eligible {best_ms:.4f} ms {best[bucket]}")

        def first(n_planes):
            return next((r for r in rows if r[1]["kernel"] == "imma" and r[2] is None
                         and r[1].get("NP", 3) == n_planes), None)

        two, three = first(2), first(3)
        if two and three:
            # the adaptive mode: two planes where the rows allow (_PLANES_RULE_L1_OVER_MAX),
            # three otherwise -- chosen when it beats the best eligible config
            auto = dict(two[1], NP="auto",
                        NP3={k: three[1][k] for k in ("BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "STACK")
                             if k in three[1]})
            c = dict(auto, BLOCK_B=max(16, B))
            x_out = x.clone()
            x_out[:, 7] = 1000 * x.abs().max()  # one massive activation per row: three planes
            ms_auto = _time_call(lambda: m._launch(x, q, s, None, out, c), reps, 3)
            ms_auto3 = _time_call(lambda: m._launch(x_out, q, s, None, out, c), reps, 3)
            results[bucket + "_auto"] = {"cfg": auto, "ms_two_planes": ms_auto, "ms_three_planes": ms_auto3}
            if ms_auto < best_ms:
                best[bucket] = auto
            log(f"    adaptive imma {auto}: {ms_auto:.4f} ms on Gaussian rows (two planes), "
                f"{ms_auto3:.4f} ms on rows with a massive activation (three planes) -> "
                f"{'chosen' if best[bucket] is auto else 'not chosen'}")
        for ms, cfg, err in rows[:10]:
            log(f"    {ms:8.4f} ms  {cfg}" + (f"  ERR {err}" if err else ""))
        nerr = sum(1 for r in rows if r[2])
        if nerr:
            log(f"    ({nerr} configs failed; first: {next(r[2] for r in rows if r[2])})")
    if "1" not in best or "16" not in best:
        return best, results
    # bucket "1": the best gemv vs the best "16" config at B=1
    x1 = torch.randn(1, H, device=q.device).to(dtype)
    o1 = torch.empty(1, V, device=q.device, dtype=dtype)
    c16 = dict(best["16"])
    c16["BLOCK_B"] = 16
    ms16 = _time_call(lambda: m._launch(x1, q, s, None, o1, c16), reps, 3)
    ms1 = results["1"][0]["ms"]
    log(f"sweep bucket 1: gemv best {ms1:.4f} ms vs bucket-16 config at B=1 {ms16:.4f} ms")
    if ms16 < ms1:
        best["1"] = dict(best["16"])
    return best, results


def _path_name(m, table, B):
    """Which kernel serves a batch of B rows under ``table`` (for the table's last column)."""
    g = m._gemm_cfg(table, B)
    if g is not None and g["kernel"] == "wgmma":
        kind = {0: "single", 1: "warp-specialized", 2: "persistent warp-specialized"}[g.get("WS", 0)]
        return f"wgmma {kind} {g['BLOCK_V']}x{g['BLOCK_B']}x{g['BLOCK_K']} stages {g['STAGES']}"
    if g is not None:
        return f"gemm {g['BLOCK_N']}x{g['BLOCK_B']}x{g['BLOCK_K']} w{g['num_warps']} s{g['num_stages']}"
    top = m._buckets(table)[-1]
    if B > top:
        return f"loop of {top}-row launches" if B <= m.MAX_LOOP_ROWS else "dequant+F.linear"
    c = m._bucket_cfg(table, B)
    if c["kernel"] == "imma":
        return f"imma NP={c.get('NP')} {c['BLOCK_N']}x{c['BLOCK_K']} BLOCK_B {c['BLOCK_B']}"
    return f"{c['kernel']} {c['BLOCK_N']}x{c['BLOCK_K']} BLOCK_B {c.get('BLOCK_B', 1)}"


MODES = (("kept", "bf16 weight kept: each batch dispatched to int8 or bf16"),
         ("freed", "bf16 weight freed: int8 kernels only"))
KINDS = (("gauss", "Gaussian rows", "o", "C0"),
         ("heavy", "heavy-tailed rows (4 channels at 20-1000x RMS)", "s", "C1"))


def plot(rows, path, title):
    """Speed-up over bf16 F.linear vs B (log x): one panel per mode (kept, freed),
    one line per row kind, eager calls solid and CUDA-graph replays dashed. Rows of
    an older JSON (one mode, keys ``speedup`` / ``graph_speedup``) give the freed
    panel alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in MODES if any(f"{m[0]}_speedup" in r for r in rows)] or [("", "int8 kernels")]
    fig, axes = plt.subplots(1, len(modes), figsize=(7 * len(modes), 4.8), dpi=120, sharey=True, squeeze=False)
    bs = sorted({r["B"] for r in rows})
    for ax, (mode, mtitle) in zip(axes[0], modes, strict=True):
        eager, graph = (f"{mode}_speedup", f"{mode}_graph_speedup") if mode else ("speedup", "graph_speedup")
        for kind, label, mk, color in KINDS:
            for col, ls, mfc, what in ((eager, "-", None, "eager calls"), (graph, "--", "none", "CUDA-graph replays")):
                pts = sorted((r["B"], r[col]) for r in rows
                             if r.get("rows", "gauss") == kind and r.get(col, float("nan")) == r.get(col))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=mk, color=color, ls=ls, mfc=mfc,
                            label=f"{label}, {what}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(bs)
        ax.set_xticklabels([str(b) for b in bs], rotation=60, fontsize=6)
        for y, st in ((1.0, "-"), (0.98, ":"), (1.5, "--"), (1.85, "-.")):
            ax.axhline(y, color="grey", lw=0.8, ls=st)
        ax.set_xlabel("batch rows B")
        ax.set_title(mtitle, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speed-up vs bf16 F.linear (same run)")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


def _time_interleaved(fns, reps, warmup):
    """Median ms of each of ``fns``, timed call by call in turn (CUDA events): the
    ratios between them come from the same moments of the run."""
    import torch

    for f in fns:
        for _ in range(warmup):
            f()
    ev = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
          for _ in fns]
    for i in range(reps):
        for j, f in enumerate(fns):
            ev[j][i][0].record()
            f()
            ev[j][i][1].record()
    torch.cuda.synchronize()
    return [statistics.median(a.elapsed_time(b) for a, b in e) for e in ev]


def _graphs(fns):
    """One CUDA graph per ``fn`` (each captured after two side-stream warm-up calls);
    returns their ``replay`` methods and keeps the graphs alive through them."""
    import torch

    out = []
    for fn in fns:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        out.append(graph.replay)
    return out


def _lm_head_module(torch, F, weight):
    """A module shaped like vLLM's untied ``ParallelLMHead`` with its unquantized
    method (``apply`` = ``F.linear``), for the real ``lm_head_logits`` path."""

    class UnquantizedEmbeddingMethod:
        def apply(self, layer, x, bias=None):
            return F.linear(x, layer.weight, bias)

    class ParallelLMHead(torch.nn.Module):
        def __init__(self, w):
            super().__init__()
            self.weight = torch.nn.Parameter(w, requires_grad=False)
            self.quant_method = UnquantizedEmbeddingMethod()

    return ParallelLMHead(weight)


def _first_call(torch, m, head, x, dev, keep):
    """The first ``lm_head_logits`` call on ``head`` with ``PATCHQ_INT8_LMHEAD_KEEP_BF16``
    set to ``keep``: quantizes (and frees, when not kept). Returns the memory figures."""
    os.environ["PATCHQ_INT8_LMHEAD_KEEP_BF16"] = "1" if keep else "0"
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        t = time.time()
        logits = m.lm_head_logits(head, x, None)
        torch.cuda.synchronize()
        first_s = time.time() - t
        after = torch.cuda.memory_allocated(dev)
        peak = torch.cuda.max_memory_allocated(dev)
    finally:
        os.environ.pop("PATCHQ_INT8_LMHEAD_KEEP_BF16", None)
    w = head.weight
    qh, sh = head._patchq_int8
    return {"kept": keep, "bf16_weight_bytes": w.numel() * w.element_size(),
            "bytes_freed": w.numel() * w.element_size() if w.stride() == (0,) * w.dim() else 0,
            "int8_weight_bytes": qh.numel(), "scales_bytes": sh.numel() * 2,
            "allocated_change_bytes": after - before - logits.numel() * logits.element_size(),
            "first_call_peak_extra_bytes": peak - before, "first_call_s": first_s,
            "weight_stride_after": list(w.stride())}


def _path(m, table, B, kept):
    if kept and m._in_ranges(table.get("kept_bf16"), B):
        return "bf16 F.linear"
    return _path_name(m, table, B)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write results as JSON to this path")
    ap.add_argument("--rows", type=int, default=V_DEFAULT)
    ap.add_argument("--hidden", type=int, default=H_DEFAULT)
    ap.add_argument("--batches", default=",".join(map(str, BATCHES_DEFAULT)))
    ap.add_argument("--graph", type=int, default=1,
                    help="also time each call as a CUDA-graph replay (no host launch cost); 0: off")
    ap.add_argument("--plot", help="write the speed-up vs B plot (PNG) here (needs matplotlib)")
    ap.add_argument("--plot-from", help="only render --plot from this JSON (written by --json) and exit")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3,
                    help="time the whole B list this many times; each figure is the median over rounds")
    ap.add_argument("--spin", type=float, default=3.0, help="seconds of bf16 GEMMs before timing (clocks ramp up)")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds idle before each B (clocks recover from the power cap of the B before)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--sweep", action="store_true", help="time the fixed config list first and use the winners")
    ap.add_argument("--sweep-json", help="where --sweep writes the chosen launch table")
    ap.add_argument("--sweep-reps", type=int, default=25)
    ap.add_argument("--sweep-buckets", default="1,16,32,64,128",
                    help="buckets to sweep; the others keep the built-in table")
    ap.add_argument("--sweep-kernels", default="",
                    help="comma-separated kernel kinds to sweep (default all); the built-in entry is always kept")
    ap.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--log", help="also append the printed lines to this file")
    args = ap.parse_args(argv)
    if args.plot_from:
        with open(args.plot_from) as fh:
            res = json.load(fh)
        plot(res["table"], args.plot, f"int8 lm-head vs bf16 F.linear, [{res['V']}, {res['H']}], {res['device']}")
        return 0

    import torch
    import torch.nn.functional as F

    from patchq_runtime import int8_lmhead as m

    dev_kernels.register()
    logf = open(args.log, "a") if args.log else None

    def log(msg=""):
        print(msg, flush=True)
        if logf:
            logf.write(msg + "\n")
            logf.flush()

    if not torch.cuda.is_available():
        log("CUDA not available: nothing to benchmark")
        return 2
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    import triton

    log(f"device: {props.name} sm{props.major}{props.minor} {props.multi_processor_count} SMs, "
        f"torch {torch.__version__}, triton {triton.__version__}")
    V, H = args.rows, args.hidden
    dtype = torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    w = (torch.randn(V, H, device=dev, generator=g) * 0.02).to(dtype)
    torch.cuda.synchronize()
    t = time.time()
    q, s = m.quantize_rows(w)
    torch.cuda.synchronize()
    quant_s = time.time() - t
    int8_bytes = q.numel() * q.element_size() + s.numel() * s.element_size()
    bf16_bytes = w.numel() * w.element_size()
    log(f"weight [{V}, {H}] bf16 {bf16_bytes / 1e6:.1f} MB -> int8 {q.numel() / 1e6:.1f} MB + scales "
        f"{s.numel() * 2 / 1e6:.3f} MB; quantize_rows {quant_s * 1e3:.0f} ms (first call, includes allocation)")

    # bandwidth ceiling: device-to-device copy of the bf16 weight
    dst = torch.empty_like(w)
    copy_ms = _time_call(lambda: dst.copy_(w), 20, 3)
    copy_tbs = 2 * bf16_bytes / (copy_ms * 1e-3) / 1e12
    del dst
    floor_ms = int8_bytes / (copy_tbs * 1e12) * 1e3
    log(f"d2d copy of the bf16 weight: {copy_ms:.4f} ms = {copy_tbs:.2f} TB/s (read+write); "
        f"int8 read floor at that rate {floor_ms:.4f} ms")

    result = {"device": props.name, "sm": f"sm{props.major}{props.minor}", "V": V, "H": H,
              "torch": torch.__version__, "triton": triton.__version__,
              "copy_tb_s": copy_tbs, "int8_floor_ms": floor_ms}
    if args.sweep:
        best, sweep_rows = _sweep(q, s, H, dtype, args.sweep_reps, args.workers, log,
                                  tuple(args.sweep_buckets.split(",")),
                                  tuple(k for k in args.sweep_kernels.split(",") if k))
        table = dict(best)
        result["sweep"] = sweep_rows
        result["chosen"] = table
        path = args.sweep_json or "int8_lmhead_sweep_config.json"
        with open(path, "w") as fh:
            json.dump({f"sm{props.major}{props.minor}": table}, fh, indent=1, sort_keys=True)
        os.environ["PATCHQ_INT8_LMHEAD_CONFIG"] = os.path.abspath(path)
        log(f"sweep: chosen table written to {path} and used below")
    table = m._configs_for(dev)
    result["launch_table"] = table
    log(f"launch table: {json.dumps(table, sort_keys=True)}")
    del q, s

    # the two modes through the real lm_head_logits path: "kept" on the bench's weight
    # itself (the bf16 baseline reads the same tensor), "freed" on a copy it frees
    x4 = torch.randn(4, H, device=dev, generator=g).to(dtype)
    kept_head = _lm_head_module(torch, F, w)
    mem_kept = _first_call(torch, m, kept_head, x4, dev, keep=True)
    freed_head = _lm_head_module(torch, F, w.clone())
    mem_freed = _first_call(torch, m, freed_head, x4, dev, keep=False)
    result["memory"] = {"kept": mem_kept, "freed": mem_freed}
    for name, mem in (("kept", mem_kept), ("freed", mem_freed)):
        fp = mem["int8_weight_bytes"] + mem["scales_bytes"]
        resident = fp + (0 if mem["bytes_freed"] else bf16_bytes)
        mem["resident_bytes"] = resident
        log(f"memory, {name}: first call {mem['first_call_s']:.1f} s (quantize + compile); allocated change "
            f"{mem['allocated_change_bytes']} B; peak above start {mem['first_call_peak_extra_bytes']} B; resident "
            f"lm-head bytes {resident} ({resident / bf16_bytes:.4f} of bf16; int8 {mem['int8_weight_bytes']} + "
            f"scales {mem['scales_bytes']}; bf16 freed {mem['bytes_freed']})")

    batches = [int(b) for b in args.batches.split(",") if b]
    flop1 = 2.0 * V * H  # per activation row
    # the clocks ramp from idle: a few seconds of bf16 GEMMs before the first timing
    xw = torch.randn(1024, H, device=dev, generator=g).to(dtype)
    t = time.time()
    while time.time() - t < args.spin:
        for _ in range(20):
            F.linear(xw, w)
        torch.cuda.synchronize()
    del xw
    inputs = {}
    for B in batches:
        inputs[B] = {"gauss": torch.randn(B, H, device=dev, generator=g).to(dtype),
                     "heavy": dev_kernels.heavy_rows(torch, B, H, g, dev).to(dtype)}
    head = (f"{'B':>5} {'rows':>6} {'bf16 ms':>8} {'kept ms':>8} {'kept x':>7} {'freed ms':>8} {'freed x':>7} "
            f"{'g bf16':>8} {'g kept':>8} {'kept gx':>7} {'g freed':>8} {'freed gx':>8} {'freed TF/s':>10}  "
            f"kept path | freed path")
    keys = ("bf16_ms", "kept_ms", "freed_ms", "graph_bf16_ms", "graph_kept_ms", "graph_freed_ms")
    runs: dict = {}
    for rnd in range(args.rounds):
        log("")
        log(f"round {rnd + 1} of {args.rounds}")
        log(head)
        for B in batches:
            # let the clocks leave the power-cap state the previous (large) B may have
            # left: the int8 kernels at B <= 16 are SM-clock sensitive, F.linear is not
            torch.cuda.synchronize()
            time.sleep(args.settle)
            for kind, x in inputs[B].items():
                fns = (lambda: F.linear(x, w), lambda: m.lm_head_logits(kept_head, x, None),  # noqa: B023
                       lambda: m.lm_head_logits(freed_head, x, None))  # noqa: B023
                t16, tk, tf = _time_interleaved(fns, args.reps, args.warmup)
                g16 = gk = gf = float("nan")
                if args.graph:
                    g16, gk, gf = _time_interleaved(_graphs(fns), args.reps, args.warmup)
                runs.setdefault((B, kind), []).append(dict(zip(keys, (t16, tk, tf, g16, gk, gf), strict=True)))
                log(f"{B:>5} {kind:>6} {t16:>8.4f} {tk:>8.4f} {t16 / tk:>6.2f}x {tf:>8.4f} {t16 / tf:>6.2f}x "
                    f"{g16:>8.4f} {gk:>8.4f} {g16 / gk:>6.2f}x {gf:>8.4f} {g16 / gf:>7.2f}x")
    # each figure: the median over the rounds (of the per-round medians; each ratio is
    # the median of the per-round ratios, so it pairs times taken at the same moments)
    rows = []
    log("")
    log(f"median of {args.rounds} round(s)")
    log(head)
    for B in batches:
        kpath, fpath = _path(m, table, B, True), _path(m, table, B, False)
        for kind in ("gauss", "heavy"):
            rs = runs[(B, kind)]
            med = {k: statistics.median(r[k] for r in rs) for k in keys}
            ratio_of = lambda a, b, rs=rs: statistics.median(r[a] / r[b] for r in rs)  # noqa: E731
            row = {"B": B, "rows": kind, **med,
                   "kept_speedup": ratio_of("bf16_ms", "kept_ms"), "freed_speedup": ratio_of("bf16_ms", "freed_ms"),
                   "kept_graph_speedup": ratio_of("graph_bf16_ms", "graph_kept_ms"),
                   "freed_graph_speedup": ratio_of("graph_bf16_ms", "graph_freed_ms"),
                   "rounds": rs,
                   "freed_gb_s": int8_bytes / (med["freed_ms"] * 1e-3) / 1e9,
                   "bf16_gb_s": bf16_bytes / (med["bf16_ms"] * 1e-3) / 1e9,
                   "freed_tflop_s": flop1 * B / (med["freed_ms"] * 1e-3) / 1e12,
                   "bf16_tflop_s": flop1 * B / (med["bf16_ms"] * 1e-3) / 1e12,
                   "kept_path": kpath, "freed_path": fpath}
            rows.append(row)
            log(f"{B:>5} {kind:>6} {med['bf16_ms']:>8.4f} {med['kept_ms']:>8.4f} {row['kept_speedup']:>6.2f}x "
                f"{med['freed_ms']:>8.4f} {row['freed_speedup']:>6.2f}x {med['graph_bf16_ms']:>8.4f} "
                f"{med['graph_kept_ms']:>8.4f} {row['kept_graph_speedup']:>6.2f}x {med['graph_freed_ms']:>8.4f} "
                f"{row['freed_graph_speedup']:>7.2f}x {row['freed_tflop_s']:>10.1f}  {kpath} | {fpath}")
    result["table"] = rows
    verdict = {}
    ratio = lambda mode, graph: f"{mode}_graph_speedup" if graph else f"{mode}_speedup"  # noqa: E731
    for mode in ("kept", "freed"):
        for kind in ("gauss", "heavy"):
            for graph in (False, True):
                sel = {r["B"]: r[ratio(mode, graph)] for r in rows
                       if r["rows"] == kind and r[ratio(mode, graph)] == r[ratio(mode, graph)]}
                if not sel:
                    continue

                def worst(lo, hi, sel=sel):
                    v = [x for b, x in sel.items() if lo <= b <= hi]
                    return min(v) if v else None

                if mode == "kept":
                    checks = {"every B >= 0.98x": (worst(1, 1 << 30), 0.98), "B<=16 >= 1.85x": (worst(1, 16), 1.85)}
                    if kind == "gauss":
                        checks["B<=64 >= 1.5x"] = (worst(1, 64), 1.5)
                else:
                    checks = {"B<=16 >= 1.85x": (worst(1, 16), 1.85), "B<=64 >= 1.5x": (worst(1, 64), 1.5),
                              "104<=B<=512 >= 1.0x": (worst(104, 512), 1.0),
                              "256<=B<=4096 >= 0.95x": (worst(256, 4096), 0.95)}
                for name, (got, need) in checks.items():
                    verdict[f"{mode} {kind}{' graph' if graph else ''}: {name}"] = {
                        "worst": got, "met": got is not None and got >= need}
    fp = mem_freed["resident_bytes"] / bf16_bytes
    verdict["freed: memory 0.50 of bf16"] = {"worst": fp, "met": fp <= 0.5005}
    result["verdict"] = verdict
    log("")
    for name, v in verdict.items():
        log(f"target {name:40s} worst {v['worst'] if v['worst'] is None else round(v['worst'], 4)} -> "
            f"{'MET' if v['met'] else 'NOT MET'}")
    if args.plot:
        try:
            plot(rows, args.plot, f"int8 lm-head vs bf16 F.linear, [{V}, {H}], {props.name}")
            log(f"wrote {args.plot}")
        except ImportError as e:
            log(f"no plot ({e}); render it from the JSON: python bench/int8_lmhead.py --plot-from JSON --plot PNG")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1, default=str)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
