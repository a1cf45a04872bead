"""patchq's own run-time code, in processes that run patched vLLM (standard library only).

``hook`` is the import hook of ``patchq run`` (copied byte for byte into each hook
directory as ``_patchq_hook.py``, so the target environment needs no patchq), ``plugin``
the vLLM general plugin (``vllm.general_plugins`` entry point: every vLLM process),
``live`` which profile is live in this process, ``cachefold`` the torch.compile cache
root per patch set. None of them imports anything beyond the standard library and
``patchq.env.layout``: a vLLM process pays a few file reads, never libcst or typer.
What a series' patches themselves import at run time is the series' own package, installed
by the series' distribution (as ``patchq-spark`` installs ``patchq_runtime``), not patchq's.
"""
