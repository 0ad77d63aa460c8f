"""A toy extractive summarizer for the news example: the first ``k`` sentences of the article.

Lead-k is the classic news baseline (See et al., 2017, "Get To The Point", lead-3 on CNN/DM).
Copying source sentences verbatim makes it faithful by construction, which is what a release
gate should confirm. Gate it with::

    faithgate check --summarizer summarizer:summarize --data articles.jsonl
"""

from __future__ import annotations

import re

# A sentence ends at . ! or ? (optionally followed by a closing quote) before whitespace and an
# upper-case letter, digit or opening quote. Good enough for news prose; faithgate itself uses
# spaCy for sentence splitting, this toy keeps the example free of model downloads.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"”’']?\s+(?=[\"“‘A-Z0-9])")
# CNN articles start with a dateline such as "(CNN)" glued to the first word.
_DATELINE = re.compile(r"^\s*\((?:CNN|AP|Reuters)\)\s*")


def split_sentences(text: str) -> list[str]:
    """Split news text into sentences with a regular expression (no models)."""
    text = _DATELINE.sub("", text.strip())
    return [s.strip() for s in _BOUNDARY.split(text) if s.strip()]


def summarize(source: str, k: int = 2) -> str:
    """The first ``k`` sentences of ``source``, joined by a space."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError("summarize() needs non-empty source text")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return " ".join(split_sentences(source)[:k])
