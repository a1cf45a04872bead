"""patchq.env.layout: where the state directory is, and what a reader accepts from it (paths,
entry kinds, the journal and transaction manifest), on real journals written by apply."""

from __future__ import annotations

import json
import os

import pytest

from patchq.commands import apply
from patchq.env import layout


def test_the_state_root_is_in_site_packages_or_keyed_under_a_shared_base(tmp_path):
    site, base = str(tmp_path / "site"), str(tmp_path / "shared")
    os.makedirs(site)
    assert layout.state_root(site, {}) == os.path.join(site, ".patchq")
    keyed = layout.state_root(site, {layout.ENV_VAR: base})
    assert keyed == os.path.join(base, "env-" + layout.site_key(site)) and len(layout.site_key(site)) == 16
    os.symlink(site, tmp_path / "link")
    assert layout.site_key(str(tmp_path / "link")) == layout.site_key(site)  # by real path


def test_a_legacy_flat_base_is_read_by_its_own_environment_only(tmp_path):
    site, other, base = str(tmp_path / "site"), str(tmp_path / "other"), tmp_path / "shared"
    base.mkdir()
    (base / layout.JOURNAL).write_text("{}")
    assert layout.state_root(site, {layout.ENV_VAR: str(base)}) == str(base)
    (base / layout.OWNER).write_text(layout.owner_json(other))
    assert layout.read_owner(str(base)) == os.path.realpath(other)
    assert layout.state_root(site, {layout.ENV_VAR: str(base)}) == layout.keyed_root(str(base), site)


@pytest.mark.parametrize("relpath, problem", [
    ("vllm/ops/utils.py", None),
    ("", "is not a path"), (3, "is not a path"), ("/etc/passwd", "is absolute"),
    ("vllm/../x.py", "is not normalized"), ("vllm//x.py", "is not normalized"), ("./vllm/x.py", "is not normalized"),
    ("../x.py", "leaves site-packages"), ("vllm\\x.py", "NUL or a backslash"),
    (".patchq/journal.json", "inside the state directory"),
])
def test_relpath_problem(relpath, problem):
    found = layout.relpath_problem(relpath)
    assert (found is None) if problem is None else (problem in found)


def test_inside_refuses_links_and_escapes(tmp_path):
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "x.py").write_text("")
    (tmp_path / "elsewhere").mkdir()
    (site / "vllm" / "l.py").symlink_to(site / "vllm" / "x.py")
    (site / "vllm" / "out").symlink_to(tmp_path / "elsewhere")
    assert layout.inside(str(site), "vllm/x.py") is None and layout.inside(str(site), "vllm/new.py") is None
    assert "is a symlink" in layout.inside(str(site), "vllm/l.py")
    assert "resolves outside site-packages" in layout.inside(str(site), "vllm/out/y.py")


def test_entries_of_the_wrong_kind_are_refused(tmp_path):
    root = tmp_path / ".patchq"
    root.mkdir()
    assert layout.symlink_problem(str(root)) is None
    (root / layout.JOURNAL).mkdir()
    assert "is not a regular file" in layout.symlink_problem(str(root))
    (root / layout.JOURNAL).rmdir()
    (root / layout.PRISTINE).write_text("")
    assert "is not a directory" in layout.entry_problem(str(root), layout.PRISTINE)
    os.symlink(root, tmp_path / "linked")
    assert "is a symlink" in layout.symlink_problem(str(tmp_path / "linked"))


def test_temp_names_and_pending_writes(tmp_path):
    assert layout.is_temp_name(".utils.py.a1B2c3D4.patchq-tmp") and not layout.is_temp_name("utils.py")
    assert not layout.has_pending(str(tmp_path))
    os.makedirs(os.path.dirname(layout.txn_manifest(str(tmp_path))))
    open(layout.txn_manifest(str(tmp_path)), "w").close()
    assert layout.has_pending(str(tmp_path))


def test_a_real_journal_is_accepted_and_each_damage_is_named(small):
    apply.apply(small.target, small.series, "base")
    journal = json.loads((small.site / ".patchq" / layout.JOURNAL).read_text())
    assert layout.journal_problem(journal) is None
    assert layout.journal_problem([]) == "not a JSON object"
    assert layout.journal_problem({**journal, "schema": 2}) == "schema 2 is not 1"
    rel = next(iter(journal["files"]))
    bad = json.loads(json.dumps(journal))
    bad["files"][rel]["patched_sha256"] = "xyz"
    assert layout.journal_problem(bad) == f"files[{rel}] has a malformed hash or patch list"
    bad = json.loads(json.dumps(journal))
    bad["patches"]["bump-default"]["files"] = ["vllm/other.py"]
    assert layout.journal_problem(bad) == "patches[bump-default] names 'vllm/other.py', which has no file entry"
    bad = json.loads(json.dumps(journal))
    bad["files"]["../escape.py"] = bad["files"].pop(rel)
    assert "leaves site-packages" in layout.journal_problem(bad)
    assert layout.manifest_problem({"files": {rel: {"from": None, "to": "0" * 64}}, "journal": journal}) is None
    assert layout.manifest_problem({"files": {rel: {"from": None, "to": "short"}}, "journal": journal}) == \
        f"files[{rel}] has malformed hashes"
