"""The parity gate's arithmetic, the calibration sample, quantization names and the recipes in
``onnx_models/`` (no model is loaded here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from faithgate.backends.export import DEFAULT_OPSET, OPTIMUM_TASKS, ROLE_TASKS
from faithgate.backends.quantize.modes import normalise_quantization
from faithgate.backends.quantize.parity import (
    BUILTIN_CALIBRATION,
    Tolerance,
    compare,
    load_calibration,
)
from faithgate.errors import InputError

REPO = Path(__file__).resolve().parents[3]


def test_compare_by_hand():
    ref = np.array([[0.9, 0.5], [0.6, 0.7], [0.8, 0.2], [0.4, 0.3]])
    # pair 4 flips order (0.40 < 0.42); |differences| 0, 0.01 | 0.02, 0 | 0, 0.12 | 0, 0.12
    new = np.array([[0.9, 0.51], [0.62, 0.7], [0.8, 0.32], [0.4, 0.42]])
    rep = compare("s", ref, new, bounded=True)
    assert rep.mean_abs_diff == pytest.approx((0.01 + 0.02 + 0.12 + 0.12) / 8)
    assert rep.max_abs_diff == pytest.approx(0.12)
    assert rep.rank_agreement == pytest.approx(0.75)
    assert rep.consistency_ref == pytest.approx(0.75)  # pairs 1, 3, 4
    assert rep.consistency_new == pytest.approx(0.5)  # pairs 1, 3
    assert not rep.passed
    assert len(rep.reasons) == 3  # mean diff, agreement, consistency
    # Unbounded scores (log-probabilities) are held to their own limit, in nats (0.05),
    # not to the 0.01 of bounded scores.
    rep = compare("lp", ref, ref - 1.0, bounded=False)
    assert not rep.passed and rep.reasons == ["mean |diff| 1.0000 nats > 0.05"]
    rep = compare("lp", ref, ref - 0.03, bounded=False)
    assert rep.passed and rep.mean_abs_diff == pytest.approx(0.03)
    assert not compare("s", ref, ref - 0.03, bounded=True).passed
    # The zero tolerance accepts only identical scores.
    assert compare("s", ref, ref.copy(), True, Tolerance.zero()).passed
    assert not compare("s", ref, ref + 1e-9, True, Tolerance.zero()).passed
    with pytest.raises(ValueError):
        compare("s", ref, ref[:2], True)


def test_a_non_finite_score_never_passes_the_gate():
    """A NaN compares false with everything: one NaN score turned the mean |diff| check off,
    so a form whose scores all moved by 0.5 (50x the limit) passed on 100 pairs."""
    rng = np.random.default_rng(0)
    ref = np.stack([rng.uniform(0.6, 0.9, 100), rng.uniform(0.1, 0.4, 100)], 1)
    for new in (ref.copy(), ref + 0.5):
        new[0, 1] = np.nan
        rep = compare("p_entailment", ref, new, True)
        assert not rep.passed
        assert "non-finite scores (0 in the reference, 1 in the candidate)" in rep.reasons
        # The manifest and ``export --json`` hold valid JSON: null, never a bare NaN.
        data = rep.to_dict()
        assert data["mean_abs_diff"] is None and data["max_abs_diff"] is None
        json.dumps(data, allow_nan=False)
    # Either side, and infinities too; a loose gate passes none of them.
    bad_ref = ref.copy()
    bad_ref[3, 0] = np.inf
    for a, b in ((bad_ref, ref), (ref, -bad_ref), (bad_ref, bad_ref)):
        assert not compare("s", a, b, False, Tolerance.loose()).passed
    assert compare("s", ref, ref, True).to_dict()["mean_abs_diff"] == 0.0


def test_calibration_sample(tmp_path):
    assert load_calibration(None) == list(BUILTIN_CALIBRATION)
    rows = []
    for p in range(5):
        rows.append({"pair_id": f"p{p}", "role": "reference", "source": f"S{p}", "summary": "good"})
        rows.append({"pair_id": f"p{p}", "role": "edited", "source": f"S{p}", "summary": "bad"})
    rows.append({"pair_id": None, "role": None, "source": "x", "summary": "y"})
    path = tmp_path / "bump.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    sample = load_calibration(path, n_pairs=3)
    assert len(sample) == 3
    assert all(good == "good" and bad == "bad" for _, good, bad in sample)
    assert load_calibration(path, n_pairs=3) == sample  # deterministic
    assert len(load_calibration(path, n_pairs=50)) == 5
    with pytest.raises(InputError, match="does not exist"):
        load_calibration(tmp_path / "missing.jsonl")
    path.write_text('{"pair_id": "a"\n')
    with pytest.raises(InputError, match=r"bump.jsonl:1"):
        load_calibration(path)


def test_quantization_names():
    assert normalise_quantization("int8") == "int8-dynamic"
    assert normalise_quantization("fp32") == "none"
    assert normalise_quantization("int8-static") == "int8-static"
    assert normalise_quantization("W8") == "w8" and normalise_quantization("auto") == "auto"
    with pytest.raises(InputError, match="unknown quantization"):
        normalise_quantization("int4")


def test_recipes_match_the_code():
    recipes = sorted((REPO / "onnx_models" / "recipes").glob("*.json"))
    assert {p.stem for p in recipes} == set(ROLE_TASKS)
    for path in recipes:
        recipe = json.loads(path.read_text())
        assert recipe["role"] == path.stem
        assert recipe["task"] == ROLE_TASKS[path.stem]
        assert recipe["optimum_task"].split()[0] == OPTIMUM_TASKS[recipe["task"]]
        assert recipe["opset"] == DEFAULT_OPSET


def test_the_fp32_graph_is_not_refused_for_a_near_tie_that_rounding_flips():
    """The fp32 graph was held to pair agreement and consistency too: one near-tied pair that
    float rounding flipped (60 pairs: agreement 0.983, consistency moved 1.7 points) refused a
    correct export, --quantize none included. It is judged on mean |diff| and NaN only."""
    from faithgate.backends.export import fp32_gate

    rng = np.random.default_rng(0)
    ref = rng.uniform(0.1, 0.9, size=(60, 2))
    ref[0] = [0.5, 0.5 - 1e-7]  # a near tie
    new = ref + rng.normal(0, 1e-7, size=ref.shape)
    new[0] = [0.5 - 1e-7, 0.5]  # rounding flips it
    assert not compare("s", ref, new, True, Tolerance()).passed  # the quantized forms' gate
    assert compare("s", ref, new, True, fp32_gate(Tolerance())).passed
    assert compare("s", ref, new, True, fp32_gate(Tolerance.zero())).passed
    off = ref + 0.05
    assert not compare("s", ref, off, True, fp32_gate(Tolerance())).passed
    with_nan = new.copy()
    with_nan[3, 1] = np.nan
    assert not compare("s", ref, with_nan, True, fp32_gate(Tolerance())).passed
