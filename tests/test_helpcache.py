"""``--help`` from a stat stamp (patchq.helpcache): the same text, and only plain requests."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from patchq import helpcache
from patchq.env import stamp


@pytest.fixture()
def out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PATCHQ_STAMPS", raising=False)
    monkeypatch.setattr(stamp, "now", lambda: time.time_ns() + 2 * stamp.SETTLE_NS)
    return capsys


def test_plain_requests_only() -> None:
    assert helpcache.is_plain_help(["--help"]) and helpcache.is_plain_help(["upstream", "log", "--help"])
    assert not helpcache.is_plain_help(["check", "--profile", "x", "--help"])
    assert not helpcache.is_plain_help(["--help", "check"]) and not helpcache.is_plain_help([])


def test_the_second_request_writes_the_kept_text(out) -> None:
    calls = []

    def render(argv: list[str]) -> int:
        calls.append(argv)
        sys.stdout.write("Usage: patchq check [OPTIONS]\n")
        return 0

    assert helpcache.run(["check", "--help"], render) == 0
    assert helpcache.run(["check", "--help"], render) == 0
    assert calls == [["check", "--help"]]
    assert out.readouterr().out == "Usage: patchq check [OPTIONS]\n" * 2
    assert helpcache.run(["list", "--help"], render) == 0 and len(calls) == 2  # another request, another stamp


@pytest.mark.parametrize("how", ["stderr", "exit 2", "buffer", "not help"])
def test_nothing_kept_unless_plain_and_clean(out, how: str) -> None:
    calls = []

    def render(argv: list[str]) -> int:
        calls.append(argv)
        sys.stdout.write("text\n")
        if how == "stderr":
            sys.stderr.write("warning\n")
        if how == "buffer":
            getattr(sys.stdout, "buffer", None)
        return 2 if how == "exit 2" else 0

    argv = ["check", "--profile", "p"] if how == "not help" else ["check", "--help"]
    helpcache.run(argv, render)
    helpcache.run(argv, render)
    assert len(calls) == 2


# -- the real typer app, in subprocesses: the kept text is typer's, also after patchq changes --

#: ``python -c DRIVER ARGS``: the console script's entry, with every stamp "settled" at once
#: (no 2 s wait; settling is test_stamp's), reporting on stderr whether typer was imported.
_DRIVER = """
import sys, time
from patchq.env import stamp
stamp.now = lambda: time.time_ns() + 2 * stamp.SETTLE_NS
import patchq, patchq.__main__
sys.argv[0] = "patchq"
try:
    patchq.__main__.main()
finally:
    sys.stderr.write(f"typer={'typer' in sys.modules} from={patchq.__file__}\\n")
"""
#: typer's own rendering, without the fast path or the help cache.
_TYPER = "import sys; sys.argv[0] = 'patchq'; from patchq.cli import main; main()"


def _run(code: str, args: list[str], env: dict[str, str]) -> tuple[str, str]:
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=env["HOME"])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


@pytest.fixture()
def installed(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of patchq on ``PYTHONPATH`` (an installed patchq that can change), a cache of its own."""
    import os
    import shutil

    import patchq

    site = tmp_path / "site"
    shutil.copytree(Path(patchq.__file__).parent, site / "patchq", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHQ_", "_PATCHQ", "COLUMNS", "LINES"))}
    env.update(PYTHONPATH=str(site), PATCHQ_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path),
               PYTHONIOENCODING="utf-8", PYTHONDONTWRITEBYTECODE="1")
    return site / "patchq", env


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["upstream", "log", "--help"]])
def test_the_kept_text_is_typers(installed, argv: list[str]) -> None:
    pkg, env = installed
    typer_text, _ = _run(_TYPER, argv, env)
    first, err1 = _run(_DRIVER, argv, env)
    second, err2 = _run(_DRIVER, argv, env)
    assert f"from={pkg / '__init__.py'}" in err1  # the copy runs, not the checkout
    assert "typer=True" in err1 and "typer=False" in err2  # rendered, then from the stamp
    assert first == second == typer_text and typer_text.startswith("Usage: patchq ")


