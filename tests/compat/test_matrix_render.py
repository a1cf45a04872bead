"""patchq.compat.matrix_render: the matrix as Markdown and HTML, rendered from a real matrix of
the small series on two small releases (the layer's own cache) and its boot evidence."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from patchq.commands import matrix
from patchq.compat import matrix_boot, matrix_render
from testing.small_series import UTILS_PY, write_index, write_release


@pytest.fixture
def doc(small, tmp_path) -> dict:
    cache = Path(os.environ["PATCHQ_CACHE_DIR"])
    write_release(cache, "0.1.0")
    write_release(cache, "0.2.0", utils=UTILS_PY.replace("class Backend", "class Renamed"))
    write_index(cache, ["0.1.0", "0.2.0"])
    built, _, _ = matrix.run(">=0.1", "base", tmp_path / "out", series_dir=str(small.series.root), workers=1)
    return built


def test_markdown_has_a_table_per_profile_and_marks_what_would_fail(doc):
    text = matrix_render.markdown(doc)
    assert text.startswith("# patchq compatibility matrix\n")
    assert "vLLM 0.1.0 .. 0.2.0 (2 releases)" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| bump-default")]
    assert rows == ["| bump-default | applies (src) | **GONE** | 0.2.0 |"]  # a blocking cell in bold


def test_html_is_well_formed_and_escapes_what_it_shows(doc):
    doc["cells"]["base"]["bump-default"]["0.2.0"]["reason"] += " <script>x</script>"
    page = matrix_render.html(doc)
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack: list[str] = []
            self.tables = 0

        def handle_starttag(self, tag, attrs):
            self.tables += tag == "table"
            if tag not in ("br", "wbr", "meta", "link", "input", "hr", "img"):
                self.stack.append(tag)

        def handle_endtag(self, tag):
            assert self.stack and self.stack.pop() == tag, (tag, self.stack[-3:])

    tags = Tags()
    tags.feed(page)
    assert tags.stack == [] and tags.tables >= 1


def test_boot_evidence_shows_in_its_own_row(doc):
    recs = [{"profile": "base", "release": "0.1.0", "result": "serves", "boot_s": 12.0}]
    doc["boot"] = matrix_boot.group(recs, ["base"])
    text = matrix_render.markdown(doc)
    assert "| *boot* | base ok 12 s |  | |" in text.splitlines()
    assert "## Blocking cells" in text and "- base / bump-default / 0.2.0: gone: anchor default:" in text


def test_the_changes_section_names_the_first_release_checked_not_a_claim(doc):
    """The first cell of a patch is where the matrix starts, not where its status began: "applies
    on 0.1.0, the first release checked" (issue 39: "upstreamed from 0.30.0" read as a claim about
    0.30.0 though the variant says 0.28.0)."""
    text = matrix_render.markdown(doc)
    assert "- **bump-default** (base): applies on 0.1.0, the first release checked" in text.splitlines()
    assert "applies from 0.1.0" not in text
