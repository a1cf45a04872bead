"""prefix-align: the mamba hash-block back-off is only for non-align mamba.

With prefix caching on and the drafter's attention page twice the target's, unification
scales the target's mamba and attention blocks (2240 -> 4480) while the drafter group
stays at 2240. ``resolve_kv_cache_block_sizes`` (``vllm/v1/core/kv_cache_utils.py``) then
sees a mamba block that differs from ``cache_config.block_size``, backs off to the LCM as
hash block size, and the coordinator asserts that 2240 is divisible by 4480. In align
mode the GCD path is right.

Variants:

* ``>=0.15,<0.20``: absent: the function (and any back-off) does not exist in 0.15.1 -
  0.19.1; 0.19.1 passes ``hash_block_size`` as the scheduler block size.
* ``>=0.20,<0.28``: anchor ``mamba-backoff`` (the ``if any(isinstance(g.kv_cache_spec,
  MambaSpec) and g.kv_cache_spec.block_size != cache_config.block_size for g in groups)``
  back-off) holds unchanged 0.20.0-0.27.1 (the function is already in 0.20.0 and 0.20.1;
  0.26.0's DCP scaling and the ``prefix_match_unit`` rename are outside it); the edit
  puts the align-mode guard in front of its test.
* ``>=0.28``: upstreamed: the back-off tests ``spec.mamba_cache_mode != "align"`` on the
  group spec instead of comparing block sizes. In align mode both skip the back-off
  (what the patch is for); in non-align mode upstream backs off for any Mamba group
  (more conservative than the patch). 0.29.0 iterates ``iter_layer_specs`` of each
  group; 0.30-0.32 change the function outside the back-off. :func:`upstream_check`
  verifies that post-state in the release's code rather than trusting the range.
"""

import ast

import libcst as cst

from patchq import edits, postcheck
from patchq.series import case, patch, variant

ALIGN_GUARD = 'getattr(cache_config, "mamba_cache_mode", "none") != "align"'


def guard_align(resolve, found, ctx):
    """``if any(...)`` -> ``if <not align> and any(...)`` on the back-off branch."""
    (backoff,) = found
    new_test = cst.BooleanOperation(
        left=edits.expr(ALIGN_GUARD), operator=cst.And(), right=backoff.test)
    return edits.replace(resolve, backoff.test, new_test)


def _is_not_align(node: ast.AST) -> bool:
    """``<x>.mamba_cache_mode != "align"``."""
    return (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.NotEq)
            and isinstance(node.left, ast.Attribute) and node.left.attr == "mamba_cache_mode"
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value == "align")


