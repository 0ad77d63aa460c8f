"""Release tests for the news summarizer, written with faithgate's pytest plugin.

Run from ``examples/news``::

    pytest                                            # gates outputs.jsonl (passes)
    RELEASE_OUTPUTS=outputs_edited.jsonl pytest       # a release with edited summaries (fails)
    pytest --faithgate                                # also runs the [tool.faithgate] gate item

The ``faithgate`` fixture scores with the metric and threshold of the ``faithgate`` marker;
failures name the score, the threshold and the least supported summary sentence.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
RELEASE = HERE / os.environ.get("RELEASE_OUTPUTS", "outputs.jsonl")
BASELINE = HERE / "faithgate-baseline.json"
# A release may lose at most this much harim_plus per summary against the last release (the
# gate's rules.regression.per_example_drop): the metric that ranks a faithful summary above its
# one-edit twin most often, but varies too much between articles for one shared threshold.
TOLERANCE = 0.05


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _baseline_scores() -> dict[str, float]:
    """harim_plus of each summary of the last release, by id (the gate's baseline file)."""
    data = json.loads(BASELINE.read_text(encoding="utf-8"))
    return {e["id"]: e["scores"]["harim_plus"]["value"] for e in data["examples"]}


RELEASE_ROWS = _jsonl(RELEASE)
ARTICLES = {row["id"]: row for row in _jsonl(HERE / "articles.jsonl")}
EDITED = {row["id"]: row for row in _jsonl(HERE / "outputs_edited.jsonl")}


@pytest.mark.faithgate(metric="sentsim", threshold=0.5)
@pytest.mark.parametrize("row", RELEASE_ROWS, ids=lambda r: r["id"])
def test_summary_meets_the_floor(faithgate, row):
    """Every summary clears the configured floor."""
    faithgate.assert_faithful(row["source"], row["summary"])


@pytest.mark.faithgate(metric="harim_plus")
@pytest.mark.parametrize("row", RELEASE_ROWS, ids=lambda r: r["id"])
def test_summary_does_not_regress(faithgate, row):
    """No summary scores clearly lower than the same article's summary in the last release."""
    previous = _baseline_scores()[row["id"]]
    faithgate.assert_faithful(row["source"], row["summary"], threshold=previous - TOLERANCE)


@pytest.mark.faithgate(metric="sentsim")
@pytest.mark.parametrize("article_id", sorted(ARTICLES))
def test_metric_prefers_reference_to_bump_edit(faithgate, article_id):
    """Sanity check of the metric itself on human minimal pairs (BUMP): the reference summary
    must outscore its one-edit unfaithful version, or the gate above would mean little."""
    article = ARTICLES[article_id]
    faithgate.assert_consistent(
        article["source"], article["reference"], EDITED[article_id]["summary"]
    )
