"""minicheck against MiniCheck's released inference code, the classifier label override and
the unused-role usage error.

Golden values: tests/minicheck_golden.json, made by benchmarks/minicheck_golden.py running the
reference (github.com/Liyan06/MiniCheck, inference.py) on the tiny models that
tests/minicheck_models.py builds here with the same seed. Tolerance: 1e-5 on every support
probability (float32 models; measured: 0 for the classifiers and < 1e-7 for T5 on torch,
< 3e-7 on ONNX).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from faithgate import Example, Scorer
from faithgate.errors import ConfigError, InputError

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS.parent / "benchmarks"))

GOLDEN = json.loads((TESTS / "minicheck_golden.json").read_text(encoding="utf-8"))
TOLERANCE = 1e-5
LABEL_1 = {"nli": {"supported_label": "LABEL_1"}}


@pytest.fixture(scope="session")
def minicheck_models(tmp_path_factory, torch, transformers) -> dict[str, Path]:
    from minicheck_models import save_minicheck_models

    torch.manual_seed(GOLDEN["seed"])
    return save_minicheck_models(tmp_path_factory.mktemp("minicheck"))


@pytest.fixture(scope="session")
def minicheck_exports(minicheck_models, tmp_path_factory) -> dict[str, Path]:
    """fp32 ONNX exports of the three models (T5 as a seq2seq LM), parity-gated."""
    pytest.importorskip("onnxruntime")
    from faithgate import models
    from faithgate.backends.export import export_model
    from faithgate.backends.quantize.parity import Tolerance, load_calibration

    root = tmp_path_factory.mktemp("minicheck-onnx")
    few = load_calibration(None)[:4]  # the fp32 gate on a few pairs: the test compares all
    out = {}
    for name, directory in minicheck_models.items():
        task = "seq2seq-lm" if name == "t5" else "pair-classifier"
        spec = models.resolve("nli", str(directory))
        export_model(
            spec, task, out=root / name, quantize="none", tolerance=Tolerance.loose(),
            calibration=few,
        )  # fmt: skip
        out[name] = root / name
    return out


def _reference_run(name: str, model: Path, backend: str) -> list[tuple[dict, object]]:
    case = GOLDEN["cases"][name]
    scorer = Scorer(
        ["minicheck"],
        models={"nli": str(model)},
        backend=backend,
        model_options={} if name == "t5" else LABEL_1,
        metric_settings={"minicheck": {"claim": "whole", "chunk_size": case["chunk_size"]}},
    )
    examples = [Example(str(i), it["doc"], it["claim"]) for i, it in enumerate(case["items"])]
    return [
        (item, row["minicheck"])
        for item, row in zip(case["items"], scorer.score(examples), strict=True)
    ]


def _assert_matches_reference(runs: list[tuple[dict, object]], name: str) -> None:
    for item, score in runs:
        assert score.failure is None
        assert score.value == pytest.approx(item["max_support_prob"], abs=TOLERANCE)
        # The same chunks, each with the reference's support probability. (The reference
        # reports a chunk as its text up to "</s>": for DeBERTa's [SEP] that is no chunk.)
        if name != "deberta":
            assert [s.evidence for s in score.sentences][0] in item["chunks"]
        assert score.details["n_chunks"] == len(item["chunks"])
        assert score.details["support_per_chunk"][0] == pytest.approx(
            item["support_prob_per_chunk"], abs=TOLERANCE
        )


@pytest.mark.parametrize("name", ["roberta", "deberta", "t5"])
def test_minicheck_matches_the_reference_code_on_torch(minicheck_models, name):
    from minicheck_golden import weights_digest

    # The model rebuilt here is the one the golden values came from.
    assert weights_digest(minicheck_models[name]) == GOLDEN["cases"][name]["weights"]
    _assert_matches_reference(_reference_run(name, minicheck_models[name], "torch"), name)


@pytest.mark.parametrize("name", ["roberta", "deberta", "t5"])
def test_minicheck_matches_the_reference_code_on_onnx(minicheck_exports, name):
    _assert_matches_reference(_reference_run(name, minicheck_exports[name], "onnx"), name)


def test_minicheck_reads_chunk_eos_claim_as_one_sequence(minicheck_models):
    """One </s> between chunk and claim (MiniCheck's input), not a pair's </s></s>."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(minicheck_models["roberta"])
    seen = []
    scorer = Scorer(["minicheck"], models={"nli": str(minicheck_models["roberta"])},
                    backend="torch", model_options=LABEL_1)  # fmt: skip
    model = scorer.pool.get("nli", "pair-classifier")
    original = model.tokenizer

    class Spy:
        def __getattr__(self, name):
            return getattr(original, name)

        def __call__(self, *args, **kwargs):
            seen.append(args)
            return original(*args, **kwargs)

    model.tokenizer = Spy()
    try:
        scorer.score([Example("1", "A short note.", "A note.")])
    finally:
        model.tokenizer = original
    texts = [t for args in seen if isinstance(args[0], list) for t in args[0]]
    assert "A short note.</s>A note." in texts
    ids = tok("A short note.</s>A note.")["input_ids"]
    assert ids.count(tok.eos_token_id) == 2  # between them and at the end


def test_a_two_way_head_is_refused_without_the_label_override(minicheck_models, tmp_path):
    from faithgate.cli import cli as main

    source = tmp_path / "source.txt"
    source.write_text("Heavy rain closed the coast road on Tuesday.", encoding="utf-8")
    args = ["score", "--metric", "minicheck", "--model", f"nli={minicheck_models['roberta']}",
            "--source", str(source), "--summary", "The coast road is closed.", "--backend",
            "torch"]  # fmt: skip
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 2
    assert "nli.supported_label" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    scored = CliRunner().invoke(main, [*args, "--set", "nli.supported_label=LABEL_1"])
    assert scored.exit_code == 0, scored.output
    assert "minicheck" in scored.output


def test_label_override_names_the_classes_and_changes_the_settings_hash(minicheck_models):
    model = str(minicheck_models["roberta"])
    example = [Example("1", "Heavy rain closed the coast road.", "The road is closed.")]

    def run(options):
        scorer = Scorer(["summac_zs"], models={"nli": model}, backend="torch",
                        model_options={"nli": options})  # fmt: skip
        row = scorer.score(example)[0]["summac_zs"]
        return row.value, row.settings_hash

    by_label, hash_label = run({"supported_label": "label_1"})
    by_names, hash_names = run({"labels": ["contradiction", "entailment"]})
    flipped, _ = run({"supported_label": "LABEL_0"})
    # Two-way: supported_label alone reads p_e (no contradiction class); the names add p_c.
    assert flipped == pytest.approx(1 - by_label, abs=1e-6)
    assert by_names == pytest.approx(by_label - (1 - by_label), abs=1e-6)
    assert len({hash_label, hash_names}) == 2
    with pytest.raises(ConfigError, match="names 3 classes"):
        run({"labels": ["a", "b", "c"]})
    with pytest.raises(ConfigError, match="not a class"):
        run({"supported_label": "SUPPORTS"})


def test_a_model_for_a_role_no_metric_uses_is_a_usage_error(minicheck_models, tmp_path):
    with pytest.raises(InputError, match=r"role 'nli'.*\(repetition\).*summac_zs"):
        Scorer(["repetition"], models={"nli": str(minicheck_models["roberta"])})
    from faithgate.cli import cli as main

    source = tmp_path / "source.txt"
    source.write_text("Heavy rain closed the coast road.", encoding="utf-8")
    result = CliRunner().invoke(
        main,
        ["score", "--metric", "repetition", "--model", f"nli={minicheck_models['roberta']}",
         "--source", str(source), "--summary", "The road is closed."],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "role 'nli'" in result.output and "minicheck" in result.output


_RUNTIME = """
import json, sys
for name in ("torch", "transformers", "optimum", "sentence_transformers"):
    sys.modules[name] = None  # importlib.util.find_spec answers None: not installed
from faithgate import Example, Scorer
scorer = Scorer(["minicheck"], models={"nli": sys.argv[1]}, backend="onnx",
                model_options={"nli": {"supported_label": "LABEL_1"}})
[s] = scorer.score([Example("x", "Heavy rain closed the coast road.", "The road is closed.")])
print(json.dumps([s["minicheck"].value, s["minicheck"].settings_hash]))
"""


@pytest.mark.slow  # a subprocess importing faithgate, onnxruntime and spaCy afresh
def test_a_quantized_minicheck_export_scores_without_torch(minicheck_models, tmp_path):
    pytest.importorskip("onnxruntime")
    from faithgate import models
    from faithgate.backends.export import export_model
    from faithgate.backends.quantize.parity import load_calibration

    spec = models.resolve("nli", str(minicheck_models["roberta"]))
    manifest = export_model(
        spec,
        out=tmp_path / "w8",
        quantize="w8",
        require_quantized=True,
        calibration=load_calibration(None)[:6],
    )
    assert manifest.quantization == "w8"  # passed the parity gate
    proc = subprocess.run(
        [sys.executable, "-c", _RUNTIME, str(tmp_path / "w8")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    value, settings_hash = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 0.0 <= value <= 1.0
    assert "|onnx|w8|" in settings_hash


def test_fever_heads_read_with_the_supported_label():
    from faithgate.engines.nli import contradiction_index, entailment_index

    labels = ["supports", "refutes", "not enough info"]
    with pytest.raises(ConfigError, match="nli.supported_label"):
        entailment_index(labels, "fever")
    assert entailment_index(labels, "fever", supported="SUPPORTS") == 0
    assert contradiction_index(labels) == 1  # REFUTES is summac_zs's p_contradict
