"""Document-grounded synthetic NLI pairs, as FactCC made them (Kryscinski et al., 2020,
"Evaluating the Factual Consistency of Abstractive Text Summarization", EMNLP).

From unlabelled documents only: a *claim* is a sentence of the document, often compressed the
way summaries compress (an appositive, a relative or adverbial clause, a trailing prepositional
phrase dropped), and its *premise* is a window of the document's sentences that contains it.

- supported (``entailment``): the claim against its window;
- unsupported, contradicting (``contradiction``): one ``faithgate.perturb`` edit of the claim
  that the window contradicts (negation, antonym, entity/number/date/location swapped for
  another of the window, wrong pronoun);
- unsupported, not stated (``neutral``): an edit that brings in something the window does not
  mention (extrinsic entity, place, time or verb), or another sentence of the same document
  that lies outside the window.

Every choice is drawn from ``random.Random`` seeded per document, so a corpus and a seed give
the same pairs in any order or process.

``SynthConfig.synthesis`` is the revision of these rules. 1 is what the first shipped checker
was trained on (``onnx_models/build_checker.sh`` passes it, so that checker rebuilds byte for
byte). 2, the default, fixes labels that 1 got wrong. It makes 1's random draws until a claim
comes out different (the rest of that document's draws then differ):

- ``compress`` keeps a condition ("if", "unless", "provided", "until", "as long as", ...) and
  a restrictive relative clause (one no comma sets off), and rejects a result left with a
  dangling word ("..., according.", "as workers had been.");
- no unsupported pair (edit, other sentence, added detail) states what its premise says word
  for word (a sentence repeated in the document fell outside its own window);
- the held-out split keeps documents of the same text, and chunks of one article, together
  (``corpora.held_out_key``; ``faithgate.training.dataset``);
- the optional paraphrases resolve "he"/"she"/"his" only to the subject of the sentence before,
  and only when a first name or title agrees (``paraphrase.resolve_pronoun``).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from faithgate.perturb import perturb
from faithgate.text import load_spacy, parse_in_pieces, split_sentences
from faithgate.training.corpora import Document, NLIPair
from faithgate.training.paraphrase import paraphrase
from faithgate.words import words

# NLI label indices (``corpora.LABELS``). Every perturb edit replaces something the window
# states with something else, so it contradicts the window (in SNLI's sense, "extrinsic" swaps
# included); material the window never mentions is neutral.
ENTAILMENT, NEUTRAL, CONTRADICTION = 0, 1, 2
# Dependents whose subtree a summary often drops without changing what the rest asserts.
_DROPPABLE = {"appos", "relcl", "advcl", "parataxis", "npadvmod"}
# Synthesis 2: words that open a condition. The rest of the sentence holds only under it, so
# without it the claim says more than the document ("raise rates if inflation rises").
_CONDITIONS = frozenset(
    ["if", "unless", "provided", "providing", "until", "till", "lest", "assuming", "supposing"]
)
_CONDITION_PHRASES = ("as long as", "so long as", "in case", "on condition")
# A claim ending in one of these lost the words it needed ("..., according.", "had been.").
_DANGLING_POS = frozenset(["ADP", "AUX", "SCONJ", "CCONJ", "DET", "PART"])
_DANGLING_TAGS = frozenset(["MD", "IN", "TO", "WDT", "WP", "POS"])
# Words that make their head's context negative: a detail dropped there strengthens the claim.
_NEGATIVES = frozenset(["no", "not", "never", "nobody", "nothing", "none", "neither", "nor"])
_CLOSING = frozenset([",", ".", ";", ":", "!", "?", ")"])
_TIME_PLACE = frozenset(["DATE", "TIME", "GPE", "LOC", "FAC"])
# What a verb may keep after a drop to still say something (objects, complements, modifiers).
_COMPLEMENTS = frozenset(
    ["dobj", "obj", "attr", "acomp", "ccomp", "xcomp", "dative", "oprd", "prep", "prt"]
    + ["advmod", "npadvmod", "agent", "advcl", "pcomp", "pobj", "acl", "neg"]
)
SYNTHESIS_VERSIONS = (1, 2)


@dataclass(frozen=True)
class SynthConfig:
    claims_per_document: int = 12
    min_claim_words: int = 6
    max_claim_words: int = 45
    max_window_sentences: int = 5
    compress_probability: float = 0.6
    edits_per_claim: int = 2
    unrelated_probability: float = 0.35
    insert_probability: float = 0.35
    seed: int = 0
    # Share of claims that also get a rewritten, still supported form and an edit of that form
    # (``faithgate.training.paraphrase``). 0 reproduces the recipe of the first shipped checker.
    paraphrase_probability: float = 0.0
    # Revision of ``faithgate.perturb``'s edit rules for the contradiction pairs
    # (``perturb(..., rules=...)``). 1 reproduces the recipe of the first shipped checker.
    perturb_rules: int = 1
    # Revision of these synthesis rules (the module docstring): 1 reproduces the data of the
    # first shipped checker; 2 fixes its wrong labels and the held-out split.
    synthesis: int = 2

    def __post_init__(self) -> None:
        if self.synthesis not in SYNTHESIS_VERSIONS or isinstance(self.synthesis, bool):
            raise ValueError(f"synthesis must be one of {SYNTHESIS_VERSIONS}: {self.synthesis!r}")

    def recipe(self) -> dict[str, Any]:
        """The settings as recorded and hashed; a setting added later is left out at its
        "off" value, so an earlier recipe keeps its hash (and its cached pairs)."""
        data = asdict(self)
        if not self.paraphrase_probability:
            data.pop("paraphrase_probability")
        if self.perturb_rules == 1:
            data.pop("perturb_rules")
        if self.synthesis == 1:
            data.pop("synthesis")
        return data

    @classmethod
    def from_recipe(cls, recipe: dict[str, Any]) -> SynthConfig:
        """The config a recorded ``recipe()`` describes: a recipe without ``synthesis`` was
        made by revision 1 (the field's default is the newest revision)."""
        return cls(**{"synthesis": 1, **recipe})


def _edits(
    premise: str, claim: str, rng: random.Random, rules: int = 1, synthesis: int = 2
) -> list[Any]:
    """``faithgate.perturb``'s edits of ``claim`` (at most one per type), seeded from ``rng``;
    none when the parse hits a corner case, which costs that claim its edits, not the corpus.
    Synthesis 1 keeps predicate edits that stay true: the shipped checker's pairs were made
    before perturb dropped them (commit f4224a5), and synthesis 1 makes those pairs again."""
    seed = rng.randrange(1 << 30)
    try:
        return perturb(
            premise,
            claim,
            seed=seed,
            max_per_type=1,
            rules=rules,
            drop_still_true=synthesis >= 2,
        )
    except Exception:  # noqa: BLE001 - see the docstring
        return []


def compress(sent, rng: random.Random, synthesis: int = 1) -> str:  # type: ignore[no-untyped-def]
    """Drop one optional subtree of a parsed sentence (spaCy ``Span``), keeping the clause
    whole; returns the sentence unchanged when nothing can safely go. ``synthesis`` 2 also
    keeps conditions and restrictive relative clauses and refuses a dangling result
    (``_keeps_meaning``), drawing the same random numbers as 1."""
    candidates = []
    for tok in sent:
        if (
            tok.dep_ in _DROPPABLE
            and tok.head.i != tok.i
            or (
                tok.dep_ == "prep"
                and tok.head.pos_ in {"VERB", "AUX"}
                and tok.i > tok.head.i
                and tok.i != sent.end - 1
            )
        ):
            candidates.append(tok)
    rng.shuffle(candidates)
    for tok in candidates:
        sub = list(tok.subtree)
        lo, hi = sub[0].i, sub[-1].i
        if hi - lo + 1 > 0.6 * len(sent):  # would drop most of the sentence
            continue
        # Take the commas that set the subtree off along with it (", X," and ", X." alike).
        opened = lo - 1 >= sent.start and sent.doc[lo - 1].text == ","
        if opened:
            lo -= 1
        # Synthesis 2 leaves a comma that closes an enclosing clause (one comma before the
        # subtree is still open): "The library, which was built in 1952, will ..." loses
        # "in 1952", not ", will".
        inside = sum(t.text == "," for t in sent.doc[sent.start : lo]) % 2 == 1
        closes = synthesis < 2 or opened or not inside
        if hi + 1 < sent.end and sent.doc[hi + 1].text == "," and closes:
            hi += 1
        if not any(t.dep_ == "ROOT" for t in sent if not lo <= t.i <= hi):
            continue
        if synthesis >= 2 and not _keeps_meaning(sent, tok, lo, hi):
            continue
        doc = sent.doc
        left = doc.text[sent.start_char : doc[lo].idx].rstrip()
        right = doc.text[doc[hi].idx + len(doc[hi]) : sent.end_char].strip()
        glue = "" if not right or right[0] in ".,;:!?" else " "
        text = (left + glue + right).strip()
        if len(text.split()) >= 5:
            return text[0].upper() + text[1:]
    return sent.text.strip()


def _keeps_meaning(sent, tok, lo: int, hi: int) -> bool:  # type: ignore[no-untyped-def]
    """Synthesis 2: whether dropping ``tok``'s subtree (tokens ``lo``..``hi`` of ``sent``'s doc,
    commas included) leaves a claim the sentence entails, and a whole one."""
    doc = sent.doc
    if tok.dep_ == "relcl" and doc[lo].text != ",":
        return False  # restrictive ("fires that threaten property"): it narrows its noun
    subtree = list(tok.subtree)
    if len(subtree) != subtree[-1].i - subtree[0].i + 1:
        return False  # the subtree has a gap: the parse is crossed, the span is not its own
    unclosed = hi + 1 < sent.end and doc[hi + 1].text not in _CLOSING
    if doc[lo].text == "," and doc[hi].text != "," and unclosed:
        return False  # ", which it is feared will devour": opened by a comma, not closed
    if _opens_condition(sent, tok):
        return False  # "raise rates if inflation rises" does not entail "raise rates"
    for anc in tok.ancestors:
        # Nor may a condition, a restrictive clause or a negation lose a detail from inside:
        # "smokers who quit (before forty) live as long", "if inflation rises (next year)",
        # "did not close the plant (in March)".
        edge = anc.left_edge.i
        # (an infinitive, "a decision to evacuate people (from their homes)", restricts little)
        restrictive = (anc.dep_ == "relcl" or (anc.dep_ == "acl" and anc.tag_ != "VB")) and not (
            edge > sent.start and doc[edge - 1].text == ","
        )
        negated = anc.lower_ == "without" or any(
            c.dep_ == "neg" or c.lower_ in _NEGATIVES for c in anc.children
        )
        if restrictive or negated or _opens_condition(sent, anc):
            return False
    kept = [t for t in sent if not lo <= t.i <= hi and not t.is_punct]
    if not kept:
        return False
    # The claim's last word, and the word before the gap when punctuation follows it
    # ("... infections were, compared to ...").
    ends = [kept[-1]]
    if lo > sent.start and (hi + 1 >= sent.end or doc[hi + 1].is_punct):
        ends.append(doc[lo - 1])
    for end in ends:
        if end.pos_ in _DANGLING_POS or end.tag_ in _DANGLING_TAGS or end.lemma_ == "be":
            return False
    # Part of a word: "Pakistan-based" -> "-based".
    if (lo > sent.start and not doc[lo - 1].whitespace_ and doc[lo].text not in _CLOSING) or (
        hi + 1 < sent.end and not doc[hi].whitespace_ and doc[hi + 1].text not in _CLOSING
    ):
        return False
    # The word the subtree hung from must still say something without it: "according" (to),
    # "been" (for years), "to ease" (any of the fires) or an active "have referred" (to the
    # report) does not; "would close" (although the union offered cuts) does. A verb's
    # prepositional object ("will lead" to a fall, "was put" on hold) looks like an adjunct to
    # the parse, so a phrase after the verb goes only when it names a time or place.
    head = tok.head
    if not lo <= head.i <= hi:
        rest = [c for c in head.children if not lo <= c.i <= hi]
        phrase = tok.dep_ in {"prep", "npadvmod"}
        after = [c for c in rest if c.dep_ in _COMPLEMENTS and (c.i > head.i or not phrase)]
        if not after:
            adjunct = phrase and any(t.ent_type_ in _TIME_PLACE for t in subtree)
            passive = any(c.dep_ in {"auxpass", "nsubjpass"} for c in rest)
            infinitive = head.tag_ == "VB" and any(c.tag_ == "TO" for c in rest)
            if head.pos_ == "ADP" or head.lemma_ == "be" or (phrase and not adjunct):
                return False
            if head.tag_ == "VBG" or infinitive or (head.tag_ == "VBN" and not passive):
                return False
    return True


def _opens_condition(sent, tok) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``tok``'s subtree is a condition: it opens with (or its marker is) "if",
    "unless", "provided", "until", ..., follows "as long" / "so long", or is an inverted "had
    the referee allowed the goal"."""
    doc = sent.doc
    first = tok.left_edge
    opening = " ".join(t.lower_ for t in doc[max(sent.start, first.i - 2) : first.i + 2])
    return (
        first.lower_ in _CONDITIONS
        or any(c.dep_ == "mark" and c.lower_ in _CONDITIONS for c in tok.children)
        or any(phrase in opening for phrase in _CONDITION_PHRASES)
        or (tok.dep_ == "advcl" and first.lower_ in {"had", "were", "should"} and first.head == tok)
    )


def _stated(hypothesis: str, premise: str) -> bool:
    """Whether ``premise`` says ``hypothesis`` word for word (case and punctuation aside): such
    a pair cannot be labelled unsupported (synthesis 2 drops it)."""
    claim = " ".join(words(hypothesis))
    return bool(claim) and f" {claim} " in f" {' '.join(words(premise))} "


def document_pairs(
    doc: Document, config: SynthConfig, spacy_model: str | None = None
) -> list[NLIPair]:
    """Synthetic pairs of one document (deterministic in ``config.seed`` and ``doc.id``)."""
    rng = random.Random(f"{config.seed}:{doc.id}")
    nlp = load_spacy(spacy_model)
    # One call up to spaCy's limit, as the shipped recipe's pairs were made; a longer text
    # (which spaCy refuses, E088) in pieces, as faithgate.text.parse cuts long texts.
    parsed = nlp(doc.text) if len(doc.text) <= nlp.max_length else parse_in_pieces(nlp, doc.text)
    sents = [s for s in parsed.sents if s.text.strip()]
    if len(sents) < 2:
        return []
    eligible = [
        i
        for i, s in enumerate(sents)
        if config.min_claim_words <= len(s.text.split()) <= config.max_claim_words
        and any(t.pos_ in {"VERB", "AUX"} for t in s)
    ]
    rng.shuffle(eligible)
    checked = config.synthesis >= 2  # no unsupported pair that its premise states verbatim
    out: list[NLIPair] = []
    for i in eligible[: config.claims_per_document]:
        size = rng.randint(1, config.max_window_sentences)
        first = rng.randint(max(0, i - size + 1), i)
        last = min(len(sents), first + size)
        premise = " ".join(s.text.strip() for s in sents[first:last])
        verbatim = sents[i].text.strip()
        claim = verbatim
        if rng.random() < config.compress_probability:
            claim = compress(sents[i], rng, config.synthesis)
        # Both forms are supported: the compressed one keeps positives from being mere copies.
        out.append(NLIPair(premise, verbatim, 0, "supported:verbatim"))
        if claim != verbatim:
            out.append(NLIPair(premise, claim, 0, "supported:compressed"))
        edits = _edits(premise, claim, rng, config.perturb_rules, config.synthesis)
        rng.shuffle(edits)
        if checked:  # after the shuffle: the same random numbers as synthesis 1
            edits = [e for e in edits if not _stated(e.summary, premise)]
        for edit in edits[: config.edits_per_claim]:
            out.append(NLIPair(premise, edit.summary, CONTRADICTION, edit.type))
        if config.paraphrase_probability and rng.random() < config.paraphrase_probability:
            out.extend(_paraphrased_pairs(sents, i, first, last, config, rng))
        outside = [j for j in range(len(sents)) if j < first - 1 or j > last]
        if outside and rng.random() < config.unrelated_probability:
            j = rng.choice(outside)
            other = sents[j].text.strip()
            # Outside the window by index, yet maybe a sentence the window repeats.
            if len(other.split()) >= config.min_claim_words and not (
                checked and _stated(other, premise)
            ):
                out.append(NLIPair(premise, other, NEUTRAL, "unrelated_sentence"))
        if outside and rng.random() < config.insert_probability:
            added = _insert_modifier(claim, [sents[j] for j in outside], premise, rng)
            if added is not None and not (checked and _stated(added, premise)):
                out.append(NLIPair(premise, added, NEUTRAL, "inserted_modifier"))
    return out


def _paraphrased_pairs(
    sents: Sequence[Any], i: int, first: int, last: int, config: SynthConfig, rng: random.Random
) -> list[NLIPair]:
    """A rewrite of claim ``i`` that keeps its meaning (``entailment``) and one edit of that
    rewrite (``contradiction``), against the window widened to the sentences the rewrite draws
    on: minimal pairs on abstractive text, so that wording alone does not decide the label."""
    found = paraphrase(sents, i, rng, config.max_claim_words, config.synthesis)
    if found is None:
        return []
    text, lo, hi, kind = found
    premise = " ".join(s.text.strip() for s in sents[min(first, lo) : max(last, hi)])
    out = [NLIPair(premise, text, ENTAILMENT, f"supported:paraphrase:{kind}")]
    edits = _edits(premise, text, rng, config.perturb_rules, config.synthesis)
    if edits:
        edit = rng.choice(edits)
        if not (config.synthesis >= 2 and _stated(edit.summary, premise)):
            out.append(NLIPair(premise, edit.summary, CONTRADICTION, f"paraphrased:{edit.type}"))
    return out


def _insert_modifier(claim: str, others: Sequence, premise: str, rng: random.Random) -> str | None:  # type: ignore[type-arg]
    """The claim with a time/place/manner phrase taken from a sentence outside the window
    appended before its final punctuation: a detail the window does not state (the commonest
    extrinsic error of abstractive summaries)."""
    phrases = [
        "".join(t.text_with_ws for t in tok.subtree).strip()
        for sent in others
        for tok in sent
        if tok.dep_ in {"prep", "npadvmod"} and tok.head.pos_ in {"VERB", "AUX"}
    ]
    phrases = [p for p in phrases if 2 <= len(p.split()) <= 6 and p.lower() not in premise.lower()]
    if not phrases or not claim.endswith("."):
        return None
    return f"{claim[:-1]} {rng.choice(phrases)}."


def write_pairs(
    documents: Sequence[Document],
    config: SynthConfig,
    path: Path,
    spacy_model: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    make: Callable[[Document], list[NLIPair]] | None = None,
    split_key: Callable[[Document], str] | None = None,
) -> dict[str, list[NLIPair]]:
    """Pairs of each document (by id, in ``documents`` order), generated into ``path`` (JSONL,
    one line per document) and resumed after the documents already there: an interrupted run
    loses at most the document it was writing. ``make`` builds one document's pairs (default:
    ``document_pairs``). ``split_key``: written into each line as ``split`` (the key the
    held-out split hashes, for readers of the file that have no documents, e.g. ``ship``).
    Ids must be unique: pairs are kept per id (callers check, with messages naming the
    files)."""
    repeated = sorted(k for k, n in Counter(doc.id for doc in documents).items() if n > 1)
    if repeated:  # one document's pairs would silently stand in for the other's
        raise ValueError(f"document ids repeated: {', '.join(map(repr, repeated[:5]))}")
    done: dict[str, list[NLIPair]] = {}
    if path.exists():
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a torn last line: that document is redone
                    continue
                done[row["doc"]] = [NLIPair(**p) for p in row["pairs"]]
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
    with path.open("a", encoding="utf-8") as fh:
        if torn:  # end the torn line, so the next document starts a line of its own
            fh.write("\n")
        for k, doc in enumerate(documents):
            if doc.id not in done:
                pairs = make(doc) if make is not None else document_pairs(doc, config, spacy_model)
                row: dict[str, Any] = {"doc": doc.id, "pairs": [asdict(p) for p in pairs]}
                if split_key is not None:
                    row["split"] = split_key(doc)
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                done[doc.id] = pairs
            if progress is not None:
                progress(k + 1, len(documents))
    return {doc.id: done[doc.id] for doc in documents}


def label_counts(pairs: Sequence[NLIPair]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in pairs:
        counts[p.kind] = counts.get(p.kind, 0) + 1
    return dict(sorted(counts.items()))


# --- Labelled summaries (source, summary, faithful or not) -> sentence-level pairs ----------

_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "by",
        "with",
        "from",
        "and",
        "or",
        "but",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "has",
        "have",
        "had",
        "it",
        "its",
        "he",
        "she",
        "they",
        "his",
        "her",
        "their",
        "this",
        "that",
        "these",
        "those",
        "as",
        "not",
        "no",
        "said",
        "says",
        "will",
        "would",
    ]
)


