"""Tests of patchq.commands, one module per verb (tests/commands/test_<verb>.py)."""
