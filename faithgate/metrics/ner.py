"""Named-entity overlap: are the summary's entities found in the source?

Entity hallucination is the most frequent factual error of abstractive summarizers (Nan et al.,
2021, "Entity-level Factual Consistency of Abstractive Text Summarization", EACL, who measure
the share of summary entities that appear in the source). spaCy runs through
``faithgate.text`` (one pipeline per process, the ``spacy`` role). No torch import here.

An entity is looked up in the source's full text, not only among the entities spaCy recognised
there: a small pipeline misses or mislabels many source mentions ("near the port of Rotterdam"
yields no GPE "Rotterdam"), and each miss was a false alarm on a faithful summary.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import regex

from faithgate import text as textmod
from faithgate.engines.spans import token_f1
from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.safety.escape import printable
from faithgate.types import Example, Score, SentenceScore
from faithgate.words import main_script, script_share

# The ``regex`` module, not ``re``: its ``\w`` keeps combining marks (Devanagari and Thai vowel
# signs) in their words, where ``re`` cut "राम" to "र", "म" and found it in "रोम".
# Examples whose texts are parsed at once (``faithgate.text.preparse``; two texts each, within
# its cache of 1,024 Docs).
PREPARSE_EXAMPLES = 256
_LEADING = regex.compile(r"^(the|a|an)\s+")
_POSSESSIVE = regex.compile(r"['\u2019]s$")
# Punctuation, except a decimal point between digits: "U.S." -> "US", "3,500" -> "3500", but
# "7.8" stays "7.8" so that it does not meet "78". Currency signs are kept ("€5" is not "$5").
_NONWORD = regex.compile(r"[^\w\s.\p{Sc}]|(?<!\d)\.|\.(?!\d)")
_CURRENCY_SIGN = regex.compile(r"\p{Sc}")
_LETTER = regex.compile(r"\p{L}")
# Possessive endings anywhere in a text: "Millbrook's", "Millbrook’s", "the Smiths'"; not the
# "'s" of a decade ("the 1990's").
_POSSESSIVES = regex.compile(r"(?<!\d)['\u2019]s\b|(?<=s)['\u2019](?!\w)")
# A word with inner punctuation kept together: "U.S", "Doyle-Keefe", "O'Brien", "AT&T",
# and a thousands separator: "3,500".
_WORD = regex.compile(r"\w+(?:(?:[-.'\u2019&]|(?<=\d),(?=\d))\w+)*")
# The same text cut at every punctuation mark and between letters and digits, numbers kept
# whole: "al-Shabaab" -> "al", "Shabaab"; "1,100ft" -> "1,100", "ft". Tokenised corpora write
# "al - Shabaab", "a 13 - year - old", "3, 000" and "2. 4" (CNN/DM as QAGS gives it), so a
# mention is looked up in both forms, and a number's tokenised groups are rejoined (a thousands
# group is exactly three digits); a number is never cut: "100" is not found in "1,100", nor a
# decade from its "s": "1990" is not found in "1990s".
_SPLIT_WORD = regex.compile(r"\d+(?:,\s?\d{3}(?!\d)|\.\s?\d+)*(?:['\u2019]?s(?!\w))?|[^\W\d_]+")
_SPACE = regex.compile(r"\s+")
# What currency a sign or a word names: a MONEY mention is found only where the source does
# not name another currency beside the number ("€5 million" is not in "$5 million").
CURRENCY_SIGNS = {
    "$": {"dollar"}, "€": {"euro"}, "£": {"pound"}, "¥": {"yen", "yuan"}, "₹": {"rupee"},
    "₩": {"won"}, "₽": {"ruble", "rouble"}, "₺": {"lira"}, "₪": {"shekel"}, "₣": {"franc"},
}  # fmt: skip
# Canonical words (``canonical_word``: plural "s" cut) that name a currency after a number.
CURRENCY_WORDS = frozenset(
    {"dollar", "usd", "euro", "eur", "pound", "sterling", "gbp", "yen", "yuan", "renminbi",
     "rupee", "ruble", "rouble", "lira", "shekel", "franc", "cent", "penny", "pence"}
)  # fmt: skip
_ARTICLES = frozenset({"the", "a", "an"})
# The script of the languages spaCy ships trained pipelines for, where it is one script. A
# summary mostly in another script has no entity such a pipeline can find, and scoring it
# no_entity_value (1.0) would pass any text in that script.
PIPELINE_SCRIPTS = {
    **dict.fromkeys(
        ("en", "de", "fr", "es", "it", "pt", "nl", "ca", "da", "fi", "hr", "lt", "nb", "pl",
         "ro", "sl", "sv"),
        "Latin",
    ),
    **dict.fromkeys(("ru", "uk", "mk"), "Cyrillic"),
    "el": "Greek",
    "zh": "Han",
    "ko": "Hangul",
}  # fmt: skip


def normalise_entity(text: str) -> str:
    """Lower case, no leading article, no trailing possessive, punctuation but currency signs
    dropped (a sign is a word of its own), spaces collapsed: "The U.S.'s" -> "us", "Mary
    Doyle-Keefe" -> "mary doylekeefe", "€5 million" -> "€ 5 million"."""
    t = text.strip().lower()
    t = _POSSESSIVE.sub("", t)
    t = _LEADING.sub("", t)
    t = _NONWORD.sub("", t)
    t = _CURRENCY_SIGN.sub(lambda m: f" {m.group()} ", t)
    return " ".join(t.split())


