"""faithgate.report.github: workflow-command escaping, step outputs, annotations, job summary.

Gate results are built with the real gate engine (``faithgate.gate.evaluate``) over hand-set
scores, so the tests read the same JSON the Action reads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from action_runner import parse_env_file

from faithgate.config import GateConfig
from faithgate.gate.baseline import BaselineRead
from faithgate.gate.evaluate import evaluate
from faithgate.report import github
from faithgate.types import Example, Score, SentenceScore

# The variables GitHub sets: absent unless a test gives them (the suite may run on GitHub).
GITHUB_VARS = ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "FG_CONFIG")


def run_github(args, env):
    """``faithgate github ARGS`` with exactly ``env``'s GitHub variables; (exit code, stdout)."""
    from click.testing import CliRunner

    from faithgate.cli import cli

    full_env = {**dict.fromkeys(GITHUB_VARS), **env}
    res = CliRunner().invoke(cli, ["github", *args], env=full_env, catch_exceptions=False)
    return res.exit_code, res.stdout


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """Split ``::cmd k=v,k2=v2::message`` and undo GitHub's escaping."""

    def unescape(text: str) -> str:
        for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
            text = text.replace(code, char)
        return text

    assert line.startswith("::")
    head, message = line[2:].split("::", 1)
    command, _, props_text = head.partition(" ")
    props = {}
    for item in filter(None, props_text.split(",")):
        key, value = item.split("=", 1)
        props[key] = unescape(value)
    return command, props, unescape(message)


# ---------------------------------------------------------------------- escaping


def test_escape_data_follows_github_rules():
    assert github.escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    # % is escaped first: a literal "%0A" in the text must not become a newline.
    assert github.escape_data("%0A") == "%250A"


def test_escape_property_also_escapes_colon_and_comma():
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_workflow_command_drops_none_properties_and_escapes():
    line = github.workflow_command(
        "error", "x\ny", file="d/a.jsonl", line=3, col=None, title="t: 1,2"
    )
    assert line == "::error file=d/a.jsonl,line=3,title=t%3A 1%2C2::x%0Ay"
    assert github.workflow_command("warning", "plain") == "::warning::plain"


def test_format_output_single_and_multiline_round_trip():
    text = github.format_output("a", "1") + github.format_output("b", "two\nlines\n=x<<y")
    assert text.startswith("a=1\nb<<ghadelimiter_")
    assert parse_env_file(text) == {"a": "1", "b": "two\nlines\n=x<<y"}


# ---------------------------------------------------------------------- gate results


def _score(metric: str, value: float, sentence: str = "", error: str | None = None) -> Score:
    sentences = [SentenceScore(0, sentence, value)] if sentence else []
    if error:
        return Score.failed(metric, "m:abc", "", error)
    return Score(metric, value, "m:abc", sentences=sentences)


@pytest.fixture()
def gate_result(tmp_path: Path) -> dict:
    """Three outputs under threshold 0.5: one passes, one scores 0.3, one cannot be scored.
    Ids hold characters that must be escaped in a property; line 2 of the file is blank."""
    ids = ["ok-1", "low:2,x", "broken%3"]
    outputs = tmp_path / "ws" / "data" / "outputs.jsonl"
    outputs.parent.mkdir(parents=True)
    rows = [json.dumps({"id": i, "source": "s", "summary": "t"}) for i in ids]
    outputs.write_text(rows[0] + "\n\n" + rows[1] + "\n" + rows[2] + "\n", encoding="utf-8")
    config = GateConfig.from_dict({"metrics": ["m"], "thresholds": {"m": 0.5}}, root=tmp_path)
    examples = [
        Example(ids[0], "src", "A fine summary."),
        Example(ids[1], "src", "Costs rose 50%.\nThen fell."),
        Example(ids[2], "src", "Unscorable."),
    ]
    scores = [
        {"m": _score("m", 0.9, "A fine summary.")},
        {"m": _score("m", 0.3, "Costs rose 50%.")},
        {"m": _score("m", math.nan, error="text too long")},
    ]
    result = evaluate(config, examples, scores, {"m": "m:abc"})
    result.input = str(outputs)
    return result.to_dict()


