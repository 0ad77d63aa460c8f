"""Matching outputs to baseline entries by source, not by id alone (review s19, finding 1).

Ids default to line numbers: a row inserted at the top shifted every id, each output was
compared with another article's baseline entry (called "rewritten" and skipped, or paired with
another article's score in the regression means) and the gate passed unfaithful edits."""

from __future__ import annotations

import json

import pytest

from faithgate.config import GateConfig
from faithgate.errors import InputError
from faithgate.gate.baseline import baseline_notes, match_baseline
from faithgate.gate.evaluate import evaluate
from faithgate.result import GateResult, source_digest
from faithgate.types import Example, Score

M = "m"
H = {M: "m:abc"}
# Summaries of different articles differ in more words than max_changed_words (6).
TEXT = {
    "bridge": "the new bridge over the river opened on monday after nine years of work.",
    "zoo": "the city zoo welcomed two panda cubs born in spring to a record crowd.",
    "election": "jonas keller was elected mayor of aarburg with 54 percent of the vote.",
    "factory": "velora will close its linz factory next year and cut 1,200 jobs.",
    "new": "a storm closed every school in the valley for two days this week.",
}


def run(rows, config=None, baseline=None):
    """Evaluate rows of (id, article, value[, summary]) with metric M."""
    cfg = GateConfig.from_dict({"metrics": [M], **(config or {})})
    exs, scores = [], []
    for row in rows:
        rid, article, value = row[:3]
        text = row[3] if len(row) > 3 else TEXT[article]
        exs.append(Example(rid, f"source of the {article} article.", text))
        scores.append({M: Score(M, value, H[M], rid)})
    return evaluate(cfg, exs, scores, H, baseline=baseline)


def rule(result, name):
    return next(r for r in result.rules if r.name == name)


PER_EXAMPLE = {"thresholds": {M: 0.5}, "rules": {"regression": {"per_example_drop": {M: 0.05}}}}
BASE = [("1", "bridge", 0.8), ("2", "zoo", 0.8), ("3", "election", 0.8), ("4", "factory", 0.8)]


def edited(article, old, new):
    return TEXT[article].replace(old, new)


def test_the_result_records_a_digest_of_each_source_and_reads_it_back(tmp_path):
    base = run(BASE)
    assert base.examples[0].source_digest == source_digest("source of the bridge article.")
    assert len(base.examples[0].source_digest) == 16
    base.save(tmp_path / "b.json")
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["examples"][0]["source_digest"] == base.examples[0].source_digest
    assert GateResult.load(tmp_path / "b.json").examples[0].source_digest == (
        base.examples[0].source_digest
    )
    # A baseline written before digests were recorded still loads (matched by id only) ...
    for e in data["examples"]:
        del e["source_digest"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = GateResult.load(tmp_path / "old.json")
    assert old.examples[0].source_digest is None and not old.records_sources
    # ... and a malformed digest is one InputError naming the file.
    data["examples"][0]["source_digest"] = 7
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="bad.json: example '1': source_digest must be a string"):
        GateResult.load(tmp_path / "bad.json")


def test_an_inserted_row_shifts_line_number_ids_but_outputs_keep_their_baseline():
    """The reviewer's case: a new article first (ids are line numbers), and one name changed in
    the election summary. Before: every output was "rewritten (not compared)" and it passed."""
    base = run(BASE)
    rows = [
        ("1", "new", 0.9),
        ("2", "bridge", 0.8),
        ("3", "zoo", 0.8),
        ("4", "election", 0.6, edited("election", "jonas keller", "peter brandt")),
        ("5", "factory", 0.8),
    ]
    r = run(rows, PER_EXAMPLE, baseline=base)
    assert not r.passed
    failing = [e for e in r.outputs if not e.passed]
    assert [e.id for e in failing] == ["4"]
    assert "m 0.6000 < its own threshold 0.7500 (baseline 0.8000" in failing[0].message
    assert "'jonas keller' -> 'peter brandt'" in failing[0].message
    assert r.outputs[0].scores[M].baseline is None  # the new article has no baseline
    reg = rule(r, f"regression[{M}]")
    assert reg.details["per_example"] == {"held": 4, "below": 1, "rewritten": 0}
    assert reg.details["matched_by_source"] == 4
    assert reg.details["ids_naming_other_source"] == 4
    assert reg.details["paired"] == 4
    assert "4 outputs matched to the baseline by source instead of id" in reg.message
    assert "4 output ids name another source in the baseline (not compared" in reg.message
    assert "1 examples are new since the baseline" in reg.message


