"""The stack fixture's run-time package: what its patched vLLM imports (tests/testing/stack.py)."""
