"""What a new user reads from the CLI: readable usage, short help with an example, whole rule
details within 100 columns, a verdict as the last line of `check`, no "-0.0000", a hint of a
starting threshold, and no transformers notice in the output. In-process (CliRunner)."""

from __future__ import annotations

import json
import logging

import pytest
from click.testing import CliRunner
from gate_fakes import NAME, summary

from faithgate.cli import cli, main
from faithgate.gate.baseline import _signed
from faithgate.report.format import MAX_COLUMNS


def _lines_fit(text: str) -> None:
    """Every line within MAX_COLUMNS but the verdict line, kept whole on one line for the CI
    logs and scripts that grep it."""
    lines = [line for line in text.splitlines() if not line.startswith("faithgate: ")]
    long = [line for line in lines if len(line) > MAX_COLUMNS]
    assert not long, long


def test_bare_faithgate_prints_readable_usage(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([])  # the console entry point, as `faithgate` alone runs it
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "\\n" not in err
    lines = err.splitlines()
    assert lines[0].startswith("Usage: faithgate")
    assert any(line.strip().startswith("check") for line in lines)


def test_help_lists_short_uncut_descriptions_and_an_example_without_github():
    res = CliRunner().invoke(cli, ["--help"])
    assert res.exit_code == 0
    commands = res.output.split("Commands:")[1].split("Start here:")[0]
    assert "..." not in commands and "github" not in commands
    assert "init" in commands and "score" in commands
    assert "faithgate init && faithgate check" in res.output
    _lines_fit(res.output)


def test_github_still_runs_though_hidden():
    assert CliRunner().invoke(cli, ["github", "--help"]).exit_code == 0


def test_score_help_has_no_double_backticks():
    res = CliRunner().invoke(cli, ["score", "--help"])
    assert res.exit_code == 0 and "``" not in res.output


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"e{i}", "source": "src", "summary": summary(v)} for i, v in enumerate([0.6])]
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
        'baseline = "base.json"\n'
        f"[thresholds]\n{NAME} = 0.5\n"
        "[rules]\nregression = { tolerance = 0.01 }\n"
    )
    return tmp_path


def test_check_ends_on_its_verdict_and_keeps_rule_details_whole(project):
    res = CliRunner().invoke(cli, ["check"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = res.stdout.splitlines()
    assert out[-1].startswith("faithgate: PASS") and out[-1] == out[0]
    # the skipped regression rule's long detail is wrapped, not cut
    assert "…" not in res.stdout
    table = res.stdout.split("skipped rules")[0]
    assert "require_baseline" in table
    _lines_fit(table)


def test_check_after_an_update_ends_on_the_verdict(project):
    res = CliRunner().invoke(cli, ["check", "--update-baseline"], catch_exceptions=False)
    assert res.stdout.splitlines()[-1].startswith("faithgate: PASS")


def test_a_change_that_rounds_to_zero_has_no_minus_sign():
    assert _signed(-1e-17) == "+0.0000"
    assert _signed(-0.00012) == "-0.0001"


def test_score_without_a_threshold_hints_at_a_starting_value(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(
        cli,
        ["score", "--source", "-", "--summary", "It cost 9 million.", "--metric", "facts"],
        input="It cost 12 million dollars.",
    )
    assert res.exit_code == 0, res.output
    assert "hint: starting values: --threshold facts=1" in res.output
    assert 'not in the source: "9 million"' in res.output
    _lines_fit(res.output)


def test_the_tokenizer_legacy_notice_is_dropped():
    from faithgate.models import quiet_legacy_notice

    quiet_legacy_notice()
    logger = logging.getLogger("transformers.models.llama.tokenization_llama")
    notice = logger.makeRecord(
        logger.name, logging.WARNING, "f", 1, "You are using the default legacy behaviour", (), None
    )
    assert not all(f.filter(notice) for f in logger.filters)
    other = logger.makeRecord(logger.name, logging.WARNING, "f", 1, "something else", (), None)
    assert all(f.filter(other) for f in logger.filters)
