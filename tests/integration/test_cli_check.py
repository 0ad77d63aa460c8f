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
    # a configured baseline that is missing (a first run) skips the rule with instructions,
    # and says so
    toml = project / "faithgate.toml"
    toml.write_text(
        toml.read_text().replace("[thresholds]", 'baseline = "missing.json"\n[thresholds]')
    )
    res = run()
    assert res.exit_code == 0 and "--update-baseline" in res.output
    assert "1 skipped (regression[gate_fake])" in res.stdout.splitlines()[0]
    assert "warning: no baseline yet at missing.json" in res.stderr


def test_an_explicit_baseline_that_does_not_exist_is_an_input_error(project):
    """A --baseline typo skipped the regression rule and the per-example thresholds with a
    warning and passed (review s19, finding 3): a path named on the command line is far more
    likely a typo than a first run."""
    assert run("--baseline", "base.json", "--update-baseline").exit_code == 0
    res = CliRunner().invoke(cli, ["check", "--baseline", "base.jsn"])
    assert res.exit_code == 2, res.output
    assert res.stderr == (
        "faithgate: no baseline at base.jsn (given with --baseline); check the path, or run "
        "with --update-baseline to create it\n"
    )
    assert res.stdout == ""  # nothing ran: no verdict, no table
    # --update-baseline creates it: a first run named on the command line
    res = run("--baseline", "new.json", "--update-baseline")
    assert res.exit_code == 0 and (project / "new.json").is_file()


