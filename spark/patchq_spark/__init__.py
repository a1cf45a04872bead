"""The Spark series as an installed distribution (``patchq-spark``): where its series lives.

patchq finds an installed series through the entry-point group ``patchq.series``
(``patchq.discovery``); this distribution's entry point is ``spark = patchq_spark:SERIES``.
The wheel installs the series beside this file (``patchq_spark/series/``, with its store of
expected output ``series/diffs/``, and ``patchq_spark/anchors/``); an editable install
(``pip install -e spark``) reads the checkout's ``spark/series/`` and ``spark/anchors/``,
one directory up. Standard library only: patchq imports this at every start that falls back
to the installed series.
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.realpath(__file__))
#: the series directory: ``profiles.toml`` and one module per patch; ``anchors/`` is beside it
SERIES = os.path.join(_HERE, "series") if os.path.isfile(os.path.join(_HERE, "series", "profiles.toml")) \
    else os.path.join(os.path.dirname(_HERE), "series")
