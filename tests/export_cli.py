"""``faithgate export`` through click's test runner, and a stand-in model directory, for the
tests of what the export refuses before it reads a model (its lock, its ``--out``)."""

from __future__ import annotations

from pathlib import Path


def export_cli(*args: str):  # noqa: ANN201 - click's Result
    from click.testing import CliRunner

    from faithgate.cli import cli

    return CliRunner().invoke(cli, ["export", *args])


def fake_model(tmp_path: Path) -> Path:
    """A directory standing in for a model: the export is refused before it is read."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    return model