def test_outputs_for_reports_verdict_rate_means_and_paths(gate_result, tmp_path):
    md = tmp_path / "r.md"
    md.write_text("# r\n")
    out = github.outputs_for(gate_result, {"markdown": md, "json": tmp_path / "missing.json"})
    assert out["verdict"] == "fail"
    assert out["pass-rate"] == "0.3333333333333333"  # 1 of 3, in full
    assert json.loads(out["means"]) == {"m": 0.6}  # (0.9 + 0.3) / 2 scored
    assert out["failed-examples"] == "2"
    assert out["report-markdown"] == str(md)
    assert out["report-json"] == ""  # not written: not reported
    assert out["report-junit"] == ""


def test_one_error_annotation_per_failing_example(gate_result, tmp_path):
    commands = github.annotations_for(gate_result, workspace=str(tmp_path / "ws"))
    parsed = [parse_command(c) for c in commands]
    examples = [p for p in parsed if p[1].get("title", "").startswith("faithgate: example")]
    assert [p[0] for p in examples] == ["error", "error"]
    (_, low_props, low_msg), (_, broken_props, broken_msg) = examples
    # Escaped on the way out, intact after the runner unescapes.
    assert low_props == {
        "file": "data/outputs.jsonl",  # relative to the workspace
        "line": "3",  # line 2 is blank
        "title": "faithgate: example low:2,x failed",
    }
    assert "m 0.3000 < threshold 0.5" in low_msg
    assert '"Costs rose 50%."' in low_msg  # the least supported sentence
    assert "summary: Costs rose 50%. Then fell." in low_msg
    assert broken_props["line"] == "4"
    assert "could not score (text too long)" in broken_msg
    # Raw lines never carry a newline or an unescaped property separator.
    low_line = commands[parsed.index(examples[0])]
    assert "\n" not in low_line and "low%3A2%2Cx" in low_line and "50%25" in low_line
    rules = [p for p in parsed if p[1].get("title", "").startswith("faithgate: rule")]
    assert [p[1]["title"] for p in rules] == ["faithgate: rule pass_rate failed"]


def test_annotations_are_capped(gate_result):
    commands = github.annotations_for(gate_result, max_annotations=1)
    parsed = [parse_command(c) for c in commands]
    assert sum(p[1].get("title", "").startswith("faithgate: example") for p in parsed) == 1
    more = [p for p in parsed if p[1].get("title") == "faithgate: more failures"]
    assert more and more[0][0] == "warning" and more[0][2].startswith("1 more failing")
    # Without a workspace to resolve the file against, annotations carry no file/line.
    assert "file" not in parsed[0][1]


def _rules(*kinds_passed: tuple[str, bool]) -> dict:
    # A failing regression rule measured a drop (its value) of 0.05.
    return {
        "rules": [
            {"name": k, "kind": k, "passed": p, "value": 0.05 if k == "regression" else 1}
            for k, p in kinds_passed
        ]
    }


def test_step_exit_code_and_fail_on_regression():
    only_regression = _rules(("pass_rate", True), ("regression", False))
    both = _rules(("pass_rate", False), ("regression", False))
    assert github.step_exit_code(only_regression, 1, fail_on_regression=True) == 1
    assert github.step_exit_code(only_regression, 1, fail_on_regression=False) == 0
    assert github.step_exit_code(both, 1, fail_on_regression=False) == 1
    assert github.step_exit_code(None, 2, fail_on_regression=False) == 2
    assert github.step_exit_code(_rules(("pass_rate", True)), 0, True) == 0


def _regression_gate(case: str) -> dict:
    """A gate of three outputs that pass their threshold, with the regression rule on
    (``require_baseline``), against a baseline of scores 0.9: ``case`` says what differs."""
    config = GateConfig.from_dict(
        {
            "metrics": ["m"],
            "thresholds": {"m": 0.1},
            "rules": {"regression": {"require_baseline": True}},
        }
    )
    examples = [Example(f"e{i}", f"src {i}", "A summary.") for i in range(3)]
    old = evaluate(config, examples, [{"m": _score("m", 0.9)}] * 3, {"m": "m:abc"})
    baseline: dict = {"baseline": old}
    if case == "missing":
        baseline = {"baseline": BaselineRead(error="no baseline yet at b.json", missing=True)}
    elif case == "other settings":
        old.settings_hashes["m"] = "m:old"
    elif case == "no common example":
        others = [Example(f"x{i}", f"other {i}", "A summary.") for i in range(3)]
        scores = [{"m": _score("m", 0.9)}] * 3
        baseline = {"baseline": evaluate(config, others, scores, {"m": "m:abc"})}
    current = 0.3 if case == "drop" else 0.9
    result = evaluate(
        config, examples, [{"m": _score("m", current)}] * 3, {"m": "m:abc"}, **baseline
    )
    assert [r.name for r in result.failed_rules] == ["regression[m]"], result.rules
    return result.to_dict()


