"""A user's own files, caches, the runtime hook and hostile input (issue 28).

The fast tests run in process on small files (no release). The ``suite`` tests run the
classes of ``tests/testing/safety_suite.py`` (the CLI in subprocesses, one fresh offline world per
case); they need no release either but take a minute or two, so they are in the wheel
layer (``@pytest.mark.wheel``); ``bench/reliability.py --safety N`` runs many more.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchq import discovery, jsonsafe
from patchq.authoring import fingerprints, repowrite
from patchq.errors import RepoWriteError, SeriesError, StateError, UnsafeConfig, UsageError
from testing import safety_suite, small_series

HERE = Path(__file__).resolve().parent

# -- item 2: atomic, verified writes and transactions ----------------------------------------


def _no_temp_files(d: Path) -> bool:
    return not [p for p in d.iterdir() if p.name.endswith(repowrite.TMP_SUFFIX)]


def test_a_rewrite_that_cannot_grow_keeps_the_old_bytes(tmp_path):
    path = tmp_path / "profiles.toml"
    old = b"# my comments\n" + b"x" * 5000
    path.write_bytes(old)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, hard))  # past a block: EFBIG (Python ignores SIGXFSZ)
    try:
        with pytest.raises(RepoWriteError, match=r"cannot write .*profiles.toml.*EFBIG.*nothing was changed"):
            repowrite.write_file(path, old + b"y" * 10000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert path.read_bytes() == old and _no_temp_files(tmp_path)


def test_write_file_refuses_what_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "dir.py").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "link.toml")
    for name in ("fifo.toml", "dir.py", "link.toml"):
        with pytest.raises(RepoWriteError, match="not a regular file|symlink"):
            repowrite.write_file(tmp_path / name, "x")
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(RepoWriteError, match="not a regular file"):
        repowrite.read_regular(tmp_path / "fifo.toml")  # and never blocks


def test_a_transaction_lands_whole_or_rolls_back(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.toml").write_text("# a\nold = 1\n")
    with pytest.raises(RuntimeError, match="verify failed"):
        with repowrite.Transaction(repo, "test") as txn:
            txn.write(repo / "a.toml", "new = 2\n")
            txn.write(repo / "new.py", "x = 1\n")
            txn.apply()
            assert (repo / "a.toml").read_text() == "new = 2\n"  # on disk, to verify
            raise RuntimeError("verify failed")
    assert (repo / "a.toml").read_text() == "# a\nold = 1\n" and not (repo / "new.py").exists()
    assert not repowrite.pending(repo)
    with repowrite.Transaction(repo, "test") as txn:
        txn.write(repo / "a.toml", "new = 2\n")
        txn.write(repo / "sub" / "new.py", "x = 1\n")
    assert (repo / "a.toml").read_text() == "new = 2\n" and txn.written == [str(repo / "a.toml"),
                                                                         str(repo / "sub" / "new.py")]
    assert sorted(os.listdir(repo)) == ["a.toml", "sub"]
    with pytest.raises(RepoWriteError, match="outside the series repo"):
        repowrite.Transaction(repo, "test").write(tmp_path / "x", "x")


def _killed_transaction(repo: Path, files: dict[str, str], after: int) -> int:
    """A child that stages ``files``, lands them and is killed after the ``after``-th write."""
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from patchq.authoring import repowrite
        repo = Path({str(repo)!r})
        with repowrite.Transaction(repo, "killed") as txn:
            for name, text in {files!r}.items():
                txn.write(repo / name, text)
            txn.apply()
            os._exit(9)
    """)
    env = {**os.environ, "PATCHQ_FAULT_AFTER_REPO_WRITES": str(after)}
    return subprocess.run([sys.executable, "-c", code], env=env).returncode


@pytest.mark.parametrize("after", [1, 2, 3, 9])
def test_a_killed_change_is_rolled_back_by_the_next_run(tmp_path, after):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "one.py").write_text("old one\n")
    (repo / "two.toml").write_text("# comment\nold = 2\n")
    rc = _killed_transaction(repo, {"one.py": "new one\n", "two.toml": "new = 2\n", "three.py": "new\n"}, after)
    assert rc in (9, 99) and repowrite.pending(repo)
    assert repowrite.recover(repo)  # what discovery does when it sees .patchq-txn/
    assert (repo / "one.py").read_text() == "old one\n" and (repo / "two.toml").read_text() == "# comment\nold = 2\n"
    assert not (repo / "three.py").exists() and not repowrite.pending(repo)
    assert sorted(os.listdir(repo)) == ["one.py", "two.toml"]


