"""Code that vLLM, once patched by patchq, imports at run time.

It installs as ``patchq_runtime`` (not ``runtime``, which would collide with other
top-level packages) from the ``runtime/patchq_runtime`` folder of the patchq project.
Everything here must import without torch on the import path of ``patchq`` itself:
heavy imports happen inside functions.
"""
