"""Host (CPU) time per int8_linear call, without waiting for the GPU (int8 lm-head dev aid).

    PYTHONPATH=spark:. python spark/bench/int8_host_overhead.py
"""
import time

import torch

from patchq_runtime import int8_kernels as k
from patchq_runtime import int8_lmhead as m

V, H = 248320, 3072
q = torch.zeros(V, H, dtype=torch.int8, device="cuda")
s = torch.ones(V, dtype=torch.float16, device="cuda")
for B in (16, 64, 128):
    x = torch.randn(B, H, device="cuda").to(torch.bfloat16)
    table = m._configs_for(x.device)
    cfg = m._bucket_cfg_cached(table, B)
    out = torch.empty(B, V, device="cuda", dtype=torch.bfloat16)
    for name, fn in (("int8_linear", lambda: m.int8_linear(x, q, s)),
                     ("planned", lambda: k.launch_planned(id(cfg), cfg, x, q, s, None, out, 256.0)),
                     ("unplanned", lambda: m._launch(x, q, s, None, out, cfg)),
                     ("jit path", lambda: [f[g](*a, **kw) for f, a, kw, g in m._kernel_calls(cfg, x, q, s, None, out)])):
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(50):
            fn()
        dt = (time.perf_counter() - t) / 50
        torch.cuda.synchronize()
        print(f"B={B:4d} {name:12s} host {dt * 1e6:8.1f} us/call  plans {len(k._PLANS)} compiled {len(k._COMPILED)}", flush=True)
from triton import knobs  # noqa: E402

print("launch_enter_hook:", knobs.runtime.launch_enter_hook)
