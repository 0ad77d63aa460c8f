"""Every registered metric has a card, docs/metrics/<name>.md, with exactly the template's
level-2 headings in order (the list is read from the registry, so a new metric needs a card).
Run with the fake metric of tests/gate_fakes.py registered, it is left out (not shipped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithgate.metrics.base import metric_class, metric_names

CARDS = Path(__file__).resolve().parents[2] / "docs" / "metrics"
TEMPLATE = [
    "What it measures",
    "Formula and paper",
    "When to use it",
    "Settings",
    "Measured figures",
    "Limitations",
]


def card_headings(text: str) -> list[str]:
    """The level-2 headings of a Markdown text, outside code blocks."""
    headings, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("## "):
            headings.append(line[3:].strip())
    return headings


def shipped_metrics() -> list[str]:
    """The registered metrics faithgate ships (a test's fake metric or a plugin's from another
    package registers too, and documents itself elsewhere)."""
    return [n for n in metric_names() if metric_class(n).__module__.startswith("faithgate.")]


@pytest.mark.parametrize("name", shipped_metrics())
def test_every_registered_metric_has_a_card_with_the_template_sections(name: str) -> None:
    card = CARDS / f"{name}.md"
    assert card.is_file(), f"metric {name!r} has no card at docs/metrics/{name}.md"
    text = card.read_text(encoding="utf-8")
    assert card_headings(text) == TEMPLATE, f"docs/metrics/{name}.md: headings must be {TEMPLATE}"
    sections = text.split("\n## ")[1:]
    empty = [s.splitlines()[0] for s in sections if not "".join(s.splitlines()[1:]).strip()]
    assert not empty, f"docs/metrics/{name}.md: empty sections {empty}"


def test_the_heading_reader_skips_code_blocks() -> None:
    text = "# t\n## What it measures\n```\n## not a heading\n```\n## Limitations\n"
    assert card_headings(text) == ["What it measures", "Limitations"]
