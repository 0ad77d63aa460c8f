"""Edits of what a summary mentions: a participant (entity), when or where something happened
(circumstance), and whom a pronoun points at (coreference)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from faithgate.perturb.context import Context
from faithgate.perturb.edits import Candidate
from faithgate.perturb.lexicon import (
    MENTION_STOP_WORDS,
    PARTICIPANT_LABELS,
    PLACE_LABELS,
    TIME_LABELS,
    content_words,
    match_case,
    norm_text,
    number_value,
    package_data,
    word_in,
)
from faithgate.perturb.numbers import is_age, new_numbers


def _is_location(ent: Any) -> bool:
    preps = set(package_data("closed_classes.json")["location_preps"])
    head = ent.root.head
    return ent.label_ in PLACE_LABELS and ent.root.dep_ == "pobj" and head.lower_ in preps


_TIME_WORDS = {
    "yesterday", "today", "tomorrow", "tonight", "weekend", "season", "spring", "summer", "autumn",
    "winter", "ago", "last", "next", "earlier", "later", "christmas", "easter",
}  # fmt: skip


def _time_like(ent: Any, specific: bool = False) -> bool:
    """A DATE/TIME entity that reads as a time expression (spaCy also tags ages, phone
    numbers and bare counts as DATE): it names a month, weekday, part of the day, a time unit
    or a year. ``specific``: a point in time, not just a unit ('Months' is no date)."""
    closed = package_data("closed_classes.json")
    kinds = (
        ("months", "weekdays", "day_parts")
        if specific
        else ("months", "weekdays", "day_parts", "duration_units")
    )
    vocab = {w.lower() for k in kinds for w in closed[k]} | _TIME_WORDS
    for t in ent:
        if t.lower_ in vocab or t.lower_.rstrip("s") in vocab:
            return True
        if t.text.isdigit() and len(t.text) == 4 and 1800 <= int(t.text) <= 2100:
            return True
        if re.fullmatch(r"\d{1,2}[:.]\d{2}(am|pm)?|\d{1,2}(am|pm)", t.lower_):
            return True
    return False


def _prep(ent: Any) -> str:
    head = ent.root.head
    return head.lower_ if ent.root.dep_ == "pobj" else ""


def _is_duration(ent: Any) -> bool:
    units = set(package_data("closed_classes.json")["duration_units"])
    words = [t.lower_ for t in ent]
    return (
        any(w in units for w in words)
        and any(t.like_num for t in ent)
        and not is_age(ent)
        and "ago" not in words
    )


def _words_overlap(wa: set[str], wb: set[str]) -> bool:
    """Shared word, counting a long prefix as shared ('Shirley' / 'Shirleys')."""
    return any(
        x == y or (min(len(x), len(y)) >= 4 and (x.startswith(y) or y.startswith(x)))
        for x in wa
        for y in wb
    )


def _different_referent(a: str, b: str, ctx: Context | None = None) -> bool:
    """Two mentions that share no content word are taken to name different things
    ("Keefe" and "Mary Doyle Keefe" share one, so swapping them would still be true), unless
    one source mention contains words of both ("Gatewood" and "Galbraith" within
    "Gatewood Galbraith")."""
    wa, wb = content_words(a), content_words(b)
    if not wa or not wb or _words_overlap(wa, wb):
        return False
    if ctx is not None and ctx.rules >= 2 and _same_by_alias(a, b):
        return False
    if ctx is not None:
        for mention in ctx.mention_words:
            if _words_overlap(mention, wa) and _words_overlap(mention, wb):
                return False
    return True


# Names of one referent that share no word ('The U.S.' is not another country than 'America').
_ALIASES = (
    {"us", "usa", "america", "united states", "united states of america"},
    {"uk", "britain", "great britain", "united kingdom"},
    {"un", "united nations"},
    {"eu", "european union"},
)


def _alias_key(name: str) -> str:
    words = re.findall(r"[\w']+", name.replace(".", "").lower())
    words = [w.removesuffix("'s") for w in words]
    return " ".join(words[1:] if words[:1] == ["the"] else words)


def _same_by_alias(a: str, b: str) -> bool:
    """'U.S.' / 'the United States' / 'America'; an initialism and its expansion
    ('NASA' / 'National Aeronautics and Space Administration')."""
    ka, kb = _alias_key(a), _alias_key(b)
    if any(ka in group and kb in group for group in _ALIASES):
        return True
    for short, full in ((a, b), (b, a)):
        letters = re.sub(r"[.\s]", "", short.removesuffix("'s"))
        if 2 <= len(letters) <= 6 and letters.isalpha() and letters.isupper():
            initials = "".join(
                w[0] for w in _alias_key(full).split() if w not in MENTION_STOP_WORDS
            )
            if initials == letters.lower():
                return True
    return False


def _partial_name(ent: Any) -> bool:
    """A mention that is only part of a longer name: a proper noun right beside it or tied
    to it ('Jodi [Arias]', '[Dalian] Wanda', 'Rosie the [Riveter]'), so that a swap would make
    a half-name ('Rosie the Rockwell') rather than another referent."""
    doc = ent.doc
    inside = range(ent.start, ent.end)
    neighbours = [doc[i] for i in (ent.start - 1, ent.end) if 0 <= i < len(doc)]
    if any(t.pos_ == "PROPN" for t in neighbours):
        return True
    # A capitalised word beside it mid-sentence is part of a title the parser did not tag
    # ('Made In [Chelsea]', '[Burger King] Bacon and Cheese Whopper').
    if any(t.is_title and t.is_alpha and not t.is_sent_start for t in neighbours):
        return True
    for tok in ent:
        if tok.head.i not in inside and tok.head.pos_ == "PROPN" and tok.dep_ != "pobj":
            return True
        if any(
            c.i not in inside and c.pos_ == "PROPN" and c.dep_ in ("compound", "flat", "dobj")
            for c in tok.children
        ):
            return True
    return False


def _mention_text(ctx: Context, ent: Any) -> str:
    """A pool mention as a replacement: rules 2 drop a trailing possessive ('Travis
    Alexander's' would make "Jodi Travis Alexander's is sentenced")."""
    text = ent.text.strip()
    if ctx.rules >= 2:
        text = re.sub(r"\s*['’]s$", "", text)
    return text


def _swap_candidates(
    ctx: Context, ent: Any, pool: list[Any], kind: str, detail: str
) -> Iterator[Candidate]:
    sent_text = ent.sent.text
    # words of the other mentions in this sentence: 'Newman admired Galbraith' must not become
    # 'Newman admired Terrill Newman'
    others = set().union(*(content_words(e.text) for e in ent.sent.ents if e != ent))
    seen: set[str] = set()
    if ctx.rules >= 2 and _partial_name(ent):
        return
    for other in pool:
        text = _mention_text(ctx, other)
        if ctx.rules >= 2 and (not text or _partial_name(other)):
            continue
        key = norm_text(text)
        if ctx.cased and other.label_ in PARTICIPANT_LABELS and not text[:1].isupper():
            continue  # a lower-case "name" in cased text is an NER error
        if detail in ("time", "duration") and _prep(other) != _prep(ent):
            continue  # 'on Tuesday' cannot become 'on daily': keep the same preposition
        if ctx.rules >= 2 and _generalises(ctx, ent.text, text, detail):
            continue
        if ctx.rules >= 3 and ent.label_ != "PERSON" and content_words(text) <= ctx.person_words:
            continue  # 'trained in the Alps' -> 'in Chebet': a person the tagger took for a place
        if (
            key in seen
            or not _different_referent(ent.text, text, ctx)
            or _words_overlap(content_words(text), others)
            or norm_text(text) in norm_text(sent_text)
        ):
            continue
        seen.add(key)
        yield Candidate(kind, ent.start_char, ent.end_char, text, detail)


_DAY_PARTS = frozenset(
    {"morning", "afternoon", "evening", "night", "tonight", "midday", "noon", "midnight"}
)


def _generalises(ctx: Context, original: str, replacement: str, detail: str) -> bool:
    """A swap that only says less, so the source may still support it: a bare part of the day
    for a clock time or a date ('6.15 pm' -> 'evening', 'Tuesday' -> 'evening': the source
    says 'Tuesday evening'), or a place the source puts the original in, or in the original
    ('Buckingham Palace' -> 'London' beside 'Buckingham Palace, London')."""
    if detail == "time":
        words = norm_text(replacement).split()
        bare = bool(words) and words[-1] in _DAY_PARTS and len(words) <= 2
        return bare and not set(norm_text(original).split()) & _DAY_PARTS
    if detail == "location":
        a = re.escape(norm_text(original).removeprefix("the "))
        b = re.escape(norm_text(replacement).removeprefix("the "))
        link = r"\s*(?:,|\bin\b|\bnear\b|\bof\b)\s*(?:the\s+)?"
        return bool(re.search(rf"\b{a}{link}{b}\b|\b{b}{link}{a}\b", ctx.src_lower))
    return False


def _extrinsic_candidates(
    ctx: Context, ent: Any, names: Iterable[str], kind: str, detail: str
) -> Iterator[Candidate]:
    summary_lower = norm_text(ctx.summary)
    if ctx.rules >= 2 and _partial_name(ent):
        return
    for name in names:
        words = content_words(name)
        if not words or any(word_in(w, ctx.src_lower) or word_in(w, summary_lower) for w in words):
            continue
        yield Candidate(kind, ent.start_char, ent.end_char, name, detail)


def entity_edits(ctx: Context) -> Iterator[Candidate]:
    """Swap a participant (person, organisation, group, place not used as a location, ...)."""
    fillers = package_data("extrinsic_entities.json")
    for ent in ctx.doc.ents:
        if ent.label_ not in PARTICIPANT_LABELS or _is_location(ent):
            continue
        labels = PLACE_LABELS if ent.label_ in PLACE_LABELS else {ent.label_}
        pool = [e for e in ctx.src_ents(labels) if not _is_location(e)] or ctx.src_ents(labels)
        yield from _swap_candidates(ctx, ent, pool, "entity_intrinsic", ent.label_)
        yield from _extrinsic_candidates(
            ctx, ent, fillers.get(ent.label_, []), "entity_extrinsic", ent.label_
        )


def circumstance_edits(ctx: Context) -> Iterator[Candidate]:
    """Change when, for how long or where something happened."""
    closed = package_data("closed_classes.json")
    fillers = package_data("extrinsic_entities.json")
    for ent in ctx.doc.ents:
        if _is_location(ent):
            pool = [e for e in ctx.src_ents(PLACE_LABELS)]
            yield from _swap_candidates(ctx, ent, pool, "circumstance_intrinsic", "location")
            yield from _extrinsic_candidates(
                ctx, ent, fillers["GPE"], "circumstance_extrinsic", "location"
            )
        elif (
            ent.label_ in TIME_LABELS
            and not is_age(ent)
            and _time_like(ent)
            and ent.root.dep_ not in ("compound", "amod", "nmod", "poss")
        ):
            duration = _is_duration(ent)
            detail = "duration" if duration else "time"
            pool = [
                e
                for e in ctx.src_ents(TIME_LABELS)
                if not is_age(e)
                and _is_duration(e) == duration
                and (_is_duration(e) or _time_like(e, specific=True))
            ]
            yield from _swap_candidates(ctx, ent, pool, "circumstance_intrinsic", detail)
            yield from _time_edits(ctx, ent, closed, detail)


def _time_edits(ctx: Context, ent: Any, closed: dict[str, Any], detail: str) -> Iterator[Candidate]:
    """Extrinsic time edits inside a DATE/TIME entity: another month, weekday, part of the day,
    year or duration count that the source never mentions."""
    for tok in ent:
        for cls in ("months", "weekdays", "day_parts"):
            words = closed[cls]
            if tok.text.lower() in {w.lower() for w in words}:
                for w in words:
                    if w.lower() != tok.text.lower() and not word_in(w, ctx.src_lower):
                        rep = match_case(w, tok.text, False)
                        yield Candidate.on_token("circumstance_extrinsic", tok, rep, detail)
        if not tok.like_num:
            continue
        value = number_value(tok.text)
        months = {m.lower() for m in closed["months"]}
        if (
            detail == "time"
            and value is not None
            and value <= 31
            and tok.text.isdigit()
            and any(t.lower_ in months for t in ent)
        ):
            # a day of the month: stay a valid day
            days = [d for d in (value + 3, value - 4, value + 9, value - 11) if 1 <= d <= 28]
            reps = [str(int(d)) for d in days if d not in ctx.src_numbers]
        elif detail == "time" and value is not None and not (1800 <= value <= 2100):
            reps = []  # an unknown kind of number in a date: leave it alone
        else:
            reps = new_numbers(ctx, tok.text, year=detail == "time")
        for rep in reps:
            yield Candidate.on_token("circumstance_extrinsic", tok, rep, detail)


def coreference_edits(ctx: Context) -> Iterator[Candidate]:
    """Point a personal pronoun at another person of the source: 'he' -> 'Rockwell'."""
    pronouns = package_data("closed_classes.json")["pronouns"]
    people = ctx.src_ents({"PERSON"})
    for tok in ctx.doc:
        if tok.lower_ not in pronouns or tok.tag_ not in ("PRP", "PRP$"):
            continue
        before = [e for e in ctx.doc.ents if e.label_ == "PERSON" and e.end <= tok.i]
        # Antecedent heuristic: the nearest person that is a grammatical subject (centering
        # theory's preference), else the nearest person.
        subjects = [e for e in before if e.root.dep_ in ("nsubj", "nsubjpass")]
        antecedent = (subjects or before)[-1].text if before else None
        possessive = tok.tag_ == "PRP$"
        sent_words = content_words(tok.sent.text)
        earlier_words = content_words(ctx.doc[: tok.i].text)
        trusted = bool(subjects) and tok.dep_ in ("nsubj", "nsubjpass")
        seen: set[str] = set()
        for person in people:
            name = person.text.strip()
            if norm_text(name) in seen or (ctx.cased and not name[:1].isupper()):
                continue
            if antecedent is not None and not _different_referent(antecedent, name, ctx):
                continue
            # Without an antecedent in the summary, any named person could be the right one.
            if antecedent is None:
                continue
            seen.add(norm_text(name))
            name_words = content_words(name)
            if ctx.rules >= 2 and _words_overlap(name_words, sent_words):
                continue  # 'Guardiola tore his trousers' -> 'tore Guardiola's trousers' is true
            if ctx.rules >= 2 and not trusted and _words_overlap(name_words, earlier_words):
                # Unless a subject pronoun follows a subject person (centering), a pronoun may
                # point at any person the summary named before it, tagged or not: 'Anna says
                # she suspects her' -> 'suspects Gemma' and 'Rockwell painted Keefe. He paid
                # her' -> 'Norman Rockwell paid' are still true.
                continue
            if possessive and (name.endswith("'s") or name.endswith("’s")):
                continue
            rep = (f"{name}'" if name.endswith("s") else f"{name}'s") if possessive else name
            yield Candidate.on_token("coreference", tok, rep, f"{tok.lower_} -> other person")