@pytest.mark.parametrize("failing", ["r.md", "base.json"])
def test_update_baseline_and_reports_are_written_as_one_set(project, monkeypatch, failing):
    """--update-baseline replaced the baseline before the reports were written: a report that
    could not be written (another user's file in a sticky directory) exited 2 with "no report
    was written", and the baseline silently held this run. Now neither changes."""
    import errno

    from faithgate.safety import atomic

    assert run("--baseline", "base.json", "--update-baseline", "--markdown", "r.md").exit_code == 0
    before = {name: (project / name).read_bytes() for name in ("base.json", "r.md")}
    rows = [{"id": f"e{i}", "source": "src", "summary": summary(0.9)} for i in range(3)]
    write_rows(project / "outputs.jsonl", rows)  # a new run, which passes
    real_replace = atomic.os.replace

    def replace(src, dst):
        if str(dst).endswith(failing) and str(src).endswith(".tmp"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    args = ["check", "--baseline", "base.json", "--update-baseline", "--markdown", "r.md"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert res.stdout.startswith("faithgate: PASS")  # the verdict beside the exit 2
    outcome = {
        "r.md": "no report was written and the baseline is left unchanged",
        "base.json": "it is left unchanged and no report was written",
    }[failing]
    assert res.stderr.splitlines()[-1].endswith(f"Operation not permitted; {outcome}")
    assert "baseline updated" not in res.output
    assert {name: (project / name).read_bytes() for name in before} == before
    assert sorted(p.name for p in project.iterdir() if p.name.startswith(".")) == [".fg"]


def test_a_missing_configured_baseline_says_the_per_example_thresholds_are_off(project):
    toml = project / "faithgate.toml"
    toml.write_text(
        toml.read_text().replace("[thresholds]", 'baseline = "base.json"\n[thresholds]')
        + f"[rules]\nregression = {{ per_example_drop = {{ {NAME} = 0.05 }} }}\n"
    )
    res = run()
    assert res.exit_code == 0, res.output
    assert res.stderr == (
        "faithgate: warning: no baseline yet at base.json; create it from a passing run with "
        "`faithgate check --update-baseline`; the regression rule is skipped and the "
        "per-example thresholds (rules.regression.per_example_drop) are off\n"
    )
    assert "the per-example thresholds (per_example_drop) are off too" in res.stdout


def test_update_baseline_with_a_new_metric_still_fails_a_regressed_run(project):
    """Adding a metric and running --update-baseline, as the failing run advised, dropped the
    whole baseline: gate_fake's regression was skipped, the run passed and became the
    reference. Only the new metric's comparison is skipped now (as in the Action, which runs
    this command, and pytest --faithgate-update-baseline: the same Gate)."""
    assert run("--baseline", "base.json", "--update-baseline").exit_code == 0
    recorded = (project / "base.json").read_bytes()
    rows = [{"id": f"e{i}", "source": "src", "summary": summary(0.55)} for i in range(3)]
    write_rows(project / "bad.jsonl", rows)  # still above the threshold, but a real drop
    assert run("-q", "--outputs", "bad.jsonl", "--baseline", "base.json").exit_code == 1
    toml = project / "faithgate.toml"
    toml.write_text(toml.read_text().replace(f'["{NAME}"]', f'["{NAME}", "repetition"]'))
    res = run("--outputs", "bad.jsonl", "--baseline", "base.json", "--update-baseline")
    assert res.exit_code == 1, res.output
    assert res.stdout.startswith(
        f"faithgate: FAIL: 1 of 4 rules failed (regression[{NAME}]); 3/3 examples pass"
    )
    assert (
        "regression[repetition]: the baseline at base.json holds no repetition scores made with "
        "these settings (this run replaces it): nothing to compare yet"
    ) in res.stdout
    assert "baseline NOT updated: the gate failed" in res.stderr
    assert (project / "base.json").read_bytes() == recorded
    # The outputs that did not regress replace it, with the new metric's scores.
    res = run("--baseline", "base.json", "--update-baseline")
    assert res.exit_code == 0 and "baseline updated: base.json" in res.output
    assert json.loads((project / "base.json").read_text())["metrics"] == [NAME, "repetition"]
    assert run("-q", "--outputs", "bad.jsonl", "--baseline", "base.json").exit_code == 1


@pytest.mark.parametrize("regression", ["true", "{ require_baseline = true }"])
def test_regression_without_a_baseline_path_exits_2_before_scoring(project, regression):
    """It failed the gate after a full scoring run ("no baseline given", exit 1), naming no
    key to set."""
    from gate_fakes import FakeMetric

    toml = project / "faithgate.toml"
    toml.write_text(toml.read_text() + f"[rules]\nregression = {regression}\n")
    FakeMetric.calls.clear()
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 2, res.output
    assert res.stderr == (
        "faithgate: rules.regression needs a baseline to compare with: set 'baseline' (the path "
        "of a previous result JSON) in the configuration, or pass --baseline\n"
    )
    assert res.stdout == "" and FakeMetric.calls == []
    # given with --baseline it runs (a first run: --update-baseline creates the file)
    assert run("--baseline", "base.json", "--update-baseline").exit_code == 0
    assert run("--baseline", "base.json").exit_code == 0


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
        (["--threshold", f"{NAME}x=0.5"], f"did you mean {NAME!r}?"),
        # "-" was a file named "-", not standard output (which holds the verdict table)
        (["--json", "-"], "--json: reports are written to files, not to standard output"),
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
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\n[rules]\nmin_mean = {{ overlap = 0.5 }}\n'
    )
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 2
    assert "rules.min_mean names metric 'overlap', which is not selected" in res.output
    # A name no metric has is a typo, said as for a threshold's key (not "not selected").
    (project / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\n[rules]\nmin_mean = {{ overlpa = 0.5 }}\n'
    )
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 2
    assert res.output == (
        "faithgate: rules.min_mean: no metric is named 'overlpa'; did you mean 'overlap'?\n"
    )


def test_outputs_and_a_summarizer_in_the_configuration_exit_2(project):
    """Both in faithgate.toml gated the outputs file (exit 0) and never ran the summarizer, a
    combination the flags refuse."""
    toml = project / "faithgate.toml"
    toml.write_text(
        toml.read_text().replace(
            'outputs = "outputs.jsonl"\n',
            'outputs = "outputs.jsonl"\nsummarizer = "nosuchmod:fn"\ndata = "nosuch.jsonl"\n',
        )
    )
    res = CliRunner().invoke(cli, ["check", "-q"])
    assert res.exit_code == 2, res.output
    [line] = res.output.splitlines()
    assert "both 'outputs' and 'summarizer' + 'data' are set" in line


def test_an_integer_beyond_float_range_in_the_configuration_exits_2(project):
    """OverflowError: "internal error", exit 1, the code of a failed gate."""
    toml = project / "faithgate.toml"
    toml.write_text(toml.read_text().replace(f"{NAME} = 0.5", f"{NAME} = 1{'0' * 400}"))
    res = CliRunner().invoke(cli, ["check", "-q"])
    assert res.exit_code == 2, res.output
    assert f"thresholds.{NAME}: expected a finite number" in res.output


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


# ------------------------------------------------------------ review s19: baselines by source

ARTICLES = {
    "bridge": "the new bridge over the river opened on monday after nine years",
    "zoo": "the city zoo welcomed two panda cubs to a record crowd",
    "election": "jonas keller was elected mayor of aarburg with most votes",
    "new": "a storm closed every school in the valley for two days",
}


def article_rows(*items):
    """Rows without ids (they default to line numbers) of (article, value)."""
    return [
        {"source": f"The {a} article.", "summary": summary(v, words=ARTICLES[a])} for a, v in items
    ]


def test_an_inserted_row_does_not_turn_off_per_example_thresholds(project):
    """Review s19, finding 1: a new article at the top shifted every line-number id; each output
    was compared with another article's baseline, called "rewritten (not compared)", and the
    gate passed the dropped election summary (exit 0)."""
    toml = project / "faithgate.toml"
    toml.write_text(
        toml.read_text().replace("[thresholds]", 'baseline = "base.json"\n[thresholds]')
        + f"[rules]\nregression = {{ per_example_drop = {{ {NAME} = 0.05 }} }}\n"
    )
    base = [("bridge", 0.8), ("zoo", 0.8), ("election", 0.8)]
    write_rows(project / "v1.jsonl", article_rows(*base))
    assert run("--outputs", "v1.jsonl", "--update-baseline").exit_code == 0
    write_rows(project / "v2.jsonl", article_rows(("new", 0.9), *base[:2], ("election", 0.6)))
    res = run("--outputs", "v2.jsonl", "--json", "r.json")
    assert res.exit_code == 1, res.output
    assert "3/4 examples pass" in res.stdout.splitlines()[0]
    assert f"4: {NAME} 0.6000 < its own threshold 0.7500 (baseline 0.8000" in res.stdout
    (reg,) = [r for r in json.loads((project / "r.json").read_text())["rules"] if r["metric"]]
    assert "3 outputs matched to the baseline by source instead of id" in reg["message"]
    assert "per example: 1 of 3 edited or unchanged outputs below" in reg["message"]
    assert res.stderr == (
        "faithgate: warning: baseline base.json: 3 output ids name another source in the "
        "baseline (not compared with that entry); 3 outputs matched to the baseline by source "
        "instead of id\n"
    )
    # A baseline written before sources were recorded is matched by id, with a warning.
    data = json.loads((project / "base.json").read_text())
    for example in data["examples"]:
        del example["source_digest"]
    (project / "base.json").write_text(json.dumps(data))
    res = run("--outputs", "v1.jsonl")
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith(
        "faithgate: warning: the baseline at base.json predates source checks: outputs are "
        "matched to it by id only"
    )


# ------------------------------------------------------------ review s19: threshold typos


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            f"[thresholds]\n{NAME} = 0.5\ngate_fak = 0.9\n",
            "faithgate: faithgate.toml: thresholds.gate_fak: no metric is named 'gate_fak'; "
            f"did you mean '{NAME}'?\n",
        ),
        (
            f"[thresholds]\n{NAME} = 0.5\noverlapp = 0.9\n",
            "faithgate: faithgate.toml: thresholds.overlapp: no metric is named 'overlapp'; "
            "did you mean 'overlap'?\n",
        ),
        (
            f"[thresholds]\n{NAME} = 0.5\n[metric_settings.overlapp]\nn = 2\n",
            "faithgate: faithgate.toml: metric_settings.overlapp: no metric is named "
            "'overlapp'; did you mean 'overlap'?\n",
        ),
    ],
)
def test_a_threshold_for_no_registered_metric_is_an_error(project, table, message):
    """Review s19, finding 2: a misspelled threshold was a warning, and the metric meant ran
    with no threshold (exit 0)."""
    (project / "faithgate.toml").write_text(
        f'metrics = ["{NAME}", "overlap"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n' + table
    )
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 2, res.output
    assert res.stderr == message and res.stdout == ""