@pytest.mark.parametrize(
    ("case", "waived"),
    [("drop", True), ("missing", False), ("other settings", False), ("no common example", False)],
)
def test_fail_on_regression_false_waives_only_a_measured_drop(case, waived):
    """``fail-on-regression: false`` let every failing regression rule pass the step, also
    those that compared nothing: a missing baseline with ``require_baseline``, a baseline made
    with other settings, no example in common. Those still fail, as an error annotation."""
    result = _regression_gate(case)
    assert github.waived_regressions(result, 1, fail_on_regression=False) == (
        ["regression[m]"] if waived else []
    )
    assert github.step_exit_code(result, 1, fail_on_regression=False) == (0 if waived else 1)
    assert github.step_exit_code(result, 1, fail_on_regression=True) == 1
    (line,) = github.annotations_for(result, fail_on_regression=False)
    assert parse_command(line)[0] == ("warning" if waived else "error")


def test_regression_is_a_warning_when_not_failing_on_it():
    result = {
        "examples": [],
        "rules": [
            {
                "name": "regression[m]",
                "kind": "regression",
                "passed": False,
                "message": "dropped",
                "value": 0.05,
            }
        ],
    }
    (line,) = github.annotations_for(result, fail_on_regression=False)
    assert line == "::warning title=faithgate%3A rule regression[m] failed::dropped"


# ---------------------------------------------------------------------- the command


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_WORKSPACE": str(tmp_path / "ws"),
    }


def test_report_command_writes_outputs_summary_and_annotations(gate_result, tmp_path):
    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(gate_result))
    env = _env(tmp_path)
    rc, stdout = run_github(
        ["report", "--result", str(result_path), "--exit-code", "1", "--max-annotations", "5"],
        env,
    )
    assert rc == 0
    outputs = parse_env_file(Path(env["GITHUB_OUTPUT"]).read_text())
    assert outputs["verdict"] == "fail"
    assert outputs["step-exit-code"] == "1"
    assert outputs["report-json"] == str(result_path)
    # No Markdown file given: the summary is rendered from the result.
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert "faithgate" in summary and "pass_rate" in summary
    printed = stdout.splitlines()
    assert sum(line.startswith("::error ") for line in printed) == 3  # 2 examples + 1 rule


def test_a_markdown_report_that_is_not_utf8_still_gives_outputs_and_annotations(
    gate_result, tmp_path
):
    # It was "internal error: UnicodeDecodeError" (exit 1): no outputs, no annotations.
    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(gate_result))
    (tmp_path / "r.md").write_bytes(b"# faithgate \xff\xfe report\n")
    env = _env(tmp_path)
    rc, stdout = run_github(
        ["report", "--result", str(result_path), "--markdown", str(tmp_path / "r.md")], env
    )
    assert rc == 0
    assert parse_env_file(Path(env["GITHUB_OUTPUT"]).read_text())["verdict"] == "fail"
    assert "# faithgate \ufffd\ufffd report" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert sum(line.startswith("::error ") for line in stdout.splitlines()) == 3


def test_report_command_without_result_reports_the_error(tmp_path):
    stderr = tmp_path / "stderr.log"
    stderr.write_text("warming up\nfaithgate: outputs.jsonl:3: invalid JSON (Expecting value)\n")
    env = _env(tmp_path)
    _, stdout = run_github(
        [
            "report",
            "--result",
            str(tmp_path / "none.json"),
            "--stderr",
            str(stderr),
            "--exit-code",
            "2",
        ],
        env,
    )
    outputs = parse_env_file(Path(env["GITHUB_OUTPUT"]).read_text())
    assert outputs["verdict"] == "error"
    assert outputs["step-exit-code"] == "2"
    (line,) = stdout.splitlines()
    assert (
        line
        == "::error title=faithgate::faithgate: outputs.jsonl:3: invalid JSON (Expecting value)"
    )
    assert "invalid JSON" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()


