"""The Hopper w8a16 GEMM of :mod:`patchq_runtime.int8_lmhead` (batches above 128 rows).

``out = x @ (q * s[:, None]).T (+ bias)`` computed as ``out^T = q x^T``: the int8
weight tile is the A operand of ``wgmma``, converted to bf16/fp16 on its way from
shared memory (int8 values are exact in both), the activation tile is the B operand
and stays in shared memory. Per-row scales, bias and the one rounding to the output
dtype happen in the fp32 epilogue, as in the other kernels of this package. The
tensor-core work equals bf16 ``F.linear``'s, so cuBLAS parity is the ceiling where
the call is compute-bound.

Written in Gluon (Triton's explicit-layout dialect, Triton >= 3.5) because the
Triton-level kernel could not express what the hardware needs (measured on the H200):

* ``K`` is a compile-time constant. With a runtime ``K`` LLVM gives the K loop a
  zero-trip path, the accumulator's zero-init then reaches the final wait on a second
  path, and ptxas serializes every wgmma (its C7515 note: "wgmma.mma_async
  instructions are serialized due to non wgmma instructions defining accumulator
  registers"). That is why the earlier int8 MMA kernels ran synchronously.
* An A operand in registers must not be rewritten while its wgmma is in flight (PTX
  ISA, ``wgmma.mma_async``), and ptxas reuses those registers after a
  ``wgmma.wait_group 1`` (seen in the SASS). So each warpgroup waits for its own MMA
  (``wait(0)``) and overlap comes from warp specialization instead:
  ``_w8a16_ws_kernel`` runs one TMA producer warp and two consumer warpgroups of 64
  (or 128) weight rows each, synchronized only by mbarriers (ready/empty per ring stage), so
  one warpgroup converts while the other multiplies. Tiles are strided over the
  programs: one program per tile, or a persistent grid of one program per SM.
  ``_w8a16_wgmma_kernel`` is the single-partition version (converted tile staged
  through shared memory, ``RS=0``; or registers with ``wait(0)``, ``RS=1``), kept for
  the development sweep: every K step there pays CTA-wide barriers around the TMA.

Requirements (:func:`supported`): sm90, ``K % 16 == 0`` (TMA needs 16-byte row
strides for the int8 weight), contiguous ``x`` / ``q``, 16-byte aligned bases.
Importing this module imports neither torch nor triton.
"""

from __future__ import annotations

import functools

_KERNEL = None


def build_kernel():
    """The Gluon kernels (imported on first use).

    Returns:
        the ``gluon.jit`` function ``_w8a16_wgmma_kernel``; its ``ws`` attribute is
        the warp-specialized ``_w8a16_ws_kernel``.

    Raises:
        ImportError: Triton without Gluon's Hopper API (Triton < 3.5).
    """
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    from . import _int8_wgmma_kernels as k

    k._w8a16_wgmma_kernel.ws = k._w8a16_ws_kernel
    _KERNEL = k._w8a16_wgmma_kernel
    return _KERNEL


_AVAILABLE = None


def available() -> bool:
    """Whether this Triton has Gluon's Hopper API (Triton >= 3.5); cached.

    Returns:
        True when :func:`build_kernel` imports; False on ImportError/AttributeError
        (an older Triton: the caller falls back to its other paths).
    """
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            build_kernel()
            _AVAILABLE = True
        except (ImportError, AttributeError):
            _AVAILABLE = False
    return _AVAILABLE


def supported(x2, q) -> bool:
    """Whether :func:`launch` can take these operands.

    Args:
        x2: activations ``[B, K]`` (torch tensor).
        q: int8 weight ``[V, K]``.

    Returns:
        True on sm90 with ``K % 16 == 0``, both contiguous, 16-byte aligned bases.
    """
    import torch

    K = q.shape[1]
    return (
        torch.cuda.get_device_capability(q.device)[0] == 9
        and K % 16 == 0
        and x2.is_contiguous()
        and q.is_contiguous()
        and x2.data_ptr() % 16 == 0
        and q.data_ptr() % 16 == 0
    )


