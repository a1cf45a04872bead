"""patchq.series / patchq.model: loading a small series from tmp_path."""

from __future__ import annotations

import re

import pytest
from packaging.version import Version

from patchq import series as S
from patchq.errors import SeriesError, UsageError
from testing.small_series import PATCH_PY, write_series


def test_load_profiles_patch_anchors_and_hash(tmp_path):
    loaded = S.load(write_series(tmp_path))
    assert loaded.root == (tmp_path / "series").resolve()
    assert loaded.anchors_root == (tmp_path / "anchors").resolve()
    assert list(loaded.profiles) == ["base", "none"]
    assert loaded.profile("base").patches == ("bump-default",)
    assert loaded.all_patch_ids() == ["bump-default"]
    p = loaded.patch("bump-default")
    assert p.why == "GB10 gets big tiles."  # whitespace folded
    assert p.upstream == ("https://example.invalid/pr/1",)
    spec = p.anchors["default"]
    assert (spec.module, spec.qualname, spec.node, spec.min_count, spec.max_count) == (
        "vllm.ops.utils", "Backend", "DEFAULT = ...", 1, 1)
    assert spec.module_paths == ("vllm/ops/utils.py", "vllm/ops/utils/__init__.py")
    assert spec.fingerprints == {"0.1.0": "0" * 16}
    assert len(p.hash) == 12 and int(p.hash, 16) >= 0
    assert loaded.patch("bump-default") is p  # loaded once


def test_variant_selection(tmp_path):
    p = S.load(write_series(tmp_path)).patch("bump-default")
    assert p.variant_for("0.0.9") is None  # outside applies
    assert p.variant_for("0.2.5").kind == "edit" and list(p.variant_for("0.2.5").edits) == ["default"]
    assert p.variant_for(Version("0.3.0")).kind == "upstreamed"


def test_hash_covers_the_patch_file_and_anchor_definitions_not_fingerprints(tmp_path):
    first = S.load(write_series(tmp_path / "a")).patch("bump-default").hash
    same = S.load(write_series(tmp_path / "b", fingerprint="f" * 16)).patch("bump-default").hash
    assert first == same
    series = write_series(tmp_path / "c")
    toml = tmp_path / "c" / "anchors" / "bump-default.toml"
    toml.write_text(toml.read_text().replace('count = 1', 'count = "1+"'))
    changed = S.load(series).patch("bump-default")
    assert changed.hash != first and changed.anchors["default"].max_count is None


def test_count_forms(tmp_path):
    series = write_series(tmp_path)
    toml = tmp_path / "anchors" / "bump-default.toml"
    for value, expect in [('2', (2, 2)), ('"2+"', (2, None))]:
        toml.write_text(toml.read_text().split("count =")[0] + f"count = {value}\n")
        spec = S.load_anchor_file(toml)["default"]
        assert (spec.min_count, spec.max_count) == expect
        assert spec.count_text() == ("2" if expect[1] else "at least 2")
    toml.write_text(toml.read_text().split("count =")[0] + "count = \"lots\"\n")
    with pytest.raises(SeriesError, match="bump-default.toml: anchors.default"):
        S.load(series).patch("bump-default")


def test_errors_name_the_problem(tmp_path):
    series = write_series(tmp_path)
    loaded = S.load(series)
    with pytest.raises(UsageError, match="unknown profile 'nope'; known: base, none; did you mean 'none'"):
        loaded.profile("nope")
    with pytest.raises(UsageError, match=r"unknown profile 'xyz'; known: base, none$"):
        loaded.profile("xyz")
    with pytest.raises(UsageError, match="unknown patch 'nope'"):
        loaded.patch("nope")
    with pytest.raises(SeriesError, match="no series there"):
        S.load(tmp_path / "anchors")
    (tmp_path / "anchors" / "bump-default.toml").write_text("[anchors.other]\nmodule='vllm.m'\nqualname='q'\n")
    with pytest.raises(SeriesError, match=r"edits unknown anchors \['default'\]"):
        S.load(series).patch("bump-default")
    with pytest.raises(SeriesError, match="exactly one of"):
        S.variant(">=1", edits={"a": None}, absent="x")
    with pytest.raises(SeriesError, match="bad applies-range"):
        S.spec(">=banana")


@pytest.mark.parametrize(("old", "new", "line", "what"), [
    ('applies=">=0.1",', 'applies=">=zero",', 12, "applies="),  # the PATCH = patch( line
    ('variant(">=0.3",', 'variant(">=zero",', 20, "variant"),
])
def test_a_bad_applies_range_names_the_series_file_line_and_patch(tmp_path, old, new, line, what):
    series = write_series(tmp_path)
    module = series / "bump_default.py"
    module.write_text(module.read_text().replace(old, new))
    with pytest.raises(SeriesError) as err:
        S.load(series).patch("bump-default")
    assert str(err.value) == (f"{module.resolve()}:{line}: patch bump-default: bad applies-range '>=zero' ({what}; "
                              f"a PEP 440 version specifier such as '>=0.23,<0.30')")
    assert err.value.exit_code == 2


