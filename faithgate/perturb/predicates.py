"""Predicate edits: negate the main verb, swap a word for its antonym, or a verb for another."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from faithgate.perturb.context import Context
from faithgate.perturb.edits import Candidate
from faithgate.perturb.lexicon import (
    NEGATORS,
    NUMBER_LABELS,
    TIME_LABELS,
    match_case,
    package_data,
    verb_form,
)


def negation_edits(ctx: Context) -> Iterator[Candidate]:
    """Negate the root predicate: 'was' -> 'was not', 'appeared' -> 'did not appear'."""
    for sent in ctx.doc.sents:
        root = sent.root
        if root.pos_ not in ("VERB", "AUX") or any(c.dep_ == "neg" for c in root.children):
            continue
        if ctx.rules >= 2 and _negated_anywhere(sent):
            continue  # 'Nobody was hurt' -> 'Nobody was not hurt' is no contradiction
        auxes = [c for c in root.children if c.dep_ in ("aux", "auxpass") and c.i < root.i]
        finite = [a for a in auxes if a.tag_ in ("MD", "VBD", "VBZ", "VBP")]
        if finite or (root.lemma_ == "be" and root.tag_ in ("VBD", "VBZ", "VBP")):
            word = finite[0] if finite else root  # 'will' -> 'will not', 'is' -> 'is not'
            yield Candidate.on_token("predicate_negation", word, f"{word.text} not", "negation")
        elif root.pos_ == "VERB" and root.tag_ in ("VBD", "VBZ", "VBP"):
            do = {"VBD": "did", "VBZ": "does", "VBP": "do"}[root.tag_]
            rep = f"{do} not {root.lemma_.lower()}"
            yield _word_swap("predicate_negation", root, rep, "negation")


def _word_swap(kind: str, tok: Any, rep: str, detail: str, **kw: Any) -> Candidate:
    """``rep`` for the word ``tok``, in its case (capitalised at a sentence start)."""
    return Candidate.on_token(kind, tok, match_case(rep, tok.text, tok.is_sent_start), detail, **kw)


def _negated_anywhere(sent: Any) -> bool:
    """A negation anywhere in the sentence: 'not', 'never', 'no one', 'nothing', ..."""
    return any(t.dep_ == "neg" or t.lower_ in NEGATORS for t in sent)


def antonym_edits(ctx: Context) -> Iterator[Candidate]:
    """Replace a verb, adjective or adverb by its antonym from ``data/antonyms.json``."""
    lists = package_data("antonyms.json")
    for tok in ctx.doc:
        if _in_compound(tok):
            continue
        rep = None
        if tok.pos_ == "VERB" and tok.lemma_.lower() in lists["verbs"]:
            other = lists["verbs"][tok.lemma_.lower()]
            rep = verb_form(other, tok.tag_)
            lemma = other
        elif tok.pos_ in ("ADJ", "ADV", "NOUN", "ADP") and tok.text.lower() in lists["words"]:
            rep = lists["words"][tok.text.lower()]
            lemma = rep
        if not rep or rep.lower() == tok.text.lower():
            continue
        if ctx.rules >= 2 and (tok.ent_type_ or _not_an_age_antonym(tok, rep)):
            continue  # inside a name ('Black Fell'), or 'five years young', 'a young chapel'
        intrinsic = lemma in ctx.src_lemmas or rep.lower() in ctx.src_words
        kind = "predicate_antonym"
        error_type = "Intrinsic Predicate" if intrinsic else "Extrinsic Predicate"
        if ctx.rules >= 3 and tok.pos_ != "VERB":
            word = tok.lower_
            if word in _BOUND_ANTONYMS and _before_number(tok):
                kind, error_type = "number", None  # 'more than 200' -> 'fewer than 200'
            elif word in _TIME_ANTONYMS or word in _PLACE_ANTONYMS:
                # 'before the election' -> 'after', 'north of Sydney' -> 'south': when or
                # where, BUMP's circumstance, not the predicate
                kind = "circumstance_intrinsic" if intrinsic else "circumstance_extrinsic"
                error_type = None
        yield _word_swap(kind, tok, rep, "antonym", error_type=error_type, lemma=lemma)


# Antonyms (rules 3) that change when or where something happened (circumstance), or a bound
# of a number (number); the other words of ``antonyms.json`` change the predicate. Rules 1
# and 2 file them all under predicate_antonym (their edits stay as they were).
_TIME_ANTONYMS = frozenset({"before", "after", "early", "late", "earlier", "later"})
_PLACE_ANTONYMS = frozenset(
    {"north", "south", "east", "west", "northern", "southern", "eastern", "western",
     "inside", "outside"}
)  # fmt: skip
_BOUND_ANTONYMS = frozenset({"more", "fewer", "most", "least"})


def _before_number(tok: Any) -> bool:
    """'more' in 'more than 200', 'more than $5m', 'at least 3': a number follows, past
    'than' and a currency sign."""
    doc = tok.doc
    i = tok.i + 1
    while i < len(doc) and (doc[i].lower_ == "than" or doc[i].tag_ == "$"):
        i += 1
    return i < len(doc) and doc[i].like_num


_AGE_UNITS = frozenset({"year", "month", "week", "day", "hour", "minute", "decade", "century"})
_LIVING = frozenset(
    {"man", "woman", "boy", "girl", "child", "person", "people", "player", "actor", "actress",
     "son", "daughter", "mother", "father", "star", "singer", "student", "fan", "team",
     "couple", "soldier", "worker", "animal", "dog", "cat", "horse", "tree", "plant"}
)  # fmt: skip


def _not_an_age_antonym(tok: Any, rep: str) -> bool:
    """'old' <-> 'young' where it is no antonym: an age ('five years old' -> 'five years
    young') or a thing that is not alive ('the old chapel' -> 'the young chapel')."""
    if {tok.lower_, rep.lower()} != {"old", "young"}:
        return False
    before = tok.doc[tok.i - 1] if tok.i > 0 else None
    if before is not None and before.lemma_.lower() in _AGE_UNITS:
        return True
    head = tok.head
    return head.i != tok.i and head.ent_type_ != "PERSON" and head.lemma_.lower() not in _LIVING


def _in_compound(tok: Any) -> bool:
    """Part of a hyphenated word such as '71-year-old'."""
    doc = tok.doc
    before = tok.i > 0 and doc[tok.i - 1].text in ("-", "–") and not doc[tok.i - 1].whitespace_
    after = tok.i + 1 < len(doc) and doc[tok.i + 1].text in ("-", "–") and not tok.whitespace_
    return bool(before or after)


def _content_verbs(doc: Any) -> list[Any]:
    light = set(package_data("closed_classes.json")["light_verbs"])
    return [
        t
        for t in doc
        if t.pos_ == "VERB"
        and t.tag_ in ("VB", "VBD", "VBZ", "VBP", "VBG", "VBN")
        and t.lemma_.lower() not in light
        and t.text.isalpha()
    ]


def _has_object(tok: Any) -> bool:
    """Transitive use: a direct object, or a passive (its object is the subject)."""
    return any(c.dep_ in ("dobj", "obj", "auxpass", "nsubjpass") for c in tok.children)


def verb_edits(ctx: Context) -> Iterator[Candidate]:
    """Replace a content verb by another verb of the source (intrinsic) or one absent from it
    (extrinsic), in the same inflection and with the same transitivity."""
    if ctx.rules >= 3:
        yield from _class_verb(ctx)
        return
    src_verbs = _content_verbs(ctx.src)
    forms = package_data("verb_forms.json")["verbs"]
    v2 = ctx.rules >= 2
    names = {t.lower_ for t in ctx.src if t.pos_ == "PROPN" or t.ent_type_} if v2 else set()
    for tok in _content_verbs(ctx.doc):
        if v2 and _not_a_verb(tok, names):
            continue
        sent_lemmas = {t.lemma_.lower() for t in tok.sent}
        transitive = _has_object(tok)
        args = _arguments(tok)
        seen: set[str] = set()
        for sv in src_verbs:
            lemma = sv.lemma_.lower()
            if (
                sv.tag_ != tok.tag_
                or lemma in sent_lemmas
                or lemma in seen
                or _has_object(sv) != transitive
            ):
                continue
            if v2 and (not args & _arguments(sv) or args <= _arguments(sv)):
                # Only a verb the source uses with the same subject or object (else garbage),
                # and not with all of the summary verb's arguments: there it is the source's
                # own wording of the claim ('influence the election' / 'sway the election').
                continue
            seen.add(lemma)
            yield _word_swap("predicate_verb_intrinsic", tok, sv.text.lower(), "verb", lemma=lemma)
        if v2 and tok.lemma_.lower() not in forms:
            continue  # 'tear' -> 'admit': only swap one common event verb for another
        for lemma, info in forms.items():
            if lemma in ctx.src_lemmas or lemma in sent_lemmas or info["transitive"] != transitive:
                continue
            rep = verb_form(lemma, tok.tag_)
            if rep and rep.lower() not in ctx.src_words:
                yield _word_swap("predicate_verb_extrinsic", tok, rep, "verb", lemma=lemma)


_PERSON_PRONOUNS = frozenset({"i", "me", "we", "us", "he", "him", "she", "her", "who", "whom"})


def _object_of(tok: Any) -> Any | None:
    """What a verb acts on: its direct object, or the subject of its passive."""
    passive = any(c.dep_ == "auxpass" for c in tok.children)
    for c in tok.children:
        if c.dep_ in ("dobj", "obj") or (passive and c.dep_ == "nsubjpass"):
            return c
    return None


def _object_kind(obj: Any) -> str | None:
    """'person', 'thing', or None when the mention could be either ('they', an organisation)."""
    if obj.ent_type_ in ("PERSON", "NORP") or obj.lower_ in _PERSON_PRONOUNS:
        return "person"
    if obj.lemma_.lower() in package_data("verb_frames.json")["person_nouns"]:
        return "person"
    if obj.ent_type_ == "ORG" or obj.lower_ in ("they", "them", "you", "that", "which"):
        return None
    return "thing"


def _frame(tok: Any) -> tuple[str, str | None, bool, bool] | None:
    """The summary verb's use (t/i), object kind, and whether it takes a that-clause or a
    to-infinitive; None where no swap fits: a phrasal verb ('sell off'), a participle
    modifying a noun ('three years left', 'the man arrested'), an object of the wrong kind
    for the verb's class ('released the ball' is not the legal sense)."""
    frames = package_data("verb_frames.json")
    info = frames["verbs"].get(tok.lemma_.lower())
    if info is None or tok.dep_ in ("acl", "amod", "compound"):
        return None
    if tok.dep_ == "conj" and tok.head.pos_ != "VERB":  # 'sexist or threatening behaviour'
        return None
    if any(c.dep_ == "prt" for c in tok.children):
        return None
    if any(c.dep_ == "prep" and c.lower_ in info["preps"] for c in tok.children):
        return None  # 'charged with', 'convicted of': a class-mate would need another preposition
    if any(c.dep_ in ("nsubj", "nsubjpass") and c.ent_type_ in TIME_LABELS for c in tok.children):
        return None  # 'Anzac Day falls on a Saturday' is the calendar, not a quantity
    obj = _object_of(tok)
    if obj is None and any(c.dep_ == "auxpass" and c.lemma_ == "get" for c in tok.children):
        return None  # 'used to get lost': an adjective, and no patient to check
    if obj is not None and obj.lemma_.lower() in frames["idiom_objects"]:
        return None  # 'joining forces', 'lost his way'
    kind = _object_kind(obj) if obj is not None else None
    if obj is not None and info["object"] and kind and kind != info["object"]:
        return None
    use = "t" if obj is not None or _has_object(tok) else "i"
    if use not in info["uses"]:
        return None
    if info["class"] == "quantity" and use == "i" and not _measured(tok):
        return None  # 'fell down a cliff' is a body moving; 'rose 17 percent' a quantity
    clause = any(c.dep_ == "ccomp" for c in tok.children)
    if info["needs_clause"] and not (
        clause or (obj is not None and obj.lemma_.lower() in frames["propositions"])
    ):
        return None  # 'denied the claims', not 'denied an HD map' or 'denied as face of'
    infinitive = any(
        c.dep_ == "xcomp" and any(g.tag_ == "TO" for g in c.children) for c in tok.children
    )
    return use, kind, clause, infinitive


def _measured(tok: Any) -> bool:
    """A change of quantity with its amount: 'rose 17.2 percent', 'fell by 3%', 'grew to 5m'."""
    for c in tok.children:
        amount = any(t.like_num or t.ent_type_ in NUMBER_LABELS for t in c.subtree)
        if amount and (c.dep_ in ("npadvmod", "dobj", "obj") or c.lower_ in ("by", "to", "from")):
            return True  # not 'fell to his death'
    return False


def _fits(info: dict[str, Any], frame: tuple[str, str | None, bool, bool]) -> bool:
    use, kind, clause, infinitive = frame
    return (
        use in info["uses"]
        and not (kind and info["object"] and kind != info["object"])
        and (info["clause"] or not clause)
        and (info["infinitive"] or not infinitive)
    )


def _class_verb(ctx: Context) -> Iterator[Candidate]:
    """Rules 3: swap a verb only for another of its class in ``data/verb_frames.json`` ('arrested'
    -> 'acquitted', 'raised' -> 'reduced', 'announced' -> 'denied'), one that fits the frame
    the sentence gives it (object or none, a person or a thing, a that-clause, a to-infinitive):
    a verb of another class makes garbage ('lost 1-0' -> 'confessed 1-0'). Intrinsic when the
    source uses the new verb (not with all of the summary verb's arguments: there it is the
    source's own wording), extrinsic when it does not."""
    frames = package_data("verb_frames.json")["verbs"]
    same_groups = package_data("verb_frames.json")["same"]
    names = {t.lower_ for t in ctx.src if t.pos_ == "PROPN" or t.ent_type_}
    src_uses: dict[str, list[Any]] = {}
    for sv in _content_verbs(ctx.src):
        src_uses.setdefault(sv.lemma_.lower(), []).append(sv)
    for tok in _content_verbs(ctx.doc):
        lemma = tok.lemma_.lower()
        if _not_a_verb(tok, names) or lemma not in frames:
            continue
        frame = _frame(tok)
        if frame is None:
            continue
        sent_lemmas = {t.lemma_.lower() for t in tok.sent}
        args = _arguments(tok)
        same = {v for group in same_groups if lemma in group for v in group}
        for other, info in frames.items():
            if info["class"] != frames[lemma]["class"] or other in sent_lemmas or other in same:
                continue
            if not _fits(info, frame):
                continue
            rep = verb_form(other, tok.tag_, "verb_frames.json")
            if not rep:
                continue
            if other in src_uses:
                if args and any(args <= _arguments(sv) for sv in src_uses[other]):
                    continue
                kind = "predicate_verb_intrinsic"
            elif other in ctx.src_lemmas or rep.lower() in ctx.src_words:
                continue  # in the source, but not as a verb: neither kind is clean
            else:
                kind = "predicate_verb_extrinsic"
            yield _word_swap(kind, tok, rep, "verb", lemma=other)


def _not_a_verb(tok: Any, names: set[str]) -> bool:
    """Tokens that a verb swap turns into garbage: part of a hyphenated word ('table-topping'),
    of a name ('Loganair Aberdeen to Shetland': a word between two proper nouns that takes no
    subject or object of its own), or a name in lower-cased text. Proper nouns on both sides
    of a verb are usually its subject and object ('Smith met Jones')."""
    doc = tok.doc
    return bool(
        _in_compound(tok)
        or tok.ent_type_
        or tok.dep_ in ("compound", "flat", "amod")
        or (
            all(0 <= i < len(doc) and doc[i].pos_ == "PROPN" for i in (tok.i - 1, tok.i + 1))
            and not _arguments(tok)
        )
        or tok.lower_ in names
    )


def _arguments(tok: Any) -> set[str]:
    """Lemmas of a verb's subject and object heads (pronouns left out: 'it' fits anything)."""
    return {
        c.lemma_.lower()
        for c in tok.children
        if c.dep_ in ("nsubj", "nsubjpass", "dobj", "obj") and c.pos_ in ("NOUN", "PROPN")
    }
