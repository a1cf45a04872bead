"""The fast layer: small fixtures, no vLLM release, no network (``pytest -m "not wheel"``)."""
