"""patchq: keep a series of anchored libcst patches alive on an installed vLLM."""

__version__ = "0.1.0"