def test_recovery_leaves_a_file_edited_since_and_refuses_escaping_paths(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "one.py").write_text("old\n")
    assert _killed_transaction(repo, {"one.py": "new\n"}, 1) == 99
    (repo / "one.py").write_text("the user's edit after the crash\n")
    with pytest.raises(StateError, match="changed since"):
        repowrite.recover(repo)
    assert (repo / "one.py").read_text() == "the user's edit after the crash\n"
    journal = repo / repowrite.JOURNAL_DIR / repowrite.JOURNAL_FILE
    doc = json.loads(journal.read_text())
    doc["entries"][0]["path"] = str(tmp_path / "outside.txt")
    journal.write_text(json.dumps(doc))
    with pytest.raises(StateError, match="outside the series repo"):
        repowrite.recover(repo)
    journal.write_text("[" * 10000)
    with pytest.raises(StateError, match="damaged"):
        repowrite.recover(repo)


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
    data = fingerprints.tomllib.loads(old)
    data["anchors"]["target"]["fingerprints"]["0.26.0"] = "bbbbbbbbbbbbbbbb"
    new = fingerprints.rewrite("my-fix", old, data)
    assert fingerprints.tomllib.loads(new) == data
    for comment in ("# Anchors of my-fix: keep this header", "# the one anchor", "# a hint", "# verified by hand"):
        assert comment in new
    data["anchors"]["target"]["fingerprints"] = {"0.15.1": "cccccccccccccccc", "0.23.0": "aaaaaaaaaaaaaaaa"}
    reordered = fingerprints.rewrite("my-fix", old, data)
    assert fingerprints.tomllib.loads(reordered) == data and "# a hint" in reordered
    assert reordered.index('"0.15.1"') < reordered.index('"0.23.0"')


# -- item 3: discovery that cannot be planted -------------------------------------------------


def _config_tree(root: Path) -> Path:
    small_series.write_series(root)
    (root / "patchq.toml").write_text('series = "series"\nanchors = "anchors"\n')
    (root / "work").mkdir()
    return root / "work"


def test_a_config_owned_by_another_uid_is_refused_with_the_way_to_opt_in(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.delenv(discovery.SAFE_ENV, raising=False)
    shared = tmp_path / "shared"
    work = _config_tree(shared)
    for p in [shared, *shared.rglob("*")]:
        os.chown(p, 65534, 65534)
    os.chmod(shared, 0o777)
    with pytest.raises(UnsafeConfig) as err:
        discovery.find(cwd=work)
    msg = str(err.value)
    assert "owned by uid 65534" in msg or "writable by others" in msg
    assert f"--series {shared}" in msg and f"{discovery.SAFE_ENV}={shared}" in msg and "CVE-2022-24765" in msg
    monkeypatch.setenv(discovery.SAFE_ENV, str(shared))
    assert discovery.find(cwd=work).series == shared / "series"
    monkeypatch.delenv(discovery.SAFE_ENV)
    assert discovery.find(shared, cwd=work).origin == "--series"  # an explicit choice


def test_a_world_writable_config_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.delenv(discovery.SAFE_ENV, raising=False)
    work = _config_tree(tmp_path / "proj")
    os.chmod(tmp_path / "proj" / "series", 0o777)
    with pytest.raises(UnsafeConfig, match="writable by others"):
        discovery.find(cwd=work)
    os.chmod(tmp_path / "proj" / "series", 0o755)
    assert discovery.find(cwd=work).origin == "config"


@pytest.mark.parametrize("body", ['series = "../elsewhere/series"\n', 'series = "series"\nanchors = "/etc"\n',
                                  'series = "series"\ngoldens = "../../x"\n', 'series = "link"\n'])
def test_config_paths_stay_inside_the_repo(tmp_path, monkeypatch, body):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    small_series.write_series(tmp_path / "elsewhere")
    repo = tmp_path / "repo"
    small_series.write_series(repo)
    os.symlink(tmp_path / "elsewhere" / "series", repo / "link")
    (repo / "patchq.toml").write_text(body)
    with pytest.raises(SeriesError, match="outside"):
        discovery.find(cwd=repo)


def test_patch_ids_and_anchor_modules_cannot_name_paths(tmp_path):
    from patchq import series as S
    from patchq.hashing import anchor_tables, profile_tables

    series = small_series.write_series(tmp_path)
    (series / "profiles.toml").write_text('[profiles.p]\npatches = ["../../outside/x"]\n')
    with pytest.raises(SeriesError, match="not a patch id"):
        profile_tables(series / "profiles.toml")
    with pytest.raises(UsageError, match="holds a path"):
        S.module_file(series, "../x")
    for module in ("/etc/passwd", "vllm/../../x", "os.path", "vllm..x"):
        (tmp_path / "anchors" / "m.toml").write_text(f'[anchors.a]\nmodule = "{module}"\nqualname = "q"\n')
        with pytest.raises(SeriesError, match="not a module of the vllm package"):
            anchor_tables(tmp_path / "anchors" / "m.toml")


def test_a_series_file_that_is_a_directory_or_fifo_is_a_series_error(tmp_path):
    from patchq.hashing import series_summary

    series = small_series.write_series(tmp_path)
    (series / "other.py").mkdir()
    with pytest.raises(SeriesError, match="not a regular file"):
        series_summary(series, tmp_path / "anchors")
    (series / "other.py").rmdir()
    os.mkfifo(series / "other.py")
    with pytest.raises(SeriesError, match="not a regular file"):  # and never blocks
        series_summary(series, tmp_path / "anchors")


# -- item 5: bounded state, runtime records, the hook's checksums ------------------------------


def test_json_is_read_bounded_and_never_from_a_fifo(tmp_path):
    with pytest.raises(jsonsafe.TooDeep):
        jsonsafe.loads("[" * 100000 + "]" * 100000)
    assert jsonsafe.loads('{"a": "[[[[" , "b": [[1]]}') == {"a": "[[[[", "b": [[1]]}
    with pytest.raises(jsonsafe.TooLarge):
        jsonsafe.loads(b"1" * 100, max_bytes=10)
    os.mkfifo(tmp_path / "j.json")
    with pytest.raises(jsonsafe.NotRegular):
        jsonsafe.read_file(tmp_path / "j.json")
    os.symlink(tmp_path / "j.json", tmp_path / "l.json")
    with pytest.raises(jsonsafe.NotRegular):
        jsonsafe.read_file(tmp_path / "l.json")


def test_runtime_status_never_lists_pid_zero_or_negative_and_never_prunes_a_symlinked_dir(tmp_path):
    from patchq.env import runtime_status

    assert not runtime_status._alive(-1, None) and not runtime_status._alive(0, None)
    other = tmp_path / "other-program"
    other.mkdir()
    foreign = {"schema": "patchq.runtime/1", "pid": 4000000, "patches": [], "served": {}}
    (other / "4000000.json").write_text(json.dumps(foreign))
    os.symlink(other, tmp_path / "rt")
    doc = runtime_status.collect(tmp_path / "rt")
    assert doc["processes"] == [] and (other / "4000000.json").is_file()


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
                     max_leaves=20)
