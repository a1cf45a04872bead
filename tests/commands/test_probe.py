"""patchq.commands.probe: ``patchq probe`` (and ``check --level probe``): a replacement that
calls a name bound only in its source project, and a release whose environment cannot be had
(the Spark series' own cases on the newest release: spark/tests/test_probe_cases.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchq import series as series_mod
from patchq.commands import probe as probe_cmd
from patchq.errors import UsageError
from testing.small_series import write_release

NEWEST = "0.34.0"  # the release the wheel layer probes: one environment, built once (docs/testing.md)


def test_targets_are_one_of_profile_patches_all(small):
    s = small.series
    assert probe_cmd.targets_of(s, None, [], True) == list(s.profiles)
    pid = s.all_patch_ids()[0]
    assert probe_cmd.targets_of(s, None, [pid], False) == [f"patch:{pid}"]
    with pytest.raises(UsageError, match="exactly one of"):
        probe_cmd.targets_of(s, "default", [pid], False)
    with pytest.raises(UsageError, match="unknown patch"):
        probe_cmd.targets_of(s, None, ["nope"], False)


def test_a_release_whose_environment_cannot_be_had_is_not_probeable(small):
    """Offline (the fast layer), no environment can be built: every cell is not probeable,
    exit 3, never a pass."""
    write_release(Path(os.environ["PATCHQ_CACHE_DIR"]), "0.1.0")
    s = small.series
    doc, code = probe_cmd.run(s, "0.1.0", probe_cmd.targets_of(s, None, [], True))
    assert code == 3 and not doc["probeable"] and "PATCHQ_OFFLINE" in doc["why"]
    assert doc["records"] and all(r["result"] == "not-probeable" for r in doc["records"])
    assert all(not c["blocking"] and c["status"] == "not-probeable" for c in doc["cells"])
    assert "not probeable here" in probe_cmd.render_text(doc)


STACK = '''import logging


class _Quieter:
    """The stack's own helper: it lives in this file, never in vLLM."""

    def __init__(self, logger):
        self.logger = logger

    def apply(self):
        self.logger.disabled = True


def my_init_logger(name):
    logger = logging.getLogger(name)
    if name.endswith(".quiet"):
        _Quieter(logger).apply()

    for method_name, method in _METHODS_TO_PATCH.items():
        setattr(logger, method_name, MethodType(method, logger))

    return cast(_VllmLogger, logger)
'''


@pytest.mark.wheel
def test_a_replacement_calling_its_source_projects_helper_fails_the_import_level(cli, tmp_path):
    """``import --replacement`` refuses the stack's own class as a runtime name; a user who
    insists (``--runtime-name _Quieter``) gets it declared and verified, and the source check
    applies it. On the patched release nothing binds the name: the import level fails
    (fails-import, exit 1), where a served vLLM would raise NameError."""
    (tmp_path / "stack.py").write_text(STACK)
    root = tmp_path / "s" / "series"
    root.mkdir(parents=True)
    (root / "profiles.toml").write_text("[profiles.default]\npatches = []\n")
    args = ["import", "--id", "quiet", "--replacement", f"{tmp_path / 'stack.py'}:my_init_logger",
            "--replaces", "vllm.logger:init_logger", "--release", NEWEST, "--series", str(root), "--json"]
    refused = cli(*args)
    assert refused.rc == 1 and "_Quieter" in refused.json["error"] and not (root / "quiet.py").exists()
    res = cli(*args, "--runtime-name", "_Quieter")
    assert res.rc == 0 and res.json["verified"], res.stderr
    assert series_mod.load(root).patch("quiet").runtime_names == ("_Quieter",)
    check = cli("check", "--patch", "quiet", "--vllm", NEWEST, "--series", str(root), "--json")
    assert check.rc == 0 and check.json["patches"][0]["status"] == "applies"
    res = cli("probe", "--vllm", NEWEST, "--patch", "quiet", "--series", str(root), "--json", timeout=3600)
    assert res.rc == 1, res.stderr[-3000:]
    (cell,) = res.json["cells"]
    assert cell["status"] == "fails-import" and cell["blocking"]
    (imp,) = [r for r in res.json["records"] if r["level"] == "import"]
    assert "runtime name '_Quieter'" in imp["detail"] and "NameError" in imp["detail"]
    deep = cli("check", "--patch", "quiet", "--vllm", NEWEST, "--series", str(root), "--level", "probe", "--json",
               timeout=3600)
    assert deep.rc == 1 and deep.json["patches"][0]["status"] == "fails-import"
    assert deep.json["patches"][0]["source_status"] == "applies"
