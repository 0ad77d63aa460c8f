"""``alignscore`` and ``hhem`` reproduce their reference code on the same weights, on torch and
on ONNX (fp32), and their quantized exports load in the torch-free runtime.

The references' scores of tiny random checkers (``tests/tiny_checkers.py``) were recorded by
``benchmarks/checker_reference.py`` (alignscore-speedofmagic 0.1.4 and HHEM's published
``modeling_hhem_v2.py``) in ``tests/golden/checker_reference.json``; the same checkers are
rebuilt here (numpy draws, hand-written vocabularies), converted with ``faithgate.convert``
and scored through the metrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import tiny_checkers as tc  # noqa: E402

from faithgate import Example, Scorer  # noqa: E402
from faithgate.errors import InputError, ModelFileError  # noqa: E402

pytestmark = pytest.mark.xdist_group("onnx")

GOLDEN = json.loads((Path(__file__).parents[2] / "golden" / "checker_reference.json").read_text())
EXAMPLES = [Example(str(i), source, summary) for i, (source, summary) in enumerate(tc.PAIRS)]
# Stated tolerances (absolute, on scores in [0, 1]): torch runs the reference's own operations
# (float32, other batching and padding); ONNX fp32 fuses them differently.
TORCH_TOL = 1e-5
ONNX_TOL = 1e-4
# A few (source, faithful, unfaithful) triples: the int8 gate runs on them (the tolerance is
# loose: random weights), so the fixture stays fast.
CALIBRATION = [(source, summary, tc.PAIRS[1][1]) for source, summary in tc.PAIRS[:3]]
LOOSE = dict(max_mean_abs_diff=1.0, min_rank_agreement=0.0, max_consistency_change=1.0)


@pytest.fixture(scope="module")
def checkers(tmp_path_factory: pytest.TempPathFactory, torch, transformers) -> dict[str, Path]:
    """Converted tiny checkers, their fp32 exports and their int8 exports."""
    pytest.importorskip("optimum.exporters.onnx", reason="exports need faithgate[full]")
    from faithgate import models
    from faithgate.backends.export import export_model
    from faithgate.backends.quantize.parity import Tolerance
    from faithgate.convert import convert_alignscore, convert_hhem

    root = tmp_path_factory.mktemp("checkers")
    base, ckpt = tc.save_alignscore(root)
    foundation, hhem = tc.save_hhem(root)
    out = {
        "base": base,
        "ckpt": ckpt,
        "hhem_source": hhem,
        "foundation": foundation,
        "alignscore": convert_alignscore(ckpt, base, root / "alignscore"),
        "alignscore_bin": convert_alignscore(ckpt, base, root / "alignscore-bin", head="bin"),
        "hhem": convert_hhem(hhem, foundation, root / "hhem"),
    }
    for role in ("alignscore", "hhem"):
        spec = models.resolve(role, str(out[role]))
        fp32 = export_model(
            spec, out=root / f"{role}-onnx", quantize="none", calibration=CALIBRATION
        )
        out[f"{role}_onnx"] = fp32.directory
        quantized = export_model(
            spec,
            out=root / f"{role}-int8",
            quantize="int8",
            tolerance=Tolerance(**LOOSE),
            calibration=CALIBRATION,
        )
        assert quantized.quantization == "int8-dynamic"
        out[f"{role}_int8"] = quantized.directory
    return out


def _scores(metric: str, role: str, directory: Path, backend: str) -> np.ndarray:
    scorer = Scorer([metric], models={role: str(directory)}, backend=backend)
    return np.array([r[metric].value for r in scorer.score(EXAMPLES)])


@pytest.mark.parametrize(
    ("metric", "role", "key", "golden"),
    [
        ("alignscore", "alignscore", "alignscore", "alignscore_nli"),
        ("alignscore", "alignscore", "alignscore_bin", "alignscore_bin"),
        ("hhem", "hhem", "hhem", "hhem"),
    ],
)
def test_torch_matches_the_reference_code(checkers, metric, role, key, golden):
    got = _scores(metric, role, checkers[key], "torch")
    np.testing.assert_allclose(got, GOLDEN[golden], rtol=0, atol=TORCH_TOL)


@pytest.mark.parametrize(("metric", "golden"), [("alignscore", "alignscore_nli"), ("hhem", "hhem")])
def test_onnx_matches_the_reference_code(checkers, metric, golden):
    got = _scores(metric, metric, checkers[f"{metric}_onnx"], "onnx")
    np.testing.assert_allclose(got, GOLDEN[golden], rtol=0, atol=ONNX_TOL)


def test_alignscore_chunks_a_long_context_and_takes_max_then_mean(checkers):
    scorer = Scorer(["alignscore"], models={"alignscore": str(checkers["alignscore"])})
    short, long = scorer.score([EXAMPLES[2], EXAMPLES[4]])
    # LONG has 50 sentences and 600 words: 600 // 350 + 1 = 2 chunks of 25 sentences.
    assert short["alignscore"].details["n_chunks"] == 1
    assert long["alignscore"].details["n_chunks"] == 2
    for score in (short["alignscore"], long["alignscore"]):
        matrix = np.array(score.details["matrix"])
        assert score.value == pytest.approx(matrix.max(axis=0).mean(), abs=1e-4)
        assert len(score.sentences) == matrix.shape[1]


def test_context_chunks_follow_the_reference_rule():
    from faithgate.metrics.alignscore import context_chunks

    sentences = [f"s{i}." for i in range(7)]
    assert context_chunks(sentences, 100, 350) == [" ".join(sentences)]
    # 700 words: 3 chunks wanted, 7 // 3 = 2 sentences each, the rest in a fourth.
    assert context_chunks(sentences, 700, 350) == ["s0. s1.", "s2. s3.", "s4. s5.", "s6."]
    assert context_chunks([], 0, 350) == [""]


def test_converted_checkers_record_what_they_are(checkers):
    config = json.loads((checkers["alignscore"] / "config.json").read_text())
    assert config["faithgate_checker"] == "alignscore"
    assert config["id2label"]["0"] == "entailment"  # AlignScore's ALIGNED class
    hhem = json.loads((checkers["hhem"] / "config.json").read_text())
    assert hhem["faithgate_checker"] == "hhem"
    assert hhem["faithgate_prompt"].startswith("<pad> Determine if the hypothesis is true")


def test_a_file_that_is_not_a_checkpoint_is_one_clear_error(checkers, tmp_path):
    from faithgate.convert import convert_alignscore

    bad = tmp_path / "x.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ModelFileError, match="PyTorch Lightning checkpoint"):
        convert_alignscore(bad, checkers["base"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_lightning_attribute_dict_in_the_checkpoint_is_read_without_lightning(
    checkers, tmp_path, torch
):
    """Lightning pickles hyper-parameters as its AttributeDict; the weights-only reader takes
    it as a dict without importing (or executing) anything of Lightning's."""
    import types

    from faithgate.convert import read_lightning_state

    names = [
        "pytorch_lightning",
        "pytorch_lightning.utilities",
        "pytorch_lightning.utilities.parsing",
    ]
    saved = {n: sys.modules.get(n) for n in names}
    fake = types.ModuleType(names[-1])

    class AttributeDict(dict):
        pass

    AttributeDict.__module__ = names[-1]
    AttributeDict.__qualname__ = "AttributeDict"
    fake.AttributeDict = AttributeDict  # type: ignore[attr-defined]
    try:
        for n in names:
            sys.modules[n] = fake if n == names[-1] else types.ModuleType(n)
        ckpt = tmp_path / "lightning.ckpt"
        state = {"tri_layer.bias": torch.zeros(3)}
        torch.save({"state_dict": state, "hyper_parameters": AttributeDict(model="x")}, ckpt)
    finally:
        for n, module in saved.items():
            if module is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = module
    assert list(read_lightning_state(ckpt)) == ["tri_layer.bias"]


