"""Series discovery: --series, $PATCHQ_SERIES, patchq.toml / [tool.patchq] walking up, an installed distribution's."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patchq import discovery
from patchq.errors import SeriesError, UnsafeConfig
from support import REPO
from testing import small_series


def _repo(root, config="patchq.toml", body='series = "s"\nanchors = "a"\n'):
    (root / "s").mkdir(parents=True)
    (root / "a").mkdir()
    (root / "s" / "profiles.toml").write_text('[profiles.p]\npatches = []\n')
    (root / config).write_text(body)
    return root


def test_config_found_walking_up(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.delenv("PATCHQ_ANCHORS", raising=False)
    root = _repo(tmp_path / "proj")
    deep = root / "x" / "y"
    deep.mkdir(parents=True)
    loc = discovery.find(cwd=deep)
    assert (loc.series, loc.anchors, loc.origin, loc.config) == (
        root / "s", root / "a", "config", root / "patchq.toml")
    assert discovery.anchors_for(root / "s") == root / "a"


def test_pyproject_tool_table_and_plain_pyproject_skipped(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    root = _repo(tmp_path / "proj", "pyproject.toml", '[tool.patchq]\nseries = "s"\nanchors = "a"\n')
    inner = root / "sub"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no [tool.patchq]: keep walking
    loc = discovery.find(cwd=inner)
    assert loc.config == root / "pyproject.toml" and loc.series == root / "s"


def test_explicit_and_env_win(tmp_path, monkeypatch):
    root = _repo(tmp_path / "proj")
    other = _repo(tmp_path / "other")
    monkeypatch.setenv("PATCHQ_SERIES", str(other))  # a repo root with patchq.toml
    assert discovery.find(cwd=root).series == other / "s"
    assert discovery.find(cwd=root).origin == "PATCHQ_SERIES"
    assert discovery.find(root / "s", cwd=root).origin == "--series"


def test_no_series_names_what_was_searched(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    only(monkeypatch, tmp_path / "empty-site")
    with pytest.raises(SeriesError) as err:
        discovery.find(cwd=tmp_path)
    msg = str(err.value)
    assert "--series" in msg and "$PATCHQ_SERIES" in msg and "patchq.toml" in msg
    assert str(tmp_path) in msg and "patchq init" in msg and "entry-point group patchq.series" in msg


def test_config_naming_a_missing_series(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    (tmp_path / "patchq.toml").write_text('series = "nope"\n')
    with pytest.raises(SeriesError, match="names series directory .*nope.*no profiles.toml"):
        discovery.find(cwd=tmp_path)


# -- a series an installed distribution provides (entry-point group patchq.series) -------------


def site_with(root: Path, dist: str, entries: dict[str, str], version: str = "1.0",
              module: str | None = None, body: str = "") -> Path:
    """A site directory holding ``<dist>-<version>.dist-info`` whose ``entry_points.txt``
    declares ``entries`` in group patchq.series (and one of another group), and the module
    ``module`` (``body``) the entries name."""
    di = root / f"{dist}-{version}.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = ["[console_scripts]", "x = y:z", "", f"[{discovery.ENTRY_POINT_GROUP}]"]
    lines += [f"{k} = {v}" for k, v in entries.items()]
    (di / "entry_points.txt").write_text("\n".join(lines) + "\n")
    if module:
        (root / f"{module}.py").write_text(body)
    return root


def only(monkeypatch, *sites: Path) -> None:
    """``sys.path`` with ``sites`` first, then the standard library only: no site-packages and
    no checkout folder (whose installed series, the Spark one in this checkout's venv or its
    ``spark/*.egg-info``, is not this test's). What the tests import of patchq is imported
    before they call this."""
    for s in sites:
        s.mkdir(parents=True, exist_ok=True)
    stdlib = [p for p in _SYS_PATH if p.startswith((sys.base_prefix, sys.base_exec_prefix)) and "-packages" not in p]
    monkeypatch.setattr(sys, "path", [str(s) for s in sites] + stdlib)
    monkeypatch.setattr(discovery, "_INSTALLED", None)
    for name in FIXTURE_MODULES:  # each test's provider modules are its own
        monkeypatch.delitem(sys.modules, name, raising=False)


_SYS_PATH = list(sys.path)
#: the provider modules these tests write
FIXTURE_MODULES = ("small_dist", "other_dist", "stack_mod", "bad_mod", "ed_mod")


def series_dist(root: Path, module: str = "small_dist", dist: str = "small-series") -> Path:
    """A site holding a distribution that provides the small series (``<module>/series``)."""
    small_series.write_series(root / module)
    (root / module / "__init__.py").write_text(
        "import os\nSERIES = os.path.join(os.path.dirname(__file__), 'series')\n")
    return site_with(root, dist.replace("-", "_"), {"small": f"{module}:SERIES"})


def test_an_installed_distribution_provides_the_series_when_nothing_else_does(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    site = series_dist(tmp_path / "site")
    only(monkeypatch, site)
    (provider,) = discovery.providers()
    assert (provider.name, provider.value, provider.dist, provider.version) == (
        "small", "small_dist:SERIES", "small-series", "1.0")
    loc = discovery.find(cwd=tmp_path)
    assert loc.origin == "bundled" and loc.series == site / "small_dist" / "series"
    assert loc.anchors == site / "small_dist" / "anchors" and loc.config is None
    assert loc.as_json() == {"dir": str(site / "small_dist" / "series"),
                             "anchors": str(site / "small_dist" / "anchors"),
                             "from": "bundled", "config": None, "distribution": "small-series 1.0"}
    assert loc.describe() == (
        f"series {site / 'small_dist' / 'series'} (from the installed distribution small-series 1.0)")
    # a project config still wins, and the other origins carry no distribution field
    _repo(tmp_path / "proj")
    assert "distribution" not in discovery.find(cwd=tmp_path / "proj").as_json()


def test_an_entry_point_may_name_a_series_repo_root(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _repo(site / "stack_repo")
    site_with(site, "stack", {"stack": "stack_mod:ROOT"}, module="stack_mod",
              body=f"ROOT = {str(site / 'stack_repo')!r}\n")
    only(monkeypatch, site)
    loc = discovery.installed()
    assert loc is not None and (loc.series, loc.anchors, loc.origin, loc.config) == (
        site / "stack_repo" / "s", site / "stack_repo" / "a", "bundled", site / "stack_repo" / "patchq.toml")


def test_the_first_distribution_of_a_name_on_the_path_wins_and_other_groups_are_ignored(tmp_path, monkeypatch):
    first, second = series_dist(tmp_path / "one"), series_dist(tmp_path / "two")
    (tmp_path / "three").mkdir()
    site_with(tmp_path / "three", "other", {}, version="2.0")  # the group, empty
    only(monkeypatch, first, second, tmp_path / "three")
    (provider,) = discovery.providers()
    assert provider.site == str(first.resolve())


def test_several_providers_are_named_and_none_is_chosen(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    one = series_dist(tmp_path / "one")
    two = series_dist(tmp_path / "two", module="other_dist", dist="other-series")
    only(monkeypatch, one, two)
    with pytest.raises(SeriesError) as err:
        discovery.find(cwd=tmp_path)
    msg = str(err.value)
    assert msg.startswith("2 installed distributions provide a patch series (")
    assert "small-series 1.0 (entry point small = small_dist:SERIES of group patchq.series)" in msg
    assert "other-series 1.0" in msg and "--series" in msg


@pytest.mark.parametrize(("value", "body", "want"), [
    ("missing_mod:SERIES", None, "cannot be loaded: ModuleNotFoundError"),
    ("bad_mod:SERIES", "SERIES = 42\n", "names int 42, not a directory path"),
    ("bad_mod:NOPE", "SERIES = '/'\n", "cannot be loaded: AttributeError"),
    ("bad_mod:SERIES", "SERIES = '/'\n", "holds neither profiles.toml nor patchq.toml"),
    ("bad_mod:SERIES", "raise RuntimeError('boom')\n", "cannot be loaded: RuntimeError: boom"),
])
def test_a_broken_provider_is_one_named_error(tmp_path, monkeypatch, value, body, want):
    site = site_with(tmp_path / "site", "broken", {"b": value}, module="bad_mod" if body else None, body=body or "")
    only(monkeypatch, site)
    with pytest.raises(SeriesError, match="broken 1.0 .entry point b = ") as err:
        discovery.installed()
    assert want in str(err.value)


def test_writes_are_refused_inside_a_series_installed_from_a_wheel_only(tmp_path, monkeypatch):
    """A wheel's series lives in its site directory (the next install replaces it); an
    editable install's lives in its checkout and is written as any series repo."""
    from patchq.authoring import repowrite
    from patchq.errors import UsageError

    site = series_dist(tmp_path / "site")
    only(monkeypatch, site)
    assert discovery.installed_roots() == {str((site / "small_dist").resolve()): "small-series 1.0"}
    with pytest.raises(UsageError, match="inside the installed series of small-series 1.0"):
        repowrite.refuse_bundled(site / "small_dist" / "series" / "new.py", "new")
    checkout = tmp_path / "checkout"
    small_series.write_series(checkout)
    editable = site_with(tmp_path / "editable", "ed", {"e": "ed_mod:SERIES"}, module="ed_mod",
                         body=f"SERIES = {str(checkout / 'series')!r}\n")
    only(monkeypatch, editable)
    assert discovery.installed_roots() == {}
    repowrite.refuse_bundled(checkout / "series" / "new.py")  # no error


def test_the_scan_reads_entry_points_as_the_packaging_spec_writes_them():
    text = "# c\n[patchq.series]\n  a = m:A  \n; c\nb=m:B [extra]\n[other]\nc = m:C\n[patchq.series]\nd = n\n"
    assert discovery._group_entries(text, "patchq.series") == [("a", "m:A"), ("b", "m:B [extra]"), ("d", "n")]


@pytest.mark.wheel
@pytest.mark.slow
def test_the_patchq_wheel_carries_the_tool_alone(tmp_path):
    """Built as a wheel, patchq is patchq/ and its dist-info: no series (no profiles.toml,
    anchors or stored diffs), no series' run-time package, and no entry point of the
    patchq.series group (a series is a distribution of its own)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "dist"), str(REPO)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("patchq-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"patchq", "patchq-0.1.0.dist-info"}, sorted(names)
    assert "patchq/py.typed" in names  # PEP 561: series repos type-check against patchq
    data = [n for n in names if not n.endswith(".py") and not n.startswith("patchq-0.1.0.dist-info/")]
    assert data == ["patchq/py.typed"], data
    modules = {n for n in names if n.endswith(".py")}
    assert modules == {str(p.relative_to(REPO)) for p in (REPO / "patchq").rglob("*.py")}
    entry_points = zipfile.ZipFile(wheel).read("patchq-0.1.0.dist-info/entry_points.txt").decode()
    assert discovery.ENTRY_POINT_GROUP not in entry_points and "[console_scripts]" in entry_points


# -- discovery that cannot be planted (issue 28) ---------------------------------------------


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


def test_the_refusal_says_where_the_config_was_found(tmp_path, monkeypatch):
    """In the working directory itself, or above it (naming the working directory)."""
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    monkeypatch.delenv(discovery.SAFE_ENV, raising=False)
    root = tmp_path / "proj"
    work = _config_tree(root)
    os.chmod(root / "series", 0o777)
    with pytest.raises(UnsafeConfig) as err:
        discovery.find(cwd=root)
    assert f"refusing the project config {root / 'patchq.toml'} found in the working directory: " in str(err.value)
    with pytest.raises(UnsafeConfig) as err:
        discovery.find(cwd=work)
    assert f"found above the working directory {work}: " in str(err.value)
    monkeypatch.chdir(root)  # the default: the process's working directory
    with pytest.raises(UnsafeConfig, match="found in the working directory: "):
        discovery.find()
    os.chmod(root / "series", 0o755)


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


@pytest.mark.parametrize("name", ["series/profiles.toml", "anchors/bump-default.toml"])
def test_every_file_of_a_walked_up_series_is_held_to_the_trust_rule(tmp_path, name):
    """profiles.toml and anchors files of a walked-up series were not covered by the
    ownership check its modules get: a hostile edit chose which patches a profile applies
    and where they land. Owned by another uid, each is refused (exit 2) with the opt-in."""
    import subprocess
    import sys

    work = _config_tree(tmp_path / "proj")
    os.chown(tmp_path / "proj" / name, 65534, 65534)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHQ_")}
    env.update(PATCHQ_CACHE_DIR=str(tmp_path / "cache"), PATCHQ_OFFLINE="1")
    tree = small_series.write_tree(tmp_path / "tree")
    run = [sys.executable, "-m", "patchq", "check", "--profile", "base", "--source", str(tree), "--as-version", "0.1.0"]
    r = subprocess.run(run, cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 2 and f"refusing {tmp_path / 'proj' / name} of the series found by walking up" in r.stderr
    assert f"{discovery.SAFE_ENV}={tmp_path / 'proj'}" in r.stderr and "Traceback" not in r.stderr
    ok = subprocess.run(run, cwd=work, env={**env, discovery.SAFE_ENV: str(tmp_path / "proj")}, capture_output=True,
                        text=True)
    assert "refusing" not in ok.stderr


def test_a_profiles_toml_that_is_not_a_regular_file_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHQ_SERIES", raising=False)
    work = _config_tree(tmp_path / "proj")
    profiles = tmp_path / "proj" / "series" / "profiles.toml"
    profiles.unlink()
    os.mkfifo(profiles)
    with pytest.raises(SeriesError, match=f"^{profiles}: not a regular file"):
        discovery.find(cwd=work)
    with pytest.raises(SeriesError, match=f"^{profiles}: not a regular file"):
        discovery.find(tmp_path / "proj" / "series")