def test_report_args_and_report_dir_cover_every_file_format(gate_result, tmp_path):
    """``report-args`` gives ``faithgate check`` one ``--NAME FILE`` per file format of the
    registry (an earlier run's files removed); ``report --report-dir`` reads the same files
    and sets one ``report-NAME`` output per format."""
    from faithgate.formats import REPORT_FORMATS, file_report_kinds

    d = tmp_path / "reports dir"
    d.mkdir()
    # An earlier run's report (faithgate's own: a file of the user's there would be refused).
    (d / "faithgate.md").write_text("## ❌ faithgate: FAIL\n\nstale\n")
    rc, stdout = run_github(["report-args", "--dir", str(d)], {})
    assert rc == 0
    args = stdout.split("\0")
    assert args.pop() == ""  # NUL-terminated
    names = {REPORT_FORMATS[k].report_filename: k for k in file_report_kinds()}
    assert args == [
        item
        for k in file_report_kinds()
        for item in (f"--{k}", str(d / REPORT_FORMATS[k].report_filename))
    ]
    assert len(names) == len(file_report_kinds())  # one file per format
    assert not (d / "faithgate.md").exists()
    (d / "faithgate.json").write_text(json.dumps(gate_result))
    (d / "faithgate.md").write_text("# the report\n")
    env = _env(tmp_path)
    rc, _ = run_github(["report", "--report-dir", str(d), "--exit-code", "1"], env)
    assert rc == 0
    outputs = parse_env_file(Path(env["GITHUB_OUTPUT"]).read_text())
    assert {k for k in outputs if k.startswith("report-")} == {
        REPORT_FORMATS[k].action_output for k in file_report_kinds()
    }
    assert outputs["report-json"] == str(d / "faithgate.json")
    assert outputs["report-markdown"] == str(d / "faithgate.md")
    assert outputs["report-html"] == ""  # not written: not reported
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text() == "# the report\n"


def test_report_on_a_malformed_result_is_an_error_step_not_a_crash(tmp_path):
    """An example without 'passed' was an internal error (KeyError) with no step outputs."""
    bad = tmp_path / "r.json"
    bad.write_text('{"passed": false, "examples": [{"id": "x"}], "metrics": ["overlap"]}')
    env = _env(tmp_path)
    rc, stdout = run_github(["report", "--result", str(bad), "--exit-code", "1"], env)
    assert rc == 0
    assert "r.json: malformed faithgate result (missing field 'passed')" in stdout
    outputs = parse_env_file(Path(env["GITHUB_OUTPUT"]).read_text())
    assert outputs["verdict"] == "error" and outputs["step-exit-code"] == "2"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"means": 10**30}, "means must be an object of numbers or null"),
        ({"means": {"m": "high"}}, "means must be an object of numbers or null"),
        ({"pass_rate": "x"}, "pass_rate must be a number or null"),
        ({"metrics": [{"a": 1}]}, "metrics must be a list of metric names"),
        ({"verdict": ["pass"]}, "verdict must be 'pass' or 'fail'"),
        ({"passed": "false"}, "passed must be true or false"),
        ({"thresholds": {"m": "0.5"}}, "thresholds must be an object of finite numbers"),
        (
            {"rules": [{"name": "pass_rate", "passed": "false"}]},  # bool("false") is True
            "rule 'pass_rate': 'passed' must be true or false",
        ),
    ],
    ids=[
        "means-int",
        "means-text",
        "pass-rate",
        "metrics",
        "verdict",
        "passed",
        "thresholds",
        "rule-passed",
    ],
)
def test_a_result_with_top_level_fields_of_wrong_types_is_an_error_step(
    gate_result, tmp_path, change, message
):
    """Only examples and rules were checked: a wrong "means", "pass_rate" or "metrics" was an
    internal error, for "metrics" after the annotations were already printed."""
    _assert_an_error_step_before_any_annotation(tmp_path, {**gate_result, **change}, message)


