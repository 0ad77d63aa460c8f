"""Number edits: a count, amount, percentage or age the source does not state."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from faithgate.perturb.context import Context
from faithgate.perturb.edits import Candidate
from faithgate.perturb.lexicon import NUMBER_WORDS, TIME_LABELS, number_value


def is_age(ent: Any) -> bool:
    """An age ('71 years old', 'aged 5'): a number edit, not a circumstance."""
    return "old" in ent.text.lower() or "aged" in ent.text.lower()


def new_numbers(ctx: Context, text: str, year: bool = False) -> list[str]:
    """Other values for a number, formatted like it, none of which the source states."""
    value = number_value(text)
    if value is None or not math.isfinite(value):
        return []  # "1" and 400 zeros reads as inf: no edit of it, rather than an OverflowError
    lower = text.lower()
    if lower in NUMBER_WORDS:
        options = [w for w, v in NUMBER_WORDS.items() if v != value and w not in ctx.src_words]
        return [w.capitalize() if text[:1].isupper() else w for w in options[:4]]
    decimals = len(text.split(".")[1]) if "." in text else 0
    if year and decimals == 0 and 1800 <= value <= 2100:
        steps = [value - 3, value + 2, value - 10, value + 5]
    else:
        steps = [value * 2, value + max(1.0, round(value * 0.5)), value * 3, value + 7]
        if value > 2:
            steps.append(value - max(1.0, round(value * 0.4)))
    out = []
    for new in steps:
        if new == value or new <= 0 or new in ctx.src_numbers or not math.isfinite(new):
            continue  # 1e308 * 2 overflows to inf, which int() cannot take
        if decimals:
            # rules 1 dropped the thousands separator: '1,200.5' -> '2401.0'
            sep = "," if "," in text and ctx.rules >= 2 else ""
            rep = f"{new:{sep}.{decimals}f}"
        elif "," in text:
            rep = f"{int(new):,}"
        else:
            rep = str(int(new))
        if rep not in out:
            out.append(rep)
    return out


def number_edits(ctx: Context) -> Iterator[Candidate]:
    """Change a count, amount, percentage or age to a value the source does not state."""
    for tok in ctx.doc:
        if not tok.like_num or tok.tag_ != "CD":
            continue
        if tok.ent_type_ in TIME_LABELS:
            ent = next((e for e in ctx.doc.ents if e.start <= tok.i < e.end), None)
            if ent is None or not is_age(ent):
                continue  # dates and durations are circumstance edits
        bound = 0
        if ctx.rules >= 2:
            if tok.lower_ in _MULTIPLIERS or _in_name(tok):
                continue
            bound = _bound(ctx, tok)
        value = number_value(tok.text)
        for rep in new_numbers(ctx, tok.text):
            new = number_value(rep)
            if bound and (new is None or value is None or (new - value) * bound <= 0):
                continue  # 'more than 105' is not falsified by 'more than 63'
            yield Candidate.on_token("number", tok, rep, "number")


# 'Two hundred' -> 'Two three': a multiplier is no number on its own
_MULTIPLIERS = {"hundred", "thousand", "million", "billion", "trillion", "dozen"}
_NAME_LABELS = {"PRODUCT", "ORG", "EVENT", "WORK_OF_ART", "FAC", "LAW"}
_LOWER_BOUND = re.compile(
    r"\b(more than|over|at least|above|upwards of|greater than|in excess of|exceeding|"
    r"no fewer than|no less than|not less than)\s*$"
)
_UPPER_BOUND = re.compile(
    r"\b(less than|fewer than|under|up to|at most|below|no more than|not more than|"
    r"a maximum of)\s*$"
)


def _in_name(tok: Any) -> bool:
    """A number that is part of a name ('Apollo 11', 'Boeing 737', 'Formula 1')."""
    doc = tok.doc
    if tok.ent_type_ in _NAME_LABELS and tok.i > next(
        e.start for e in doc.ents if e.start <= tok.i < e.end
    ):
        return True
    if tok.i > 0 and doc[tok.i - 1].pos_ == "PROPN" and doc[tok.i - 1].ent_type_ not in TIME_LABELS:
        return True
    return tok.dep_ in ("nummod", "compound") and tok.head.pos_ == "PROPN" and tok.head.i < tok.i


def _bound(ctx: Context, tok: Any) -> int:
    """+1 when the number is a lower bound ('more than $105 million'): only a larger value
    makes the claim false; -1 for an upper bound ('up to 200'); 0 otherwise."""
    before = ctx.summary[tok.sent.start_char : tok.idx].lower()
    before = re.sub(r"[$€£¥]\s*$", "", before.rstrip()).rstrip()
    if _UPPER_BOUND.search(before):
        return -1
    if _LOWER_BOUND.search(before):
        return 1
    return 0
