"""The ``facts`` metric on hand-written cases (its development examples, with the development
half of benchmarks/facts_table.py's split), with the real spaCy pipeline: a changed number,
currency, weekday, month or name is flagged with its span; the same fact written another way
is not."""

from __future__ import annotations

import pytest

from faithgate.errors import InputError
from faithgate.gate.evaluate import _example_result
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.types import Example

SOURCE = (
    "The town of Millbrook opened a new public library on Tuesday, 24 November 2026. The "
    "building cost 12 million dollars and was paid for by the U.S. government. Mayor Anne "
    "Visser said the library would serve about twelve thousand residents, 38.5% of the town. "
    "Kenyan author Ruth Chebet read from her third novel. Later, Ms Chebet signed 340 books."
)


@pytest.fixture(scope="module")
def facts():
    metric = get_metric("facts")
    ctx = ScoringContext()

    def run(summary: str, source: str = SOURCE):
        return metric.score_batch([Example("x", source, summary)], ctx)[0]

    return run


@pytest.mark.parametrize(
    "summary",
    [
        "The library cost $12 million.",
        "The library cost 12,000,000 dollars.",
        "The library cost twelve million dollars.",
        "The library opened on Tuesday.",
        "It opened on 24 November.",
        "The United States paid for the building.",
        "It will serve about 12,000 residents.",
        "It will serve 12 thousand people, 38.5 per cent of the town.",
        "Ruth Chebet, a Kenyan writer, read from her third novel.",
        "Chebet signed three hundred and forty books.",
        "The library opened for the first time.",
    ],
)
def test_a_fact_written_another_way_is_supported(facts, summary):
    score = facts(summary)
    assert score.value == 1.0, score.details["unsupported"]
    assert score.details["evidence"] is None


@pytest.mark.parametrize(
    ("summary", "span"),
    [
        ("The library cost 9 million dollars.", "9 million"),
        ("The library cost 12 million euros.", "12 million"),
        ("The library opened on Sunday.", "Sunday"),
        ("The library opened in March.", "March"),
        ("Mayor Anne Jansen opened the library.", "Anne Jansen"),
        ("Ruth Chebet signed 430 books.", "430"),
        ("The library opened in 2025.", "2025"),
    ],
)
def test_a_changed_fact_is_flagged_with_its_span(facts, summary, span):
    score = facts(summary)
    assert score.value < 1.0
    assert any(span in u for u in score.details["unsupported"])
    assert span in score.details["evidence"]
    assert score.least_supported().evidence.startswith("not in the source")


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        # Accents written by one text only.
        ("Alexis Sánchez scored twice.", "Alexis Sanchez scored twice."),
        # A place and its people or adjective, regular and not.
        ("Officials in France said so.", "French officials said so."),
        ("The French team won.", "France won."),
        ("Troops left the Netherlands.", "Dutch troops left."),
        ("The Dutch troops left.", "Troops left the Netherlands."),
        ("The Welsh coast was hit.", "The coast of Wales was hit."),
        ("Americans voted.", "The United States voted."),
        ("He grew up in Italy.", "The Italian grew up abroad."),
        ("Democrats in Congress voted.", "Democratic lawmakers voted."),
        # A title before a person's name.
        ("Jane Goodall spoke.", "Dr Goodall spoke."),
        ("Barack Obama spoke.", "President Obama spoke."),
        # A tokenised decimal ("98. 7", as QAGS gives CNN/DM), a decade's short form.
        ("Dog one got it right in 98. 7 per cent of cases.", "It was right 98.7% of the time."),
        ("It cost $ 1. 7 million.", "It cost $1.7 million."),
        ("They loved the 1960s.", "They loved the 60s."),
        # A vague quantity: the same words, or a number in its range; dozens.
        ("Thousands of fans came.", "Thousands of fans came."),
        ("Some 27,000 fans came.", "Tens of thousands of fans came."),
        ("A dozen eggs broke.", "12 eggs broke."),
    ],
)
def test_a_fact_written_another_way_in_another_source_is_supported(facts, source, summary):
    score = facts(summary, source)
    assert score.value == 1.0, score.details["unsupported"]


@pytest.mark.parametrize(
    ("source", "summary", "span"),
    [
        ("He moved to Australia.", "The Austrian moved.", "Austrian"),
        ("Barack Obama spoke.", "President Biden spoke.", "Biden"),
        ("It cost $ 1. 7 million.", "It cost $1.9 million.", "1.9 million"),
        ("They loved the 1960s.", "They loved the 70s.", "70s"),
        ("Some 300 fans came.", "Tens of thousands of fans came.", "Tens of thousands"),
        ("Hundreds of fans came.", "Thousands of fans came.", "Thousands"),
    ],
)
def test_a_changed_fact_in_another_source_is_flagged(facts, source, summary, span):
    score = facts(summary, source)
    assert score.value < 1.0
    assert any(span in u for u in score.details["unsupported"]), score.details["unsupported"]


def test_a_currency_change_says_so(facts):
    score = facts("The library cost 12 million euros.")
    assert "another currency" in score.details["evidence"]


def test_rounding_is_allowed_only_when_the_summary_says_about(facts):
    source = "The storm cut power to 81,350 homes."
    assert facts("About 81,000 homes lost power.", source).value == 1.0
    assert facts("81,000 homes lost power.", source).value == 0.0


def test_a_summary_without_facts_scores_no_fact_value(facts):
    score = facts("A library opened.")
    assert score.value == 1.0
    assert score.details["no_facts"] is True


def test_the_gate_failure_message_names_the_unsupported_span(facts):
    ex = Example("lib", SOURCE, "The library cost 9 million euros and opened on Sunday.")
    result = _example_result(ex, {"facts": facts(ex.summary)}, ["facts"], {"facts": 1.0}, False)
    assert not result.passed
    assert 'not in the source: "9 million"' in result.reasons[0]
    assert '"Sunday"' in result.reasons[0]


@pytest.mark.parametrize("check", [[], ["money"], "dates,colours", 3])
def test_an_unknown_check_is_refused(check):
    with pytest.raises(InputError, match="check must be"):
        get_metric("facts", check=check)


def test_check_selects_the_kinds(facts):
    only_names = get_metric("facts", check="names")
    ex = Example("x", SOURCE, "Anne Visser opened it on Sunday for 9 million dollars.")
    assert only_names.score_batch([ex], ScoringContext())[0].value == 1.0