_KEYS = ("schema", "pid", "ppid", "start_ticks", "argv", "profile", "digest", "vllm", "site_packages",
         "patches", "served")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=8) | _JSON)
def test_garbage_runtime_records_are_state_errors_never_crashes(tmp_path, record):
    from patchq.env import runtime_status

    rd = tmp_path / "procs"
    rd.mkdir(exist_ok=True)
    (rd / "12345.json").write_text(json.dumps(record))
    try:
        doc = runtime_status.collect(rd, {"x": "h"}, prune=False)
    except StateError:
        return
    for p in doc["processes"]:
        assert isinstance(p["pid"], int) and p["pid"] > 0
        runtime_status.exit_code(doc)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=1, max_size=400), where=st.integers(min_value=0), bit=st.integers(0, 7))
def test_a_flipped_hook_manifest_is_refused_before_marshal(data, where, bit):
    sys.path.insert(0, str(HERE.parents[1] / "runtime"))
    from patchq.runtime import hook

    packed = bytearray(hook.pack(hook.MANIFEST_TAG, data))
    assert hook.unpack(hook.MANIFEST_TAG, bytes(packed)) == data
    packed[where % len(packed)] ^= 1 << bit
    assert hook.unpack(hook.MANIFEST_TAG, bytes(packed)) is None


# -- item 1: --dir misuse, through the CLI on a small installed site --------------------------


def test_edit_and_record_never_take_over_a_directory_they_did_not_make(tmp_path):
    world = safety_suite.make_world(tmp_path)
    before = safety_suite.snapshot(world.repo)
    site = ("--site-packages", world.site)
    for target in (".", world.repo / ".git"):
        r = safety_suite.pq(world, "edit", "mine", "--file", "vllm/ops/utils.py", "--dir", target, *site)
        assert r.rc == 2 and "not empty and was not made by `patchq edit`" in r.err, r
        r = safety_suite.pq(world, "record", "mine", "--dir", target, *site)
        assert r.rc == 2 and "holds no edit" in r.err, r
    assert safety_suite.snapshot(world.repo) == before  # the repo, .git included, byte for byte


# -- the classes of tests/testing/safety_suite.py (a minute or two: the wheel layer) ------------------


@pytest.mark.wheel
@pytest.mark.parametrize("cls", sorted(safety_suite.CLASSES))
def test_suite_class_is_clean(cls):
    tally = safety_suite.run_class(cls, 2, random.Random(cls).randrange(1000))
    assert tally.clean, "\n".join(tally.failures)