def _content_tokens(text: str) -> list[str]:
    return [w for w in words(text) if w not in _STOP]


def evidence(sentence: str, source_sentences: Sequence[str], k: int) -> str:
    """The ``k`` source sentences sharing most content words (and bigrams) with ``sentence``,
    in source order: the premise a summary sentence is checked against (as ``entail_topk``
    retrieves at scoring time, here lexically so building the data needs no model)."""
    tokens = _content_tokens(sentence)
    want = set(tokens) | set(zip(tokens, tokens[1:], strict=False))
    scored = []
    for j, src in enumerate(source_sentences):
        sw = _content_tokens(src)
        have = set(sw) | set(zip(sw, sw[1:], strict=False))
        scored.append((len(want & have), -j))
    top = sorted(range(len(source_sentences)), key=lambda j: scored[j], reverse=True)[:k]
    return " ".join(source_sentences[j].strip() for j in sorted(top))


def labelled_summary_pairs(
    row_id: str,
    source: str,
    summary: str,
    faithful: bool,
    config: SynthConfig,
    spacy_model: str | None = None,
) -> list[NLIPair]:
    """Sentence-level pairs from one human-labelled (source, summary) item.

    The summaries are real system or reference outputs, so they teach what synthetic claims
    cannot: abstractive wording (fusion, paraphrase, headline style) that is still supported.
    - faithful summary: each sentence against its retrieved evidence (``entailment``), and up
      to ``edits_per_claim`` ``faithgate.perturb`` edits of each sentence (``contradiction``):
      minimal pairs on abstractive text;
    - unfaithful one-sentence summary: that sentence (``contradiction``);
    - unfaithful longer summary: which sentence is wrong is not known, so the whole summary
      against the union of its sentences' evidence (``contradiction``)."""
    rng = random.Random(f"{config.seed}:labelled:{row_id}")
    src = [s for s in split_sentences(source, spacy_model) if s.strip()]
    sents = [s for s in split_sentences(summary, spacy_model) if len(s.split()) >= 3]
    if not src or not sents:
        return []
    premises = [evidence(s, src, rng.randint(2, 4)) for s in sents]
    if not faithful:
        if len(sents) == 1:
            return [NLIPair(premises[0], sents[0], CONTRADICTION, "labelled:unfaithful")]
        union = evidence(summary, src, min(len(src), 2 * len(sents) + 1))
        return [NLIPair(union, " ".join(sents), CONTRADICTION, "labelled:unfaithful_summary")]
    out: list[NLIPair] = []
    for premise, sent in zip(premises, sents, strict=True):
        out.append(NLIPair(premise, sent, ENTAILMENT, "labelled:faithful"))
        edits = _edits(premise, sent, rng, config.perturb_rules, config.synthesis)
        rng.shuffle(edits)
        if config.synthesis >= 2:
            edits = [e for e in edits if not _stated(e.summary, premise)]
        for edit in edits[: config.edits_per_claim]:
            out.append(NLIPair(premise, edit.summary, CONTRADICTION, f"labelled:{edit.type}"))
    return out
