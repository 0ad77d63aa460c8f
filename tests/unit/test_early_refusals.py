"""Bad options and model paths refused up front, in their own words (issue 49).

``calibrate --target-precision nan`` (or ``inf``, ``1.5``) was refused only after every
example was scored; a model path that is a file went on to the hub client ("Repo id must be
in the form ..."), which said nothing about the mistake.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from faithgate import models
from faithgate.cli import cli
from faithgate.errors import ModelNotFoundError

SRC = "The committee approved the budget of ten million after a long debate in Paris."


def _labelled(path: Path) -> Path:
    rows = [
        {"id": f"r{i}", "source": SRC, "summary": f"Summary number {i}.", "label": i % 2}
        for i in range(8)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1.5", "0", "-0.2"])
def test_calibrate_refuses_a_target_precision_outside_0_1_before_scoring(
    tmp_path, monkeypatch, value
):
    from faithgate.evaluation.bench.scoring import Bench

    def never(*args, **kwargs):
        raise AssertionError("scored before the option was checked")

    monkeypatch.setattr(Bench, "score", never)
    res = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--data",
            str(_labelled(tmp_path / "l.jsonl")),
            "--metric",
            "overlap",
            "--config",
            str(tmp_path / "faithgate.toml"),
            f"--target-precision={value}",
        ],
    )
    assert res.exit_code == 2, res.output
    assert "--target-precision" in res.stderr
    assert len(res.stderr.splitlines()) == 1
    assert not (tmp_path / "faithgate.toml").exists()


@pytest.mark.parametrize("role", ["embedder", "nli", "spacy"])
def test_a_model_path_that_is_a_file_is_named_as_such(tmp_path, role):
    weights = tmp_path / "model.bin"
    weights.write_bytes(b"not a model")
    with pytest.raises(ModelNotFoundError, match="is a file, not a model directory"):
        models.resolve(role, str(weights))


def test_score_with_an_embedder_file_is_one_line_saying_so(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"x")
    (tmp_path / "src.txt").write_text(SRC, encoding="utf-8")
    res = CliRunner().invoke(
        cli,
        [
            "score",
            "--source",
            str(tmp_path / "src.txt"),
            "--summary",
            "The budget was approved.",
            "--metric",
            "sentsim",
            "--model",
            f"embedder={tmp_path / 'model.bin'}",
        ],
    )
    assert res.exit_code == 2, res.output
    assert "is a file, not a model directory" in res.stderr
    assert "Repo id" not in res.output