def test_a_model_without_the_checkers_labels_is_refused(checkers):
    scorer = Scorer(["hhem"], models={"hhem": str(checkers["alignscore"])}, backend="torch")
    with pytest.raises(InputError, match="faithgate convert hhem"):
        scorer.score(EXAMPLES[:1])


def test_the_default_models_need_a_download_and_say_so(tmp_path, monkeypatch):
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    from faithgate import models
    from faithgate.errors import ModelNotFoundError

    for role, hub in (
        ("alignscore", "yzha/AlignScore"),
        ("hhem", "vectara/hallucination_evaluation_model"),
    ):
        with pytest.raises(ModelNotFoundError, match=f"{role} model '{hub}'.*--allow-download"):
            models.resolve(role)


def test_a_conversion_in_the_cache_serves_the_default_hub_id(checkers, tmp_path, monkeypatch):
    import shutil

    from faithgate import models

    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    shutil.copytree(
        checkers["hhem"], models.cache_dir_for("vectara/hallucination_evaluation_model")
    )
    spec = models.resolve("hhem")
    assert spec.origin == "cache" and spec.name == "vectara/hallucination_evaluation_model"


_RUNTIME = """
import json, sys
for name in ("torch", "transformers", "optimum", "sentence_transformers"):
    sys.modules[name] = None  # importlib.util.find_spec answers None: not installed
from faithgate import Example, Scorer
examples = [Example(str(i), s, c) for i, (s, c) in enumerate(json.loads(sys.argv[3]))]
out = {}
for metric, path in (("alignscore", sys.argv[1]), ("hhem", sys.argv[2])):
    scorer = Scorer([metric], models={metric: path}, backend="auto")
    out[metric] = [r[metric].value for r in scorer.score(examples)]
    out[metric + "_hash"] = scorer.settings_hashes()[metric]
print(json.dumps(out))
"""