@pytest.mark.parametrize(
    ("path", "bad", "message"),
    [
        (("examples", 1, "message"), ["x"], "example 'low:2,x': message must be text"),
        (("examples", 1, "reasons"), "abc", "example 'low:2,x': reasons must be a list of text"),
        (("examples", 1, "scores", "m", "threshold"), "abc", "the m threshold must be a number"),
        (("rules", 0, "value"), "abc", "rule 'scorable': value must be a number or null"),
        (("rules", 1, "limit"), 10**400, "rule 'pass_rate': limit must be a number or null"),
        (("rules", 1, "message"), {"a": 1}, "rule 'pass_rate': message must be text"),
        (("means", "m"), 10**400, "means must be an object of numbers or null"),
    ],
    ids=["message", "reasons", "threshold", "rule-value", "rule-limit", "rule-message", "mean"],
)
def test_a_result_with_nested_fields_of_wrong_types_is_an_error_step(
    gate_result, tmp_path, path, bad, message
):
    """Only some fields of the examples and rules were checked: a list as an example's
    message, text as a threshold or a rule's value was an internal error (exit 1), for the
    rule's value after the annotations were already printed; text as reasons was read as
    one reason per character."""
    target = gate_result
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = bad
    _assert_an_error_step_before_any_annotation(tmp_path, gate_result, message)


def test_a_result_holding_a_5000_digit_number_is_an_error_step(gate_result, tmp_path):
    """Python refuses to read an int of more than 4300 digits with a bare ValueError, which
    was an internal error (exit 1) instead of the step's error annotation."""
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(gate_result)[:-1] + ', "n": ' + "9" * 5000 + "}")
    env = _env(tmp_path)
    rc, stdout = run_github(["report", "--result", str(bad), "--exit-code", "1"], env)
    assert rc == 0
    assert "unreadable gate result (a number with more than 4300 digits)" in stdout


def test_report_args_with_a_file_as_dir_is_an_input_error(tmp_path):
    """``--dir FILE`` was an internal error (NotADirectoryError from unlink)."""
    (tmp_path / "afile").write_text("mine")
    from click.testing import CliRunner

    from faithgate.cli import cli

    res = CliRunner().invoke(cli, ["github", "report-args", "--dir", str(tmp_path / "afile")])
    assert res.exit_code == 2
    assert "afile is a file, not a directory (report-dir " in res.output
    assert (tmp_path / "afile").read_text() == "mine"


def test_report_outside_github_prints_outputs(gate_result, tmp_path):
    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(gate_result))
    _, out = run_github(["report", "--result", str(result_path)], {})
    assert "verdict=fail\n" in out and "step-exit-code=1\n" in out


def test_summary_is_cut_at_the_limit(monkeypatch):
    monkeypatch.setattr(github, "SUMMARY_LIMIT", 100)
    text = github.summary_markdown(None, "é" * 200, None)  # 2 bytes per character
    assert text.startswith("é" * 50) and "cut at GitHub's 1 MiB" in text
    assert "é" * 51 not in text


def test_cache_dir_command(tmp_path, monkeypatch):
    (tmp_path / "faithgate.toml").write_text('cache_dir = "scores"\n')
    monkeypatch.chdir(tmp_path)
    out_file = tmp_path / "out.txt"
    run_github(["cache-dir"], {"GITHUB_OUTPUT": str(out_file)})
    assert parse_env_file(out_file.read_text()) == {"cache-dir": str(tmp_path / "scores")}
    (tmp_path / "faithgate.toml").write_text("")  # none configured: .faithgate here
    assert run_github(["cache-dir"], {})[1] == f"cache-dir={tmp_path / '.faithgate'}\n"


def test_bad_config_is_one_error_line(tmp_path, monkeypatch):
    (tmp_path / "faithgate.toml").write_text("nonsense = 1\n")
    monkeypatch.chdir(tmp_path)
    rc, stdout = run_github(["cache-dir"], {})
    assert rc == 2
    (line,) = stdout.splitlines()
    assert line.startswith("::error title=faithgate::") and "nonsense" in line


def test_summarizer_runs_are_annotated_on_the_dataset(gate_result, tmp_path):
    data = gate_result["input"]
    gate_result["input"] = f"summarizer:summarize over {data}"
    commands = github.annotations_for(gate_result, workspace=str(tmp_path / "ws"))
    assert commands[0].startswith("::error file=data/outputs.jsonl,line=3,")


