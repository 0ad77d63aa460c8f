"""A test-only metric for the gate tests: scores are written into the summary itself.

Each summary sentence starts with its support value, e.g. ``"0.9 The cat sat. 0.2 It flew."``;
the example's value is the lowest sentence value (so the least supported sentence is known by
construction). A summary containing ``UNSCORABLE`` makes the metric raise, which the scorer
turns into ``Score.failed``. ``FakeMetric.calls`` counts examples actually scored.
"""

from __future__ import annotations

import re

from faithgate.metrics.base import Metric, register
from faithgate.types import Score, SentenceScore

NAME = "gate_fake"


@register
class FakeMetric(Metric):
    name = NAME
    description = "test metric: reads the score from the summary"
    defaults = {"offset": 0.0}
    calls: list[str] = []  # ids scored, across instances (reset by tests)

    def score_batch(self, examples, ctx):
        out = []
        for ex in examples:
            if "UNSCORABLE" in ex.summary:
                raise ValueError(f"cannot read {ex.id}")
            FakeMetric.calls.append(ex.id)
            sentences = []
            for i, sent in enumerate(re.split(r"(?<=\.)\s+", ex.summary.strip())):
                value = float(sent.split()[0]) + self.settings["offset"]
                sentences.append(SentenceScore(i, sent, value))
            value = min(s.value for s in sentences)
            out.append(Score(self.name, value, self.settings_hash(ctx), ex.id, sentences))
        return out


def summary(*values: float, words: str = "words here") -> str:
    return " ".join(f"{v} {words} {i}." for i, v in enumerate(values))
