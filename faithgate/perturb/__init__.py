"""Minimal unfaithful edits of a faithful summary, in BUMP's error taxonomy.

BUMP (Ma et al., 2023, "BUMP: A Benchmark of Unfaithful Minimal Pairs for Meta-Evaluation of
Faithfulness Metrics", ACL) asks annotators to make *one* edit to a faithful reference summary so
that it becomes unfaithful, and labels the edit with a type:

- **predicate**: the main verb/relation is wrong (here: negation, antonym, or another verb),
- **entity**: a subject/object is swapped for another entity of the source (*intrinsic*) or for
  one that the source does not mention (*extrinsic*),
- **circumstance**: the time, duration or location of an event is wrong (intrinsic/extrinsic),
- **coreference**: a pronoun is replaced so that it points to a wrong antecedent,

to which faithgate adds **number** changes (a quantity the source does not state).

``perturb(source, summary)`` generates such edits automatically with spaCy: each variant differs
from the summary in exactly one span, records the original and the replacement span with their
character offsets, and is labelled with its BUMP ``error_type``. Generation is deterministic for
a given ``seed``. A candidate that would not contradict or go beyond the source is dropped: an
intrinsic swap must bring in a *different* referent (no word shared with the replaced mention), an
extrinsic replacement must not occur in the source at all, and no edited sentence may occur
verbatim in the source. A predicate edit (another verb, an antonym) is also dropped when the
replacement is a synonym of the original (``data/synonyms.json``: "hurt" -> "injured") or when
a source sentence of the same polarity already holds every content word of the edited
sentence ("No one was injured" makes "Nobody was injured" true, whatever verb it replaced).
These are heuristics: the edits are meant for meta-evaluation (does a
metric rank the faithful summary higher?), not as ground truth.

``rules=1`` gives the edits the first shipped checker was trained on, with the predicate
filter above, which came after its pairs were made (``drop_still_true=False`` leaves it out, as
``faithgate train --synthesis 1`` does to make those pairs again). ``rules=2`` also: moves
a bounded number past its bound ("more than 105" -> "more than 210", never "more than 63";
"up to 200" only lower); does not negate a sentence that already holds a negation
("Nobody was hurt"); leaves numbers in names ("Apollo 11", "Boeing 737") and lone multipliers
("hundred") alone; points no pronoun at a person named in its own sentence, nor (unless a
subject pronoun follows a subject person) at one the summary named before it; swaps no part of a
longer name ("Rosie the [Riveter]", "[Dalian] Wanda") and drops a pool mention's trailing
"'s"; keeps an article single ("The BBC" -> "The World Bank"), a sentence-final period after
"U.S." and a thousands separator in "1,200.5"; takes aliases and initialisms for the same
referent ("the U.S." / "America", "NASA" / its expansion); swaps no verb inside a hyphenated
word or a name, swaps an intrinsic verb only for one the source uses with the same subject or
object (but not with all of its arguments: the source's own wording), and an extrinsic one only
when the original is itself one of the listed event verbs; swaps no name beside a capitalised
word mid-sentence ("Made In [Chelsea]"); makes no swap that only says less (a bare part of the
day for a time, "6.15 pm" -> "evening"; a place the source puts the original in, "Buckingham
Palace" -> "London"); turns "old" into "young" only for the living (not "five years young", "the
young chapel"); and gives each edit the same type whichever types are asked for.

``rules=3`` (the default) keeps rules 2 and replaces its verb swaps, most of which a blind
reading judged garbage ("lost 1-0" -> "confessed 1-0", "raised odds" -> "closed odds"): a verb
is swapped only for another of its class in ``data/verb_frames.json`` (legal: "arrested" ->
"acquitted"; quantity: "rose 17%" -> "declined 17%"; trade, contest, motion, ...), never for
a class-mate that can say the same ("announced" -> "revealed"), and only in a frame both fit:
the same use (with an object or passive, or without), an object of the kind the class takes (a
person is arrested, a thing is sold: "released the ball" is not the legal sense), a that-clause
or to-infinitive only for verbs that take one; no phrasal verb ("selling off"), idiom ("joining
forces"), verb with its own preposition ("charged with"), participle modifying a noun ("three
years left") and no quantity verb without its amount ("fell down a cliff"). Intrinsic when the
source uses the class-mate as a verb, extrinsic when the source does not have the word at all.
Nor does it swap a place, organisation or other non-person mention for a name that is tagged a
person elsewhere in the texts ("trained in the Alps" -> "trained in Chebet"). Its rules are
English: a source that does not read as English (``reads_as_english``) gets no edit at all, where
rules 1 and 2 made garbage ("eröffnete am Montag" -> "eröffnete am not Montag"). An antonym of
a time or place word is filed as the circumstance it changes ("before the election" -> "after",
"north of Sydney" -> "south", "arrived late" -> "early"), and a bound's before a number
("more than 200" -> "fewer than 200") as a number edit; rules 1 and 2 call them all
``predicate_antonym``.
"""

