"""Tests of patchq.runtime, one module per module (tests/runtime/test_<module>.py)."""
