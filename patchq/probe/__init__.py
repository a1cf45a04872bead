"""``patchq probe``: the import and probe levels of the matrix, on CPU, for any release.

:mod:`patchq.probe.env` builds and caches a release's CPU environment (its Python files,
a CPU torch, the distributions its imports reach, from its METADATA);
:mod:`patchq.probe.run` applies targets there and records the import and probe levels;
:mod:`patchq.probe.child` is what runs inside the environment's interpreter;
:mod:`patchq.probe.merge` turns the records into check rows and matrix cells (a failing
case makes a cell blocking, ``fails-probe``). The verb is :mod:`patchq.commands.probe`.
"""