def canonical_word(word: str) -> str:
    """One word's matching form: lower case, punctuation dropped, and a plural or third-person
    "s" cut from words longer than three letters with a letter before it ("Americans" ->
    "american", "Paris" -> "pari" on both sides, which is harmless), so inflected mentions
    meet; a decade keeps it ("1990s" is not "1990")."""
    w = _NONWORD.sub("", word.lower())
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and _LETTER.search(w[:-1]):
        w = w[:-1]
    return w


def currencies(text: str) -> set[str]:
    """The currencies ``text`` names by sign or by word (``CURRENCY_SIGNS``, ``CURRENCY_WORDS``)."""
    found = {c for sign in _CURRENCY_SIGN.findall(text) for c in CURRENCY_SIGNS.get(sign, ())}
    return found | {w for w, _, _ in text_words(text) if w in CURRENCY_WORDS}


def _currencies_at(text: str, start: int, end: int) -> set[str]:
    """The currencies the source names at a match ``text[start:end]``: inside it, a sign just
    before it ("$5 million", "US$ 5") or a currency word just after it ("5 million dollars")."""
    around = currencies(text[start:end])
    sign = regex.search(r"(\p{Sc})\s*$", text[max(0, start - 4) : start])
    if sign:
        around |= CURRENCY_SIGNS.get(sign.group(1), set())
    after = regex.match(r"\s*(\w+)", text[end : end + 40])
    if after and canonical_word(after.group(1)) in CURRENCY_WORDS:
        around.add(canonical_word(after.group(1)))
    return around


def text_words(text: str, split: bool = False) -> list[tuple[str, int, int]]:
    """(canonical word, start, end) of every word of ``text``; possessive endings are blanked
    first (same length, so offsets stay those of ``text``). ``split`` cuts words at inner
    punctuation and between letters and digits too ("Doyle-Keefe" and "1,100ft" are two words
    each), never inside a number, whose tokenised groups it rejoins ("3, 000" is one)."""
    plain = _POSSESSIVES.sub(lambda m: " " * len(m.group()), text)
    out = []
    for m in (_SPLIT_WORD if split else _WORD).finditer(plain):
        w = canonical_word(_SPACE.sub("", m.group()))
        if w:
            out.append((w, m.start(), m.end()))
    return out


class _WordIndex:
    """One tokenisation of a text, indexed by canonical word."""

    def __init__(self, text: str, split: bool) -> None:
        self.split = split
        self.words = text_words(text, split)
        self.positions: dict[str, list[int]] = {}
        for i, (w, _, _) in enumerate(self.words):
            self.positions.setdefault(w, []).append(i)

    def find(self, mention: str) -> Iterator[tuple[int, int]]:
        """Every span of the text where the mention's words occur consecutively."""
        words = [w for w, _, _ in text_words(mention, self.split)]
        while words and words[0] in _ARTICLES and len(words) > 1:
            words = words[1:]
        if not words:
            return
        n = len(words)
        for i in self.positions.get(words[0], []):
            if [w for w, _, _ in self.words[i : i + n]] == words:
                yield self.words[i][1], self.words[i + n - 1][2]


