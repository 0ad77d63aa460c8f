"""Reference parity of the likelihood metrics on encoder-decoders, and the seq2seq role.

``loglik`` against BARTScore (neulab/BARTScore ``bart_score.py``) and ``harim_plus``
(``harim_form = "released"``) against the HaRiM+ authors' released scorer (the ``evaluate``
metric NCSOFT/harim_plus), on tiny random BART, PEGASUS and T5 models with their real
tokenizer classes (``tests/seq2seq_models.py``). The reference outputs are golden values in
``data/seq2seq_reference.json``, recorded by ``benchmarks/seq2seq_reference.py`` from the
fetched reference code on these very models (same seed; the fingerprint checks it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from seq2seq_models import ARCHITECTURES, PAIRS, fingerprint, save_seq2seq_model

from faithgate.errors import FaithgateError, InputError, ModelFileError
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

pytestmark = pytest.mark.xdist_group("seq2seq_parity")

GOLDEN = json.loads((Path(__file__).parent / "data" / "seq2seq_reference.json").read_text())
# fp32 on both sides, different batching and padding: float rounding only (measured max 4e-6;
# per model and backend in docs/metrics/loglik.md and harim.md, "Measured figures").
TOLERANCE = 2e-5
EXAMPLES = [Example(str(i), s, y) for i, (s, y) in enumerate(PAIRS)]
RELEASED = {"harim_plus": {"harim_form": "released"}}


@pytest.fixture(scope="session")
def seq2seq_dirs(transformers: object, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny models (torch and transformers needed: the fixture skips without them)."""
    root = tmp_path_factory.mktemp("seq2seq_models")
    out = {}
    for arch in ARCHITECTURES:
        out[arch] = save_seq2seq_model(arch, root / arch)
        recorded = GOLDEN["models"][arch]["fingerprint"]
        if fingerprint(out[arch]) != recorded:
            pytest.fail(
                f"the tiny {arch} differs from the one the golden values were recorded on "
                "(another torch/transformers?): re-record with benchmarks/seq2seq_reference.py"
            )
    return out


