"""The small world module tests run in (offline, no vLLM release): the small series
(:mod:`testing.small_series`: one patch, ``bump-default``, profiles ``base`` and ``none``)
and an installed vLLM 0.1.0 of one module with a real RECORD. ``tests/conftest.py`` hands
it out as the ``small`` fixture."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchq import series as series_mod
from patchq.plan import anchors
from patchq.series import Series
from patchq.vllmdist import sources
from patchq.vllmdist.sources import CodeSource
from testing import small_series

UTILS = "vllm/ops/utils.py"


@dataclass
class Small:
    """The small world: ``series`` loaded, ``target`` the installed vLLM, ``site`` its path."""

    root: Path
    series: Series
    site: Path

    @property
    def target(self) -> CodeSource:
        return sources.installed(self.site)

    def utils(self) -> str:
        return (self.site / UTILS).read_text()

    def reinstall(self, text: str) -> None:
        """Install another ``vllm/ops/utils.py`` as an installer would: the file and its RECORD row."""
        (self.site / UTILS).write_text(text)
        record = next(self.site.glob("vllm-*.dist-info")) / "RECORD"
        rows = [small_series._record_row(self.site, UTILS) if row.startswith(UTILS + ",") else row
                for row in record.read_text().splitlines()]
        record.write_text("\n".join(rows) + "\n")


def make(tmp_path: Path, monkeypatch) -> Small:
    """The small series (fingerprint of 0.1.0 recorded) and an installed vLLM 0.1.0 in
    ``tmp_path``; ``PATCHQ_SERIES``/``PATCHQ_ANCHORS`` (set with ``monkeypatch``) name the series."""
    fp = anchors.fingerprint_ast(anchors.ast_index(small_series.UTILS_PY)["Backend"][0])
    sdir = small_series.write_series(tmp_path / "project", fingerprint=fp)
    site = small_series.write_site(tmp_path / "site-packages", "0.1.0")
    monkeypatch.setenv("PATCHQ_SERIES", str(sdir))
    monkeypatch.setenv("PATCHQ_ANCHORS", str(tmp_path / "project" / "anchors"))
    monkeypatch.setenv("PATCHQ_PROGRESS", "0")
    return Small(tmp_path / "project", series_mod.load(sdir), site)
