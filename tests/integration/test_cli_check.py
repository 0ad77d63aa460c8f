"""`faithgate check`: exit codes 0 (pass) / 1 (gate failed) / 2 (usage or input error)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from gate_fakes import NAME, summary

from faithgate.cli import cli, main


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project dir with outputs (values 0.6, 0.7, 0.8) and a faithgate.toml."""
    monkeypatch.chdir(tmp_path)
    rows = [
        {"id": f"e{i}", "source": "src", "summary": summary(v)}
        for i, v in enumerate([0.6, 0.7, 0.8])
    ]
    write_rows(tmp_path / "outputs.jsonl", rows)
    (tmp_path / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
        f"[thresholds]\n{NAME} = 0.5\n"
    )
    return tmp_path


def run(*args):
    return CliRunner().invoke(cli, ["check", *args], catch_exceptions=False)


def test_pass_exits_0_and_prints_the_table(project):
    res = run()
    assert res.exit_code == 0, res.output
    assert res.output.startswith("faithgate: PASS: 2 of 2 rules pass; 3/3 examples pass")
    assert "pass_rate" in res.output


def test_threshold_flag_fails_the_gate_exit_1_with_reports(project):
    res = run(
        "--threshold",
        "0.75",
        "--markdown",
        "r/out.md",
        "--json",
        "r/out.json",
        "--junit",
        "r/out.xml",
        "--html",
        "r/out.html",
    )
    assert res.exit_code == 1, res.output
    assert "FAIL" in res.output and "e0: gate_fake 0.6000 < threshold 0.75" in res.output
    md = (project / "r" / "out.md").read_text()
    assert md.startswith("## ❌ faithgate: FAIL")
    data = json.loads((project / "r" / "out.json").read_text())
    assert data["pass_rate"] == pytest.approx(1 / 3)
    assert (project / "r" / "out.xml").is_file() and (project / "r" / "out.html").is_file()


def test_named_threshold_and_min_pass_rate(project):
    assert run("--threshold", f"{NAME}=0.75", "--min-pass-rate", "0.33").exit_code == 0
    assert run("--threshold", f"{NAME}=0.75", "--min-pass-rate", "0.34").exit_code == 1


def test_baseline_round_trip_via_json_and_update(project):
    assert run("--baseline", "base.json", "--update-baseline").exit_code == 0
    assert (project / "base.json").is_file()
    # same outputs against the baseline: no regression
    res = run("--baseline", "base.json")
    assert res.exit_code == 0 and "regression[gate_fake]" in res.output
    # a missing baseline (a first run) skips the rule with instructions, and says so
    res = run("--baseline", "missing.json")
    assert res.exit_code == 0 and "--update-baseline" in res.output
    assert "1 skipped (regression[gate_fake])" in res.stdout.splitlines()[0]
    assert "warning: no baseline yet at missing.json" in res.stderr


def test_summarizer_and_data(project):
    (project / "summ.py").write_text("def f(source):\n    return '0.9 ' + source + '.'\n")
    write_rows(project / "src.jsonl", [{"id": "a", "source": "alpha"}])
    res = run("--summarizer", "summ:f", "--data", "src.jsonl")
    assert res.exit_code == 0, res.output
    assert "1/1 examples pass" in res.output


def test_a_summarizer_raising_keyboard_interrupt_exits_130_through_main(project, capsys):
    """click turns a KeyboardInterrupt from user code into Abort: it exited 1 "aborted"."""
    # its own module name: an earlier test's "summ" stays imported in this process
    (project / "interrupting.py").write_text("def f(source):\n    raise KeyboardInterrupt\n")
    write_rows(project / "src.jsonl", [{"id": "a", "source": "alpha"}])
    try:
        rc = main(["check", "--summarizer", "interrupting:f", "--data", "src.jsonl"])
    except SystemExit as exc:
        rc = exc.code
    assert rc == 130
    assert capsys.readouterr().err.strip() == "faithgate: interrupted"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--outputs", "nope.jsonl"], "nope.jsonl: no such file"),
        (["--metric", "no_such_metric"], "unknown metric 'no_such_metric'"),
        (["--threshold", "high"], "--threshold 'high'"),
        (["--threshold", "other=0.5"], "not selected: other"),
        (["--data", "x.jsonl"], "--data needs --summarizer"),
        (["--outputs", "outputs.jsonl", "--summarizer", "a:b"], "either --outputs or"),
        (["--summarizer", "nomod_zz:f", "--data", "outputs.jsonl"], "cannot import 'nomod_zz'"),
        (["--config", "missing.toml"], "configuration file not found"),
        (["--min-pass-rate", "3"], "--min-pass-rate"),
        (["--threshold", "-inf"], "--threshold '-inf': expected a finite number"),
        (["--threshold", f"{NAME}=nan"], "expected a finite number"),
        # a second value silently won over the first (the last, or the blanket one)
        (["--threshold", f"{NAME}=0.99", "--threshold", f"{NAME}=0.1"], "given twice (0.99, 0.1)"),
        (["--threshold", "0.99", "--threshold", "0.1"], "given twice (0.99, 0.1)"),
        (["--threshold", "0.99", "--threshold", f"{NAME}=0.1"], "give one form"),
    ],
)
def test_usage_and_input_errors_exit_2_with_one_line(project, args, message):
    res = CliRunner().invoke(cli, ["check", *args])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output