def test_annotations_find_an_input_named_relative_to_a_config_in_a_subdirectory(
    gate_result, tmp_path, monkeypatch
):
    """The check names its input relative to its configuration's directory; the annotations
    resolved that name against the current directory: a config in gate/ put them on
    ./outputs.jsonl (another file, other lines) or on no file at all."""
    ws = tmp_path / "ws"
    (ws / "data" / "faithgate.toml").write_text('metrics = ["m"]\n')
    decoy = ws / "outputs.jsonl"  # same ids, other lines: must not be the one annotated
    decoy.write_text("\n".join(json.dumps({"id": i}) for i in ("x", "y", "broken%3", "low:2,x")))
    gate_result["input"] = "outputs.jsonl"  # as the check records it, from data/faithgate.toml
    monkeypatch.chdir(ws)
    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(gate_result))
    env = {**_env(tmp_path), "GITHUB_WORKSPACE": str(ws)}
    rc, stdout = run_github(
        ["report", "--result", str(result_path), "--config", "data/faithgate.toml"], env
    )
    assert rc == 0
    assert "::error file=data/outputs.jsonl,line=3,title=faithgate%3A example low" in stdout
    rc, stdout = run_github(
        ["report", "--result", str(result_path)], {**env, "FG_CONFIG": "data/faithgate.toml"}
    )
    assert "::error file=data/outputs.jsonl,line=3,title=faithgate%3A example low" in stdout


def test_warnings_of_the_check_become_warning_annotations(gate_result, tmp_path):
    """`faithgate: warning: ...` lines of the check's stderr (e.g. a threshold for a metric that
    is not selected) reach the Actions UI as warnings; other stderr lines do not."""
    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(gate_result))
    stderr = tmp_path / "stderr.log"
    stderr.write_text(
        "loading models\n"
        "faithgate: warning: thresholds for bertscore are not applied: not selected metrics "
        "(metrics: sentsim); add them to `metrics` to gate on them\n"
        "faithgate: warning: 100% sure, a, b\n"
    )
    env = _env(tmp_path)
    _, stdout = run_github(
        ["report", "--result", str(result_path), "--stderr", str(stderr), "--exit-code", "1"],
        env,
    )
    warnings = [ln for ln in stdout.splitlines() if ln.startswith("::warning ")]
    assert warnings == [
        "::warning title=faithgate%3A warning::thresholds for bertscore are not applied: not "
        "selected metrics (metrics: sentsim); add them to `metrics` to gate on them",
        "::warning title=faithgate%3A warning::100%25 sure, a, b",
    ]
    assert sum(line.startswith("::error ") for line in stdout.splitlines()) == 3  # unchanged


@pytest.mark.parametrize(
    ("passed", "total", "shown"),
    [
        (20000, 20001, "0.999950002499875"),
        (1, 20001, "0.00004999750012499375"),
        (2, 3, "0.6666666666666666"),
        (3, 3, "1"),
        (0, 3, "0"),
    ],
)
def test_pass_rate_output_is_1_only_when_every_example_passed(passed, total, shown):
    """Four decimals read 20000 of 20001 as "1" (and 1 of 20001 as "0"): a workflow testing
    pass-rate == '1' took a failing example for none. The rate is given in full."""
    examples = [{"id": str(i), "passed": i < passed} for i in range(total)]
    out = github.outputs_for({"examples": examples, "pass_rate": passed / total}, {})
    assert out["pass-rate"] == shown
    assert out["failed-examples"] == str(total - passed)


def _regression_only(gate_result: dict) -> dict:
    """``gate_result`` failing only a regression rule (its examples all pass)."""
    for example in gate_result["examples"]:
        example["passed"] = True
    gate_result["rules"] = [
        {"name": "pass_rate", "kind": "pass_rate", "passed": True, "message": "ok"},
        {
            "name": "regression[m]",
            "kind": "regression",
            "passed": False,
            "message": "dropped",
            "value": 0.05,
            "limit": 0.01,
        },
    ]
    gate_result["passed"] = False
    gate_result["verdict"] = "fail"
    return gate_result


@pytest.mark.parametrize(
    ("fail_on_regression", "verdict", "rc"), [("true", "fail", "1"), ("false", "pass", "0")]
)
def test_a_waived_regression_passes_the_verdict_and_says_so(
    gate_result, tmp_path, fail_on_regression, verdict, rc
):
    """fail-on-regression false passes the step on a regression-only failure: the verdict
    output and the job summary's heading said FAIL all the same."""
    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(_regression_only(gate_result)))
    env = _env(tmp_path)
    args = ["report", "--result", str(result_path), "--exit-code", "1"]
    _, stdout = run_github([*args, "--fail-on-regression", fail_on_regression], env)
    outputs = parse_env_file(Path(env["GITHUB_OUTPUT"]).read_text())
    assert (outputs["verdict"], outputs["step-exit-code"]) == (verdict, rc)
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    if verdict == "pass":
        assert summary.startswith("## ⚠️ faithgate: PASS with a warning (regression\\[m\\])\n")
        assert "::warning title=faithgate%3A rule regression[m] failed::dropped" in stdout
    else:
        assert "PASS" not in summary and "faithgate: FAIL" in summary


