"""HHEM (Vectara's Hughes Hallucination Evaluation Model, HHEM-2.1-open): a Flan-T5-base
classifier reading ``"<pad> Determine if the hypothesis is true given the premise?\\n\\nPremise:
{source}\\n\\nHypothesis: {summary}"`` and giving the probability that the summary is
consistent with the source, as ``HHEMv2ForSequenceClassification.predict`` of its published
modeling code does: softmax of the first position's logits, class 1 ("consistent").

score = p_consistent(source, summary), in [0, 1]; the whole source and the whole summary in one
prompt, never chunked nor cut (HHEM-2.1-open reads inputs of any length; time and memory grow
with it).

The model is the ``hhem`` role: a directory made by ``faithgate convert hhem`` (default hub id
``vectara/hallucination_evaluation_model``, converted into the cache on first use with
``--allow-download``). faithgate runs it natively (``faithgate.backends.torch_hhem`` and the
ONNX export): the hub's remote code is never run, so no ``trust_remote_code`` is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.types import Example, Score, is_blank


@register
class HHEM(Metric):
    """HHEM-2.1-open: p(consistent) of (source, summary) under its prompt template."""

    name = "hhem"
    family = "nli"
    description = "HHEM-2.1-open: probability that the summary is consistent with the source"
    roles = {"hhem": "pair-classifier"}
    bounds = (0.0, 1.0)
    scale = "probability that the summary is consistent with the source, 0..1"

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        settings_hash = self.settings_hash(ctx)
        todo = [i for i, ex in enumerate(examples) if not is_blank(ex.summary)]
        probs = np.zeros(0)
        if todo:
            model = ctx.model("hhem", "pair-classifier")
            labels = [str(label).lower() for label in model.labels]
            if "consistent" not in labels:
                raise InputError(
                    f"hhem model {model.spec.name!r} has labels {labels}, not HHEM's "
                    "(hallucinated, consistent): convert HHEM-2.1-open with "
                    "`faithgate convert hhem` and pass --model hhem=DIR"
                )
            pairs = list(dict.fromkeys((examples[i].source, examples[i].summary) for i in todo))
            index = {pair: k for k, pair in enumerate(pairs)}
            out = model.predict_proba([p for p, _ in pairs], [h for _, h in pairs])
            probs = np.asarray(out, dtype=np.float64)[:, labels.index("consistent")]
        scores = []
        for ex in examples:
            if is_blank(ex.summary):
                scores.append(Score.failed(self.name, settings_hash, ex.id, "empty summary"))
                continue
            value = float(probs[index[(ex.source, ex.summary)]])
            scores.append(Score(self.name, value, settings_hash, ex.id, details={}))
        return scores