def test_bad_config_key_exit_2_through_main(project, capsys):
    (project / "faithgate.toml").write_text('metrics = ["x"]\n[rules]\nmin_passrate = 1\n')
    try:
        rc = main(["check"])
    except SystemExit as exc:  # main() may exit or return the code
        rc = exc.code
    assert rc == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("faithgate: ") and "'min_passrate'" in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_main_returns_1_for_a_failing_gate(project, capsys):
    rc = None
    try:
        rc = main(["check", "--threshold", "0.95", "-q"])
    except SystemExit as exc:  # click may exit instead of returning
        rc = exc.code
    assert rc == 1
    # -q prints the verdict line alone, and it names the failed rule
    assert (
        capsys.readouterr()
        .out.strip()
        .startswith("faithgate: FAIL: 1 of 2 rules failed (pass_rate)")
    )


def test_unscorable_output_fails(project):
    write_rows(project / "o.jsonl", [{"id": "x", "source": "s", "summary": "UNSCORABLE 0.9 a."}])
    # min_pass_rate 0 would isolate the scorable rule, but thresholds under it judge nothing,
    # so such a gate is refused (test_gate); the scorable rule fails on its own line here.
    res = run("--outputs", "o.jsonl")
    assert res.exit_code == 1
    assert "no example could be scored" in res.output
    assert "2 of 2 rules failed (scorable, pass_rate)" in res.stdout.splitlines()[0]


def test_rule_naming_an_unselected_metric_fails_before_scoring(project):
    (project / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\n[rules]\nmin_mean = {{ other = 0.5 }}\n'
    )
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 2
    assert "rules.min_mean names metric 'other', which is not selected" in res.output


def test_threshold_calibrated_under_other_settings_is_flagged(project):
    """A threshold written by ``faithgate calibrate`` records its settings hash; used under
    another (other model, backend, formula version) it is applied but flagged on stderr."""
    toml = project / "faithgate.toml"
    toml.write_text(
        toml.read_text()
        + f'[calibration.{NAME}]\nthreshold = 0.5\nsettings_hash = "{NAME}|000000000000"\n'
    )
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 0, res.output
    assert f"warning: the {NAME} threshold 0.5 was calibrated under settings" in res.stderr
    # Under the same settings (the hash this run computes) nothing is said.
    from faithgate.config import load_config
    from faithgate.gate import Gate

    current = Gate(load_config(str(toml))).scorer.settings_hashes()[NAME]
    toml.write_text(toml.read_text().replace(f"{NAME}|000000000000", current))
    assert "calibrated under" not in CliRunner().invoke(cli, ["check"]).stderr


@pytest.mark.parametrize(
    "args",
    [
        ["score", "--source", "-", "--summary", "x", "--threshold", "-inf"],
        ["export", "embedder", "--max-diff", "nan"],
        ["export", "embedder", "--max-nats", "inf"],
        ["export", "embedder", "--min-agreement", "nan"],
        ["export", "embedder", "--max-consistency-change", "-inf"],
        ["train", "--lr", "nan"],
        ["train", "--labelled-dev-fraction", "nan"],
        ["github", "report", "--result", "r.json", "--max-annotations", "-1"],
    ],
)
def test_non_finite_numbers_are_refused_by_every_command(project, args):
    """A NaN bound compares false with everything: ``export --max-diff nan`` let every
    quantized form through the parity gate, ``score --threshold -inf`` passed anything."""
    res = CliRunner().invoke(cli, args, input="source text")
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output


@pytest.mark.parametrize(
    "args",
    [
        [
            "bench",
            "--data",
            "lab.jsonl",
            "--metric",
            NAME,
            "--no-cache",
            "--output",
            "lab.jsonl/r.json",
        ],
        ["bench", "--data", "lab.jsonl", "--metric", NAME, "--no-cache", "--plots", "lab.jsonl"],
        ["perturb", "--input", "lab.jsonl", "--output", "lab.jsonl/p.jsonl"],
    ],
)
def test_an_output_path_that_cannot_be_written_is_an_input_error(project, args):
    """A file in the way of an output (or of its directory) was an internal error (exit 1):
    it is the user's path, so exit 2 naming it, and the file in the way is left alone."""
    rows = [
        {"id": "a", "source": "The cat sat on the mat.", "summary": summary(0.9), "label": 1},
        {"id": "b", "source": "The cat sat on the mat.", "summary": summary(0.1), "label": 0},
    ]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (project / "lab.jsonl").write_text(text)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    [line] = res.stderr.strip().splitlines()[-1:]
    assert "lab.jsonl" in line and "internal error" not in line, line
    assert "cannot write" in line or "is a file, not a directory" in line, line
    assert (project / "lab.jsonl").read_text() == text