BAD_ANCHORS = [  # (text appended to the small series' anchors file, the message it must give)
    ('"banana" = "0000000000000000"\n',
     r"bump-default.toml: anchors.default.fingerprints: key 'banana' is not a vLLM version"),
    ('"0.2.0" = "not-a-fingerprint"\n',
     r'bump-default.toml: anchors.default.fingerprints."0.2.0" = \'not-a-fingerprint\' is not a fingerprint'),
    ('\n[reviews.banana]\nby = "ana"\n', r"bump-default.toml: reviews: key 'banana' is not a vLLM version"),
    ('\n[reviews."0.1.0"]\nby = 3\n', r'bump-default.toml: reviews."0.1.0".by must be a string, not int'),
    ('\n[reviews]\n"0.1.0" = "ana"\n', r'bump-default.toml: reviews."0.1.0" must be a table .*not a string'),
]


@pytest.mark.parametrize(("tail", "message"), BAD_ANCHORS)
def test_a_malformed_fingerprint_or_review_is_bad_input_naming_file_and_key(tmp_path, tail, message):
    """A fingerprint or review keyed by a non-version (compared as versions later) or a
    review field of the wrong type is a SeriesError (exit 2) naming the file and key."""
    series = write_series(tmp_path)
    toml = tmp_path / "anchors" / "bump-default.toml"
    toml.write_text("format = 2\n" + toml.read_text() + tail)
    with pytest.raises(SeriesError, match=message) as err:
        S.load(series).patch("bump-default")
    assert err.value.exit_code == 2 and str(tmp_path / "anchors" / "bump-default.toml") in str(err.value)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("count = 1\n", 'count = 1\nnodes = "x"\n',
     r"anchors.default: unknown key 'nodes'; did you mean 'node'\? \(known: module, qualname, node, count, "
     r"fingerprints\)"),
    ("[anchors.default]\n", '[review."0.1.0"]\nby = "ana"\n\n[anchors.default]\n',
     r"the top level: unknown key 'review'; did you mean 'reviews'\? \(known: format, anchors, reviews\)"),
])
def test_an_unknown_key_in_an_anchors_file_is_named(tmp_path, old, new, message):
    """A misspelt key would change what an anchor means (no node, count 1, nothing
    verified) without a word: it is a malformed file."""
    series = write_series(tmp_path)
    toml = tmp_path / "anchors" / "bump-default.toml"
    toml.write_text(toml.read_text().replace(old, new))
    with pytest.raises(SeriesError, match=f"bump-default.toml: {message}"):
        S.load(series).patch("bump-default")


def test_a_non_version_fingerprint_key_exits_2_with_one_line(tmp_path, cli):
    """Through the CLI: one line on stderr, exit 2, no traceback (it was an internal error, 70)."""
    series = write_series(tmp_path)
    toml = tmp_path / "anchors" / "bump-default.toml"
    toml.write_text(toml.read_text() + '"banana" = "0000000000000000"\n')
    res = cli("list", "--series", series)
    assert res.rc == 2, res.stderr
    assert res.stderr.splitlines() == [f"patchq: error: {toml}: anchors.default.fingerprints: key 'banana' is not a "
                                       f'vLLM version (such as "0.23.0")']


def test_env_vars_select_series_and_anchors(tmp_path, monkeypatch):
    series = write_series(tmp_path / "one")
    other = tmp_path / "elsewhere"
    (other).mkdir()
    (other / "bump-default.toml").write_text((tmp_path / "one" / "anchors" / "bump-default.toml").read_text())
    monkeypatch.setenv("PATCHQ_SERIES", str(series))
    monkeypatch.setenv("PATCHQ_ANCHORS", str(other))
    loaded = S.load()
    assert loaded.root == series.resolve() and loaded.anchors_root == other.resolve()


@pytest.mark.parametrize("raises, what", [("raise KeyboardInterrupt", "KeyboardInterrupt"),
                                          ("import sys\nsys.exit(0)", "SystemExit(0)")])
def test_a_series_module_raising_interrupt_or_exit_is_a_series_error(tmp_path, raises, what):
    """A series module raising KeyboardInterrupt at import gave exit 130 "interrupted" (and
    sys.exit(0) the status it chose): a series error naming the file and line, exit 2."""
    root = write_series(tmp_path)
    module = root / "bump_default.py"
    module.write_text(raises + "\n" + module.read_text())
    with pytest.raises(SeriesError, match=f"^{module}:{raises.count(chr(10)) + 1}: raises {re.escape(what)} "
                                          f"when imported"):
        S.load(root).patch("bump-default")


def test_a_real_ctrl_c_while_a_series_module_loads_still_interrupts(tmp_path):
    root = write_series(tmp_path)
    module = root / "bump_default.py"
    module.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n" + module.read_text())
    with pytest.raises(KeyboardInterrupt):
        S.load(root).patch("bump-default")


def test_a_series_module_that_does_not_decode_is_a_series_error(tmp_path):
    """Bytes that are not UTF-8 (and no coding line) in a series file were a UnicodeDecodeError
    from the import machinery, exit 70 (the fuzzed-series class of the safety bench)."""
    root = write_series(tmp_path)
    module = root / "bump_default.py"
    module.write_bytes(b"=\x98\x8c" + module.read_bytes())
    with pytest.raises(SeriesError, match=f"^{module}: not a Python source in its encoding"):
        S.load(root).patch("bump-default")
    module.write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n" + PATCH_PY.encode())
    assert S.load(root).patch("bump-default").id == "bump-default"  # its coding line decides, as for Python
