"""Every print site of ``faithgate github``, fed names that hold terminal escapes.

The print sites (``faithgate/cli/github.py``, ``faithgate/report/github.py``):

- ``report``: one annotation per failing example, per failing rule, per warning of the check's
  stderr, the "more failures" notice, the error annotation when there is no result;
- ``report`` outside GitHub: the step outputs printed as ``name=value`` (report paths, means);
- ``cache-dir`` outside GitHub: ``cache-dir=PATH``;
- ``report-args``: the ``--NAME PATH`` arguments (NUL-separated, printed as they are);
- ``action``: an input's refusal, a report directory it refuses, outside GitHub its outputs;
- the error boundary of every subcommand (a workflow ``::error`` line) and click's usage errors.

A directory named with an OSC 8 hyperlink (``ESC ] 8 ;; URL BEL``), ``ESC [ 2J``, a C1 CSI, a
bidi override and a legacy ``##[error]`` reached stdout raw through the printed report paths
(issue 49). Run in process (click's runner): nothing here needs a model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from action_runner import parse_env_file
from click.testing import CliRunner
from gh_commands import parse_output

from faithgate.cli import cli
from faithgate.config import GateConfig
from faithgate.formats import REPORT_FORMATS, file_report_kinds
from faithgate.gate.evaluate import evaluate
from faithgate.report import render
from faithgate.types import Example, Score, SentenceScore

# Escapes a terminal acts on: an OSC 8 hyperlink, clear screen, a C1 CSI, a bidi override,
# a legacy workflow command (parsed anywhere in a line), a line break.
HOSTILE = (
    "\x1b]8;;http://evil.example/x\x07click me\x1b]8;;\x07\x1b[2J\x9b31m\u202eok##[error]forged"
)
NAME = HOSTILE.replace("/", "_")  # one path component
# What must never reach stdout or stderr raw (NUL only between report-args' arguments).
RAW = re.compile("[\x01-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
GITHUB_VARS = ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "FG_CONFIG")


def _run(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
    full_env = {**dict.fromkeys(GITHUB_VARS), **(env or {})}
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(cli, ["github", *args], env=full_env)
    import os

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(cli, ["github", *args], env=full_env)
    finally:
        os.chdir(old)


def _assert_safe(res) -> None:
    """Nothing raw on either stream, and every workflow command one faithgate meant."""
    for stream in (res.stdout, res.stderr):
        assert RAW.search(stream) is None, repr(stream)
        for command in parse_output(stream):
            assert command.name in ("error", "warning"), command.raw
            assert command.properties.get("title", "").startswith("faithgate"), command.raw
    assert "Traceback" not in res.output


def _result(tmp_path: Path) -> dict:
    """A failing gate over hostile ids, summaries, metric name and errors."""
    metric = f"m{NAME}"
    config = GateConfig.from_dict({"metrics": [metric], "thresholds": {metric: 0.5}})
    examples = [
        Example(f"id-{i}{HOSTILE}", "src", f"Summary {HOSTILE}\nline two.") for i in range(3)
    ]
    scores = [
        {metric: Score(metric, 0.3, "m:abc", sentences=[SentenceScore(0, HOSTILE, 0.3)])},
        {metric: Score.failed(metric, "m:abc", "", f"error {HOSTILE}")},
        {metric: Score(metric, 0.9, "m:abc")},
    ]
    result = evaluate(config, examples, scores, {metric: "m:abc"})
    result.input = str(tmp_path / f"{NAME}.jsonl")
    return result


@pytest.fixture()
def report_dir(tmp_path: Path) -> Path:
    """A report directory with a hostile name holding every file report of a failing run."""
    directory = tmp_path / HOSTILE  # (nested: the URL's slashes)
    directory.mkdir(parents=True)
    result = _result(tmp_path)
    for kind in file_report_kinds():
        (directory / REPORT_FORMATS[kind].report_filename).write_text(
            render(kind, result), encoding="utf-8"
        )
    return directory


def _stderr_log(tmp_path: Path) -> Path:
    log = tmp_path / f"stderr{NAME}.log"
    log.write_text(f"faithgate: warning: {HOSTILE}\nfaithgate: {HOSTILE}\n", encoding="utf-8")
    return log


def test_report_outside_github_prints_report_paths_escaped(report_dir, tmp_path):
    res = _run(
        [
            "report",
            "--report-dir",
            str(report_dir),
            "--stderr",
            str(_stderr_log(tmp_path)),
            "--exit-code",
            "1",
            "--max-annotations",
            "1",
        ]
    )
    assert res.exit_code == 0, res.output
    _assert_safe(res)
    # Every site was reached: example, "more" notice, rule, warning, and each report path.
    kinds = {c.properties["title"].split(" ")[1] for c in parse_output(res.stdout)}
    assert {"example", "more", "rule", "warning"} <= kinds, res.stdout
    for kind in file_report_kinds():
        output = REPORT_FORMATS[kind].action_output
        line = next(ln for ln in res.stdout.splitlines() if ln.startswith(f"{output}="))
        assert "\\x1b]8;;http:" in line and "\\x1b[2J" in line and "#\\#[error]" in line


def test_report_with_each_report_named_on_its_own_option(report_dir, tmp_path):
    args = ["report", "--result", str(report_dir / REPORT_FORMATS["json"].report_filename)]
    for kind in file_report_kinds():
        if kind != "json":
            args += [f"--{kind}", str(report_dir / REPORT_FORMATS[kind].report_filename)]
    res = _run(args)
    assert res.exit_code == 0, res.output
    _assert_safe(res)
    assert "report-markdown=" in res.stdout


def test_report_on_github_writes_real_paths_and_prints_only_escaped_annotations(
    report_dir, tmp_path
):
    env = {
        "GITHUB_OUTPUT": str(tmp_path / "out.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    res = _run(["report", "--report-dir", str(report_dir), "--exit-code", "1"], env)
    assert res.exit_code == 0, res.output
    _assert_safe(res)
    outputs = parse_env_file((tmp_path / "out.txt").read_text(encoding="utf-8"))
    # The file a later step reads keeps the path itself: it names the report.
    assert Path(outputs["report-markdown"]).is_file()


def test_report_without_a_result_in_a_hostile_directory(tmp_path):
    directory = tmp_path / HOSTILE
    directory.mkdir(parents=True)
    res = _run(["report", "--report-dir", str(directory), "--exit-code", "2"])
    assert res.exit_code == 0, res.output
    _assert_safe(res)
    assert "verdict=error" in res.stdout


def test_report_on_a_malformed_result_with_a_hostile_name(tmp_path):
    bad = tmp_path / f"{NAME}.json"
    bad.write_text(json.dumps({"passed": True, "examples": [], "metrics": [HOSTILE, 3]}))
    res = _run(["report", "--result", str(bad)])
    _assert_safe(res)
    assert "verdict=error" in res.stdout


def test_report_without_result_or_dir_is_an_escaped_error():
    res = _run(["report", "--stderr", HOSTILE])
    assert res.exit_code == 2
    _assert_safe(res)


def test_cache_dir_outside_github_prints_its_path_escaped(tmp_path):
    cache = json.dumps(NAME)  # a TOML basic string is JSON-compatible here
    (tmp_path / "faithgate.toml").write_text(f"cache_dir = {cache}\n", encoding="utf-8")
    res = _run(["cache-dir"], cwd=tmp_path)
    assert res.exit_code == 0, res.output
    _assert_safe(res)
    assert res.stdout.startswith("cache-dir=") and "\\x1b[2J" in res.stdout
    # On GitHub the output file holds the real path: actions/cache reads it.
    out = tmp_path / "out.txt"
    res = _run(["cache-dir"], {"GITHUB_OUTPUT": str(out)}, cwd=tmp_path)
    assert res.exit_code == 0 and res.stdout == ""
    assert parse_env_file(out.read_text(encoding="utf-8"))["cache-dir"].endswith(NAME)


def test_cache_dir_with_a_hostile_config_error(tmp_path):
    key = json.dumps(HOSTILE)
    (tmp_path / "faithgate.toml").write_text(f"{key} = 1\n", encoding="utf-8")
    res = _run(["cache-dir", "--config", str(tmp_path / "faithgate.toml")])
    assert res.exit_code == 2
    _assert_safe(res)
    res = _run(["cache-dir", "--config", str(tmp_path / f"{NAME}.toml")])
    assert res.exit_code == 2
    _assert_safe(res)


def test_report_args_refuses_a_directory_it_would_print_raw(report_dir):
    before = {p: p.read_bytes() for p in report_dir.iterdir()}
    res = _run(["report-args", "--dir", str(report_dir)])
    assert res.exit_code == 2
    _assert_safe(res)
    assert "\\x1b[2J" in res.stdout  # the ::error names it, escaped
    assert {p: p.read_bytes() for p in report_dir.iterdir()} == before  # nothing removed


def test_report_args_errors_about_a_users_file_are_escaped(tmp_path):
    directory = tmp_path / "reports ##[error] ::x"
    directory.mkdir()
    (directory / REPORT_FORMATS["markdown"].report_filename).write_text("my notes\n")
    res = _run(["report-args", "--dir", str(directory), "--config", str(tmp_path / NAME)])
    assert res.exit_code == 2
    _assert_safe(res)
    res = _run(["report-args", "--dir", str(directory)])
    assert res.exit_code == 2
    _assert_safe(res)


def test_action_refuses_hostile_inputs_and_report_dir_escaped(tmp_path):
    """The Action's gate step: a bad input's value and a report directory it would print
    are named escaped; no check runs."""
    for args in (["--max-annotations", HOSTILE], ["--min-pass-rate", HOSTILE]):
        res = _run(["action", *args], cwd=tmp_path)
        assert res.exit_code == 2
        _assert_safe(res)
    res = _run(["action", "--report-dir", NAME], cwd=tmp_path)
    assert res.exit_code == 2
    _assert_safe(res)
    assert "\\x1b[2J" in res.stdout  # the ::error names it, escaped


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--max-annotations", HOSTILE],
        ["report", "--fail-on-regression", HOSTILE],
        ["report", f"--{HOSTILE}"],
        [HOSTILE],
    ],
    ids=["int", "choice", "option", "command"],
)
def test_usage_errors_are_escaped(args):
    res = _run(args)
    assert res.exit_code == 2
    _assert_safe(res)
