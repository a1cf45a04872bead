"""patchq.probe.child: what runs in a probe environment's interpreter (``-I -S``, the paths
given): the scan with stand-ins, the import level with sentinels and runtime names."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from patchq.probe import child


def _run(tmp_path: Path, job: dict) -> dict:
    jin, jout = tmp_path / "in.json", tmp_path / "out.json"
    jin.write_text(json.dumps(job))
    proc = subprocess.run([sys.executable, "-I", "-S", child.__file__, str(jin), str(jout)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(jout.read_text())


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "mod.py").write_text(textwrap.dedent('''\
        # patchq:my-fix:0123456789ab (applied by patchq)
        import json
        import not_installed_a
        from not_installed_b import thing
        try:
            import optional_c
        except ImportError:
            optional_c = None
        VALUE = not_installed_a.VALUE

        def f():
            return Helper()
        '''))
    (site / "pkg" / "clean.py").write_text("# patchq:my-fix:0123456789ab\nBOUND = 1\n\ndef g():\n    return BOUND\n")
    return site


def test_guarded_knows_an_optional_import(tmp_path):
    src = tmp_path / "g.py"
    src.write_text("import a\ntry:\n    import b\nexcept ImportError:\n    import c\n"
                   "try:\n    import d\nexcept ValueError:\n    pass\n"
                   "def f():\n    try:\n        if x:\n            import e\n    except Exception:\n        pass\n")
    assert [child.guarded(str(src), line) for line in (1, 3, 5, 7, 13)] == [False, True, False, False, True]


def test_scan_sees_every_missing_module_in_one_pass(tmp_path):
    site = _site(tmp_path)
    out = _run(tmp_path, {"mode": "scan", "modules": ["pkg.mod"], "paths": [str(site)], "site": str(site)})
    names = {m["name"]: m for m in out["missing"]}
    assert set(names) >= {"not_installed_a", "not_installed_b", "optional_c"}
    assert not names["not_installed_a"]["guarded"] and not names["not_installed_b"]["guarded"]
    assert names["optional_c"]["guarded"] and names["not_installed_a"]["file"].endswith("pkg/mod.py")
    assert names["not_installed_a"]["line"] == 3


def test_run_imports_checks_sentinels_and_runtime_names(tmp_path):
    site = _site(tmp_path)
    out = _run(tmp_path, {"mode": "run", "paths": [str(site)], "imports": [
        {"module": "pkg.mod", "patch": "my-fix", "sentinel": "patchq:my-fix:"},
        {"module": "pkg.clean", "patch": "my-fix", "sentinel": "patchq:my-fix:"},
        {"module": "pkg.clean", "patch": "other", "sentinel": "patchq:other:"}],
        "runtime_names": {"my-fix": ["BOUND", "Helper"]}})
    assert out["imports"]["pkg.mod"]["ok"] is False and out["imports"]["pkg.mod"]["missing"] == "not_installed_a"
    assert out["missing"] == ["not_installed_a"]
    assert out["imports"]["pkg.clean"]["ok"] is True
    # Helper is used only in pkg.mod, which did not import; BOUND is bound where it is used
    assert out["runtime_names"]["my-fix"] == {"BOUND": None, "Helper": None}


def test_a_runtime_name_bound_nowhere_fails(tmp_path):
    site = _site(tmp_path)
    (site / "pkg" / "late.py").write_text("# patchq:my-fix:0123456789ab\ndef f():\n    return Helper()\n")
    out = _run(tmp_path, {"mode": "run", "paths": [str(site)], "runtime_names": {"my-fix": ["Helper"]},
                          "imports": [{"module": "pkg.late", "patch": "my-fix", "sentinel": "patchq:my-fix:"}]})
    assert out["imports"]["pkg.late"]["ok"] is True
    assert "not bound in pkg.late" in out["runtime_names"]["my-fix"]["Helper"]
