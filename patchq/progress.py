"""Progress on stderr for the long waits (a release fetch, the matrix), on a terminal only.

A :class:`Bar` draws a rich progress bar on stderr when stderr is a terminal (``TERM`` not
``dumb``), and nothing otherwise: piped or captured output (CI, ``2>log``) stays as it was.
``PATCHQ_PROGRESS=0`` turns it off. Only one bar is live at a time in a process: a bar
started while another is live stays silent (a fetch inside the matrix). Worker processes
of the matrix draw nothing (:func:`silence`). rich is imported only when a bar is drawn:
the no-op apply and ``status`` never import this module's dependencies.
"""

from __future__ import annotations

import os
import sys
import threading

_lock = threading.Lock()
_active = [False]


def enabled() -> bool:
    """True when a bar would be drawn: stderr is a terminal and progress is not off."""
    if os.environ.get("PATCHQ_PROGRESS", "") == "0":
        return False
    if os.environ.get("TERM", "") in ("dumb", "unknown"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


def silence() -> None:
    """No bar in this process from now on (a worker process of the matrix)."""
    os.environ["PATCHQ_PROGRESS"] = "0"


class Bar:
    """One progress bar: ``with Bar("vllm 0.23.0 sources", total=None, unit="bytes") as bar:
    bar.advance(n)``. ``unit``: ``bytes`` (a download: size and speed) or ``items``
    (``3/27``). ``total`` None: unknown yet (:meth:`set_total` later). Thread-safe."""

    def __init__(self, label: str, total: float | None = None, unit: str = "items") -> None:
        self.label, self.total, self.unit, self.done = label, total, unit, 0.0
        self._progress = None
        self._task = None
        self._mutex = threading.Lock()

    def __enter__(self) -> Bar:
        with _lock:
            if enabled() and not _active[0]:
                try:
                    self._progress = self._start()
                    _active[0] = True
                except Exception:  # pragma: no cover - rich cannot draw here: no bar, never a failure
                    self._progress = None
        return self

    def _start(self):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TransferSpeedColumn,
        )

        counts = (DownloadColumn(), TransferSpeedColumn()) if self.unit == "bytes" else (MofNCompleteColumn(),)
        progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), *counts,
                            TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        progress.start()
        self._task = progress.add_task(self.label, total=self.total)
        return progress

    def advance(self, n: float = 1, label: str | None = None) -> None:
        """``n`` more units done (and a new label, e.g. the release just checked)."""
        with self._mutex:
            self.done += n
            if self._progress is not None:
                self._progress.update(self._task, advance=n, **({"description": label} if label else {}))

    def set_total(self, total: float) -> None:
        """The total, once known."""
        self.total = total
        if self._progress is not None:
            self._progress.update(self._task, total=total)

    @property
    def shown(self) -> bool:
        """Whether this bar is drawn."""
        return self._progress is not None

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            with _lock:
                _active[0] = False

    def note(self, line: str) -> None:
        """A line on stderr that stays after the bar (only when the bar was drawn: silent
        otherwise)."""
        if self._progress is not None:
            self._progress.console.print(f"patchq: {line}", highlight=False, markup=False)
