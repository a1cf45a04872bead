"""patchq.env.runtime_status: the records of running ``patchq run`` processes, read defensively."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchq.errors import StateError


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


def test_a_process_whose_profile_gained_a_patch_since_it_started_is_stale(tmp_path):
    """status --runtime said `live`, exit 0, after the running profile gained a patch in
    profiles.toml: the process runs a patch set its profile no longer names."""
    from patchq.env import runtime_status
    from patchq.runtime.hook import start_ticks

    rec = {"schema": "patchq.runtime/1", "pid": os.getpid(), "start_ticks": start_ticks(), "profile": "base",
           "patches": [{"id": "a", "hash": "h1", "status": "ok"}], "served": {}}
    (tmp_path / f"{os.getpid()}.json").write_text(json.dumps(rec))
    same = runtime_status.collect(tmp_path, {"a": "h1"}, profiles={"base": ["a"]})
    assert [p["status"] for p in same["processes"]] == ["live"] and runtime_status.exit_code(same) == 0
    for profiles, reason in (({"base": ["a", "b"]}, "profile base gained b since start"),
                             ({"base": []}, "profile base lost a since start"),
                             ({"other": ["a"]}, "profile base is no longer in the series")):
        doc = runtime_status.collect(tmp_path, {"a": "h1", "b": "h2"}, profiles=profiles)
        (row,) = doc["processes"]
        assert (row["status"], row["reason"], runtime_status.exit_code(doc)) == ("stale", reason, 7)