@pytest.fixture(scope="session")
def tiny_lm_dir(transformers: Any, torch: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama (decoder-only), for the lm role."""
    from tiny_models import bpe_tokenizer, tiny_llama_config

    directory = tmp_path_factory.mktemp("tiny_lm")
    bpe = bpe_tokenizer([s for pair in PAIRS for s in pair])
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(tiny_llama_config(bpe)).save_pretrained(directory)
    bpe.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def seq2seq_exports(
    seq2seq_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("optimum.exporters.onnx", reason="exports need faithgate[full]")
    from faithgate import models
    from faithgate.backends.export import export_model

    root = tmp_path_factory.mktemp("seq2seq_exports")
    return {
        arch: export_model(
            models.resolve("seq2seq", str(d)), "seq2seq-lm", out=root / arch, quantize="none"
        ).directory
        for arch, d in seq2seq_dirs.items()
    }


def _scores(directory: Path, backend: str, settings=RELEASED) -> dict[str, np.ndarray]:
    scorer = Scorer(
        ["loglik", "harim_plus"],
        models={"seq2seq": str(directory)},
        backend=backend,
        metric_settings=settings,
    )
    rows = scorer.score(EXAMPLES)
    assert all(r[m].ok for r in rows for m in ("loglik", "harim_plus"))
    return {
        "loglik": np.array([r["loglik"].value for r in rows]),
        "harim_plus": np.array([r["harim_plus"].value for r in rows]),
        "harim_released": np.array([r["harim_plus"].details["harim_released"] for r in rows]),
    }


def _check(arch: str, got: dict[str, np.ndarray]) -> None:
    ref = GOLDEN["models"][arch]
    for ours, theirs in (
        ("loglik", "bartscore"),
        ("loglik", "log_ppl"),
        ("harim_plus", "harim_plus"),
        ("harim_released", "harim_released"),
    ):
        diff = np.abs(got[ours] - np.array(ref[theirs])).max()
        assert diff <= TOLERANCE, f"{arch} {ours} vs reference {theirs}: max diff {diff:.2e}"


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_torch_matches_bartscore_and_released_harim_plus(seq2seq_dirs, arch):
    _check(arch, _scores(seq2seq_dirs[arch], "torch"))


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_onnx_matches_bartscore_and_released_harim_plus(seq2seq_exports, arch):
    _check(arch, _scores(seq2seq_exports[arch], "onnx"))


def test_text_targets_and_paper_form_differ_from_the_references(seq2seq_dirs):
    """The other settings give other numbers (and other settings hashes): the target without
    the tokenizer's <s>/</s>, and the paper form of HaRiM+ (lambda * HaRiM, no constant)."""
    bart = seq2seq_dirs["bart"]
    text = _scores(bart, "torch", {"loglik": {"target_tokens": "text"}, **RELEASED})
    assert np.abs(text["loglik"] - GOLDEN["models"]["bart"]["bartscore"]).max() > 1e-2
    scorer = Scorer(["harim_plus"], models={"seq2seq": str(bart)}, backend="torch")
    paper = scorer.score(EXAMPLES[:1])[0]["harim_plus"]
    loglik, harim = paper.details["loglik"], paper.details["harim"]
    assert paper.value == pytest.approx(loglik - 7.0 * harim)
    released = GOLDEN["models"]["bart"]["harim_plus"][0]
    assert released == pytest.approx(loglik + 7.0 * (1 - harim / 2), abs=TOLERANCE)
    hashes = [
        _hashes(bart, settings)
        for settings in (
            {},
            RELEASED,
            {"loglik": {"target_tokens": "text"}, "harim_plus": {"target_tokens": "text"}},
        )
    ]
    # harim_plus: three settings, three hashes; loglik: the text target alone differs.
    assert len({h[0] for h in hashes}) == 3 and len({h[1] for h in hashes}) == 2


def _hashes(directory: Path, settings) -> tuple[str, ...]:
    scorer = Scorer(
        ["harim_plus", "loglik"], models={"seq2seq": str(directory)}, metric_settings=settings
    )
    return tuple(m.settings_hash(scorer.context) for m in scorer.metrics)


def test_seq2seq_model_alone_switches_the_likelihood_metrics(seq2seq_dirs, tiny_lm_dir):
    """--model seq2seq=DIR with no metric setting scores with it (model = "auto"), and the
    settings hash names it; model = "lm" pins the decoder-only model."""
    bart = seq2seq_dirs["bart"]
    auto = Scorer(["loglik"], models={"seq2seq": str(bart), "lm": str(tiny_lm_dir)})
    metric = auto.metrics[0]
    assert metric.model_roles(auto.context) == {"seq2seq": "seq2seq-lm", "spacy": "pipeline"}
    value = auto.score(EXAMPLES[:1])[0]["loglik"].value
    assert value == pytest.approx(GOLDEN["models"]["bart"]["bartscore"][0], abs=TOLERANCE)
    pin = {"loglik": {"model": "lm"}}
    # Pinned to lm, the seq2seq model would be ignored: that is a usage error, not a quiet run.
    with pytest.raises(InputError, match="role 'seq2seq'"):
        Scorer(
            ["loglik"], models={"seq2seq": str(bart), "lm": str(tiny_lm_dir)}, metric_settings=pin
        )
    pinned = Scorer(["loglik"], models={"lm": str(tiny_lm_dir)}, metric_settings=pin)
    assert pinned.metrics[0].model_roles(pinned.context)["lm"] == "causal-lm"
    assert metric.settings_hash(auto.context) != pinned.metrics[0].settings_hash(pinned.context)
    assert pinned.score(EXAMPLES[:1])[0]["loglik"].value != pytest.approx(value, abs=1e-3)


def test_a_seq2seq_model_that_does_not_resolve_is_an_error_not_the_lm(tiny_lm_dir, tmp_path):
    """--model seq2seq=<missing dir> must not fall back to the lm role with exit 0."""
    missing = str(tmp_path / "no-such-bart")
    scorer = Scorer(["loglik"], models={"seq2seq": missing, "lm": str(tiny_lm_dir)})
    assert "seq2seq" in scorer.metrics[0].model_roles(scorer.context)
    with pytest.raises(FaithgateError):
        scorer.score(EXAMPLES[:1])


def test_auto_without_seq2seq_hashes_as_lm(tiny_lm_dir):
    """Model "auto" resolved to the lm role keeps the settings hash of model = "lm" (caches and
    baselines made before the setting existed stay valid)."""
    lm = {"lm": str(tiny_lm_dir)}
    for name in ("loglik", "harim_plus", "fflm"):
        auto = Scorer([name], models=lm)
        pinned = Scorer([name], models=lm, metric_settings={name: {"model": "lm"}})
        assert auto.metrics[0].settings_hash(auto.context) == pinned.metrics[0].settings_hash(
            pinned.context
        )


def test_lm_role_given_an_encoder_decoder_points_at_seq2seq(seq2seq_dirs):
    scorer = Scorer(["loglik"], models={"lm": str(seq2seq_dirs["bart"])}, backend="torch")
    with pytest.raises(ModelFileError, match=r"seq2seq role.*--model seq2seq="):
        scorer.score(EXAMPLES[:1])


def test_bad_seq2seq_settings_are_refused():
    with pytest.raises(InputError, match="target_tokens"):
        Scorer(["loglik"], metric_settings={"loglik": {"target_tokens": "none"}})
    with pytest.raises(InputError, match="harim_form"):
        Scorer(["harim_plus"], metric_settings={"harim_plus": {"harim_form": "authors"}})


def test_onnx_export_leaves_key_padding_masks_unexpanded(seq2seq_exports):
    """BART's and PEGASUS's encoder and decoder graphs expand the (batch, keys) mask to one
    row per query; the export drops those expansions (the ONNX parity tests above show the
    scores unchanged) and records it in the manifest."""
    from faithgate.backends.manifest import load_manifest

    for arch in ("bart", "pegasus"):
        rewrites = load_manifest(seq2seq_exports[arch]).config["graph_rewrites"]
        assert rewrites["encoder_mask_expands_dropped"] == 1
        assert rewrites["mask_expands_dropped"] == 1


def test_shipped_ensemble_keeps_harim_plus_on_the_lm_its_scales_were_fitted_on(seq2seq_dirs):
    """The ensemble's z-score scales were fitted on SmolLM2's harim_plus: a seq2seq model
    configured for the other likelihood metrics must not move its component to BART."""
    scorer = Scorer(["ensemble", "loglik"], models={"seq2seq": str(seq2seq_dirs["bart"])})
    ensemble, loglik = scorer.metrics
    harim_plus = next(m for m in ensemble.components if m.name == "harim_plus")
    assert "lm" in harim_plus.model_roles(scorer.context)
    assert "seq2seq" in loglik.model_roles(scorer.context)