def test_quantized_exports_score_in_the_torch_free_runtime(checkers):
    pairs = json.dumps(tc.PAIRS[:2])
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUNTIME,
            str(checkers["alignscore_int8"]),
            str(checkers["hhem_int8"]),
            pairs,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for metric, golden in (("alignscore", "alignscore_nli"), ("hhem", "hhem")):
        assert "|onnx|int8-dynamic|" in out[metric + "_hash"]
        # int8 of random weights: near the reference, not equal to it.
        np.testing.assert_allclose(out[metric], GOLDEN[golden][:2], atol=0.05)


# --- the command line ---------------------------------------------------------------------------


def _cli(*args: str):  # noqa: ANN202 - click's Result
    from click.testing import CliRunner

    from faithgate.cli import cli

    return CliRunner().invoke(cli, list(args))


def test_metrics_lists_the_checkers():
    result = _cli("metrics")
    assert result.exit_code == 0
    assert "alignscore" in result.output and "hhem" in result.output


def test_convert_then_score_from_the_command_line(checkers, tmp_path):
    dest = tmp_path / "as"
    result = _cli(
        "convert", "alignscore", str(checkers["ckpt"]), str(dest), "--base", str(checkers["base"])
    )
    assert result.exit_code == 0, result.output
    source = tmp_path / "source.txt"
    source.write_text(tc.PAIRS[0][0])
    result = _cli(
        "score",
        "--source",
        str(source),
        "--summary",
        tc.PAIRS[0][1],
        "--metric",
        "alignscore",
        "--model",
        f"alignscore={dest}",
        "--backend",
        "torch",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    assert f"{GOLDEN['alignscore_nli'][0]:.4f}"[:5] in result.output
    dest = tmp_path / "hh"
    result = _cli(
        "convert",
        "hhem",
        str(checkers["hhem_source"]),
        str(dest),
        "--foundation",
        str(checkers["foundation"]),
    )
    assert result.exit_code == 0, result.output


def test_hhem_as_published_is_refused_with_the_way_to_convert_it(checkers, tmp_path):
    source = tmp_path / "source.txt"
    source.write_text(tc.PAIRS[0][0])
    for metric, role in (("hhem", "hhem"), ("summac_zs", "nli")):
        result = _cli(
            "score",
            "--source",
            str(source),
            "--summary",
            "x.",
            "--metric",
            metric,
            "--model",
            f"{role}={checkers['hhem_source']}",
            "--backend",
            "torch",
        )
        assert result.exit_code == 2, result.output
        assert "faithgate convert hhem" in result.output
        assert "trust_remote_code" not in result.output


def test_allow_download_converts_the_default_hub_id_into_the_cache(tmp_path, monkeypatch):
    """The download itself is not run (no test downloads): the converter is stood in for."""
    from faithgate import convert, models

    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = []

    def fake(hub_id, dest, variant="large", log=print):
        calls.append((hub_id, Path(dest)))
        Path(dest).mkdir(parents=True)
        (Path(dest) / "config.json").write_text('{"faithgate_checker": "alignscore"}')
        (Path(dest) / "model.safetensors").write_bytes(b"")
        return Path(dest)

    monkeypatch.setattr(convert, "download_and_convert", fake)
    spec = models.resolve("alignscore", allow_download=True)
    assert calls == [("yzha/AlignScore", models.cache_dir_for("yzha/AlignScore"))]
    assert (spec.origin, spec.location) == ("cache", str(calls[0][1]))
    models.resolve("alignscore", allow_download=True)  # found in the cache: not fetched again
    assert len(calls) == 1


def test_nltk_sentences_are_the_reference_splitter_under_another_hash(checkers, monkeypatch):
    nltk_tokenize = pytest.importorskip("nltk.tokenize")
    seen = []

    def one_sentence(text):  # stands in for punkt, whose data no test downloads
        seen.append(text)
        return [text]

    monkeypatch.setattr(nltk_tokenize, "sent_tokenize", one_sentence)
    models = {"alignscore": str(checkers["alignscore"])}
    default = Scorer(["alignscore"], models=models, backend="torch")
    reference = Scorer(
        ["alignscore"],
        models=models,
        backend="torch",
        metric_settings={"alignscore": {"sentences": "nltk"}},
    )
    [a] = default.score(EXAMPLES[2:3])
    [b] = reference.score(EXAMPLES[2:3])
    assert len(a["alignscore"].sentences) == 3 and len(b["alignscore"].sentences) == 1
    assert tc.PAIRS[2][1] in seen
    assert default.settings_hashes()["alignscore"] != reference.settings_hashes()["alignscore"]


def test_nltk_sentences_without_punkt_data_are_one_clear_error(monkeypatch):
    nltk_tokenize = pytest.importorskip("nltk.tokenize")
    from faithgate.metrics.alignscore import nltk_sentences

    def missing(text):
        raise LookupError("Resource 'punkt_tab' not found.")

    monkeypatch.setattr(nltk_tokenize, "sent_tokenize", missing)
    with pytest.raises(InputError, match="nltk.downloader punkt_tab"):
        nltk_sentences("A sentence. Another one.")