def _is_mamba_isinstance(node: ast.AST) -> bool:
    """``isinstance(<x>, MambaSpec)``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
            and len(node.args) == 2 and isinstance(node.args[1], ast.Name) and node.args[1].id == "MambaSpec")


def _compares_block_size(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "block_size" for n in ast.walk(node))


def upstream_check(source):
    """A reason when the release's back-off already spares align-mode mamba, else None.

    Looks in ``resolve_kv_cache_block_sizes`` for an ``if any(<gen>): return ...`` whose
    generator element tests ``isinstance(<spec>, MambaSpec)`` and
    ``<spec>.mamba_cache_mode != "align"`` and no longer compares block sizes (the
    0.28.0 post-state; the 0.29.0 two-level generator too). The patch's own guard sits
    outside ``any(...)`` and never matches.
    """
    found = postcheck.definition(source, "resolve_kv_cache_block_sizes", "vllm.v1.core.kv_cache_utils")
    if found is None or found.patched_by("prefix-align"):
        return None
    for node in ast.walk(found.node):
        if not (isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Return)):
            continue
        test = node.test
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "any"
                and len(test.args) == 1 and isinstance(test.args[0], ast.GeneratorExp)):
            continue
        elt = test.args[0].elt
        parts = list(ast.walk(elt))
        if any(map(_is_mamba_isinstance, parts)) and any(map(_is_not_align, parts)) \
                and not _compares_block_size(elt):
            return (f"resolve_kv_cache_block_sizes ({found.where}) "
                    'backs off to the scheduler block size only for Mamba specs with '
                    'mamba_cache_mode != "align": align mode takes the GCD path, as the patch makes it')
    return None


@case(releases=">=0.20", pristine="fails")
def align_mode_hash_block():
    """Prefix caching with a DFlash drafter in align mode: hash block 2240 divides every group (no LCM back-off).

    The groups of the 0.23 boot that asserted: the target's mamba and attention groups
    scaled 2240 -> 4480 by unification, the drafter's attention group at 2240,
    ``cache_config.block_size`` 2240, ``mamba_cache_mode="align"``, prefix caching on.
    ``resolve_kv_cache_block_sizes`` reads ``kv_cache_groups[].kv_cache_spec`` and
    ``cache_config`` / ``parallel_config`` / ``kv_transfer_config`` of its arguments; they are
    given as plain namespaces holding real specs. The KV coordinator then requires every
    group's block size to be divisible by the hash block size, which is asserted here.
    Before 0.20 the function does not exist (the patch is absent there).
    """
    from types import SimpleNamespace

    import torch
    from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec

    bf16 = torch.bfloat16
    specs = [
        FullAttentionSpec(block_size=4480, num_kv_heads=2, head_size=256, dtype=bf16),
        MambaSpec(block_size=4480, shapes=((64, 1024),), dtypes=(bf16,), mamba_cache_mode="align"),
        FullAttentionSpec(block_size=2240, num_kv_heads=8, head_size=128, dtype=bf16),
    ]
    groups = SimpleNamespace(kv_cache_groups=[SimpleNamespace(kv_cache_spec=s) for s in specs])
    config = SimpleNamespace(
        cache_config=SimpleNamespace(block_size=2240, enable_prefix_caching=True, mamba_cache_mode="align",
                                     hash_block_size=None, prefix_match_unit=None),
        parallel_config=SimpleNamespace(decode_context_parallel_size=1, prefill_context_parallel_size=1),
        kv_transfer_config=None)
    scheduler, hashed = resolve_kv_cache_block_sizes(groups, config)
    sizes = [s.block_size for s in specs]
    assert all(b % hashed == 0 for b in sizes), (
        f"hash block {hashed} does not divide the group block sizes {sizes} (the LCM back-off in align mode)")
    assert hashed == 2240 and scheduler == 4480, (scheduler, hashed)
    return {"scheduler_block_size": scheduler, "hash_block_size": hashed}


PATCH = patch(
    id="prefix-align",
    summary="Hash block size back-off only for non-align mamba (prefix caching with a DFlash drafter)",
    why="""In mamba align mode the scaled mamba block legitimately differs from
    cache_config.block_size; the back-off to the LCM then makes the drafter group's block
    size indivisible by the hash block size and the KV coordinator asserts. Skip the
    back-off in align mode so the GCD path is taken.""",
    upstream=["https://github.com/vllm-project/vllm/blob/v0.28.0/vllm/v1/core/kv_cache_utils.py"],
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.20", absent="resolve_kv_cache_block_sizes and its mamba back-off do not "
                "exist before vLLM 0.20.0 (0.19.1 passes hash_block_size as the scheduler block size)"),
        variant(">=0.20,<0.28", edits={"mamba-backoff": guard_align},
                note="back-off compares the mamba block size with cache_config.block_size"),
        variant(">=0.28", upstreamed='vLLM 0.28.0 backs off only for Mamba group specs with '
                'mamba_cache_mode != "align" (read from the spec, block sizes no longer compared), '
                "so align mode takes the GCD path as the patch intends; non-align mode backs off for "
                "every Mamba group"),
    ],
    upstream_check=upstream_check,
    cases=[align_mode_hash_block],
)
