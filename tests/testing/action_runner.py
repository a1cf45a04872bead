"""Run a composite GitHub Action's ``run:`` steps in a local shell, as the runner would.

``act`` (and the container images it needs) is not available on the project's machines, so
the steps of ``action.yml`` run here directly: ``${{ inputs.X }}`` (default or given),
``${{ github.* }}`` and ``${{ steps.ID.outputs.X }}`` are substituted, ``if:`` conditions
over ``inputs`` and ``always()`` are evaluated, each step runs under bash with its
``env:`` and ``working-directory``, and ``GITHUB_ACTION_PATH``, ``GITHUB_OUTPUT`` and
``GITHUB_STEP_SUMMARY`` are what the runner provides. ``uses:`` steps (setup-python,
cache, upload-artifact) are not run: the caller provides Python on ``PATH``; they are
listed in the result as skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepRun:
    """One step: its name, whether it ran, its exit code and output."""

    name: str
    ran: bool
    rc: int | None = None
    output: str = ""
    why: str = ""  # why it did not run: "uses" (an action step) or "if" (its condition)


@dataclass
class ActionRun:
    """What running the action did: every step, the step summary and the outputs."""

    steps: list[StepRun] = field(default_factory=list)
    summary: str = ""
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def failed(self) -> StepRun | None:
        return next((s for s in self.steps if s.ran and s.rc), None)


def _value(expr: str, inputs: dict, context: dict) -> str:
    if expr.startswith("inputs."):
        return str(inputs[expr[len("inputs."):]])
    if expr.startswith("steps."):
        _, sid, _, key = expr.split(".", 3)
        return context["steps"].get(sid, {}).get(key, "")
    if expr.startswith("github."):
        return str(context["github"][expr[len("github."):]])
    raise ValueError(f"unsupported expression {expr!r}")


def _condition(text: str, inputs: dict, failed: bool) -> bool:
    """``if:`` over ``inputs.X == 'v'``, ``!=``, ``&&``, ``||`` and ``always()``."""
    expr = text.replace("${{", "").replace("}}", "").strip()
    always = "always()" in expr
    expr = expr.replace("always()", "True").replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"inputs\.([A-Za-z0-9_-]+)", lambda m: repr(str(inputs[m.group(1)])), expr)
    ok = bool(eval(expr, {"__builtins__": {}}, {"True": True}))  # noqa: S307 - our own action.yml
    return ok and (always or not failed)


def run(action_yml: Path, workspace: Path, given: dict[str, str], env: dict[str, str]) -> ActionRun:
    """Run the ``run:`` steps of the composite action ``action_yml`` in ``workspace``.

    Args:
        given: the ``with:`` inputs (the rest take their defaults).
        env: the environment (``PATH`` with the Python the action would set up).
    """
    import yaml

    action_yml = Path(action_yml).resolve()
    spec = yaml.safe_load(action_yml.read_text())
    inputs = {k: str(v.get("default", "")) for k, v in spec["inputs"].items()}
    inputs.update(given)
    out_dir = workspace / ".runner"
    out_dir.mkdir(exist_ok=True)
    summary = out_dir / "summary.md"
    summary.write_text("")
    context = {"steps": {}, "github": {"run_id": "1", "action_path": str(action_yml.parent)}}
    result = ActionRun()
    for i, step in enumerate(spec["runs"]["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i}"
        if "run" not in step:
            result.steps.append(StepRun(name, ran=False, why="uses"))
            continue
        if not _condition(str(step.get("if", "True")), inputs, result.failed is not None):
            result.steps.append(StepRun(name, ran=False, why="if"))
            continue
        output = out_dir / f"output-{i}"
        output.write_text("")
        sub = {k: _EXPR.sub(lambda m: _value(m.group(1), inputs, context), str(v))
               for k, v in (step.get("env") or {}).items()}
        cwd = workspace / _EXPR.sub(lambda m: _value(m.group(1), inputs, context),
                                    str(step.get("working-directory", ".")))
        full = {**env, **sub, "GITHUB_ACTION_PATH": str(action_yml.parent), "GITHUB_OUTPUT": str(output),
                "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(workspace)}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                              env=full, capture_output=True, text=True)
        result.steps.append(StepRun(name, ran=True, rc=proc.returncode, output=proc.stdout + proc.stderr))
        if step.get("id"):
            context["steps"][step["id"]] = dict(line.split("=", 1) for line in output.read_text().splitlines()
                                                if "=" in line)
    result.summary = summary.read_text()
    result.outputs = context["steps"]
    return result


def fresh_python(where: Path) -> dict[str, str]:
    """A new virtual environment (what setup-python gives: a bare Python with pip); returns
    an environment with it first on ``PATH`` and patchq's own variables cleared."""
    import sys

    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHQ_SERIES", "PATCHQ_ANCHORS", "VIRTUAL_ENV"))}
    env["PATH"] = f"{where / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env
