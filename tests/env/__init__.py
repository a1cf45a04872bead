"""Tests of patchq.env, one module per module (tests/env/test_<module>.py)."""
