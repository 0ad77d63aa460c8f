"""User text never reaches a terminal, log or CI runner unescaped.

An example id ``"x\\n::error::forged"`` used to print a forged GitHub workflow command in
``faithgate check``'s stdout. Every channel is checked here with a parser that reads output as
GitHub's runner does (``gh_commands``): the terminal report, error lines, the pytest plugin's
output, the Action's annotations and its step summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import gate_fakes
import pytest
from click.testing import CliRunner
from gate_fakes import NAME, summary
from gh_commands import parse_output

from faithgate.report import github
from faithgate.safety.escape import (
    defuse_workflow_commands,
    json_for_terminal,
    printable,
    safe_line,
)

HOSTILE_IDS = [
    "a\n::error::forged by a newline",
    "b\r::error::forged by a carriage return",
    "::warning file=x::forged at the start of a line",
    "c\u2028::error::forged by a line separator",
    "d\x85::error::forged by NEL",
    "e\x1b[2J\x1b[31mred and cleared",
    "f\x9b31mC1 CSI",
    "g\u202eevil bidi override",
    "h\x01soh\x07bell\x08backspace",
]
# GitHub's runner still parses the legacy "##[name props]data" anywhere in a line.
LEGACY_IDS = [
    "i ##[error title=x;]forged by the legacy syntax",
    "j ##[set-output name=verdict;]pass",
    "##[add-mask]k",
]
CONTROL = [chr(c) for c in range(0x20) if c not in (0x0A,)] + ["\x7f", "\x1b", "\x9b"]


@pytest.mark.parametrize(
    "text, shown",
    [
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\r\\nb"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("x\u2028y\u2029z\x85", "x\\u2028y\\u2029z\\x85"),
        ("\ud800", "\\ud800"),
        ("rtl\u202eltr", "rtl\\u202eltr"),
        ("tab\there", "tab\\there"),
        ("中文 русский हिन्दी عربي 🙂 ::x", "中文 русский हिन्दी عربي 🙂 ::x"),
    ],
)
def test_printable_escapes_only_unsafe_characters(text, shown):
    assert printable(text) == shown
    assert "\n" not in printable(text)


def test_defuse_workflow_commands_escapes_command_lines_only():
    block = "ok line\n  ::error::x\n::set-output name=a::b\nmid ::error:: ok"
    out = defuse_workflow_commands(block)
    assert parse_output(out) == []
    assert out.splitlines()[0] == "ok line" and out.splitlines()[3] == "mid ::error:: ok"
    assert parse_output(safe_line("::error::x")) == []


def test_the_legacy_command_syntax_is_defused_anywhere_in_a_line():
    """``##[error]...`` / ``##[set-output name=...;]...`` is a command wherever it stands in a
    line (the runner's ``ActionCommand.TryParse``); ``printable`` leaves ``#[]`` alone."""
    hostile = "id ##[error title=x;]forged and ###[set-output name=verdict;]pass ##[add-mask]x"
    assert [c.name for c in parse_output(hostile)] == ["error"]  # the runner takes the first
    assert [c.name for c in parse_output("s ##[set-output name=verdict;]pass")] == ["set-output"]
    for text in (safe_line(hostile), defuse_workflow_commands(f"ok\n{hostile}\n")):
        assert parse_output(text) == [] and "##[" not in text, text
        assert "#\\#[error title=x;]" in text
    shown = json_for_terminal({"id": hostile, "##[x]": ["##["]}, indent=1)
    assert parse_output(shown) == [] and "##[" not in shown
    assert json.loads(shown) == {"id": hostile, "##[x]": ["##["]}


@pytest.fixture
def hostile_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [
        {"id": eid, "source": "src", "summary": f"0.1 bad {eid} sentence."} for eid in HOSTILE_IDS
    ]
    (tmp_path / "outputs.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    (tmp_path / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
        f"[thresholds]\n{NAME} = 0.5\n"
    )
    return tmp_path


def assert_inert(text: str) -> None:
    assert parse_output(text) == [], text
    assert not any(ch in text for ch in CONTROL if ch not in "\n"), repr(text)
    assert not any(ch in text for ch in "\u2028\u2029\x85\u202e")


def test_check_terminal_report_forges_no_command(hostile_project):
    res = CliRunner().invoke(
        __import__("faithgate.cli", fromlist=["cli"]).cli, ["check"], catch_exceptions=False
    )
    assert res.exit_code == 1, res.output
    assert_inert(res.stdout)
    # every failing id is on exactly one line of its own, escaped
    assert "  a\\n::error::forged by a newline: " in res.stdout
    assert "  \\::warning file=x::forged at the start of a line: " in res.stdout


def test_check_output_forges_no_legacy_command(hostile_project):
    """An id or summary holding ``##[error ...]`` / ``##[set-output ...]`` forged an annotation
    or a step output wherever it stood in a line of ``faithgate check``'s output."""
    from faithgate.cli import cli

    rows = [
        {"id": eid, "source": "src", "summary": f"0.1 bad {eid} sentence."} for eid in LEGACY_IDS
    ]
    (hostile_project / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(cli, ["check", "--json", "r.json"])
    assert res.exit_code == 1, res.output
    assert parse_output(res.stdout) == [] and parse_output(res.stderr) == [], res.output
    assert "  i #\\#[error title=x;]forged by the legacy syntax: " in res.stdout
    # the Action's annotations: V2 commands, which the runner parses before the legacy form
    result = github.load_result(hostile_project / "r.json")
    parsed = parse_output("\n".join(github.annotations_for(result)) + "\n")
    assert [c.name for c in parsed] == ["error"] * (len(LEGACY_IDS) + 1)
    assert parsed[1].properties["title"] == f"faithgate: example {LEGACY_IDS[1]} failed"


def test_error_lines_are_one_escaped_line(hostile_project):
    from faithgate.cli import cli

    name = "missing\n::error::forged\x1b[2J.jsonl"
    res = CliRunner().invoke(cli, ["check", "--outputs", name])
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1
    assert_inert(res.stderr)
    assert "missing\\n::error::forged\\x1b[2J.jsonl" in res.stderr


def test_markdown_report_and_step_summary_keep_one_row_per_example(hostile_project):
    from faithgate.cli import cli

    res = CliRunner().invoke(cli, ["check", "--markdown", "r.md", "--json", "r.json"])
    assert res.exit_code == 1
    md = (hostile_project / "r.md").read_text()
    rows = [ln for ln in md.splitlines() if "(gate\\_fake 0.100)" in ln]
    assert len(rows) == len(HOSTILE_IDS)
    assert_inert(md)
    text = github.summary_markdown(None, None, "bad\n```\n::error::x\x1b[2J ````")
    assert text.count("\n") == 5  # title, blank, fence, one line of text, fence
    fence = text.splitlines()[2]
    assert fence == "`````" and text.splitlines()[4] == fence
    assert_inert(text)


def test_action_annotations_are_one_command_each_with_escaped_text(hostile_project):
    from faithgate.cli import cli

    CliRunner().invoke(cli, ["check", "--json", "r.json"])
    result = github.load_result(hostile_project / "r.json")
    commands = github.annotations_for(result, workspace=str(hostile_project))
    out = "\n".join(commands) + "\n"
    parsed = parse_output(out)
    assert len(parsed) == len(commands) == len(HOSTILE_IDS) + 1  # + the pass_rate rule
    assert all(c.name == "error" for c in parsed)
    for command, eid in zip(parsed, HOSTILE_IDS, strict=False):
        assert command.properties["title"] == f"faithgate: example {printable(eid)} failed"
        assert "\x1b" not in command.data and "\x85" not in command.data
    # the annotation points at the example's line even with U+2028 / NEL inside the file
    lines = {c.properties.get("title"): c.properties.get("line") for c in parsed}
    assert lines[f"faithgate: example {printable(HOSTILE_IDS[4])} failed"] == "5"


def test_score_prints_a_model_name_escaped():
    """``faithgate score`` printed the settings hash and the model names (a user's paths)
    raw: an ESC sequence reached the terminal and a line break split the line."""
    from faithgate.cli.score import render_text
    from faithgate.types import Score

    model = "sp\x1b[31mRED\n::error::x"
    score = Score("overlap", 0.5, f"overlap|{model}@98cc5b", "a")
    identity = {"role": "spacy", "model": model, "fingerprint": "98cc5b09e1e5"}
    text = render_text(
        {"overlap": score},
        {"overlap": [identity]},
        [],
        thresholds={"overlap": 0.4},
        threshold_source="c\n::error::.toml",
    )
    assert_inert(text)
    assert "(thresholds from c\\n::error::.toml)" in text
    # score wraps its lines at 100 columns
    assert "models spacy=sp\\x1b[31mRED\\n::error::x #98cc5b09e1e5" in " ".join(text.split())


def test_a_huge_example_id_is_clipped_in_lines_and_annotation_titles():
    """A 1 MB id was printed whole in every failing example's terminal line and annotation
    title: megabytes per failing example, and an annotation the runner may drop."""
    from faithgate.config import GateConfig
    from faithgate.gate.evaluate import evaluate
    from faithgate.report import render
    from faithgate.types import Example, Score

    eid = "x" * 1_000_000 + "\n::error::end"
    config = GateConfig.from_dict({"metrics": ["m"], "thresholds": {"m": 0.5}})
    scores = [{"m": Score("m", 0.1, "m:abc", eid)}]
    result = evaluate(config, [Example(eid, "src", "Wrong.")], scores, {"m": "m:abc"})
    text = render("terminal", result)
    assert max(len(line) for line in text.splitlines()) < 1000
    assert "  " + "x" * 119 + "\u2026: " in text
    assert_inert(text)
    [command, _] = github.annotations_for(result.to_dict())
    title = parse_output(command + "\n")[0].properties["title"]
    assert title == "faithgate: example " + "x" * 119 + "\u2026 failed"


def test_workflow_command_is_the_one_escaper():
    line = github.workflow_command("error", "a\nb\x1b[1m%", title="t:i,t\r\nle")
    [command] = parse_output(line)
    assert command.data == "a\nb\\x1b[1m%"
    assert command.properties["title"] == "t:i,t\\r\\nle"


def test_plugin_output_forges_no_command(pytester):
    pytester.syspathinsert(pytester.path)
    pytester.makeconftest("import gate_fakes  # noqa: F401 - registers the test metric\n")
    (pytester.path / "gate_fakes.py").write_text(Path(gate_fakes.__file__).read_text())
    rows = [{"id": eid, "source": "src", "summary": summary(0.1)} for eid in HOSTILE_IDS]
    (pytester.path / "outputs.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    (pytester.path / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
        f"[thresholds]\n{NAME} = 0.5\n"
    )
    pytester.makepyfile(
        test_inner=(
            "def test_fixture(faithgate):\n"
            "    faithgate.assert_faithful('src', '0.1 x\\n::error::forged\\x1b[2J.',"
            f" threshold=0.5, metric={NAME!r})\n"
        )
    )
    result = pytester.runpytest_subprocess("--faithgate", "-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert "a\\n::error::forged by a newline" in out
    assert parse_output(out) == [], out
    assert "\x1b" not in out


pytest_plugins = ["pytester"]


BOOM_CONFTEST = """
from faithgate.metrics.base import Metric, register


@register
class Boom(Metric):
    name = "boom"

    def score_batch(self, examples, ctx):
        raise RuntimeError("kaboom\\n::error::from-metric \\x1b[31m")
"""


def test_plugin_escapes_a_file_name_and_a_logged_metric_error(pytester):
    """The outputs file's name (the gate item's name) and a metric's exception text (logged
    by the scorer, shown by pytest's log capture) reach pytest's output escaped."""
    hostile = "o\x1b[31mut\n::error::fname.jsonl"
    row = {"id": "1", "source": "src", "summary": "A summary."}
    (pytester.path / hostile).write_text(json.dumps(row) + "\n", encoding="utf-8")
    (pytester.path / "faithgate.toml").write_text(
        f'metrics = ["boom"]\noutputs = {json.dumps(hostile)}\ncache_dir = ".fg"\n'
        "[thresholds]\nboom = 0.5\n"
    )
    pytester.makeconftest(BOOM_CONFTEST)
    pytester.makepyfile(test_inner="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("--faithgate", "-rA", "-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, failed=1)  # the gate item: boom cannot score
    assert "faithgate[o\\x1b[31mut\\n::error::fname.jsonl]" in out
    assert "kaboom\\n::error::from-metric \\x1b[31m" in out  # the scorer's warning, escaped
    assert parse_output(out) == [], out
    assert "\x1b" not in out


def test_plugin_escapes_a_configuration_file_name_in_the_gate_items_node_id(pytester):
    """The gate item's node id starts with the configuration file's path, which pytest prints
    as it is: a name with a line break and an escape sequence must reach it escaped."""
    hostile = "c\x1b[31mfg\n::error::forged.toml"
    row = {"id": "1", "source": "src", "summary": "A summary."}
    (pytester.path / "o.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    (pytester.path / hostile).write_text(
        'metrics = ["boom"]\noutputs = "o.jsonl"\ncache_dir = ".fg"\n[thresholds]\nboom = 0.5\n'
    )
    pytester.makeconftest(BOOM_CONFTEST)
    result = pytester.runpytest_subprocess(
        "--faithgate", "--faithgate-config", hostile, "-rA", "-v", "-p", "no:cacheprovider"
    )
    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(failed=1)
    assert "c\\x1b[31mfg\\n::error::forged.toml::faithgate[o.jsonl]" in out
    assert parse_output(out) == [], out
    assert "\x1b" not in out


def test_plugin_refuses_non_finite_or_non_numeric_limits_in_one_line(pytester):
    """A marker's or a call's threshold, margin or min_rate must be a finite number: ``-inf``
    would pass anything (as the command line and the configuration already refuse), and a
    marker's unknown metric or backend fails the test in one line, not a traceback; a metric's
    NaN is named as such."""
    pytester.syspathinsert(pytester.path)
    pytester.makeconftest("import gate_fakes  # noqa: F401 - registers the test metric\n")
    (pytester.path / "gate_fakes.py").write_text(Path(gate_fakes.__file__).read_text())
    src, bad = "src", summary(0.1)
    pytester.makepyfile(
        test_inner=f"""
import pytest

@pytest.mark.faithgate(metric={NAME!r}, threshold=float("-inf"))
def test_marker_minus_inf(faithgate):
    faithgate.assert_faithful({src!r}, {bad!r})

@pytest.mark.faithgate(metric={NAME!r}, threshold="abc")
def test_marker_text(faithgate):
    faithgate.assert_faithful({src!r}, {bad!r})

def test_call_nan(faithgate):
    faithgate.assert_faithful({src!r}, {bad!r}, threshold=float("nan"), metric={NAME!r})

def test_margin_minus_inf(faithgate):
    faithgate.assert_consistent({src!r}, {bad!r}, {summary(0.9)!r}, metric={NAME!r},
                                margin=float("-inf"))

@pytest.mark.faithgate(metric="nosuch", threshold=0.1)
def test_marker_unknown_metric(faithgate):
    faithgate.assert_faithful({src!r}, {bad!r})

@pytest.mark.faithgate(metric={NAME!r}, threshold=0.1, backend="nope")
def test_marker_unknown_backend(faithgate):
    faithgate.assert_faithful({src!r}, {bad!r})

def test_metric_gives_nan(faithgate):
    faithgate.assert_faithful({src!r}, "nan words.", threshold=0.5, metric={NAME!r})
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=7)
    result.stdout.fnmatch_lines(
        [
            "*_ test_marker_minus_inf _*",
            "faithgate: threshold must be a finite number, got -inf",
            "*_ test_marker_text _*",
            "faithgate: threshold must be a finite number, got 'abc'",
            "*_ test_call_nan _*",
            "faithgate: threshold must be a finite number, got nan",
            "*_ test_margin_minus_inf _*",
            "faithgate: margin must be a finite number, got -inf",
            "*_ test_marker_unknown_metric _*",
            "faithgate: unknown metric 'nosuch'; available: *",
            "*_ test_marker_unknown_backend _*",
            "faithgate: unknown backend 'nope'; *",
            "*_ test_metric_gives_nan _*",
            "*faithgate: gate_fake could not score the summary: metric returned NaN",
        ]
    )
    assert "Traceback" not in result.stdout.str()
