"""patchq.authoring.diffstore: the one store of expected output (a patch's diff per release and
its verdicts): applying a stored diff, the verdict file, hashes masked for comparison."""

from __future__ import annotations

import pytest

from patchq.plan.diffs import unified_all

BEFORE = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 7\nh = 8\n"


def test_apply_diff_gives_back_the_patched_texts():
    from patchq.authoring.diffstore import apply_diff

    pristine = {"vllm/x.py": BEFORE, "vllm/sub/y.py": "p = 1\nq = 2", "vllm/z.py": "untouched\n"}
    patched = {"vllm/x.py": BEFORE.replace("a = 1\n", "a = 1\nz = 0\n").replace("h = 8\n", ""),
               "vllm/sub/y.py": "p = 1\nq = 3"}
    assert apply_diff(pristine, unified_all(pristine, patched)) == patched
    moved = dict(pristine, **{"vllm/x.py": "new first line\n" + BEFORE})  # no offset, no fuzz
    with pytest.raises(Exception, match="does not match line 1"):
        apply_diff(moved, unified_all(pristine, patched))
    with pytest.raises(Exception, match="no such file"):
        apply_diff({}, unified_all(pristine, patched))


def test_verdicts_render_parse_and_refuse_garbage():
    from patchq.authoring.diffstore import parse_verdicts, render_verdicts
    from patchq.errors import SeriesError

    text = render_verdicts("p", {"0.33.0": "upstreamed", "0.9.0": "absent", "0.23.0": "applies"})
    assert text.splitlines()[-3:] == ['"0.9.0" = "absent"', '"0.23.0" = "applies"', '"0.33.0" = "upstreamed"']
    assert parse_verdicts(text.encode()) == {"0.9.0": "absent", "0.23.0": "applies", "0.33.0": "upstreamed"}
    assert parse_verdicts(None) is None
    for bad in (b"[verdicts\n", b'[verdicts]\n"0.1.0" = 3\n', b"\xff"):
        with pytest.raises(SeriesError):
            parse_verdicts(bad)


def test_stored_diffs_compare_without_the_patch_hash():
    from patchq.authoring.diffstore import mask_hashes

    a = "+# patchq:backend-tiles:0123456789ab (applied by patchq; `patchq status` explains)\n"
    b = a.replace("0123456789ab", "ba9876543210")
    assert mask_hashes(a) == mask_hashes(b) == (
        "+# patchq:backend-tiles:<hash> (applied by patchq; `patchq status` explains)\n")
    assert mask_hashes(a.replace("backend-tiles", "other")) != mask_hashes(b)
