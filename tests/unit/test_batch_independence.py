"""A score is a function of (settings, source, summary) alone.

Scoring 20 rows and then all 60 changed ``sentsim`` values by up to 1.2e-7: sequences were
padded to the longest of their batch, and padding changes a forward pass's shapes and so its
float32 summation order. Backends now batch only sequences of equal length (no padding,
``faithgate.backends.windowing``), NLI pairs and generation inputs likewise, and bertscore's idf
comes from the example's own source. Here every metric scores the same examples alone, all
together, in another order and in other company, and every value (score and per-sentence)
must be bit for bit the same.
"""

from __future__ import annotations

import json
import math
import struct

import pytest

from faithgate.backends.windowing import batches_by_token_budget, equal_length_batches
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

SRC_A = (
    "The city council of Springfield approved a new budget on Monday after a long debate. "
    "The budget raises spending on schools by 4 percent. Mayor Ann Lee said the vote was "
    "a victory for parents."
)
SRC_B = "Heavy rain flooded the main road near the river. Police closed it for two hours."
SRC_C = (
    "Researchers at the University of Oslo found that the glacier lost 12 meters of ice in 2023. "
    "They used satellite images and field measurements. The team plans to return next spring."
)
EXAMPLES = [
    Example("a1", SRC_A, "Springfield approved a new budget on Monday."),
    Example("a2", SRC_A, "The budget cuts school spending, the mayor said."),
    Example("b1", SRC_B, "Rain flooded a road and police closed it."),
    Example("b2", SRC_B, "Rain flooded the road near the river for two days after a storm."),
    Example("c1", SRC_C, "The glacier lost 12 meters of ice in 2023, Oslo researchers found."),
    Example("c2", SRC_C, "Scientists in Oslo said the glacier grew."),
]
# The same examples in other batches: each alone, reversed, and mixed with strangers.
STRANGERS = [
    Example("x1", "A short one.", "Short."),
    Example("x2", SRC_C + " " + SRC_A, "A much longer summary that pads every other text a lot."),
]


def compositions(examples: list[Example]) -> list[list[list[Example]]]:
    """``examples`` in other batches: each alone, reversed, and mixed with strangers."""
    return [
        [[ex] for ex in examples],
        [list(reversed(examples))],
        [examples[::2] + STRANGERS, STRANGERS + examples[1::2]],
    ]


def bits(value: float) -> bytes:
    return struct.pack("<d", value)


def fingerprint(scores: dict) -> dict[tuple[str, str], tuple[bytes, ...]]:
    """Every value of every score, as exact bytes (NaN included)."""
    out = {}
    for ex_id, by_metric in scores.items():
        for name, score in by_metric.items():
            values = [score.value] + [s.value for s in score.sentences]
            out[(ex_id, name)] = tuple(bits(float(v)) for v in values)
    return out


def score_in(scorer: Scorer, batches: list[list[Example]]) -> dict:
    out = {}
    for batch in batches:
        for ex, row in zip(batch, scorer.score(batch), strict=True):
            if ex not in STRANGERS:
                out[ex.id] = row
    return out


def assert_batch_independent(
    metrics: list[str], examples: list[Example] = EXAMPLES, **scorer_args
) -> None:
    scorer = Scorer(metrics, cache=None, **scorer_args)
    reference = fingerprint(score_in(scorer, [examples]))
    for name in metrics:
        scored = [
            k
            for k, v in reference.items()
            if k[1] == name and not math.isnan(struct.unpack("<d", v[0])[0])
        ]
        assert scored, f"{name} scored nothing: the test would prove nothing"
    for batches in compositions(examples):
        # Each composition from scratch: the shared engines keep what they computed (LM
        # passes, QA answers) until the end of a run, and a memo hit would prove nothing.
        scorer.release()
        assert fingerprint(score_in(scorer, batches)) == reference, batches


def test_equal_length_batches_never_mix_lengths():
    lengths = [3, 5, 3, 3, 5, 9]
    assert equal_length_batches(lengths, 2) == [[0, 2], [3], [1, 4], [5]]
    assert equal_length_batches([(2, 3), (2, 4), (2, 3)], 8) == [[0, 2], [1]]
    budget = batches_by_token_budget([4, 4, 4, 100, 4], 8)
    assert budget == [[0, 1], [2, 4], [3]]  # 2 x 4 tokens per batch; 100 alone
    for batch in budget:
        assert len({[4, 4, 4, 100, 4][i] for i in batch}) == 1


@pytest.mark.parametrize("metric", ["overlap", "ner"])
def test_model_free_metrics(metric):
    assert_batch_independent([metric])


@pytest.mark.slow
def test_embedding_and_structure_metrics_real_minilm():
    assert_batch_independent(["sentsim", "bertscore", "frames", "triples"])
    assert_batch_independent(["bertscore"], metric_settings={"bertscore": {"idf": True}})


@pytest.mark.slow
def test_likelihood_metrics_real_smollm2():
    assert_batch_independent(["loglik", "harim", "harim_plus", "cop", "fflm", "pmi_mink"])


@pytest.mark.slow
def test_qa_metrics_real_smollm2():
    # Three examples, one per source (QA answers each example on its own; 23 CPU s for six).
    assert_batch_independent(["qgqa", "feqa"], EXAMPLES[::2])


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory):
    """A small randomly initialised BERT NLI classifier (no NLI weights exist offline): the
    point is the batching of the backend, not the quality of the model."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from faithgate import models

    target = tmp_path_factory.mktemp("tiny-nli")
    emb = models.resolve("embedder", None).location
    labels = {0: "entailment", 1: "neutral", 2: "contradiction"}
    cfg = transformers.BertConfig(
        vocab_size=transformers.AutoTokenizer.from_pretrained(emb).vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(cfg).save_pretrained(target)
    transformers.AutoTokenizer.from_pretrained(emb).save_pretrained(target)
    return str(target)


@pytest.mark.slow
def test_nli_metrics_tiny_classifier(tiny_nli):
    assert_batch_independent(
        ["entail_s2s", "entail_d2s", "entail_topk", "summac_zs"], models={"nli": tiny_nli}
    )


def test_combined_metric(tmp_path):
    weights = {
        "format": 1,
        "metrics": ["overlap", "ner"],
        "mean": [0.5, 0.5],
        "scale": [0.2, 0.3],
        "coef": [1.5, -0.5],
        "intercept": 0.1,
    }
    from faithgate.metrics.combined import COMBINATION_FORMAT

    weights["format"] = COMBINATION_FORMAT
    path = tmp_path / "w.json"
    path.write_text(json.dumps(weights))
    assert_batch_independent(["combined"], metric_settings={"combined": {"weights": str(path)}})
