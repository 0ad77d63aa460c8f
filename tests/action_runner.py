"""Run the composite action's steps locally with a fake GitHub environment (test helper).

``run_action`` reads ``action.yml``, evaluates the ``${{ }}`` expressions of each step's
``env`` and ``working-directory`` (the subset the action uses: ``inputs.*``,
``steps.<id>.outputs.*``, ``runner.*``, ``github.*``, and ``a || b``: the first non-empty),
runs every ``run:`` step with ``bash --noprofile --norc -eo pipefail`` as the runner does for
``shell: bash`` (after a failed step only those whose ``if:`` is ``failure()`` or
``always()``, the status functions the fake runner evaluates), and records
what GitHub would see: step outputs (``$GITHUB_OUTPUT``), exported env (``$GITHUB_ENV``), the
job summary (``$GITHUB_STEP_SUMMARY``) and the workflow commands printed on stdout.

``uses:`` steps (setup-python, actions/cache) are recorded, not run. ``python -m pip`` is
intercepted by a shim on ``PATH`` and logged, so the install step is checked without
installing anything; every other ``python`` call goes to the interpreter running the tests.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from gh_commands import parse_output

REPO_ROOT = Path(__file__).resolve().parents[1]
ACTION = REPO_ROOT / "action.yml"
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
# The ``if:`` conditions of run steps the fake runner evaluates: whether the step runs when
# every step before it succeeded, and when one failed.
_STATUS_IFS = {"success()": (True, False), "failure()": (False, True), "always()": (True, True)}


def load_action() -> dict[str, Any]:
    return yaml.safe_load(ACTION.read_text(encoding="utf-8"))


def parse_env_file(text: str) -> dict[str, str]:
    """Parse a $GITHUB_OUTPUT / $GITHUB_ENV file (``name=value`` and ``name<<DELIM`` forms)."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value: list[str] = []
            while lines[i] != delimiter:
                value.append(lines[i])
                i += 1
            i += 1
            out[name] = "\n".join(value)
        else:
            name, value_text = line.split("=", 1)
            out[name] = value_text
    return out


@dataclass
class StepRun:
    name: str
    id: str | None
    kind: str  # "run" or "uses"
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionRun:
    steps: list[StepRun]
    outputs: dict[str, str]  # the action's declared outputs, evaluated
    summary: str
    pip_calls: list[str]
    workspace: Path

    @property
    def failed_step(self) -> StepRun | None:
        return next((s for s in self.steps if s.returncode != 0), None)

    @property
    def commands(self) -> list[str]:
        """Workflow commands (``::error ...``) printed by all steps, in order, as the runner
        parses them (``gh_commands``: leading blanks trimmed, ``::stop-commands::`` honoured)."""
        return [
            command.raw
            for s in self.steps
            for command in parse_output(s.stdout)
            if command.name != "debug"
        ]

    def step(self, name: str) -> StepRun:
        return next(s for s in self.steps if s.name == name)


def _shim(directory: Path) -> Path:
    """A ``python`` on PATH that logs ``python -m pip ...`` and runs everything else."""
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "python"
    shim.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "${1:-}" = "-m" ] && [ "${2:-}" = "pip" ]; then\n'
        '  printf "%s\\n" "$*" >> "$FAKE_PIP_LOG"; exit 0\n'
        "fi\n"
        f'exec {shlex.quote(sys.executable)} "$@"\n',
        encoding="utf-8",
    )
    shim.chmod(0o755)
    return directory


def _runs_after(step: dict[str, Any], name: str, failed: bool) -> bool:
    """Whether a run step runs, by its ``if:`` (a status function) and whether a step
    before it failed."""
    condition = str(step.get("if", "success()")).strip()
    if condition not in _STATUS_IFS:
        raise ValueError(f"step {name!r}: the fake runner does not evaluate if: {condition}")
    return _STATUS_IFS[condition][failed]