def launch(x2, q, scales, bias, out, cfg: dict) -> None:
    """Launch the kernel for ``out[B, V] = x2 @ (q * scales[:, None]).T (+ bias)``.

    Args:
        x2: ``[B, K]`` bf16/fp16, contiguous.
        q: ``[V, K]`` int8, contiguous.
        scales: ``[V]`` fp16.
        bias: ``[V]`` or None.
        out: ``[B, V]`` in ``x2.dtype``, unit stride along V.
        cfg: a launch-table entry: ``BLOCK_V`` weight rows per tile (128 or 256 for
            the warp-specialized kernels: two consumer warpgroups of 64 or 128 rows), ``BLOCK_B``
            batch rows per tile (16-256, a power of two), ``BLOCK_K`` (64 or 128),
            ``STAGES`` (TMA ring depth; shared memory is
            ``STAGES * (BLOCK_V + 2 * BLOCK_B) * BLOCK_K`` bytes, at most ~227 KiB),
            ``WS`` (0: single partition, ``num_warps`` applies; 1:
            warp-specialized; 2: warp-specialized and persistent), ``RS`` (warp-
            specialized only: 1, the default, converts the weight tile into the
            register A operand and waits for each MMA; 0 converts it into two
            shared-memory buffers per consumer, ``2 * BLOCK_V * BLOCK_K * 2`` more bytes,
            and keeps one MMA in flight), ``REGS`` (consumer register budget, default 232).

    Raises:
        ValueError: a warp-specialized config with ``BLOCK_V`` other than 128 or 256.
    """
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    kernel = build_kernel()
    B, K = x2.shape
    V = q.shape[0]
    bv, bb, bk = cfg["BLOCK_V"], cfg["BLOCK_B"], cfg["BLOCK_K"]
    q_layout = _smem_layout(bv, bk, "int8")
    x_layout = _smem_layout(bb, bk, "bfloat16" if str(x2.dtype) == "torch.bfloat16" else "float16")
    q_desc = TensorDescriptor(q, [V, K], [K, 1], [bv, bk], q_layout)
    x_desc = TensorDescriptor(x2, [B, K], [K, 1], [bb, bk], x_layout)
    grid = (((V + bv - 1) // bv) * ((B + bb - 1) // bb),)
    if cfg.get("WS") and bv not in (128, 256):
        raise ValueError(f"warp-specialized wgmma tiles hold 128 or 256 weight rows, not {bv}")
    if cfg.get("WS"):
        # WS 1: one program per tile; WS 2: persistent, one program per SM
        n = min(grid[0], _sm_count(q.device)) if cfg["WS"] == 2 else grid[0]
        kernel.ws[(n,)](
            q_desc, x_desc, scales, bias if bias is not None else scales, out,
            B, V, out.stride(0),
            K=K, HAS_BIAS=bias is not None, STAGES=cfg["STAGES"], CONSUMER_REGS=cfg.get("REGS", 232),
            RS=cfg.get("RS", 1), num_warps=4,
        )
        return
    kernel[grid](
        q_desc, x_desc, scales, bias if bias is not None else scales, out,
        B, V, out.stride(0),
        K=K, HAS_BIAS=bias is not None, STAGES=cfg["STAGES"], num_warps=cfg["num_warps"],
    )


@functools.lru_cache(maxsize=None)
def _smem_layout(rows: int, cols: int, dtype_name: str):
    """The shared-memory layout TMA fills for a ``[rows, cols]`` tile of ``dtype_name``
    (Gluon's default swizzle); cached: computing it costs ~12 us of host time per call."""
    from triton.experimental.gluon import language as gl

    return gl.NVMMASharedLayout.get_default_for([rows, cols], getattr(gl, dtype_name))


_SMS = {}


def _sm_count(device) -> int:
    """Streaming multiprocessors of ``device`` (cached: the persistent grid's size)."""
    import torch

    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx]