from __future__ import annotations

import random
import re
import sys
import types as _pytypes
from collections.abc import Iterable
from typing import Any

from faithgate.errors import InputError
from faithgate.perturb.apply import apply_candidate
from faithgate.perturb.context import Context
from faithgate.perturb.edits import RULES, TYPES, Perturbation
from faithgate.perturb.mentions import circumstance_edits, coreference_edits, entity_edits
from faithgate.perturb.numbers import number_edits
from faithgate.perturb.predicates import antonym_edits, negation_edits, verb_edits

__all__ = [
    "ENGLISH_MIN_SHARE",
    "ENGLISH_MIN_WORDS",
    "RULES",
    "TYPES",
    "Perturbation",
    "perturb",
    "reads_as_english",
    "resolve_types",
]

# Each rule with the types it makes, by prefix (rules 3 file a time or place antonym under
# circumstance and a bound's under number). A later rule's edit is dropped when an earlier rule
# made the same text, so the rules after the last one that makes a wanted type need not run.
_RULE_PREFIXES = (
    (negation_edits, ("predicate_negation",)),
    (antonym_edits, ("predicate_antonym", "circumstance", "number")),
    (verb_edits, ("predicate_verb",)),
    (entity_edits, ("entity",)),
    (circumstance_edits, ("circumstance",)),
    (coreference_edits, ("coreference",)),
    (number_edits, ("number",)),
)
_RULES = tuple(rule for rule, _ in _RULE_PREFIXES)
_RULE_TYPES = {rule: {t for t in TYPES if t.startswith(p)} for rule, p in _RULE_PREFIXES}


# ---------------------------------------------------------------- public API


def resolve_types(types: Iterable[str] | None) -> list[str]:
    """Expand user type names: a full name (``entity_intrinsic``), a prefix (``entity``,
    ``predicate``) or a BUMP error type (``Intrinsic Entity``). ``None`` means all."""
    if types is None:
        return list(TYPES)
    if isinstance(types, str):  # one type: "entity" is not e, n, t, ...
        types = [types]
    if not isinstance(types, Iterable):
        raise InputError(f"perturbation types are a list of names, got {type(types).__name__}")
    out: list[str] = []
    for name in types:
        if not isinstance(name, str):
            raise InputError(f"perturbation types are names (strings), got {name!r}")
        key = name.strip()
        matches = [t for t in TYPES if t == key or t.startswith(key + "_")]
        matches += [t for t, bump in TYPES.items() if bump.lower() == key.lower()]
        if not matches:
            raise InputError(
                f"unknown perturbation type {name!r}; types: {', '.join(TYPES)} "
                "(a prefix such as 'entity' selects a family)"
            )
        out.extend(m for m in matches if m not in out)
    return out


