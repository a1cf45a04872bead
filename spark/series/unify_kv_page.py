"""unify-kv-page: scale the smaller KV pages' block size AND pad the rest of the page.

``unify_kv_cache_spec_page_size`` (``vllm/v1/core/kv_cache_utils.py``; from 0.33.0
``vllm/v1/core/kv_cache_planning.py``) scales the block size of layers whose page is
smaller than the largest one by ``ratio = max_page_size // layer_page_size``, then
asserts the pages are equal. With a hybrid GDN + mamba + attention target and a DFlash
drafter whose attention page is twice the target's, the largest page is the drafter's;
the target's mamba page was already *padded* (to the target attention page), so scaling
its block size does not change its page and the assert fails. The fix keeps the scaled
block size and pads the remainder (``page_size_padded=max_page_size``), as vLLM already
does for hidden-state specs. Padding without scaling (a known wrong fix) mis-strided the
drafter's KV and collapsed speculative acceptance (~1.5 accepted tokens instead of ~8):
never regress to it.

Variants (anchor ``scaled-replace`` = the statement
``new_spec = replace(layer_spec, block_size=new_block_size)``; the edit inserts the
padded rebuild right after it, so the upstream assert stays and checks the result):

* ``>=0.15,<0.24``: the statement is in the loop body, right before the assert.
* ``>=0.24,<0.26``: the divisible case moved into ``if max_page_size % layer_page_size
  == 0:`` (re-indented) and a new ``elif`` pads attention pages that do not divide the
  maximum *without* scaling (backends that opt in with ``indexes_kv_by_block_stride``).
  That is a different case (non-divisible) and is left alone; the insertion lands in the
  divisible branch, before the shared assert.
* ``>=0.26,<0.33``: upstream added an ``elif isinstance(layer_spec, MambaSpec):`` branch
  before the scaling branch: it pads Mamba pages to the maximum without scaling their
  block size (its comment names the draft-model case), with its own second assert.
  0.29.0 drops the opt-in of the non-divisible padding (non-MLA attention), 0.31.0
  reformats the docstring only; neither touches the anchor.
* ``>=0.33``: the function moved to ``vllm/v1/core/kv_cache_planning.py`` (body identical
  to 0.32.0); anchor ``scaled-replace-planning`` names that module, so it resolves in
  place, not as moved.

Decision for 0.26+ (the Mamba branch). The patch keeps its edit in the scaling branch,
i.e. for attention-type (every non-Mamba) layer a scaled spec whose page still falls
short is padded *with* its scaled block size; it never pads such a layer without
scaling. Upstream's Mamba branch is kept as it is: a Mamba page comes from its state
shapes and does not depend on ``block_size``, so padding is the only way to equalize it
and no KV stride depends on its block size (the mis-strided KV of the known wrong fix
was attention KV). The 0.23 patch scaled the mamba block too (2240 -> 4480), which then
needed prefix-align to stop the hash back-off; upstream's unscaled mamba block equals
``cache_config.block_size``, so that back-off is not taken for this geometry. On 0.26+
the edit is therefore inert for the DFlash geometry and only acts for a non-Mamba spec
whose page does not scale linearly with its block size (an attention spec that is
already padded); there it turns the assert into a scaled + padded spec.
Evidence (CPU, vLLM 0.28.0 installed with its dependencies and torch 2.13.0+cpu, the
cases :func:`dflash_geometry` and :func:`padded_attention`, run 2026-11-30; ``patchq probe``
runs them on every release, ``lab/evidence/probe/``):

* pristine 0.28.0, ``dflash``: target attention block 288 -> 576 (page 1179648), mamba
  block 288 with ``page_size_padded`` 1179648 (padded, not scaled), drafter unchanged
  (288, 1179648), no assert; ``padded-attention``: upstream's assert fails.
* patched 0.28.0 (``patchq apply --profile dflash``): ``dflash`` identical to pristine
  (the edit is inert there); ``padded-attention``: the padded layer gets block 16 -> 48
  and ``page_size_padded`` 36864 (= the maximum), the other layer is unchanged.
* ``resolve_kv_cache_block_sizes`` of 0.28.0 on the unified ``dflash`` groups (block
  sizes [576, 288, 288], align mode, prefix caching on) returns (scheduler 576, hash
  288): every group's block size is divisible by the hash block size, so the
  coordinator's divisibility check holds without prefix-align.

Not settled here: acceptance length on a GPU boot of 0.26+ with the unscaled mamba
block (the boot level of the matrix).
"""

from patchq import edits
from patchq.series import case, patch, variant

PAD_AFTER_SCALE = """
if new_spec.page_size_bytes != max_page_size:
    # patchq unify-kv-page: keep the scaled block size, pad the rest of the page
    new_spec = replace(layer_spec, block_size=new_block_size, page_size_padded=max_page_size)
"""

#: Where the function lives, newest first (``kv_cache_planning`` from 0.33.0).
UNIFY_MODULES = ("vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils")


def pad_after_scale(unify, found, ctx):
    """Insert the padded rebuild right after ``new_spec = replace(..., block_size=...)``."""
    (scaled,) = found
    return edits.insert_after(unify, scaled, edits.stmts(PAD_AFTER_SCALE))


