"""The Spark series' run-time package: what its patched vLLM imports at run time.

The int8 lm-head (``int8_lmhead``, its Triton and Gluon kernels) and the INC hybrid FP8
shared-expert dispatch (``inc_hybrid``). The series' patches insert imports of it by this
name (``series/int8_lmhead.py``, ``series/inc_hybrid_fp8.py``), so the name is part of the
patched text and of each patch's hash. It lives in the Spark series repo (``spark/``) beside ``serve.sh`` and
installs with the patchq wheel that bundles the series, as ``patchq_runtime`` (not
``runtime``, which would collide with other top-level packages). patchq itself imports
none of it; its own run-time code is ``patchq.runtime``. Everything here must import
without torch: heavy imports happen inside functions.
"""
