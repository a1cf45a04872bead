"""vLLM general plugin (entry point group ``vllm.general_plugins``).

vLLM calls :func:`register` in every process it starts. Until the runtime-mode
checks land it does nothing unless ``PATCHQ_EXPECT_PROFILE`` is set.
"""


def register() -> None:
    """Entry point called by vLLM's ``load_general_plugins`` in every process."""
    return None