def perturb(
    source: str,
    summary: str,
    types: Iterable[str] | None = None,
    seed: int = 0,
    max_per_type: int | None = 1,
    spacy_model: str | None = None,
    *,
    rules: int = RULES,
    drop_still_true: bool = True,
) -> list[Perturbation]:
    """Minimal unfaithful variants of ``summary`` given ``source`` (BUMP taxonomy).

    Returns at most ``max_per_type`` variants per type (``None``: all candidates), chosen with
    a ``random.Random`` seeded by ``seed`` and the type, so the output is reproducible. Types
    for which no safe edit exists are simply absent. Raises ``InputError`` for empty input.

    ``rules`` picks the revision of the edit rules: 1 reproduces the edits the first shipped
    checker was trained on (``SynthConfig.perturb_rules``) when ``drop_still_true`` is False
    (its pairs were made before the predicate filter that drops edits which stay true; ``faithgate
    train --synthesis 1`` turns it off), 2 adds the review fixes listed in the
    module docstring, 3 (the default, ``RULES``) swaps verbs only within their class and frame. The same ``rules`` and ``seed`` give the same edits.
    """
    if not isinstance(source, str) or not source.strip():
        raise InputError("perturb: the source is empty")
    if not isinstance(summary, str) or not summary.strip():
        raise InputError("perturb: the summary is empty")
    if max_per_type is not None and (
        isinstance(max_per_type, bool) or not isinstance(max_per_type, int) or max_per_type < 1
    ):  # -1 sliced off the last candidate instead of meaning anything
        raise InputError(
            f"perturb: max_per_type must be an integer >= 1 or None, not {max_per_type!r}"
        )
    if isinstance(rules, bool) or rules not in (1, 2, 3):
        raise InputError(f"perturb: rules must be 1, 2 or 3, not {rules!r}")
    if isinstance(seed, bool) or not hasattr(seed, "__index__"):  # None, "abc", 1.5: not seeds
        raise InputError(f"perturb: seed must be an integer, not {seed!r}"[:200])
    wanted = resolve_types(types)
    if not wanted:  # an empty list is no type, not every type (and max() below has none)
        raise InputError("perturb: types is empty: name at least one type, or pass None for all")
    if rules >= 3 and not reads_as_english(source):
        return []  # English rules on another language make garbage, which flatters a metric
    ctx = Context(source, summary, spacy_model, rules, drop_still_true)
    by_type: dict[str, list[Perturbation]] = {t: [] for t in wanted}
    seen: set[str] = set()
    last = max(i for i, rule in enumerate(_RULES) if _RULE_TYPES[rule] & set(wanted))
    for rule in _RULES if rules == 1 else _RULES[: last + 1]:
        for cand in rule(ctx):
            # rules 1 skipped unrequested types before deduplicating, so an edit's type
            # depended on which types were asked for; rules 2 assigns it from all of them.
            if cand.type not in by_type and rules == 1:
                continue
            variant = apply_candidate(ctx, cand)
            if variant is None or variant.summary in seen:
                continue
            seen.add(variant.summary)
            if cand.type in by_type:
                by_type[cand.type].append(variant)
    out: list[Perturbation] = []
    for t in wanted:
        cands = by_type[t]
        random.Random(f"{seed}:{t}").shuffle(cands)
        out.extend(cands if max_per_type is None else cands[:max_per_type])
    return out


_LETTER_WORD = re.compile(r"[^\W\d_]+")
# Share of English function words (spaCy's English stop list) below which a text of at least
# ENGLISH_MIN_WORDS words is not read as English. Measured (2026-11-25) on the sources of every
# file of ../shared/data: the lowest English share was 0.246 (QAGS), the first percentile 0.34;
# news sentences in German, French, Spanish, Italian, Dutch and Portuguese gave 0.00-0.09.
ENGLISH_MIN_SHARE = 0.15
ENGLISH_MIN_WORDS = 20


def reads_as_english(text: str) -> bool:
    """Whether ``text`` reads as English enough for perturb's English rules: at least
    ``ENGLISH_MIN_SHARE`` of its words are English function words ("the", "of", "was", ...).
    A text of fewer than ``ENGLISH_MIN_WORDS`` words is not judged (True)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    words = [w.lower() for w in _LETTER_WORD.findall(text)]
    if len(words) < ENGLISH_MIN_WORDS:
        return True
    return sum(w in STOP_WORDS for w in words) / len(words) >= ENGLISH_MIN_SHARE


class _CallableModule(_pytypes.ModuleType):
    """``faithgate.perturb`` is both this module and the public function: importing the module
    makes Python bind the package attribute ``faithgate.perturb`` to the module, so the module
    itself forwards calls to ``perturb()`` and ``from faithgate import perturb`` always works."""

    def __call__(self, *args: Any, **kwargs: Any) -> list[Perturbation]:
        return perturb(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