@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_a_changed_patchq_shows_its_own_help(installed, how: str) -> None:
    """Editing the installed patchq in place, or replacing a file as pip does, is seen at once."""
    import os

    pkg, env = installed
    before, _ = _run(_DRIVER, ["--help"], env)
    assert "typer=False" in _run(_DRIVER, ["--help"], env)[1]
    cli = pkg / "cli.py"
    text = cli.read_text(encoding="utf-8").replace("alive on an installed vLLM.", "alive on vLLM (changed).", 1)
    if how == "in place":
        with open(cli, "r+", encoding="utf-8") as fh:
            fh.write(text)
            fh.truncate()
    else:
        (pkg / "cli.py.new").write_text(text, encoding="utf-8")
        os.replace(pkg / "cli.py.new", cli)
    after, err = _run(_DRIVER, ["--help"], env)
    assert "typer=True" in err and "alive on vLLM (changed)." in after and after != before
    assert after == _run(_TYPER, ["--help"], env)[0] == _run(_DRIVER, ["--help"], env)[0]


def test_another_width_is_rendered_again(installed) -> None:
    pkg, env = installed
    wide = _run(_DRIVER, ["check", "--help"], dict(env, COLUMNS="200"))[0]
    assert _run(_DRIVER, ["check", "--help"], dict(env, COLUMNS="200"))[0] == wide
    narrow, err = _run(_DRIVER, ["check", "--help"], dict(env, COLUMNS="50"))
    assert "typer=True" in err and narrow != wide
    assert narrow == _run(_TYPER, ["check", "--help"], dict(env, COLUMNS="50"))[0]


@pytest.mark.parametrize("var", ["COLUMNS", "GITHUB_ACTIONS", "PY_COLORS", "TERMINAL_WIDTH", "TYPER_USE_RICH",
                                 "_TYPER_FORCE_DISABLE_TERMINAL", "_PATCHQ_COMPLETE", "NO_COLOR"])
def test_what_the_renderer_reads_is_in_the_key(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.delenv(var, raising=False)
    without = helpcache._key(["--help"])
    monkeypatch.setenv(var, "1")
    assert helpcache._key(["--help"]) != without


def test_two_installs_of_one_version_keep_their_own_help(installed, tmp_path: Path) -> None:
    """Two copies of patchq (same version, one changed) sharing one cache: each prints its own help."""
    import shutil

    pkg, env = installed
    other = tmp_path / "other" / "patchq"
    shutil.copytree(pkg, other)
    cli = other / "cli.py"
    cli.write_text(cli.read_text(encoding="utf-8").replace("alive on an installed vLLM.", "alive (other).", 1),
                   encoding="utf-8")
    env_b = dict(env, PYTHONPATH=str(other.parent))
    a1, b1 = _run(_DRIVER, ["--help"], env)[0], _run(_DRIVER, ["--help"], env_b)[0]
    a2, b2 = _run(_DRIVER, ["--help"], env)[0], _run(_DRIVER, ["--help"], env_b)[0]
    assert a1 == a2 != b1 == b2 and "alive (other)." in b2


def test_help_writes_nothing_into_a_directory_that_is_not_patchqs(installed, tmp_path: Path) -> None:
    # a misset PATCHQ_CACHE_DIR naming someone's directory: every command refuses it (exit 2),
    # and --help renders without keeping anything there
    _, env = installed
    mine = tmp_path / "somedir"
    (mine / "photos").mkdir(parents=True)
    (mine / "notes.txt").write_text("mine\n")
    env = {**env, "PATCHQ_CACHE_DIR": str(mine)}
    for _ in range(2):
        text, err = _run(_DRIVER, ["list", "--help"], env)
        assert text.startswith("Usage: patchq list") and "typer=True" in err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "photos"]
