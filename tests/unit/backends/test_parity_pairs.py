"""A parity gate that measured no pairs passes nothing: a quantized export on no calibration
pairs is refused before any model is loaded (an fp32 export, whose graph the gate checks only
on the pairs it has, needs none). No model is loaded here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from faithgate import models
from faithgate.backends.quantize.parity import MIN_PARITY_PAIRS, compare
from faithgate.errors import InputError


def test_compare_on_no_pairs_does_not_pass():
    empty = np.zeros((0, 2))
    report = compare("p_entailment", empty, empty, bounded=True)
    assert not report.passed and report.n_pairs == 0
    assert report.reasons == [f"0 calibration pairs < {MIN_PARITY_PAIRS}"]


def _spec(tmp_path: Path) -> models.ModelSpec:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    return models.ModelSpec("nli", "tiny-nli", str(model), "path")


@pytest.mark.parametrize("mode", ["int8", "w8a32", "auto"])
def test_a_quantized_export_on_no_calibration_pairs_is_refused_before_loading(
    tmp_path, monkeypatch, mode
):
    export = pytest.importorskip("faithgate.backends.export")
    monkeypatch.setattr(export, "_torch_model", lambda *a: pytest.fail("the model was loaded"))
    out = tmp_path / "out"
    with pytest.raises(InputError) as err:
        export.export_model(
            _spec(tmp_path), out=out, quantize=mode, calibration=[], calibration_source="mine"
        )
    message = str(err.value)
    assert "\n" not in message and "0 calibration pairs (mine)" in message
    assert "quantize none" in message  # what to do instead
    assert not out.exists() and not Path(str(out) + ".lock").exists()


def test_an_fp32_export_needs_no_calibration_pairs(tmp_path, monkeypatch):
    export = pytest.importorskip("faithgate.backends.export")

    class Loaded(Exception):
        pass

    def load(*args):
        raise Loaded  # got past every check: the export would go on

    monkeypatch.setattr(export, "_torch_model", load)
    with pytest.raises(Loaded):
        export.export_model(_spec(tmp_path), out=tmp_path / "out", quantize="none", calibration=[])