def test_a_regression_rule_that_compared_nothing_still_fails_the_step(tmp_path):
    """A missing baseline with ``require_baseline = true`` is no regression to waive: with
    ``--fail-on-regression false`` the verdict stayed pass and the step exited 0."""
    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(_regression_gate("missing")))
    env = _env(tmp_path)
    args = ["report", "--result", str(result_path), "--exit-code", "1"]
    _, stdout = run_github([*args, "--fail-on-regression", "false"], env)
    outputs = parse_env_file(Path(env["GITHUB_OUTPUT"]).read_text())
    assert (outputs["verdict"], outputs["step-exit-code"]) == ("fail", "1")
    assert "PASS" not in Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert "::error title=faithgate%3A rule regression[m] failed::no baseline yet" in stdout


def test_cache_dir_is_next_to_the_configuration(tmp_path, monkeypatch):
    """As `faithgate check` and the pytest plugin: not in the working directory."""
    (tmp_path / "faithgate.toml").write_text('metrics = ["overlap"]\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert run_github(["cache-dir"], {})[1] == f"cache-dir={tmp_path / '.faithgate'}\n"


def test_a_cache_dir_with_a_line_break_is_refused(tmp_path, monkeypatch):
    """actions/cache reads each line of the cache-dir output as a path of its own."""
    (tmp_path / "faithgate.toml").write_text('cache_dir = "c1\\n/tmp/secret"\n')
    monkeypatch.chdir(tmp_path)
    out_file = tmp_path / "out.txt"
    rc, stdout = run_github(["cache-dir"], {"GITHUB_OUTPUT": str(out_file)})
    assert rc == 2
    (line,) = stdout.splitlines()
    assert line.startswith("::error title=faithgate::cache_dir must be one line (a path)")
    outputs = parse_env_file(out_file.read_text())
    assert "cache-dir" not in outputs
    assert outputs["error"].startswith("cache_dir must be one line (a path)")
    assert "\n" not in outputs["error"]


def _assert_an_error_step_before_any_annotation(tmp_path, data, message: str) -> None:
    """``github report`` on the result ``data``: one ``::error`` naming ``message``, printed
    before any annotation, and the step's outputs saying error, exit code 2."""
    result_path = tmp_path / "r.json"
    result_path.write_text(json.dumps(data))
    env = _env(tmp_path)
    rc, stdout = run_github(["report", "--result", str(result_path), "--exit-code", "1"], env)
    assert rc == 0
    [line] = stdout.splitlines()  # the error alone: no example was annotated first
    assert line.startswith("::error title=faithgate::") and message in line, line
    outputs = parse_env_file(Path(env["GITHUB_OUTPUT"]).read_text())
    assert outputs["verdict"] == "error" and outputs["step-exit-code"] == "2"


def test_an_unwritable_github_env_file_is_one_line_and_exit_2(gate_result, tmp_path, capsys):
    """A $GITHUB_STEP_SUMMARY the runner cannot append to was an internal error (exit 1)."""
    from faithgate.cli import main

    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(gate_result))
    env = {**_env(tmp_path), "GITHUB_STEP_SUMMARY": str(tmp_path / "missing-dir" / "summary.md")}
    with pytest.MonkeyPatch.context() as mp:
        for key in GITHUB_VARS:
            mp.delenv(key, raising=False)
        for key, value in env.items():
            mp.setenv(key, value)
        rc = main(["github", "report", "--result", str(result_path), "--exit-code", "1"])
    assert rc == 2
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("::error title=faithgate::cannot append to ")
    assert "missing-dir" in last and "internal error" not in last


def test_a_non_finite_mean_is_null_in_the_means_output(gate_result):
    """The means output is read with fromJSON(), which refuses a bare NaN."""
    data = json.loads(json.dumps(gate_result))
    data["means"] = {"m": float("nan"), "n": 0.5}
    means = json.loads(github.outputs_for(data, {})["means"])
    assert means == {"m": None, "n": 0.5}