# ------------------------------------------------------------ review s19: empty summaries


@pytest.mark.parametrize("empty", ["", "   ", "\u200b"])
def test_an_empty_summary_fails_its_example_and_the_gate_reports_the_rest(project, empty):
    """Review s19, finding 6: an empty summary stopped the whole gate with exit 2 and no
    report; it is a bad output, so it fails its own example."""
    rows = [
        {"id": "a", "source": "src", "summary": summary(0.9)},
        {"id": "b", "source": "src", "summary": empty},
        {"id": "c", "source": "src", "summary": summary(0.4)},
    ]
    write_rows(project / "o.jsonl", rows)
    res = run("--outputs", "o.jsonl", "--json", "r.json")
    assert res.exit_code == 1, res.output
    assert "1/3 examples pass" in res.stdout.splitlines()[0]
    assert "b: empty summary: the output has no text to score" in res.stdout
    assert f"c: {NAME} 0.4000 < threshold 0.5" in res.stdout
    data = json.loads((project / "r.json").read_text())
    b = data["examples"][1]
    assert not b["passed"] and b["scores"][NAME]["error"] == "empty summary"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "a", "source": " ", "summary": "0.9 x."}, "o.jsonl:1: field 'source' is empty"),
        ({"id": "a", "source": "s"}, "o.jsonl:1: missing required field 'summary'"),
        ({"id": "a", "source": "s", "summary": None}, "o.jsonl:1: field 'summary' must be text"),
    ],
)
def test_an_empty_source_or_a_missing_summary_stays_an_input_error(project, row, message):
    write_rows(project / "o.jsonl", [row])
    res = CliRunner().invoke(cli, ["check", "--outputs", "o.jsonl"])
    assert res.exit_code == 2 and message in res.stderr, res.output