def run_action(
    tmp_path: Path,
    inputs: dict[str, str] | None = None,
    *,
    workspace: Path | None = None,
    env: dict[str, str] | None = None,
    stop_after: str | None = None,
    timeout: float = 600,
) -> ActionRun:
    """Run action.yml's steps in a fake GitHub environment rooted at ``tmp_path``.

    ``workspace`` (default ``tmp_path / "ws"``) plays ``$GITHUB_WORKSPACE``; the action path is
    this repository. After the first failing step only the steps that run on failure run,
    like the runner; it stops after the step named ``stop_after``.
    """
    action = load_action()
    declared = action["inputs"]
    unknown = set(inputs or {}) - set(declared)
    if unknown:
        raise ValueError(f"inputs not declared in action.yml: {sorted(unknown)}")
    values = {name: str(spec.get("default", "")) for name, spec in declared.items()}
    values.update(inputs or {})

    tmp_path.mkdir(parents=True, exist_ok=True)
    workspace = workspace or tmp_path / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    gh = tmp_path / "github"
    gh.mkdir(exist_ok=True)
    summary = gh / "step_summary.md"
    summary.touch()
    env_file = gh / "env"
    env_file.touch()
    pip_log = gh / "pip.log"
    pip_log.touch()
    bin_dir = _shim(gh / "bin")
    base_env = {
        **os.environ,
        "PATH": os.pathsep.join(
            [str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]]
        ),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(REPO_ROOT),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_ENV": str(env_file),
        "RUNNER_TEMP": str(gh),
        "RUNNER_OS": "Linux",
        "FAKE_PIP_LOG": str(pip_log),
        "FAITHGATE_HOME": str(tmp_path / "faithgate-home"),
        **(env or {}),
    }
    contexts: dict[str, Any] = {
        "inputs": values,
        "steps": {},
        "runner": {"os": "Linux", "temp": str(gh)},
        "github": {"run_id": "1", "run_attempt": "1", "action_path": str(REPO_ROOT)},
    }

    def evaluate(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            # ``a || b``: the first operand that is not empty (all operands are strings here).
            alternatives = [value(e.strip()) for e in match.group(1).split("||")]
            return next((v for v in alternatives if v), "")

        def value(expr: str) -> str:
            parts = expr.split(".")
            if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
                return contexts["steps"].get(parts[1], {}).get(parts[3], "")
            if parts[0] in ("inputs", "runner", "github") and len(parts) == 2:
                return contexts[parts[0]][parts[1]]
            raise ValueError(f"expression not supported by the fake runner: {expr!r}")

        return _EXPR.sub(one, str(text))

    runs: list[StepRun] = []
    failed = False
    for step in action["runs"]["steps"]:
        name = step.get("name", step.get("uses", "?"))
        if "uses" in step:
            if not failed:  # (their own if: is not evaluated)
                runs.append(StepRun(name, step.get("id"), "uses"))
        elif _runs_after(step, name, failed):
            if step.get("shell") != "bash":
                raise ValueError(f"step {name!r}: composite run steps must set shell: bash")
            step_env = {k: evaluate(v) for k, v in (step.get("env") or {}).items()}
            cwd = workspace / evaluate(step.get("working-directory", "."))
            output_file = gh / f"output-{len(runs)}"
            output_file.write_text("")
            script = gh / f"step-{len(runs)}.sh"
            script.write_text(step["run"], encoding="utf-8")
            full_env = {
                **base_env,
                **parse_env_file(env_file.read_text()),
                **step_env,
                "GITHUB_OUTPUT": str(output_file),
            }
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=cwd,
                env=full_env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            record = StepRun(
                name,
                step.get("id"),
                "run",
                proc.returncode,
                proc.stdout,
                proc.stderr,
                parse_env_file(output_file.read_text()),
                step_env,
            )
            runs.append(record)
            if record.id:
                contexts["steps"][record.id] = record.outputs
            failed = failed or proc.returncode != 0
        if stop_after is not None and name == stop_after:
            break

    outputs = {name: evaluate(spec["value"]) for name, spec in action["outputs"].items()}
    return ActionRun(
        runs,
        outputs,
        summary.read_text(encoding="utf-8"),
        [line for line in pip_log.read_text().splitlines() if line],
        workspace,
    )
