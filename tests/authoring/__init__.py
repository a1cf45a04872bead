"""Tests of patchq.authoring, one module per module (tests/authoring/test_<module>.py)."""