def test_swapped_ids_are_compared_with_their_own_articles():
    base = run(BASE)
    rows = [
        ("1", "bridge", 0.8),
        ("2", "zoo", 0.8),
        ("4", "election", 0.8),  # the ids of election and factory swapped
        ("3", "factory", 0.6, edited("factory", "1,200", "4,500")),
    ]
    r = run(rows, PER_EXAMPLE, baseline=base)
    failing = [e for e in r.outputs if not e.passed]
    assert [e.id for e in failing] == ["3"] and "'1,200' -> '4,500'" in failing[0].message
    reg = rule(r, f"regression[{M}]")
    assert reg.details["per_example"]["rewritten"] == 0
    assert (reg.details["matched_by_source"], reg.details["ids_naming_other_source"]) == (2, 2)


def test_the_regression_means_pair_the_same_articles():
    """Unchanged scores behind an inserted row: no drop. Paired by id, the bridge's baseline
    0.9 met the new article's 0.2 and the means compared unrelated articles."""
    base = run([("1", "bridge", 0.9), ("2", "zoo", 0.9), ("3", "election", 0.3)])
    rows = [("1", "new", 0.2), ("2", "bridge", 0.9), ("3", "zoo", 0.9), ("4", "election", 0.3)]
    r = run(rows, {"rules": {"regression": {}}}, baseline=base)
    reg = rule(r, f"regression[{M}]")
    assert reg.value == pytest.approx(0.0)
    assert reg.details["paired"] == 3
    assert reg.details["baseline_mean"] == pytest.approx(0.7)
    assert reg.details["current_mean"] == pytest.approx(0.7)


def test_within_one_source_the_closest_summary_is_the_baseline():
    # Two baseline entries of one source: the output continues the one whose summary it keeps.
    base = run([("a", "bridge", 0.9), ("b", "bridge", 0.9, TEXT["zoo"]), ("c", "zoo", 0.9)])
    rows = [("c", "bridge", 0.1), ("d", "zoo", 0.1)]
    r = run(rows, PER_EXAMPLE | {"thresholds": {M: 0.0}}, baseline=base)
    first, second = r.outputs
    assert not first.passed and first.scores[M].baseline == 0.9  # entry "a", same summary
    assert not second.passed and second.scores[M].baseline == 0.9  # zoo's entry, under "c"
    reg = rule(r, f"regression[{M}]")
    assert (reg.details["matched_by_source"], reg.details["ids_naming_other_source"]) == (2, 1)
    # Two outputs seeking one entry of their source: the one with its summary gets it.
    match = match_baseline(
        run([("x", "zoo", 0.5), ("y", "zoo", 0.5, TEXT["bridge"])]).outputs, run(BASE)
    )
    assert list(match.entries) == ["x"] and match.entries["x"].id == "2"


def test_shifted_ids_among_summaries_of_one_article_keep_each_summarys_baseline():
    """Review of the change (s19): several summaries of one article, a row inserted above them.
    Each id then named another summary of the same source; paired by id, every output was
    "rewritten (not compared)" and a one-word factual edit passed."""
    one = "source of the election article."
    keller = TEXT["election"]
    turnout = "turnout in aarburg rose to 61 percent, the highest in two decades of voting."
    base = run([("1", "election", 0.8, keller), ("2", "election", 0.8, turnout)])
    assert base.examples[0].source_digest == base.examples[1].source_digest == source_digest(one)
    rows = [
        ("1", "new", 0.9),
        ("2", "election", 0.6, edited("election", "jonas keller", "peter brandt")),
        ("3", "election", 0.8, turnout),
    ]
    r = run(rows, PER_EXAMPLE, baseline=base)
    failing = [e for e in r.outputs if not e.passed]
    assert [e.id for e in failing] == ["2"]
    assert "'jonas keller' -> 'peter brandt'" in failing[0].message
    reg = rule(r, f"regression[{M}]")
    assert reg.details["per_example"] == {"held": 2, "below": 1, "rewritten": 0}


def test_a_baseline_without_digests_is_matched_by_id_with_a_warning():
    base = run(BASE)
    for e in base.examples:
        e.source_digest = None
    r = run([("1", "zoo", 0.8), ("2", "bridge", 0.8)], {"rules": {"regression": {}}}, baseline=base)
    reg = rule(r, f"regression[{M}]")
    assert reg.details["paired"] == 2 and reg.details["source_checked"] is False
    assert "the baseline predates source checks: outputs are matched to it by id only" in (
        reg.message
    )
    (note,) = baseline_notes(r, base, "b.json")
    assert note.startswith("the baseline at b.json predates source checks")
    assert "update it with --update-baseline" in note
    # A baseline with digests and outputs that match it by id says nothing.
    assert baseline_notes(run(BASE), run(BASE), "b.json") == []
