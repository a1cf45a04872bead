"""patchq.commands.matrix: every profile on every listed release, written as json/md/html;
two small releases in the layer's own cache (an explicit list needs no index)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchq.commands import matrix
from patchq.errors import UsageError
from testing.small_series import UTILS_PY, write_index, write_release


@pytest.fixture
def releases(small):
    cache = Path(os.environ["PATCHQ_CACHE_DIR"])
    write_release(cache, "0.1.0")
    write_release(cache, "0.2.0", utils=UTILS_PY.replace("class Backend", "class Renamed"))
    write_index(cache, ["0.1.0", "0.2.0"])
    return small


def test_cells_per_release_and_profile_and_the_files(releases, tmp_path):
    doc, paths, code = matrix.run(">=0.1", "base,none", tmp_path / "out", series_dir=str(releases.series.root),
                                  workers=1)
    assert code == 1  # the patch's definition is gone on 0.2.0: a blocking cell
    assert sorted(paths) == ["html", "json", "md"] and all(Path(p).is_file() for p in paths.values())
    assert json.loads(Path(paths["json"]).read_text()) == doc
    assert doc["schema"] == "patchq.matrix/1" and doc["releases"] == ["0.1.0", "0.2.0"]
    assert list(doc["profiles"]) == ["base", "none"]
    cell = doc["cells"]["base"]["bump-default"]
    assert (cell["0.1.0"]["status"], cell["0.1.0"]["blocking"]) == ("applies", False)
    assert (cell["0.2.0"]["status"], cell["0.2.0"]["blocking"], cell["0.2.0"]["failed_level"]) == (
        "gone", True, "source")
    assert "bump-default" in Path(paths["md"]).read_text()


def test_usage_errors_come_before_any_release_is_read(releases, tmp_path):
    with pytest.raises(UsageError, match="--profiles is empty"):
        matrix.run("0.1.0", " , ", tmp_path / "out")
    with pytest.raises(UsageError):
        matrix.run("not a spec", "base", tmp_path / "out2")


def test_the_help_names_no_file_a_wheel_user_lacks():
    """``matrix --help`` points at the docs for the evidence formats, never at lab/ scripts that only
    a checkout has (issue 39: it named lab/cpu_levels.py)."""
    from support import run_cli

    res = run_cli("matrix", "--help", env={"COLUMNS": "1000"})
    assert res.rc == 0 and "lab/" not in res.stdout
    assert res.stdout.count("docs/levels.md") == 2
    assert (Path(__file__).resolve().parents[2] / "docs" / "levels.md").is_file()


def test_the_default_range_runs_to_the_newest_release_and_holds_the_installed_one(small, monkeypatch, tmp_path):
    """No --releases: every release from the floor to the newest the index lists, and the installed
    vLLM's release even below the floor; a release the index gains is in it at the next listing,
    no code change (issue 39: the default ended at a hard-coded 0.33.0)."""
    from patchq.vllmdist import releases
    from testing.fake_index import FakeIndex

    monkeypatch.delenv("PATCHQ_OFFLINE", raising=False)
    monkeypatch.setattr(releases, "_fetch_pip_index", lambda package: (_ for _ in ()).throw(RuntimeError("no pip")))
    monkeypatch.setattr(matrix, "DEFAULT_FLOOR", "0.2.0")
    with FakeIndex(["0.1.0", "0.2.0", "0.3.0"]) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        assert matrix.default_releases(installed="0.1.0") == ["0.1.0", "0.2.0", "0.3.0"]
        assert matrix.default_releases(installed="0.1.0+local") == ["0.2.0", "0.3.0"]  # not a release on the index
        index.add("0.4.0")
        releases.list_releases(refresh=True)  # `patchq cache refresh`, or the hour the list is fresh ran out
        assert matrix.default_releases(installed=None) == ["0.2.0", "0.3.0", "0.4.0"]


def test_an_out_the_environment_refuses_is_exit_5_as_for_init(releases, tmp_path, immutable):
    """EPERM (an immutable directory, which refuses even root) and ENOENT (a place no directory can
    be made) are the environment's refusal: exit 5 naming the path and the errno, as init's (issue
    39: matrix said exit 2, init 5)."""
    from patchq.errors import EXIT_READ_ONLY, PatchqError

    locked = tmp_path / "locked"
    locked.mkdir()
    immutable(locked)
    for out, name in ((locked / "m", "EPERM"), (Path("/proc/patchq-matrix"), "ENOENT")):
        with pytest.raises(PatchqError) as err:
            matrix.run("0.1.0", "base", out, series_dir=str(releases.series.root), workers=1)
        assert err.value.exit_code == EXIT_READ_ONLY
        assert str(err.value).startswith(f"cannot create {out}: ")
        assert f"({name}); nothing was written" in str(err.value)