def _unify():
    """The (patched) ``unify_kv_cache_spec_page_size`` of the imported vLLM."""
    import importlib

    for module in UNIFY_MODULES:
        try:
            return importlib.import_module(module).unify_kv_cache_spec_page_size
        except ModuleNotFoundError as exc:
            if not (exc.name and (module == exc.name or module.startswith(exc.name + "."))):
                raise  # the module is there but cannot import: say so
        except AttributeError:
            continue
    raise AssertionError(f"unify_kv_cache_spec_page_size not found in {', '.join(UNIFY_MODULES)}")


def _unified(case_name, specs):
    """Unify ``specs`` ({layer: spec}); assert every page ends at the largest one and an
    attention layer whose page grew had its block size scaled by the integer page ratio.
    Returns {layer: {"block_size", "page_size_bytes", "page_size_padded"}}."""
    from vllm.v1.kv_cache_interface import AttentionSpec

    try:
        result = _unify()(dict(specs))
    except AssertionError as exc:  # upstream's own assert: name the case
        raise AssertionError(f"{case_name}: unify_kv_cache_spec_page_size asserted: {exc!r}") from exc
    top = max(s.page_size_bytes for s in specs.values())
    out = {}
    for name, spec in result.items():
        before = specs[name]
        assert spec.page_size_bytes == top, f"{case_name}/{name}: page {spec.page_size_bytes} != {top}"
        if isinstance(spec, AttentionSpec) and before.page_size_bytes != top:
            ratio = top // before.page_size_bytes
            assert spec.block_size == before.block_size * ratio, (
                f"{case_name}/{name}: attention block {spec.block_size} not scaled by {ratio} "
                f"(padding without scaling)")
        out[name] = {"block_size": spec.block_size, "page_size_bytes": spec.page_size_bytes,
                     "page_size_padded": getattr(spec, "page_size_padded", None)}
    return out


@case()
def dflash_geometry():
    """The tiny models' pages end equal: target attention scaled 288 -> 576, mamba padded, drafter kept.

    Target ``FullAttentionSpec(block_size=288, num_kv_heads=2, head_size=256)`` (page
    589824 B), target ``MambaSpec(block_size=288, page_size_padded=589824,
    mamba_cache_mode="align")`` and the drafter's ``FullAttentionSpec(block_size=288,
    num_kv_heads=8, head_size=128)`` (page 1179648 B), bf16: the KV-cache geometry of the
    real pair (docs/boot.md). Before 0.26 upstream scales the mamba block and asserts
    (the unify assert of a DFlash boot); from 0.26 it pads mamba itself, so the pristine
    release passes too and the edit is inert here.
    """
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec

    bf16 = torch.bfloat16
    out = _unified("dflash-geometry", {
        "target.attn": FullAttentionSpec(block_size=288, num_kv_heads=2, head_size=256, dtype=bf16),
        "target.mamba": MambaSpec(block_size=288, shapes=((64, 1024),), dtypes=(bf16,),
                                  page_size_padded=589824, mamba_cache_mode="align"),
        "drafter.attn": FullAttentionSpec(block_size=288, num_kv_heads=8, head_size=128, dtype=bf16),
    })
    assert out["target.attn"]["block_size"] == 576, out
    assert out["drafter.attn"]["block_size"] == 288, out
    return out


@case(pristine="fails")
def padded_attention():
    """An attention page already padded (12288 B) beside a 36864 B page: scaled x3 and padded, never asserted on.

    Scaling its block 16 -> 48 leaves the padded page short of the largest one, which
    upstream asserts on; the patch keeps the scaled block and pads the rest
    (``page_size_padded`` 36864).
    """
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    bf16 = torch.bfloat16
    out = _unified("padded-attention", {
        "small.attn": FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=64, dtype=bf16,
                                        page_size_padded=12288),
        "big.attn": FullAttentionSpec(block_size=16, num_kv_heads=9, head_size=64, dtype=bf16),
    })
    assert out["small.attn"] == {"block_size": 48, "page_size_bytes": 36864, "page_size_padded": 36864}, out
    return out


PATCH = patch(
    id="unify-kv-page",
    summary="KV-cache unify keeps the scaled block size and pads the page (drafter on a hybrid target)",
    why="""With a hybrid GDN + mamba + attention target the mamba page is padded; when the
    speculative drafter's attention page is larger, scaling a smaller layer's block size by
    the integer page ratio cannot reach it and unify_kv_cache_spec_page_size asserts. Keep
    the scaled block size and pad the remainder with page_size_padded (as for hidden-state
    specs); never pad attention without scaling.""",
    upstream=["https://github.com/vllm-project/vllm/blob/v0.23.0/vllm/v1/core/kv_cache_utils.py",
              "https://github.com/vllm-project/vllm/blob/v0.26.0/vllm/v1/core/kv_cache_utils.py"],
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.24", edits={"scaled-replace": pad_after_scale},
                note="scaled replace + assert adjacent in the loop body"),
        variant(">=0.24,<0.26", edits={"scaled-replace": pad_after_scale},
                note="divisible case re-indented into an if-branch; upstream pads non-divisible attention unscaled"),
        variant(">=0.26,<0.33", edits={"scaled-replace": pad_after_scale},
                note="upstream pads Mamba unscaled in its own branch (kept); the patch covers the scaling branch"),
        variant(">=0.33", edits={"scaled-replace-planning": pad_after_scale},
                note="function moved to vllm/v1/core/kv_cache_planning.py"),
    ],
    cases=[dflash_geometry, padded_attention],
)
