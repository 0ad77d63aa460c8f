"""What a newcomer reads from ``faithgate check``.

The verdict line names the failed rules; a first run without a baseline is explained (skipped
with a warning) rather than failed; ``--update-baseline`` refuses a failing run unless
``--force``; the terminal report names the worst inconsistent minimal pairs. All through
click's ``CliRunner`` on a project scored by the test metric of ``gate_fakes`` (the value is
written in the summary, so every expected number is known).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from gate_fakes import NAME, summary

from faithgate.cli import cli


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


PAIRS = [
    # pair p1: consistent (faithful 0.8 > edited 0.3)
    {"id": "f1", "source": "s", "summary": summary(0.8), "pair_id": "p1", "role": "reference"},
    {"id": "u1", "source": "s", "summary": summary(0.3), "pair_id": "p1", "role": "edited"},
    # pair p2: inconsistent by 0.1
    {"id": "f2", "source": "s", "summary": summary(0.7), "pair_id": "p2", "role": "reference"},
    {
        "id": "u2",
        "source": "s",
        "summary": summary(0.8),
        "pair_id": "p2",
        "role": "edited",
        "error_type": "Intrinsic Entity",
    },
    # pair p3: inconsistent by 0.3 (the worst: listed first)
    {"id": "f3", "source": "s", "summary": summary(0.6), "pair_id": "p3", "role": "reference"},
    {"id": "u3", "source": "s", "summary": summary(0.9), "pair_id": "p3", "role": "edited"},
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """Six outputs that all pass the threshold; a baseline configured but not yet written."""
    monkeypatch.chdir(tmp_path)
    rows = [
        {"id": f"e{i}", "source": "src", "summary": summary(v)}
        for i, v in enumerate([0.6, 0.7, 0.8, 0.9, 0.7, 0.8])
    ]
    write_rows(tmp_path / "outputs.jsonl", rows)
    write_rows(tmp_path / "pairs.jsonl", PAIRS)
    (tmp_path / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
        'baseline = "baseline.json"\n'
        f"[thresholds]\n{NAME} = 0.5\n"
    )
    (tmp_path / "pairs.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "pairs.jsonl"\ncache_dir = ".fg"\n'
        f"[thresholds]\n{NAME} = 0.5\n"
        "[rules]\npair_consistency = { min_rate = 0.9 }\n"
    )
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(cli, ["check", *args], catch_exceptions=False)


def test_first_run_without_baseline_passes_with_instructions(project):
    res = run()
    assert res.exit_code == 0, res.output
    first = res.stdout.splitlines()[0]
    assert first.startswith(
        "faithgate: PASS: 2 of 3 rules pass, 1 skipped (regression[gate_fake]); "
        "6/6 examples pass (100.0%)"
    )
    # ... and a warning on stderr: a mistyped baseline path reads exactly like a first run.
    assert res.stderr == (
        "faithgate: warning: no baseline yet at baseline.json; create it from a passing run "
        "with `faithgate check --update-baseline`; the regression rule is skipped\n"
    )
    assert "regression[gate_fake]" in res.output and "SKIP" in res.output
    assert "skipped rules (passed without being checked):" in res.output
    assert "no baseline yet at baseline.json" in res.output
    assert "faithgate check --update-baseline" in res.output


def test_require_baseline_makes_a_missing_baseline_fail(project):
    toml = project / "faithgate.toml"
    toml.write_text(
        toml.read_text().replace(
            "[thresholds]", "[rules]\nregression = { require_baseline = true }\n[thresholds]"
        )
    )
    res = run()
    assert res.exit_code == 1
    assert res.stdout.startswith("faithgate: FAIL: 1 of 3 rules failed (regression[gate_fake])")
    assert "warning" not in res.stderr  # the failed rule says it; no "skipped" warning


def test_headline_names_the_failed_rule_not_only_the_pass_count(project):
    # Every example passes its threshold; only pair consistency fails (1 of 3 pairs).
    res = run("--config", "pairs.toml")
    assert res.exit_code == 1
    first = res.output.splitlines()[0]
    assert first.startswith(
        "faithgate: FAIL: 1 of 3 rules failed (pair_consistency[gate_fake]); "
        "3/3 examples pass (100.0%)"
    ), first
    quiet = run("--config", "pairs.toml", "-q")
    assert quiet.output.strip() == first


def test_terminal_report_names_the_worst_inconsistent_pairs(project):
    res = run("--config", "pairs.toml")
    lines = res.output.splitlines()
    start = lines.index("inconsistent minimal pairs (2 of 3, worst first):")
    block = lines[start + 1 : start + 5]
    assert block[0] == "  p3: gate_fake 0.6000 faithful vs 0.9000 edited"
    assert block[1] == "      edit: '0.6' -> '0.9'"
    assert block[2] == "  p2 [Intrinsic Entity]: gate_fake 0.7000 faithful vs 0.8000 edited"
    assert "p1:" not in res.output  # a consistent pair is not listed


def test_terminal_report_caps_the_pair_list(project):
    rows = []
    for i in range(8):
        rows.append(
            {"id": f"f{i}", "source": "s", "summary": summary(0.5 + i / 100), "pair_id": f"q{i}"}
        )
        rows[-1]["role"] = "reference"
        rows.append({"id": f"u{i}", "source": "s", "summary": summary(0.9), "pair_id": f"q{i}"})
        rows[-1]["role"] = "edited"
    write_rows(project / "many.jsonl", rows)
    res = run("--config", "pairs.toml", "--outputs", "many.jsonl")
    assert "inconsistent minimal pairs (8 of 8, worst first):" in res.output
    assert "  ... and 3 more" in res.output
    # worst first: q0 (0.50 vs 0.90) leads
    assert res.output.index("  q0:") < res.output.index("  q4:")


def test_update_baseline_refuses_a_failing_run(project):
    res = run("--config", "pairs.toml", "--baseline", "baseline.json", "--update-baseline")
    assert res.exit_code == 1
    assert not (project / "baseline.json").exists()
    # On stderr (click's result.output holds both streams; stderr alone is checked too).
    assert "baseline NOT updated: the gate failed" in res.stderr
    assert "pass --force to record this failing run" in res.stderr


def test_update_baseline_force_writes_a_failing_run_and_says_so(project):
    res = run(
        "--config", "pairs.toml", "--baseline", "baseline.json", "--update-baseline", "--force"
    )
    assert res.exit_code == 1  # the gate still failed
    assert (project / "baseline.json").is_file()
    assert "baseline updated: baseline.json (forced: this run FAILED the gate" in res.output


def test_update_baseline_on_a_passing_run_then_regression_is_checked(project):
    res = run("--update-baseline")
    assert res.exit_code == 0
    assert "baseline updated: baseline.json" in res.output
    again = run()
    assert again.exit_code == 0
    assert again.output.startswith("faithgate: PASS: 3 of 3 rules pass;")
    # (the table cuts details to the terminal width: check the start of the message)
    assert "mean gate_fake change +0.0000" in again.output


def test_force_without_update_baseline_is_a_usage_error(project):
    res = CliRunner().invoke(cli, ["check", "--force"])
    assert res.exit_code == 2
    assert "--force only applies to --update-baseline" in res.output


def test_baseline_path_that_is_a_directory_is_named(project):
    (project / "adir").mkdir()
    res = CliRunner().invoke(cli, ["check", "--baseline", "adir"])
    assert res.exit_code == 2
    assert "is a directory" in res.output


# -- points 5 and 10: `faithgate score` reads well -------------------------------------------

SCORE_SOURCE = "The cat sat on the mat. A dog barked loudly at the postman."
SCORE_SUMMARY = "The cat sat on the mat. The dog barked loudly. It sang."
FAST = ["--metric", "overlap", "--metric", "sentsim", "--set", "sentsim.sim=token_f1"]


@pytest.fixture
def score_files(tmp_path, monkeypatch):
    from fake_encoder import regex_split

    from faithgate import text as textmod

    monkeypatch.setattr(textmod, "split_sentences", regex_split)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "article.txt").write_text(SCORE_SOURCE, encoding="utf-8")
    return tmp_path


def score(*args: str):
    return CliRunner().invoke(
        cli, ["score", "--source", "article.txt", "--summary", SCORE_SUMMARY, *FAST, *args]
    )


def test_score_shows_direction_scale_and_sentence_quantity(score_files):
    res = score()
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.startswith("every metric: higher = more faithful\n")
    flat = " ".join(out.split())  # score wraps its lines at 100 columns
    assert "rouge2 precision against the source, 0..1" in flat
    assert "precision of the best source-sentence similarity (token_f1), at most 1" in flat
    # per-sentence columns are labelled with what they hold
    assert "  overlap: the same rouge2 precision for the sentence alone (0..1)" in out
    assert "  sentsim: similarity to the most similar source sentence" in out


def test_score_explains_overlap_categories(score_files):
    out = " ".join(score().stdout.split())  # score wraps its lines at 100 columns
    assert "share of summary n-grams not in the source, n=1-4" in out
    assert "with a word not in the source" in out
    assert "% none" not in out  # the bare FEQA category name is not shown


def test_score_verdict_from_threshold_flag(score_files):
    res = score("--threshold", "overlap=0.2", "--threshold", "sentsim=0.99")
    assert res.exit_code == 0  # a spot check: the verdict is shown, the gate is `check`
    verdict = [line for line in res.stdout.splitlines() if line.startswith("verdict:")]
    assert len(verdict) == 1
    assert verdict[0].startswith("verdict: FAIL: sentsim ")
    assert "< 0.9900 (thresholds from --threshold)" in verdict[0]
    passing = score("--threshold", "0.01").stdout
    assert "verdict: PASS: overlap, sentsim at or above threshold" in passing
    bad = score("--threshold", "bertscore=0.5")
    assert bad.exit_code == 2 and "not scored: bertscore" in bad.stderr


def test_score_verdict_from_the_project_configuration(score_files):
    (score_files / "faithgate.toml").write_text(
        'metrics = ["overlap"]\noutputs = "o.jsonl"\n[thresholds]\noverlap = 0.99\n'
    )
    out = score().stdout
    assert "verdict: FAIL: overlap" in out and "(thresholds from faithgate.toml)" in out
    (score_files / "faithgate.toml").unlink()
    assert "verdict: none (no threshold for these metrics" in score().stdout


def test_score_judges_a_configured_threshold_with_the_configured_settings(score_files):
    # A threshold was set for the project's metric settings and backend: the spot check must
    # score with them (as `faithgate check` does), or its PASS/FAIL is about another metric.
    (score_files / "faithgate.toml").write_text(
        'metrics = ["overlap"]\nbackend = "torch"\n[thresholds]\noverlap = 0.5\n'
        '[metric_settings.overlap]\ncomponent = "rouge1"\n'
        "[metric_settings.bertscore]\nidf = true\n"  # a metric not run: not applied
    )

    def overlap_of(*args: str) -> dict:
        res = score("--format", "json", *args)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["metrics"]["overlap"]

    configured = overlap_of()
    assert configured["details"]["component"] == "rouge1"
    assert configured["threshold"] == 0.5
    # the command line's --set wins over the configuration's setting
    assert overlap_of("--set", "overlap.component=rouge2")["details"]["component"] == "rouge2"
    # --threshold instead of the configuration's: nothing of the configuration applies
    assert overlap_of("--threshold", "overlap=0.5")["details"]["component"] == "rouge2"


def test_score_loads_models_as_the_configuration_says(score_files, monkeypatch):
    import faithgate.scoring.scorer

    (score_files / "faithgate.toml").write_text(
        'metrics = ["overlap"]\nbackend = "torch"\n[thresholds]\noverlap = 0.5\n'
        '[models]\nembedder = "my/encoder"\n[model_options.embedder]\nmax_length = 64\n'
    )
    built = []
    original = faithgate.scoring.scorer.Scorer.__init__

    def recording(self, metrics, **kwargs):
        built.append(kwargs)
        original(self, metrics, **kwargs)

    monkeypatch.setattr(faithgate.scoring.scorer.Scorer, "__init__", recording)
    assert score().exit_code == 0
    assert built[-1]["backend"] == "torch"
    assert built[-1]["models"] == {"embedder": "my/encoder"}
    assert built[-1]["model_options"] == {"embedder": {"max_length": 64}}
    assert score("--backend", "onnx").exit_code == 0
    assert built[-1]["backend"] == "onnx" and built[-1]["models"] == {"embedder": "my/encoder"}
    # A --model for a role the selected metrics do not use is a usage error, not ignored.
    refused = score("--model", "embedder=other")
    assert refused.exit_code == 2 and "role 'embedder'" in refused.output


def test_score_json_carries_scale_threshold_and_verdict(score_files):
    res = score("--format", "json", "--threshold", "overlap=0.2")
    data = json.loads(res.stdout)
    overlap = data["metrics"]["overlap"]
    assert overlap["threshold"] == 0.2 and overlap["passed"] is True
    assert overlap["scale"].startswith("rouge2 precision")
    assert data["metrics"]["sentsim"]["passed"] is None


def test_score_hints_why_a_short_sentence_is_least_supported(score_files):
    out = score().stdout
    lines = out.splitlines()
    flagged = [line for line in lines if "<- least supported" in line]
    assert len(flagged) == 1 and "It sang." in flagged[0]
    start = lines.index("why sentence 3 may rank last:")
    hints = "\n".join(lines[start + 1 :])
    assert "a short sentence (2 words)" in hints
    assert "refers back with 'it'" in hints


def test_score_does_not_mark_a_tie_as_least_supported(score_files):
    res = CliRunner().invoke(
        cli,
        ["score", "--source", "article.txt", "--summary", "The cat sat. The cat sat."]
        + ["--metric", "overlap", "--set", "overlap.component=rouge1"],
    )
    assert res.exit_code == 0, res.output
    assert "*" not in res.stdout.split("per summary sentence")[1].split("\n", 1)[1]
    assert "<- least supported" not in res.stdout


@pytest.mark.parametrize("option", ["--source", "--summary"])
def test_score_says_a_directory_is_a_directory(score_files, option):
    (score_files / "adir").mkdir()
    args = {"--source": "article.txt", "--summary": "x"}
    args[option] = "adir" if option == "--source" else "@adir"
    res = CliRunner().invoke(
        cli, ["score", "--source", args["--source"], "--summary", args["--summary"]]
    )
    assert res.exit_code == 2
    assert res.stderr.strip().endswith(
        f"the {option[2:]} (adir) is a directory, not a regular file or a pipe; give a text file "
        "(or - for stdin)"
    )
    assert "does not exist" not in res.stderr


def test_harim_plus_sentence_column_is_labelled_as_a_different_quantity():
    from faithgate.metrics.base import get_metric

    scale, sentence = get_metric("harim_plus").how_to_read()
    assert "7 HaRiM" in scale
    assert sentence.startswith("mean log p(token | source)") and "not the headline" in sentence
    scale, sentence = get_metric("bertscore", component="f1").how_to_read()
    assert scale.startswith("BERTScore f1")


def test_update_baseline_replaces_one_made_with_other_settings(project):
    """The regression rule says "update it with --update-baseline" when the metric's settings
    changed; that update must not then be refused because of the same mismatch."""
    assert run("--update-baseline").exit_code == 0
    changed = run("--config", "faithgate.toml")  # same settings: comparable
    assert changed.exit_code == 0
    toml = project / "faithgate.toml"
    toml.write_text(toml.read_text() + f"[metric_settings.{NAME}]\noffset = 0.0001\n")
    stale = run()
    assert stale.exit_code == 1 and "made with other settings" in stale.output
    res = run("--update-baseline")
    assert res.exit_code == 0, res.output
    assert "this run replaces it" in res.output
    assert "baseline updated: baseline.json" in res.output
    assert run().exit_code == 0


def test_markdown_and_html_reports_show_a_skipped_rule(project):
    res = run("--markdown", "r.md", "--html", "r.html")
    assert res.exit_code == 0
    md = (project / "r.md").read_text()
    assert "| `regression[gate_fake]` | - | 0.0100 | ⚠️ skipped | skipped: no baseline yet" in md
    assert "<td>skipped</td>" in (project / "r.html").read_text()
