"""``python -m faithgate.training.ship``: a quantized ship with no held-out triples to measure
the parity gate on (``--dev-fraction 0``, or no document fell into the held-out split) is
refused with one line and exit 2, instead of "passing" a gate that measured nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faithgate import models
from faithgate.errors import InputError


def _trained(tmp_path: Path, torch) -> tuple[Path, Path]:
    from safetensors.torch import save_file

    from faithgate.training.recipe import TRAINING_META, TrainConfig

    trained = tmp_path / "m"
    trained.mkdir()
    save_file({"classifier.weight": torch.zeros(3, 4)}, str(trained / "model.safetensors"))
    (trained / "config.json").write_text("{}\n")
    recipe = TrainConfig(output="x", dev_fraction=0.0, snli_pairs=0).recipe()
    (trained / TRAINING_META).write_text(json.dumps({"recipe": recipe}) + "\n")
    synth_file = tmp_path / "synth.jsonl"
    pairs = [
        {"premise": "A b c.", "hypothesis": "A b c.", "label": 0, "kind": "supported:verbatim"},
        {"premise": "A b c.", "hypothesis": "A d c.", "label": 2, "kind": "entity_intrinsic"},
    ]
    synth_file.write_text(json.dumps({"doc": "d1", "pairs": pairs}) + "\n")
    return trained, synth_file


def test_a_quantized_ship_without_held_out_triples_is_refused(tmp_path, monkeypatch, torch):
    from faithgate.training import ship

    trained, synth_file = _trained(tmp_path, torch)
    monkeypatch.setattr(models, "package_dir", lambda name: tmp_path)
    monkeypatch.setattr(models, "assemble_trained", lambda *a, **k: None)

    def no_export(*args, **kwargs):
        raise AssertionError("exported with no parity pairs")

    monkeypatch.setattr("faithgate.backends.export.export_model", no_export)
    dest = tmp_path / "ship" / "checker"
    dest.parent.mkdir()
    with pytest.raises(InputError) as err:
        ship.ship(trained, dest, synth_file=synth_file, quantize="w8a32", log=lambda _: None)
    message = str(err.value)
    assert "\n" not in message and "no held-out synthetic triples" in message
    assert "--dev-fraction is 0.0" in message and "--quantize none" in message
    assert not dest.exists()


def test_ship_reports_a_refusal_as_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from faithgate.training import ship

    def refuse(*args, **kwargs):
        raise InputError("--quantize w8a32: no held-out synthetic triples\n::error::x")

    monkeypatch.setattr(ship, "ship", refuse)
    with pytest.raises(SystemExit) as exit_:
        ship.main([str(tmp_path / "m"), str(tmp_path / "d"), "--quantize", "w8a32"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("faithgate ship: --quantize w8a32: no held-out synthetic triples")
    assert err.count("\n") == 1 and "Traceback" not in err