def test_a_summarizer_returning_an_empty_summary_fails_that_example(project):
    (project / "empty_summ.py").write_text(
        "def f(source):\n    return '' if 'empty' in source else '0.9 fine words.'\n"
    )
    write_rows(
        project / "src.jsonl",
        [{"id": "x", "source": "a source"}, {"id": "y", "source": "an empty one"}],
    )
    res = run("--summarizer", "empty_summ:f", "--data", "src.jsonl")
    assert res.exit_code == 1, res.output
    assert "1/2 examples pass" in res.stdout.splitlines()[0]
    assert "y: empty summary" in res.stdout


def test_a_configured_baseline_that_cannot_be_looked_up_fails_rather_than_counting_as_missing(
    project,
):
    """Only "no such file" is a missing baseline (a warning, the regression rule skipped). Any
    other failure to look the file up (here a name too long for the file system; on a runner,
    a folder it may not search) was taken for one too: the regression rule silently off."""
    config = project / "faithgate.toml"
    long_dir = "b" * 300  # ENAMETOOLONG: not FileNotFoundError
    config.write_text(f'baseline = "{long_dir}/baseline.json"\n' + config.read_text())
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"faithgate: cannot read baseline {long_dir}/baseline.json: ")
    assert "name too long" in res.output.lower() and res.output.count("\n") == 1
    config.write_text(config.read_text().replace(long_dir, "absent"))
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 0 and "no baseline yet at absent/baseline.json" in res.output
