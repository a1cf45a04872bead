"""fla-shmem: let the FLA (Gated DeltaNet) Triton kernels pick big tiles on GB10 (sm121).

``Backend.DEFAULT`` (an ``Enum`` member in the FLA ``ops/utils.py``) is the shared
memory per block that the kernels require before they pick big tiles; GB10 reports
101376 bytes, just under 102400, although the same big tiles already run on Ada parts
with 101376 bytes. ``cumsum.py`` (``BS_LIST``) and ``chunk_o.py`` (``BKV_LIST``) call
``check_shared_mem()`` at module level, so the patch must be on disk (or in the import
hook) before those modules are imported. With the patch ``DEFAULT`` has the same value
as ``ADA`` and becomes an ``Enum`` alias of it; ``Backend.DEFAULT.value`` is 101376 and
``Backend.get_shared_memory`` behaves as intended.

Variants (verified on the release wheels, see ``anchors/fla-shmem.toml``):

* ``>=0.15,<0.26``: ``vllm/model_executor/layers/fla/ops/utils.py``.
* ``>=0.26``: the whole ``fla`` package moved to ``vllm/third_party/flash_linear_attention/``
  (``utils.py`` byte-identical to 0.25.1; no shim left at the old path), so the anchor
  there names the new module and resolves in place, not as moved.

The class is unchanged in every release 0.15.1-0.33.0 and ``DEFAULT`` is still 102400
in 0.33.0: nothing upstream. :func:`upstream_check` says so from the code.
"""

import ast

from patchq import edits, postcheck
from patchq.series import case, patch, variant

GB10_SHARED_MEMORY = 101376  # bytes per block, as reported by sm121 (= Backend.ADA)

#: Where ``class Backend`` lives, newest first (``vllm.third_party`` from 0.26.0).
BACKEND_MODULES = (
    "vllm.third_party.flash_linear_attention.ops.utils",
    "vllm.model_executor.layers.fla.ops.utils",
)


def lower_default(backend, found, ctx):
    """``DEFAULT = 102400`` -> ``DEFAULT = 101376`` inside ``class Backend``."""
    (line,) = found
    return edits.replace(backend, line, edits.stmts(
        f"DEFAULT = {GB10_SHARED_MEMORY}  # patchq fla-shmem: GB10 (sm121) reports 101376"))


_INT_OPS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
            ast.FloorDiv: int.__floordiv__, ast.LShift: int.__lshift__}


def _int_value(node):
    """The value of an int literal or of ``+ - * // <<`` over int literals (``99 * 1024``), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        left, right = _int_value(node.left), _int_value(node.right)
        if left is not None and right is not None:
            return _INT_OPS[type(node.op)](left, right)
    return None


def upstream_check(source):
    """A reason when the release's ``Backend.DEFAULT`` is already <= 101376 bytes, else None.

    Reads ``class Backend`` (new FLA path first, then the old one); a definition that
    carries this patch's sentinel is the patch's own edit, not upstream's.
    """
    found = postcheck.definition(source, "Backend", *BACKEND_MODULES)
    if found is None or found.patched_by("fla-shmem"):
        return None
    for stmt in found.node.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == "DEFAULT"):
            continue
        value = _int_value(stmt.value)
        if value is not None and value <= GB10_SHARED_MEMORY:
            return (f"Backend.DEFAULT is {value} bytes in {found.where} "
                    f"(<= GB10's {GB10_SHARED_MEMORY}): sm121 already gets the big FLA tiles")
    return None


def _fla_utils():
    """The imported FLA ``ops/utils`` module (new path first)."""
    import importlib

    for module in BACKEND_MODULES:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not (exc.name and (module == exc.name or module.startswith(exc.name + "."))):
                raise  # the module is there but cannot import: say so
    raise AssertionError(f"none of {', '.join(BACKEND_MODULES)} imports")


@case(pristine="fails")
def default_constant():
    """``Backend.DEFAULT`` is GB10's 101376 bytes (an alias of ``ADA``) and ``get_shared_memory`` answers it."""
    utils = _fla_utils()
    backend = utils.Backend
    assert backend.DEFAULT.value == GB10_SHARED_MEMORY, f"Backend.DEFAULT is {backend.DEFAULT.value}"
    assert backend.get_shared_memory("none") == GB10_SHARED_MEMORY
    assert backend.get_shared_memory("hopper") == backend.HOPPER.value  # the named archs are untouched
    return {"DEFAULT": backend.DEFAULT.value, "aliases_ADA": backend.DEFAULT is backend.ADA}


@case(pristine="fails")
def gb10_gate():
    """The big-tile gate ``check_shared_mem()`` is true on a device reporting 101376 bytes (GB10), false below.

    The device query (``get_all_max_shared_mem``, Triton's driver) is replaced for the call
    by a device list reporting GB10's shared memory, then 101375 bytes; the gate's cache is
    cleared around each call and restored after. The kernels' own choice (``BS_LIST``,
    ``BKV_LIST``) is made from this gate at their import, on a GPU only.
    """
    utils = _fla_utils()
    query, amd = utils.get_all_max_shared_mem, getattr(utils, "is_amd", False)
    seen = {}
    try:
        utils.is_amd = False  # the NVIDIA path of the gate (AMD asks HIP instead)
        for reported in (GB10_SHARED_MEMORY, GB10_SHARED_MEMORY - 1):
            utils.get_all_max_shared_mem = lambda reported=reported: [reported]
            utils.check_shared_mem.cache_clear()
            seen[reported] = utils.check_shared_mem()
    finally:
        utils.get_all_max_shared_mem, utils.is_amd = query, amd
        utils.check_shared_mem.cache_clear()
    assert seen == {GB10_SHARED_MEMORY: True, GB10_SHARED_MEMORY - 1: False}, seen
    return {str(k): v for k, v in seen.items()}


PATCH = patch(
    id="fla-shmem",
    summary="FLA GDN kernels use big tiles on sm121's 101376-byte shared memory",
    why="""GB10 (sm121) reports 101376 bytes of shared memory per block, just under
    Backend.DEFAULT (102400), so the Gated DeltaNet chunk kernels fall back to small
    tiles; Ada parts run the big tiles with the same 101376 bytes. Prefill speed only.""",
    applies=">=0.15",
    variants=[
        variant(">=0.15,<0.26", edits={"default-shmem": lower_default},
                note="vllm/model_executor/layers/fla/ops/utils.py"),
        variant(">=0.26", edits={"default-shmem-third-party": lower_default},
                note="fla package moved to vllm/third_party/flash_linear_attention/ (0.26.0)"),
    ],
    upstream_check=upstream_check,
    cases=[default_constant, gb10_gate],
)
