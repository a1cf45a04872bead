"""Anchors files with reviews (format 2) and the fingerprint command's release selection."""

from __future__ import annotations

import textwrap

from patchq import hashing
from patchq.authoring import fingerprints
from testing import stack

tomllib = hashing.toml_module()


def test_existing_anchors_files_render_unchanged():
    for path in sorted(stack.ANCHORS.glob("*.toml")):
        text = path.read_text(encoding="utf-8")
        assert fingerprints.render(path.stem, tomllib.loads(text)) == text, path.name


def test_reviews_round_trip_and_keep_the_patch_hash(tmp_path):
    src = stack.ANCHORS / "page-scale.toml"
    data = tomllib.loads(src.read_text(encoding="utf-8"))
    data["reviews"] = {"0.29.0": fingerprints.review_entry("review", "ana", status="review", note="ok"),
                       "0.24.0": fingerprints.review_entry("fingerprint", "bo")}
    text = fingerprints.render("page-scale", data)
    back = tomllib.loads(text)
    assert back["format"] == 2 and list(back["reviews"]) == ["0.24.0", "0.29.0"]
    assert back["reviews"]["0.29.0"]["by"] == "ana" and back["reviews"]["0.29.0"]["how"] == "review"
    assert back["anchors"] == data["anchors"]
    new = tmp_path / "page-scale.toml"
    new.write_text(text, encoding="utf-8")
    series_py = stack.SERIES / "page_scale.py"
    assert hashing.patch_hash_from_files(series_py, new) == hashing.patch_hash_from_files(series_py, src)
    assert hashing.anchor_tables(new) == hashing.anchor_tables(src)  # what older loaders read


def test_review_entry_names_who_and_when(monkeypatch):
    monkeypatch.setenv("PATCHQ_REVIEWER", "rev")
    entry = fingerprints.review_entry("review")
    assert entry["by"] == "rev" and entry["how"] == "review" and entry["at"].endswith("Z")


def test_fingerprint_rewrites_keep_the_comments():
    old = textwrap.dedent('''\
        # Anchors of my-fix: keep this header
        [anchors.target]  # the one anchor
        module = "vllm.logger"   # a hint
        qualname = "init_logger"
        count = 1

        [anchors.target.fingerprints]
        "0.23.0" = "aaaaaaaaaaaaaaaa"  # verified by hand
    ''')
    data = tomllib.loads(old)
    data["anchors"]["target"]["fingerprints"]["0.26.0"] = "bbbbbbbbbbbbbbbb"
    new = fingerprints.rewrite("my-fix", old, data)
    assert tomllib.loads(new) == data
    for comment in ("# Anchors of my-fix: keep this header", "# the one anchor", "# a hint", "# verified by hand"):
        assert comment in new
    data["anchors"]["target"]["fingerprints"] = {"0.15.1": "cccccccccccccccc", "0.23.0": "aaaaaaaaaaaaaaaa"}
    reordered = fingerprints.rewrite("my-fix", old, data)
    assert tomllib.loads(reordered) == data and "# a hint" in reordered
    assert reordered.index('"0.15.1"') < reordered.index('"0.23.0"')


def test_with_release_adds_the_fingerprints_check_saw_and_the_review(small):
    entry = fingerprints.review_entry("review", "ana", status="review")
    path, text = fingerprints.with_release(small.series, "bump-default", "0.2.0", {"default": "ab" * 8}, entry)
    assert path == small.series.anchors_root / "bump-default.toml"
    data = tomllib.loads(text)
    assert data["format"] == 2 and data["reviews"]["0.2.0"] == entry
    assert data["anchors"]["default"]["fingerprints"]["0.2.0"] == "ab" * 8
    assert path.read_text(encoding="utf-8") != text  # nothing written
