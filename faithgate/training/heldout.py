"""A checker's figures on held-out pairs (three-way accuracy, ROC AUC of P(entailment)),
and the pairs too long to encode, which training and evaluation skip."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from faithgate.training.corpora import LABELS, NLIPair


def over_long(tokenizer: Any, pairs: Sequence[NLIPair], max_length: int) -> set[int]:
    """Indices of the pairs that ``max_length`` tokens cannot hold: their hypothesis (with the
    special tokens) leaves no room for even one token of the premise, which is the only part
    truncation cuts (``truncation="only_first"`` raises on them)."""
    if not pairs:
        return set()
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    ids = tokenizer(
        [p.hypothesis for p in pairs],
        add_special_tokens=False,
        return_attention_mask=False,
        return_token_type_ids=False,
    )["input_ids"]
    out = set()
    for i, hyp in enumerate(ids):
        if len(hyp) > room:
            out.add(i)
        elif len(hyp) == room:  # fits only with nothing of the premise to cut
            premise = tokenizer(pairs[i].premise, add_special_tokens=False)["input_ids"]
            if premise:
                out.add(i)
    return out


def encode_pairs(tokenizer: Any, pairs: Sequence[NLIPair], max_length: int, device: str) -> Any:
    """One batch of (premise, hypothesis) pairs as model inputs on ``device``: padded, the
    premise cut to fit ``max_length`` (``over_long`` pairs cannot fit)."""
    return tokenizer(
        [p.premise for p in pairs],
        [p.hypothesis for p in pairs],
        truncation="only_first",
        max_length=max_length,
        padding=True,
        return_tensors="pt",
    ).to(device)


def evaluate(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[NLIPair],
    max_length: int,
    batch_size: int = 64,
    device: str = "cpu",
) -> dict[str, float]:
    """Three-way accuracy and ROC AUC of P(entailment) for supported vs unsupported; pairs
    too long to encode (``over_long``) are left out and counted."""
    import torch
    from sklearn.metrics import roc_auc_score

    if not pairs:
        return {}
    skip = over_long(tokenizer, pairs, max_length)
    if skip:
        pairs = [p for i, p in enumerate(pairs) if i not in skip]
        if not pairs:
            return {"n": 0, "skipped_over_long": len(skip)}
    model.eval()
    probs = []
    order = sorted(
        range(len(pairs)), key=lambda i: len(pairs[i].premise) + len(pairs[i].hypothesis)
    )
    with torch.inference_mode():
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            enc = encode_pairs(tokenizer, [pairs[i] for i in idx], max_length, device)
            probs.append((idx, torch.softmax(model(**enc).logits, -1).float().cpu().numpy()))
    p = np.zeros((len(pairs), len(LABELS)))
    for idx, out in probs:
        p[idx] = out
    gold = np.array([x.label for x in pairs])
    result = {"n": len(pairs), "accuracy": float((p.argmax(1) == gold).mean())}
    supported = (gold == 0).astype(int)
    if 0 < supported.sum() < len(gold):
        result["supported_auc"] = float(roc_auc_score(supported, p[:, 0]))
    if skip:
        result["skipped_over_long"] = len(skip)
    model.train()
    return result