class SourceText:
    """A source's words, indexed for finding a mention: a summary entity is found when its
    canonical words occur consecutively in the source (a leading article ignored), with words
    kept whole at inner punctuation ("U.S" meets "US") or, failing that, cut there and between
    letters and digits on both sides ("al-Shabaab" meets "al - Shabaab", "1,100" meets
    "1,100ft"), numbers never cut but their tokenised groups rejoined ("3, 000" meets
    "3,000")."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._indexes = (_WordIndex(text, split=False), _WordIndex(text, split=True))

    def find(self, mention: str, money: bool = False) -> str | None:
        """The source's own wording of ``mention``, or None when it does not occur. A mention
        with a currency sign (or any MONEY mention, ``money``) is not found where the source
        names another currency beside it ("€5 million" in "$5 million" or "5 million
        dollars"); the source naming none is no mismatch ("$5 million" in "5 million")."""
        want = currencies(mention) if money or _CURRENCY_SIGN.search(mention) else set()
        for index in self._indexes:
            for start, end in index.find(mention):
                there = _currencies_at(self.text, start, end) if want else set()
                if not there or want & there:
                    return self.text[start:end]
        return None


def _may_set_entities(nlp: Any, name: str) -> bool:
    """Whether pipeline component ``name`` may set ``doc.ents``: it says so (``ner``,
    ``entity_ruler``), it is a ``span_ruler`` told to (``annotate_ents``), or it is not spaCy's
    own and says nothing of what it sets (a project's component, spacy-llm's): trusted."""
    meta = nlp.get_pipe_meta(name)
    if "doc.ents" in meta.assigns:
        return True
    pipe = nlp.get_pipe(name)
    if meta.factory == "span_ruler":
        return bool(getattr(pipe, "annotate_ents", False))
    own = str(getattr(pipe, "__module__", "")).split(".")[0] == "spacy"
    return not own and not meta.assigns


@register
class EntityOverlap(Metric):
    """Entity precision of the summary against the source, grouped by entity label.

    For each entity e of the summary (spaCy NER, label L(e)) and the source entities E_L of the
    same label:

        s(e) = 1                               when e occurs in the source text
        s(e) = max_{f in E_L} match(e, f)      otherwise (0 when no source entity of label L)
        value = 1/|E| sum_{e in E} s(e)

    "Occurs in the source text": the entity's words appear consecutively in the source after
    normalising both (case, punctuation but a decimal point, possessives, a plural or verb "s", a
    leading article), whatever spaCy recognised there (``SourceText``);
    ``details.entities[*].found_in`` says ``text`` or ``entity``. Version 4 also cuts words at
    inner punctuation and between letters and digits when the whole words do not meet, so a
    tokenised source ("al - Shabaab", "3, 000", "2. 4") or a unit ("1,100ft") is no false
    alarm, never cuts a number ("100" is not found in "1,100"), and keeps a decimal point
    ("7.8" does not meet "78"); version 3 cut numbers too; version 2 compared whole words
    only; version 1 matched source entities only. Since version 6 a decade keeps its "s"
    ("the 1990s" does not meet "1990", nor "1990" "the 1980s"), a MONEY mention is not found
    where the source names another currency beside the number ("€5 million" is not in "$5
    million"; "$5 million" is in "5 million dollars" and in "5 million"), currency signs are
    part of the normalised entity ("€ 5 million"), and words keep their combining marks
    (Devanagari and Thai vowel signs: "राम" does not meet "रोम").

    ``match = exact``: 1 when the normalised texts are equal (case, leading article, possessive
    and punctuation ignored), else 0 -- Nan et al.'s (2021) precision-source. ``match =
    token_f1``: bag-of-words F1 of the normalised texts, so "Keefe" partly matches "Mary Doyle
    Keefe". ``labels`` restricts the entity types considered (default: all of spaCy's).

    A summary with no entity (of the selected labels) has nothing this metric can check: its
    value is the ``no_entity_value`` setting (default 1.0: no entity, so no hallucinated entity)
    and ``details.no_entities`` is true, so reports and gates can tell "no entity" from "every
    entity found"; set ``no_entity_value = "nan"`` to make such summaries unscorable (a gate
    then fails them) or ``0.0`` to count them against the summary. Per summary sentence: the
    mean of its entities' s(e) (NaN for a sentence without entities), with the matched source
    entities as evidence.

    A summary at most half of whose letters are in the script of the pipeline's language
    (Chinese, Japanese or Arabic text under the default English pipeline) is a failed score, not
    "no entity": the pipeline cannot find entities there (``PIPELINE_SCRIPTS``; version 5).
    """

    name = "ner"
    description = "share of summary named entities found in the source text (normalised)"
    family = "structure"
    # 2: entities are also found in the source's full text; 3: also with words cut at inner
    # punctuation (tokenised sources), and a decimal point is kept; 4: numbers are not cut
    # (3 found "100" in "1,100"), letters and digits are ("1,100ft")
    # 5: a summary mostly in a script the pipeline's language is not written in fails (it
    # scored no_entity_value, 1.0); 6: decades keep their "s", currencies are compared for
    # MONEY, and words keep combining marks (``regex``'s \w)
    version = "6"
    roles = {"spacy": "pipeline"}
    defaults = {"match": "exact", "labels": None, "no_entity_value": 1.0}
    bounds = (0.0, 1.0)  # a share (no_entity_value is in [0, 1] too)
    scale = (
        "share of the summary's named entities found in the source, 0..1 "
        "(no entity: {no_entity_value})"
    )
    sentence_value = "share of the sentence's entities found in the source (0..1; - = no entity)"
    MATCHES = ("exact", "token_f1")

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        """How many entities the source has, and the first five it lacks."""
        d = details
        if d.get("no_entities"):
            return "no named entities in the summary (value = no_entity_value)"
        found = sum(1 for e in d.get("entities", []) if e.get("score", 0) >= 1.0)
        text = f"{found}/{d.get('n_entities')} entities found in source"
        if d.get("unsupported"):
            text += "; not found: " + ", ".join(d["unsupported"][:5])
        return text

    def validate_settings(self) -> None:
        if self.settings["match"] not in self.MATCHES:
            raise InputError(
                f"metric 'ner': match must be one of {', '.join(self.MATCHES)}, "
                f"got {self.settings['match']!r}"
            )
        labels = self.settings["labels"]
        if labels is not None:
            if isinstance(labels, str):
                labels = [x.strip() for x in labels.split(",") if x.strip()]
            if not isinstance(labels, list | tuple) or not all(isinstance(x, str) for x in labels):
                raise InputError("metric 'ner': labels must be a list of spaCy entity labels")
            if not labels:  # no label: no entity anywhere, so every summary scored 1.0
                raise InputError(
                    "metric 'ner': labels is empty; name at least one spaCy entity label "
                    "(or leave it unset for the default set)"
                )
            self.settings["labels"] = sorted({x.upper() for x in labels})
        empty = self.settings["no_entity_value"]
        if isinstance(empty, str) and empty.lower() == "nan":
            self.settings["no_entity_value"] = "nan"
        elif isinstance(empty, bool) or not isinstance(empty, int | float) or not 0 <= empty <= 1:
            raise InputError("metric 'ner': no_entity_value must be a number in [0, 1] or 'nan'")
        else:
            self.settings["no_entity_value"] = float(empty)

    def _entities(self, doc: Any) -> list[Any]:
        labels = self.settings["labels"]
        return [e for e in doc.ents if labels is None or e.label_ in labels]

    def _match(self, a: str, b: str) -> float:
        if self.settings["match"] == "exact":
            return 1.0 if a == b else 0.0
        return token_f1(a.split(), b.split())

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        self._check_pipeline(ctx.spacy_model)
        shash = self.settings_hash(ctx)
        scores = []
        for at in range(0, len(examples), PREPARSE_EXAMPLES):
            chunk = examples[at : at + PREPARSE_EXAMPLES]
            # Parsed at once (nlp.pipe): the same Docs as one text at a time, without the
            # pipeline's per-call overhead (most of the time on short examples).
            textmod.preparse((t for ex in chunk for t in (ex.summary, ex.source)), ctx.spacy_model)
            scores.extend(self._one(ex, ctx, shash) for ex in chunk)
        return scores

    def _check_pipeline(self, spacy_model: str | None) -> None:
        """Refuse (exit 2) a pipeline that can find none of the entities asked for: without an
        entity finder, or with ``labels`` it never assigns (a typo, "PERSONS"), every summary
        has no entity and scores ``no_entity_value`` (1.0): a gate that passes invented names."""
        checked: set[str | None] = self.__dict__.setdefault("_checked_pipelines", set())
        if spacy_model in checked:
            return
        nlp = textmod.load_spacy(spacy_model)
        finders = [name for name in nlp.pipe_names if _may_set_entities(nlp, name)]
        where = f"metric 'ner': the spaCy pipeline '{printable(nlp.meta.get('name', '?'))}'"
        if not finders:
            raise InputError(
                f"{where} has no entity recognizer (components: "
                f"{printable(', '.join(nlp.pipe_names) or 'none')}), so it finds no entity and "
                "every summary would score no_entity_value; give the spacy role a pipeline "
                "with 'ner'"
            )
        listed = [getattr(nlp.get_pipe(name), "labels", None) for name in finders]
        # A component that does not say which labels it sets is trusted with any.
        if all(
            isinstance(x, list | tuple | set | frozenset) and all(isinstance(y, str) for y in x)
            for x in listed
        ):
            known = {label for labels in listed for label in labels}
            unknown = [x for x in self.settings["labels"] or () if x not in known]
            if unknown:
                raise InputError(
                    f"{where} does not assign the entity label(s) "
                    f"{printable(', '.join(map(repr, unknown)))} (it has: "
                    f"{printable(', '.join(sorted(known)) or 'none')}); a label it never "
                    "assigns matches nothing"
                )
        checked.add(spacy_model)

    def _one(self, ex: Example, ctx: ScoringContext, shash: str) -> Score:
        summary_doc = textmod.parse(ex.summary, ctx.spacy_model)
        expected = PIPELINE_SCRIPTS.get(summary_doc.lang_)
        share = script_share(ex.summary, expected) if expected is not None else None
        if share is not None and share <= 0.5:
            # Whatever the other script is (mixed Japanese, Gujarati ...), the pipeline reads
            # at most half of the summary.
            script = main_script(ex.summary)
            what = f"mostly in {script} script" if script else f"not mostly in {expected} script"
            return Score.failed(
                self.name,
                shash,
                ex.id,
                f"the summary is {what}, but the spaCy pipeline ({summary_doc.lang_!r}) reads "
                f"{expected} script and cannot find its entities; give the spacy role a "
                "pipeline for its language",
            )
        source_doc = textmod.parse(ex.source, ctx.spacy_model)
        by_label: dict[str, dict[str, str]] = {}  # label -> normalised -> first surface form
        for ent in self._entities(source_doc):
            by_label.setdefault(ent.label_, {}).setdefault(normalise_entity(ent.text), ent.text)

        source_text = SourceText(ex.source)
        entities = []
        for ent in self._entities(summary_doc):
            found_in: str | None = None
            best, best_text = 0.0, source_text.find(ent.text, money=ent.label_ == "MONEY")
            if best_text is not None:
                best, found_in = 1.0, "text"
            else:
                norm = normalise_entity(ent.text)
                for cand, surface in by_label.get(ent.label_, {}).items():
                    m = self._match(norm, cand)
                    if m > best:
                        best, best_text, found_in = m, surface, "entity"
                        if m == 1.0:
                            break
            entities.append(
                {
                    "text": ent.text,
                    "label": ent.label_,
                    "score": best,
                    "match": best_text,
                    "found_in": found_in,
                    "start_char": ent.start_char,
                    "end_char": ent.end_char,
                }
            )

        sentences = []
        for i, sent in enumerate(s for s in summary_doc.sents if s.text.strip()):
            inside = [e for e in entities if sent.start_char <= e["start_char"] < sent.end_char]
            value = sum(e["score"] for e in inside) / len(inside) if inside else float("nan")
            found = [f"{e['text']} ~ {e['match']}" for e in inside if e["match"]]
            sentences.append(SentenceScore(i, sent.text.strip(), value, "; ".join(found) or None))

        details: dict[str, Any] = {
            "match": self.settings["match"],
            "n_entities": len(entities),
            "n_source_entities": sum(len(v) for v in by_label.values()),
            "no_entities": not entities,
            "entities": entities,
            "unsupported": [e["text"] for e in entities if e["score"] < 1.0],
        }
        if not entities:
            empty = self.settings["no_entity_value"]
            if empty == "nan":
                score = Score.failed(self.name, shash, ex.id, "the summary has no named entities")
                score.details, score.sentences = details, sentences
                return score
            return Score(self.name, float(empty), shash, ex.id, sentences, details)
        value = sum(e["score"] for e in entities) / len(entities)
        return Score(self.name, value, shash, ex.id, sentences, details)
