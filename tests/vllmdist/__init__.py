"""Tests of patchq.vllmdist, one module per module (tests/vllmdist/test_<module>.py)."""
