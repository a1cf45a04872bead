"""patchq.tomlsafe: the one TOML reader, bounded in kind, size and depth, and held to the
trust rule of a walked-up series."""

from __future__ import annotations

import os

import pytest

from patchq import discovery, tomlsafe
from patchq.errors import SeriesError, UnsafeConfig


def test_a_regular_file_is_parsed(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text('[profiles.base]\npatches = ["a"]\n')
    assert tomlsafe.read_file(path) == {"profiles": {"base": {"patches": ["a"]}}}


def test_deep_nesting_is_a_series_error_naming_the_file_never_a_recursion_error(tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")  # RecursionError inside tomllib before
    with pytest.raises(SeriesError, match=f"^{path}: tables and arrays nested deeper than 32 levels"):
        tomlsafe.read_file(path)
    path.write_text("x = " + "[" * 31 + "]" * 31 + "\n")  # 32 with the document itself
    assert tomlsafe.read_file(path)["x"] is not None
    path.write_text("x = " + "[" * 32 + "]" * 32 + "\n")
    with pytest.raises(SeriesError, match="deeper than 32"):
        tomlsafe.read_file(path)
    with pytest.raises(SeriesError, match="deeper than 32"):  # tables count as arrays do
        tomlsafe.loads("[" + ".".join(f"t{i}" for i in range(40)) + "]\n", "f.toml")


def test_size_kind_and_encoding_bounds(tmp_path):
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * tomlsafe.MAX_BYTES + "\n")
    with pytest.raises(SeriesError, match=f"^{big}: .* bytes, more than the {tomlsafe.MAX_BYTES}"):
        tomlsafe.read_file(big)
    os.mkfifo(tmp_path / "fifo.toml")
    with pytest.raises(SeriesError, match="not a regular file"):
        tomlsafe.read_file(tmp_path / "fifo.toml")  # no writer: a blocking open would hang here
    (tmp_path / "dir.toml").mkdir()
    with pytest.raises(SeriesError, match="not a regular file"):
        tomlsafe.read_file(tmp_path / "dir.toml")
    with pytest.raises(SeriesError, match="No such file"):
        tomlsafe.read_file(tmp_path / "missing.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'x = "caf\xe9"\n')
    with pytest.raises(SeriesError, match=f"^{bad}: not UTF-8"):
        tomlsafe.read_file(bad)
    with pytest.raises(SeriesError, match="^f.toml: .*line 1"):
        tomlsafe.loads("x = = 1\n", "f.toml")


def test_a_walked_up_series_file_is_held_to_the_trust_rule(tmp_path, monkeypatch):
    """A file below a guarded repo (a config found by walking up) owned by another uid or
    writable by others is refused; other files, and opted-in repos, are not checked."""
    monkeypatch.setattr(tomlsafe, "GUARDED", {})
    repo, other = tmp_path / "repo", tmp_path / "other"
    for d in (repo / "series", other):
        d.mkdir(parents=True)
    (repo / "patchq.toml").write_text('series = "series"\n')
    mine = repo / "series" / "profiles.toml"
    mine.write_text("[profiles]\n")
    theirs = other / "profiles.toml"
    theirs.write_text("[profiles]\n")
    loc = discovery.Location(repo / "series", repo / "anchors", "config", repo / "patchq.toml")
    discovery.guard(loc)
    assert tomlsafe.read_file(mine) == {"profiles": {}}
    os.chown(mine, 65534, 65534)
    with pytest.raises(UnsafeConfig, match=f"refusing {mine} of the series found by walking up to "
                                           f"{repo / 'patchq.toml'}: .*owned by uid 65534"):
        tomlsafe.read_file(mine)
    os.chown(mine, 0, 0)
    os.chmod(mine, 0o666)
    with pytest.raises(UnsafeConfig, match=f"writable by others .*--series {repo}"):
        tomlsafe.read_file(mine)
    os.chown(theirs, 65534, 65534)
    assert tomlsafe.read_file(theirs) == {"profiles": {}}  # not of the walked-up series
    monkeypatch.setattr(tomlsafe, "GUARDED", {})
    monkeypatch.setenv(discovery.SAFE_ENV, str(repo))
    discovery.guard(loc)  # opted in: not guarded
    assert tomlsafe.read_file(mine) == {"profiles": {}}


@pytest.mark.parametrize("name", ["series/profiles.toml", "anchors/bump-default.toml", "patchq.toml"])
def test_every_command_reading_a_deep_file_exits_2_naming_it(tmp_path, cli, name):
    """5000 nested arrays were exit 70 for list, status, apply, serve-args and the documented
    recovery; now each names the file (exit 2), and revert --all --force still restores."""
    from patchq.plan import anchors
    from testing import small_series

    repo, site = tmp_path / "repo", small_series.write_site(tmp_path / "site")
    small_series.write_series(repo, anchors.fingerprint_ast(anchors.ast_index(small_series.UTILS_PY)["Backend"][0]))
    (repo / "patchq.toml").write_text('series = "series"\nanchors = "anchors"\n')
    env = {"PATCHQ_CACHE_DIR": str(tmp_path / "cache"), "PATCHQ_OFFLINE": "1"}
    sp = ("--site-packages", site)
    assert cli("apply", "--profile", "base", "--series", repo, *sp, env=env).rc == 0
    path = repo / name
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n" + path.read_text())
    for args in (("list",), ("status", *sp), ("apply", "--profile", "base", *sp), ("serve-args", "--profile", "base")):
        r = cli(*args, "--series", repo, env=env)
        if name.startswith("anchors") and args[0] == "serve-args":
            assert r.rc == 0, r  # it reads no anchors file
        elif name.startswith("anchors") and args[0] == "status":  # a series error in its report, as a syntax error
            assert r.rc == 2 and f"series error: {path}: tables and arrays nested deeper" in r.stdout, r
        else:
            assert r.rc == 2 and r.stderr.startswith(f"patchq: error: {path}: tables and arrays nested deeper"), r
    r = cli("revert", "--all", "--force", "--series", repo, *sp, env=env)
    assert r.rc == 0 and "removed bump-default" in r.stdout, r
    assert ("the series cannot be read" in r.stderr) == (not name.startswith("anchors")), r  # else: a series error
    assert "DEFAULT = 102400" in (site / "vllm/ops/utils.py").read_text()
