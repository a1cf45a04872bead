"""The stack: the tool's five-patch fixture series on real vLLM releases (``tests/testing/stack/``).

Its patches are stand-ins with the shapes a real stack has on vLLM 0.23.0: a class
attribute replaced (``backend-tiles``), an insertion and an ``if`` test rewritten in one file
(``page-scale``, ``align-backoff``), five edits of one class with methods whose signature is
copied from the base class (``fp8-experts``), the same statement replaced in two methods
(``head-gemv``), and patched code that imports a package of the series' own at run time
(``stack_runtime``, beside the series: :data:`RUNTIME`). Profiles ``base`` (one patch), ``kv``
(three) and ``full`` (five) share patches and carry serve tables. The anchors record vLLM
0.23.0's fingerprints; the variants end before 0.24/0.26, where upstream moved the code.

It belongs to the tests: no series the tool ships or serves is read by them. The CLI runs of
``tests/`` use it unless a test names another (``support.run_cli``: ``$PATCHQ_SERIES``), as
do in-process loads (``tests/conftest.py``); a test that writes into a series copies it first
(:func:`copy`, the ``series_copy`` fixture).
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "stack"
SERIES = ROOT / "series"
ANCHORS = ROOT / "anchors"
#: the directory holding ``stack_runtime`` (a ``.pth`` line makes it importable in a test site)
RUNTIME = ROOT

BASE = ["backend-tiles"]
KV = ["backend-tiles", "page-scale", "align-backoff"]
FULL = ["backend-tiles", "page-scale", "align-backoff", "fp8-experts", "head-gemv"]

#: the files the full profile writes on vLLM 0.23.0
UTILS = "vllm/model_executor/layers/fla/ops/utils.py"
KV_UTILS = "vllm/v1/core/kv_cache_utils.py"
INC = "vllm/model_executor/layers/quantization/inc.py"
LOGITS = "vllm/model_executor/layers/logits_processor.py"
FULL_FILES = sorted([UTILS, KV_UTILS, INC, LOGITS])
#: file -> the outermost definitions the full profile changes in it on 0.23.0
FULL_DEFS = {
    UTILS: ["Backend"],
    KV_UTILS: ["unify_kv_cache_spec_page_size", "resolve_kv_cache_block_sizes"],
    INC: ["INCConfig"],
    LOGITS: ["LogitsProcessor._get_logits", "LogitsProcessor.get_top_tokens"],
}


def copy(root: Path, diffs: bool = True) -> Path:
    """A copy of the stack in ``root`` (``root/series``, ``root/anchors``); returns the series
    directory."""
    shutil.copytree(SERIES, root / "series", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ANCHORS, root / "anchors")
    return root / "series"


def files() -> dict[str, bytes]:
    """relpath -> bytes of every file of the fixture (``__pycache__`` left out): what a test
    session must leave as it found it."""
    return {str(p.relative_to(ROOT)): p.read_bytes() for p in sorted(ROOT.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}
