"""Helpers of the gate tests: examples of one metric ``M``, their scores and a gate over them."""

from __future__ import annotations

import json

from faithgate.config import GateConfig
from faithgate.gate.baseline import BaselineRead
from faithgate.gate.evaluate import evaluate
from faithgate.types import Example, Score

M = "m"
H = {M: "m:abc"}
M2 = "m2"


def ex(i, meta=None, text=None):
    return Example(str(i), "the source", text or f"summary {i}.", meta=meta or {})


def scored(values, sentences=None):
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append({M: Score.failed(M, H[M], str(i), "RuntimeError: model exploded")})
        else:
            sents = sentences[i] if sentences else []
            out.append({M: Score(M, v, H[M], str(i), sents)})
    return out


def gate(values, config=None, **kw):
    cfg = GateConfig.from_dict({"metrics": [M], **(config or {})})
    return evaluate(cfg, [ex(i) for i in range(len(values))], scored(values), H, **kw)


def rule(result, name):
    return next(r for r in result.rules if r.name == name)


def pair_examples(n_pairs, etypes=None):
    exs = []
    for k in range(n_pairs):
        exs.append(ex(f"{k}r", {"pair_id": f"p{k}", "role": "reference"}))
        et = etypes[k] if etypes else "Intrinsic Entity"
        exs.append(ex(f"{k}e", {"pair_id": f"p{k}", "role": "edited", "error_type": et}))
    return exs


def pair_gate(pairs_values, config, etypes=None):
    exs = pair_examples(len(pairs_values), etypes)
    values = [v for pair in pairs_values for v in pair]
    cfg = GateConfig.from_dict({"metrics": [M], **config})
    return evaluate(cfg, exs, scored(values), H)


def baseline_result(values, hash_=H[M]):
    cfg = GateConfig.from_dict({"metrics": [M]})
    exs = [ex(i) for i in range(len(values))]
    scores = [{M: Score(M, v, hash_, str(i))} for i, v in enumerate(values)]
    return evaluate(cfg, exs, scores, {M: hash_})


def per_example_gate(current, base, drop=0.05, extra=None, texts=None, base_texts=None):
    """Gate ``current`` values against a baseline of ``base`` values with per-example drops."""
    cfg = GateConfig.from_dict(
        {"metrics": [M], "rules": {"regression": {"per_example_drop": drop, **(extra or {})}}}
    )
    texts = texts or [f"summary {i}." for i in range(len(current))]
    base_texts = base_texts or [f"summary {i}." for i in range(len(base))]
    b_cfg = GateConfig.from_dict({"metrics": [M]})
    b_exs = [ex(i, text=t) for i, t in enumerate(base_texts)]
    b_scores = [{M: Score(M, v, H[M], str(i))} for i, v in enumerate(base)]
    baseline = evaluate(b_cfg, b_exs, b_scores, H)
    exs = [ex(i, text=t) for i, t in enumerate(texts)]
    scores = [{M: Score(M, v, H[M], str(i))} for i, v in enumerate(current)]
    return evaluate(cfg, exs, scores, H, baseline=baseline)


def two_metric_gate(current, baseline_metrics, other_hash=None, replaced=None):
    """Gate 3 outputs scored 0.8 by ``M`` and ``current`` by ``M2`` (per_example_drop 0.05
    for ``M2`` only, which is outside ``rules.regression.metrics``) against a baseline that
    scored them 0.8 and 0.9 by ``baseline_metrics`` (``M2`` under ``other_hash`` if given)."""
    hashes = {M: H[M], M2: "m2:abc"}
    cfg = GateConfig.from_dict(
        {
            "metrics": [M, M2],
            "rules": {"regression": {"metrics": [M], "per_example_drop": {M2: 0.05}}},
        }
    )
    exs = [ex(i) for i in range(3)]
    base_hashes = {M: H[M], M2: other_hash or hashes[M2]}
    base_hashes = {m: h for m, h in base_hashes.items() if m in baseline_metrics}
    base_scores = [
        {m: Score(m, 0.8 if m == M else 0.9, base_hashes[m], str(i)) for m in baseline_metrics}
        for i in range(3)
    ]
    b_cfg = GateConfig.from_dict({"metrics": list(baseline_metrics)})
    baseline = evaluate(b_cfg, exs, base_scores, base_hashes)
    scores = [
        {M: Score(M, 0.8, H[M], str(i)), M2: Score(M2, current, hashes[M2], str(i))}
        for i in range(3)
    ]
    return evaluate(
        cfg, exs, scores, hashes, baseline=BaselineRead(baseline, replaced=replaced or {})
    )


def write_outputs(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
