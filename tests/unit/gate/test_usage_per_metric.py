"""What a run's scoring cost: the gate sums each metric's ``details["usage"]`` (requests, tokens)
into ``GateResult.usage``, the terminal and Markdown reports print one line per metric, the
result JSON keeps it, and a score served by the score cache costs nothing."""

from __future__ import annotations

import json

import pytest
from gate_fakes import NAME, summary

from faithgate.config import GateConfig
from faithgate.errors import InputError
from faithgate.gate import Gate, GateResult
from faithgate.gate.evaluate import evaluate, usage_totals
from faithgate.metrics.base import Metric, register
from faithgate.report import render
from faithgate.report.format import fmt_usage
from faithgate.types import Example, Score

PAID = "usage_fake"


@register
class PaidFake(Metric):
    """A metric that says what each score cost, as a judge behind a paid API does; a summary
    with FAIL in it fails after spending its requests."""

    name = PAID
    description = "test metric: reports usage in its details"
    defaults: dict = {}

    def score_batch(self, examples, ctx):
        h = self.settings_hash(ctx)
        out = []
        for ex in examples:
            usage = {
                "requests": 2,
                "cached_answers": 1,
                "prompt_tokens": 40_000,
                "completion_tokens": 1_000,
            }
            if "FAIL" in ex.summary:
                score = Score.failed(self.name, h, ex.id, "the judge timed out")
                score.details = {"usage": usage}
            else:
                score = Score(self.name, 0.9, h, ex.id, details={"usage": usage})
            out.append(score)
        return out


def run_gate(tmp_path, rows):
    out = tmp_path / "outputs.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = GateConfig.from_dict(
        {
            "metrics": [NAME, PAID],
            "outputs": str(out),
            "cache_dir": ".fg",
            "thresholds": {NAME: 0.5, PAID: 0.5},
        },
        root=tmp_path,
    )
    return Gate(cfg, progress=False).run()


ROWS = [
    {"id": "a", "source": "src", "summary": summary(0.9)},
    {"id": "b", "source": "src", "summary": summary(0.8)},
    {"id": "c", "source": "src", "summary": summary(0.7, words="FAIL here")},
]
LINE = "usage_fake: 6 requests (3 cached), 120,000 prompt + 3,000 completion tokens"


def test_gate_sums_usage_per_metric_counting_failed_scores_not_cached_ones(tmp_path):
    first = run_gate(tmp_path, ROWS)
    # three summaries at 2 requests each, the failed one too (its requests were sent); the
    # metric that reports no usage is not listed
    assert first.usage == {
        PAID: {
            "requests": 6,
            "cached_answers": 3,
            "prompt_tokens": 120_000,
            "completion_tokens": 3_000,
        }
    }
    again = run_gate(tmp_path, ROWS)
    # the score cache serves both good summaries: only the failed one (never cached) is sent
    assert again.cache == {"hits": 5, "misses": 1}
    assert again.usage == {
        PAID: {
            "requests": 2,
            "cached_answers": 1,
            "prompt_tokens": 40_000,
            "completion_tokens": 1_000,
        }
    }


def test_terminal_markdown_and_html_print_one_usage_line_per_metric(tmp_path):
    result = run_gate(tmp_path, ROWS)
    terminal = render("terminal", result)
    assert f"\nusage (this run):\n  {LINE}\n" in terminal
    markdown = render("markdown", result)
    assert (
        "- `usage_fake` usage: 6 requests (3 cached), 120,000 prompt + 3,000 completion tokens\n"
        in markdown
    )
    assert f'<p class="note">{LINE.replace(":", " usage:", 1)}</p>' in render("html", result)


def small_result() -> GateResult:
    """A gate's result over one example of a metric that reports no usage (no model, no run)."""
    cfg = GateConfig.from_dict({"metrics": ["m"], "thresholds": {"m": 0.5}})
    return evaluate(
        cfg, [Example("1", "src", "sum.")], [{"m": Score("m", 0.9, "m:h", "1")}], {"m": "m:h"}
    )


def test_reports_are_unchanged_when_no_metric_reports_usage():
    result = small_result()
    result.seconds = 1.0
    assert result.usage == {} and result.to_dict()["usage"] == {}
    plain = {kind: render(kind, result) for kind in ("terminal", "markdown", "html")}
    assert all("usage" not in text for text in plain.values())
    # with usage, the same reports plus the usage lines, and nothing else changed
    result.usage = {"m": {"requests": 1, "prompt_tokens": 7, "completion_tokens": 2}}
    terminal = render("terminal", result)
    assert terminal == plain["terminal"].rstrip("\n") + (
        "\n\nusage (this run):\n  m: 1 request, 7 prompt + 2 completion tokens\n"
    )
    markdown = render("markdown", result)
    added = "- `m` usage: 1 request, 7 prompt + 2 completion tokens\n"
    assert markdown.replace(added, "") == plain["markdown"]


def test_usage_survives_the_json_round_trip(tmp_path):
    result = run_gate(tmp_path, ROWS)
    data = json.loads(result.json_text())
    assert data["usage"] == result.usage
    back = GateResult.from_dict(data)
    assert back.usage == result.usage and back.to_dict() == result.to_dict()
    assert GateResult.load(result.save(tmp_path / "r.json")).usage == result.usage
    del data["usage"]  # a result written before usage was recorded
    assert GateResult.from_dict(data).usage == {}


@pytest.mark.parametrize(
    "bad", [[1], {"m": 5}, {"m": {"requests": "5"}}, {"m": {"requests": -1}}, {"m": {"x": True}}]
)
def test_a_malformed_usage_in_a_result_is_refused_in_one_line(bad):
    data = json.loads(small_result().json_text())
    data["usage"] = bad
    with pytest.raises(InputError, match="usage must be an object of metric -> counter"):
        GateResult.from_dict(data)


def test_usage_totals_add_whole_counters_in_the_metrics_order():
    rows = [
        {
            "b": Score("b", 1.0, "h", details={"usage": {"requests": 1, "odd": "x", "neg": -2}}),
            "a": Score("a", 1.0, "h", details={"usage": {"requests": 3, "flag": True}}),
        },
        {"b": Score("b", 1.0, "h", details={"usage": {"requests": 4}})},
        {"c": Score("c", 1.0, "h", details={"usage": "not a mapping"})},
        {"d": Score("d", 1.0, "h", details={"usage": {"requests": 0.5}})},  # no whole counter
    ]
    totals = usage_totals(["a", "b", "c", "d"], rows)
    assert totals == {"a": {"requests": 3}, "b": {"requests": 5}}
    assert list(totals) == ["a", "b"]


def test_fmt_usage_words_known_counters_and_names_the_others():
    assert fmt_usage({"requests": 1}) == "1 request"
    assert fmt_usage({"requests": 0, "cached_answers": 5}) == "0 requests (5 cached)"
    # a counter without wording of its own: "N name", the name escaped
    assert fmt_usage({"images": 1_234, "gpu_seconds\n": 3}) == "3 gpu seconds\\n, 1,234 images"
    assert fmt_usage({"prompt_tokens": 10}) == "10 prompt tokens"
