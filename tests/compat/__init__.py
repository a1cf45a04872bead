"""Tests of patchq.compat, one module per module (tests/compat/test_<module>.py)."""
