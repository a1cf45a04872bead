"""Tests of patchq.plan, one module per module (tests/plan/test_<module>.py)."""
