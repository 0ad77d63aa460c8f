"""``faithgate init`` in-process: a starter configuration the gate reads, in an empty folder and
in one with outputs, calibrated on a labelled file, and never an overwrite."""

from __future__ import annotations

import json
import tomllib

from click.testing import CliRunner

from faithgate.cli import cli
from faithgate.config import load_config

SOURCE = "The museum of Ghent will close in March. The work costs 25 million euros."
ROWS = [
    ("a", "The museum of Ghent will close in March.", 1),
    ("b", "The Ghent museum closes in March; the work costs 25 million euros.", 1),
    ("c", "The work on the museum costs 25 million euros.", 1),
    ("d", "The museum will close, the museum will close, the museum will close.", 0),
    ("e", "The work costs euros, the work costs euros, the work costs euros, the work.", 0),
    ("f", "Ghent will close in March and Ghent will close in March and Ghent will close.", 0),
]


def _write_jsonl(path, labelled: bool) -> None:
    lines = []
    for i, summary, label in ROWS:
        row = {"id": i, "source": SOURCE, "summary": summary}
        if labelled:
            row["label"] = label
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_init_in_an_empty_folder_writes_starting_values(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["init"])
    assert result.exit_code == 0, result.output
    data = tomllib.loads((tmp_path / "faithgate.toml").read_text(encoding="utf-8"))
    assert data["metrics"] == ["facts", "sentsim"]
    assert data["thresholds"] == {"facts": 1.0, "sentsim": 0.74}
    assert "outputs" not in data
    assert "starting values" in result.output


def test_init_finds_the_outputs_and_the_gate_reads_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write_jsonl(tmp_path / "outputs.jsonl", labelled=False)
    result = CliRunner().invoke(cli, ["init"])
    assert result.exit_code == 0, result.output
    config = load_config(tmp_path / "faithgate.toml")
    assert config.metrics == ("facts", "sentsim")
    assert config.outputs is not None and config.outputs.name == "outputs.jsonl"
    assert config.thresholds["facts"] == 1.0


def test_init_never_overwrites_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "faithgate.toml").write_text("# mine\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["init"])
    assert result.exit_code == 2
    assert "exists already" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert (tmp_path / "faithgate.toml").read_text(encoding="utf-8") == "# mine\n"


def test_init_refuses_beside_a_pyproject_gate(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.faithgate]\nmetrics = ['ner']\n")
    result = CliRunner().invoke(cli, ["init"])
    assert result.exit_code == 2
    assert "[tool.faithgate]" in result.output
    assert not (tmp_path / "faithgate.toml").exists()


def test_init_calibrates_the_thresholds_on_a_labelled_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write_jsonl(tmp_path / "labelled.jsonl", labelled=True)
    result = CliRunner().invoke(
        cli, ["init", "--labelled", "labelled.jsonl", "--metric", "repetition"]
    )
    assert result.exit_code == 0, result.output
    data = tomllib.loads((tmp_path / "faithgate.toml").read_text(encoding="utf-8"))
    assert data["metrics"] == ["facts", "repetition"]
    assert data["calibration"]["repetition"]["data"] == "labelled.jsonl"
    # the calibrated threshold splits the faithful rows from the repetitive ones
    assert data["calibration"]["repetition"]["balanced_accuracy"] == 1.0
    assert 0.0 < data["thresholds"]["repetition"] <= 1.0
    assert data["thresholds"]["facts"] == 1.0
    assert "calibrated on labelled.jsonl" in result.output


def test_init_refuses_a_metric_without_a_starting_value(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["init", "--metric", "overlap"])
    assert result.exit_code == 2
    assert "--labelled" in result.output
    assert not (tmp_path / "faithgate.toml").exists()
