"""Sentence splitting and windowing of long sources.

One spaCy pipeline is loaded per process (per model name) and reused. Windowing never cuts
silently: every function that drops or splits text returns what it did, and metrics copy that
into their score details.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from faithgate.errors import ModelNotFoundError
from faithgate.types import OTHER_LINE_ENDS

_SPACY_LOCK = threading.Lock()
_PIPELINES: dict[str, Any] = {}


def load_spacy(name: str | None = None) -> Any:
    """The spaCy pipeline for the ``spacy`` role, loaded once per process."""
    from faithgate import models

    spec = models.resolve("spacy", name)
    with _SPACY_LOCK:
        nlp = _PIPELINES.get(spec.location)
        if nlp is None:
            import spacy

            try:
                nlp = spacy.load(spec.location)
            except OSError as exc:
                raise ModelNotFoundError(
                    f"spaCy pipeline {spec.location!r} could not be loaded: {exc}"
                ) from exc
            _refuse_without_sentences(nlp, spec.location)
            _PIPELINES[spec.location] = nlp
    return nlp


def _refuse_without_sentences(nlp: Any, location: str) -> None:
    """Every metric splits texts into sentences: a pipeline with nothing that sets sentence
    boundaries (``spacy.blank``, or one saved without its parser) fails each text with spaCy's
    E030 deep inside scoring. Refused when it loads, saying what to add. Asked of the pipeline
    itself, on two short sentences: a component need not declare what it sets."""
    try:
        if nlp("One. Two.").has_annotation("SENT_START"):
            return
    except Exception:  # noqa: BLE001 - a pipeline that cannot run fails later, in its own words
        return
    raise ModelNotFoundError(
        f"spaCy pipeline {location!r} cannot split sentences: none of its components "
        f"({', '.join(nlp.pipe_names) or 'none'}) sets sentence boundaries; use a pipeline "
        "with a 'parser', 'senter' or 'sentencizer'"
    )


def parse(text: str, spacy_model: str | None = None) -> Any:
    """A spaCy ``Doc`` of ``text`` (cached: metrics parse the same texts repeatedly)."""
    found = _BATCH_PARSED.get((text, spacy_model))
    return found if found is not None else _parse_cached(text, spacy_model)


_PARSE = parse
# Docs parsed by ``preparse``, newest last (at most ``_BATCH_PARSED_MAX``).
_BATCH_PARSED: OrderedDict[tuple[str, str | None], Any] = OrderedDict()
_BATCH_PARSED_MAX = 1024


def preparse(texts: Iterable[str], spacy_model: str | None = None) -> None:
    """Parse many texts at once (``nlp.pipe``, in batches), so that ``parse`` finds their
    Docs: a call per short text cost about 1 ms of the pipeline's own overhead. Give it at
    most ``_BATCH_PARSED_MAX`` texts at a time (older ones make room). Long texts are left to
    ``parse`` (in pieces); nothing is done when ``parse`` was replaced (a test's stand-in)."""
    if parse is not _PARSE:
        return
    todo = [
        t
        for t in dict.fromkeys(texts)
        if len(t) <= PARSE_PIECE_CHARS and (t, spacy_model) not in _BATCH_PARSED
    ]
    todo = todo[:_BATCH_PARSED_MAX]  # as in presplit: never parsed twice
    if not todo:
        return
    nlp = load_spacy(spacy_model)
    for t, doc in zip(todo, nlp.pipe(todo, batch_size=SPLIT_BATCH), strict=True):
        with _SPACY_LOCK:
            _BATCH_PARSED[(t, spacy_model)] = doc
            while len(_BATCH_PARSED) > _BATCH_PARSED_MAX:
                _BATCH_PARSED.popitem(last=False)


# Longest text handed to spaCy in one call. spaCy refuses texts over ``nlp.max_length``
# (1,000,000 characters: error E088) because its parser and NER need about 1 GB per 100,000
# characters; a longer text is parsed in pieces of at most this size, cut at paragraph,
# line, sentence or word boundaries, and the pieces joined into one Doc (``Doc.from_docs``),
# so memory stays bounded and no character is dropped.
PARSE_PIECE_CHARS = 100_000


@lru_cache(maxsize=4096)
def _parse_cached(text: str, spacy_model: str | None) -> Any:
    nlp = load_spacy(spacy_model)
    if len(text) <= PARSE_PIECE_CHARS:
        return nlp(text)
    return parse_in_pieces(nlp, text)


def parse_in_pieces(nlp: Any, text: str) -> Any:
    """``text`` parsed by the pipeline ``nlp`` in ``pieces`` of at most ``PARSE_PIECE_CHARS``
    characters (and never more than ``nlp.max_length``), joined into one ``Doc`` whose text is
    ``text``: for texts spaCy would refuse (E088) or need gigabytes for in one call."""
    from spacy.tokens import Doc

    limit = min(PARSE_PIECE_CHARS, nlp.max_length)
    # One piece per batch: nlp.pipe's default batch (1,000 texts) put a 5 MB text's 50 pieces
    # through the parser at once, and its (tokens, 288) float32 array alone was 1.03 GiB.
    return Doc.from_docs(list(nlp.pipe(pieces(text, limit), batch_size=1)), ensure_whitespace=False)


def pieces(text: str, limit: int) -> list[str]:
    """``text`` cut into consecutive pieces of at most ``limit`` characters whose
    concatenation is ``text``; each cut is after the last paragraph break, else line break,
    else sentence end, else white space in the piece (a hard cut only when there is none)."""
    out: list[str] = []
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = -1
        for sep in ("\n\n", "\n", ". ", " "):
            at = window.rfind(sep)
            if at > limit // 2:
                cut = at + len(sep)
                break
        if cut <= 0:
            cut = limit
        out.append(text[start : start + cut])
        start += cut
    out.append(text[start:])
    return out


def split_sentences(text: str, spacy_model: str | None = None) -> list[str]:
    """Sentences of ``text`` by spaCy's parser, and a line break ends one (``line_breaks``);
    a list number the parser cut off ("2.") stays with its item; empty sentences dropped,
    text kept verbatim."""
    return list(_sentences_cached(text, spacy_model))


# Texts per ``nlp.pipe`` batch when many short texts are split at once.
SPLIT_BATCH = 256
_SPLIT_SENTENCES = split_sentences


def presplit(texts: Iterable[str], spacy_model: str | None = None) -> None:
    """Split many texts into sentences at once, so that ``split_sentences`` finds them
    cached. Short texts go through ``nlp.pipe`` in batches (a call per text cost about 1 ms
    of spaCy's own overhead: most of ``overlap``'s time on short examples); the sentences
    are those ``split_sentences`` gives one text at a time. Does nothing when
    ``split_sentences`` was replaced (tests put a regex splitter in its place)."""
    if split_sentences is not _SPLIT_SENTENCES:
        return
    todo = [t for t in dict.fromkeys(texts) if (t, spacy_model) not in _BATCH_SPLIT]
    # No more than the cache holds: a text split here and dropped before it is asked for
    # would be split twice (the rest are split one at a time when asked for).
    todo = todo[:_BATCH_SPLIT_MAX]
    nlp = load_spacy(spacy_model) if todo else None
    if nlp is None or "parser" not in nlp.pipe_names:
        return  # another splitter: one text at a time, as split_sentences does
    short = [t for t in todo if len(t) <= PARSE_PIECE_CHARS]
    disable = [p for p in _NOT_FOR_SENTENCES if p in nlp.pipe_names]
    for t, doc in zip(short, nlp.pipe(short, disable=disable, batch_size=SPLIT_BATCH), strict=True):
        spans = [(sent.start_char, sent.end_char) for sent in doc.sents]
        _remember(t, spacy_model, _sentences_of(t, spans))


# Sentences split by ``presplit``, newest last (at most ``_BATCH_SPLIT_MAX``).
_BATCH_SPLIT: OrderedDict[tuple[str, str | None], tuple[str, ...]] = OrderedDict()
_BATCH_SPLIT_MAX = 8192


def _remember(text: str, spacy_model: str | None, sentences: tuple[str, ...]) -> None:
    with _SPACY_LOCK:
        _BATCH_SPLIT[(text, spacy_model)] = sentences
        while len(_BATCH_SPLIT) > _BATCH_SPLIT_MAX:
            _BATCH_SPLIT.popitem(last=False)


def clear_caches() -> None:
    """Forget every parse and sentence split kept so far (one-at-a-time and batch caches), so
    the next call parses afresh: for timing cold parses and for tests that swap pipelines."""
    with _SPACY_LOCK:
        _parse_cached.cache_clear()
        _BATCH_PARSED.clear()
        _sentences_alone.cache_clear()
        _BATCH_SPLIT.clear()


# A list item's marker: a bullet or dash, or "1." / "2)" numbering; a line that starts one.
_LIST_MARKER = re.compile(r"[-*+\u2022\u00b7\u2023\u25e6\u2013\u2014]|\d{1,3}[.)]")
_LIST_ITEM = re.compile(rf"[ \t]*(?:{_LIST_MARKER.pattern})[ \t]+\S")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_ENDS_SENTENCE = (".", "!", "?", ":", ";", '"', "'", "\u201d", "\u2019", ")")
# Line ends other than "\n" (``types.OTHER_LINE_ENDS``, which ``types.normalized`` turns into
# "\n" before scoring) are read as "\n" in place here (a CRLF's CR as a space), so that offsets
# into the text stay its own.
_OTHER_LINE_ENDS = str.maketrans(dict.fromkeys(OTHER_LINE_ENDS, "\n"))


def _one_line_end(text: str) -> str:
    """``text`` with every line end a "\n", of the same length (a CRLF becomes " \n")."""
    return text.replace("\r\n", " \n").translate(_OTHER_LINE_ENDS)


def _is_cased(text: str) -> bool:
    """Whether ``text`` is written in both cases, so that a line opening in lower case says
    something: capitals are at least 1% of its letters (a lower-cased corpus keeps a stray one:
    a terminal escape's "[A" in a Polytope summary)."""
    letters = sum(ch.isalpha() for ch in text)
    upper = sum(ch.isupper() for ch in text)
    return upper >= max(1, 0.01 * letters)


def _continues(word: str) -> bool:
    """Whether a line opening with ``word`` goes on with the sentence before it, as far as
    case tells: it opens in lower case ("driven by ...", not "iPhone", "2,000" or a quote)."""
    return word[:1].isalpha() and word[:1].islower() and not any(c.isupper() for c in word)


# Words a claim does not end on (not those that end phrasal verbs or stand alone: "on", "by",
# "her", "this"): a line ending on one (or on a comma, a dash) was cut off.
_CUT_OFF_WORDS = frozenset(
    (  # noqa: SIM905 - 38 words read better as one string than as a list literal
        "a an the and or but nor of to for from with at into onto between than whose its their "
        "our your my is are was were be been has have had will would can could should must"
    ).split(" ")
)


def _cut_off(line: str) -> bool:
    """Whether ``line`` (stripped) stops mid-sentence for certain: on a comma, a dash or an
    article, preposition, conjunction, possessive or auxiliary."""
    if line.endswith((",", "-", "\u2013", "\u2014", "&")):
        return True
    words = line.split()
    return bool(words) and words[-1].lower() in _CUT_OFF_WORDS


def _lines(paragraph: str) -> list[str]:
    return [line.strip() for line in paragraph.split("\n") if line.strip()]


def _wrapped_paragraph(paragraph: str, cased: bool, width: int | None = None) -> bool:
    """Whether one paragraph is prose wrapped at a fixed width (``hard_wrapped``). With
    ``width`` (that of a paragraph of the same text found wrapped), whether its lines fill that
    width as a wrapped paragraph's do, and stop where the next word would not have fitted."""
    lines = _lines(paragraph)
    body = lines[:-1]
    if len(body) < 2:
        return False
    open_ = [k for k, line in enumerate(body) if not line.endswith(_ENDS_SENTENCE)]
    if len(open_) < 0.5 * len(body):
        return False
    if width is not None:
        # The longest line seen is a little under the width text was wrapped at.
        longest = max(len(line) for line in body)
        width = max(width, longest)
        fits = [len(body[k]) + 1 + len(lines[k + 1].split()[0]) <= width for k in open_]
        return (
            longest <= 1.1 * width
            and sum(len(line) >= 0.75 * width for line in body) >= 0.8 * len(body)
            and not any(fits)
        )
    width = max(len(line) for line in body)
    full = sum(len(line) >= 0.75 * width for line in body)
    going_on = sum(_continues(lines[k + 1].split()[0]) or _cut_off(body[k]) for k in open_)
    # In lower-cased text (a tokenised corpus) case tells nothing: more lines must agree.
    continues = going_on >= 0.5 * len(open_) if cased else len(body) >= 3
    return 40 <= width <= 100 and full >= 0.8 * len(body) and continues


def _wrapped_paragraphs(paragraphs: Sequence[str], cased: bool) -> list[bool]:
    """``_wrapped_paragraph`` of each paragraph of one text. A text is wrapped at one width:
    once some paragraph is found wrapped, another whose lines fill that width and break only
    where the next word would not have fitted is wrapped too, whatever its case says (news
    prose wraps before names and numbers)."""
    wrapped = [_wrapped_paragraph(p, cased) for p in paragraphs]
    widths = [max(map(len, _lines(p)[:-1])) for p, w in zip(paragraphs, wrapped, strict=True) if w]
    if widths:
        width = max(widths)
        wrapped = [
            w or _wrapped_paragraph(p, cased, width)
            for p, w in zip(paragraphs, wrapped, strict=True)
        ]
    return wrapped


def hard_wrapped(text: str) -> bool:
    """Whether ``text`` holds prose wrapped at a fixed width (a plain-text mail, a PDF's
    lines): some paragraph of 3+ lines whose lines but the last nearly fill one width of 40-100
    characters and mostly stop mid-sentence, the next line going on in lower case or the line
    stopping on a comma or a word no sentence ends on (in a text with almost no capitals, which
    case cannot tell: 4+ lines). There a line break is not a sentence's end."""
    flat = _one_line_end(text)
    return any(_wrapped_paragraphs(_PARAGRAPH_BREAK.split(flat), _is_cased(flat)))


def line_breaks(text: str) -> list[int]:
    """Offsets of the line breaks in ``text`` that end a sentence whatever the parser says
    (summaries written a sentence or a bullet per line: CNN/DailyMail highlights, an LLM's
    bullet list, headlines without a full stop). Every break ends one, except a break inside a
    ``hard_wrapped`` paragraph, or one after a line that does not end a sentence when that line
    stops on a comma or a word no sentence ends on, or goes on in lower case after a line as
    long as a wrapped one (``_goes_on``), or hangs indented under a list item (a wrapped bullet;
    after a line that was not cut off, only when it opens in lower case or with a digit); a
    break before a list item and a paragraph break always count. CRLF, CR, U+2028, U+2029 and
    NEL are line breaks too."""
    flat = _one_line_end(text)
    if "\n" not in flat.strip():
        return []
    cased = _is_cased(flat)
    # Paragraphs as [start, end) spans of the text, each with its own wrapping.
    spans, at = [], 0
    for m in _PARAGRAPH_BREAK.finditer(flat):
        spans.append((at, m.start()))
        at = m.end()
    spans.append((at, len(flat)))
    wrapped = _wrapped_paragraphs([flat[a:b] for a, b in spans], cased)
    starts = [a for a, _ in spans]
    out = []
    for m in re.finditer("\n", flat):
        i = m.start()
        k = bisect.bisect_right(starts, i) - 1
        a, b = spans[k]
        if not a <= i < b or _LIST_ITEM.match(flat, i + 1):
            out.append(i)  # a paragraph break, or a list item next
            continue
        if wrapped[k]:
            continue
        before = flat[flat.rfind("\n", 0, i) + 1 : i]
        after_end = flat.find("\n", i + 1)
        after = flat[i + 1 : after_end if after_end >= 0 else len(flat)]
        if not before.strip() or not after.strip() or before.rstrip().endswith(_ENDS_SENTENCE):
            out.append(i)
            continue
        if _goes_on(before.strip(), after.split()[0], cased) or (
            _hangs_from_list_item(flat, a, i, after)
            and (not after.lstrip()[:1].isupper() or _cut_off(before.strip()))
        ):
            continue
        out.append(i)
    return out


def _goes_on(before: str, word: str, cased: bool) -> bool:
    """Whether the line after ``before`` (a line that does not end a sentence), opening with
    ``word``, goes on with its sentence, in text written in both cases: ``before`` stops on a
    comma or a word no sentence ends on, or it is as long as a wrapped line (40+ characters)
    and the next opens in lower case. A list of short claims in lower case stays a list; in
    lower-cased text (a tokenised corpus: stray commas, "watch on") every line is a claim."""
    return cased and (_cut_off(before) or (len(before) >= 40 and _continues(word)))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# How far up a line's list item may be (a wrapped bullet is a few lines): each break looks up
# at most this many lines, so a long indented text is read in linear time.
_MAX_ITEM_LINES = 20


def _hangs_from_list_item(flat: str, paragraph_start: int, i: int, after: str) -> bool:
    """Whether the line ``after`` the break at ``i`` is indented under a list item above it in
    its paragraph (a wrapped bullet's next line), every line between indented as deep."""
    depth = _indent(after)
    end = i
    for _ in range(_MAX_ITEM_LINES if depth else 0):
        start = max(flat.rfind("\n", paragraph_start, end) + 1, paragraph_start)
        line = flat[start:end]
        if _indent(line) < depth:
            return bool(_LIST_ITEM.match(line))
        if start == paragraph_start:
            return False
        end = start - 1
    return False


# Components sentence boundaries do not need. The parser sets them, and in spaCy v3 it reads
# only its tok2vec layer, never tags or entities, so running without these gives the same
# boundaries (checked on 200 BUMP sources and summaries: identical) in two thirds of the time.
# Metrics that only split sentences (bertscore, sentsim) use this; a full ``parse`` is still
# one call away for those that read tags, dependencies or entities.
_NOT_FOR_SENTENCES = ("tagger", "attribute_ruler", "lemmatizer", "ner")


def _sentences_cached(text: str, spacy_model: str | None) -> tuple[str, ...]:
    found = _BATCH_SPLIT.get((text, spacy_model))
    return found if found is not None else _sentences_alone(text, spacy_model)


@lru_cache(maxsize=8192)
def _sentences_alone(text: str, spacy_model: str | None) -> tuple[str, ...]:
    nlp = load_spacy(spacy_model)
    disable = [p for p in _NOT_FOR_SENTENCES if p in nlp.pipe_names]
    if "parser" not in nlp.pipe_names:
        doc = parse(text, spacy_model)  # no parser: its own splitter, whatever it reads
        return _sentences_of(text, [(sent.start_char, sent.end_char) for sent in doc.sents])
    if len(text) <= PARSE_PIECE_CHARS:
        doc = nlp(text, disable=disable)
        return _sentences_of(text, [(sent.start_char, sent.end_char) for sent in doc.sents])
    # A long text in pieces (as ``parse`` cuts it), one at a time, keeping only each
    # sentence's offsets: never a Doc of the whole text (a 5 MB text's was gigabytes).
    limit = min(PARSE_PIECE_CHARS, nlp.max_length)
    spans: list[tuple[int, int]] = []
    offset = 0
    parts = pieces(text, limit)
    for part, doc in zip(parts, nlp.pipe(parts, disable=disable, batch_size=1), strict=True):
        spans.extend((offset + sent.start_char, offset + sent.end_char) for sent in doc.sents)
        offset += len(part)
    return _sentences_of(text, spans)


def _sentences_of(text: str, parsed: Sequence[tuple[int, int]]) -> tuple[str, ...]:
    """The sentences of ``text`` from the parser's sentence spans ``parsed`` (character
    offsets): cut at ``line_breaks``, empty ones dropped, list numbers kept with their item."""
    breaks = line_breaks(text)
    spans: list[tuple[int, int]] = []
    for start, end in parsed:
        for cut in breaks[bisect.bisect_right(breaks, start) : bisect.bisect_left(breaks, end)]:
            spans.append((start, cut))
            start = cut + 1
        spans.append((start, end))
    spans = [(a, b) for a, b in spans if text[a:b].strip()]
    # The parser ends a sentence after a list number ("2." / "2)"): it belongs to its item
    # on the same line (a number on a line of its own is left alone).
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if (
            merged
            and _LIST_MARKER.fullmatch(text[merged[-1][0] : merged[-1][1]].strip())
            and "\n" not in _one_line_end(text[merged[-1][1] : a])
        ):
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return tuple(text[a:b].strip() for a, b in merged)


@dataclass(frozen=True)
class Window:
    """A contiguous run of sentences ``[start, end)`` that fits a model's context."""

    start: int
    end: int
    text: str
    n_tokens: int
    truncated: bool = False  # a single sentence longer than the limit was cut


def window_sentences(
    sentences: Sequence[str],
    max_tokens: int,
    count_tokens: Callable[[str], int],
    overlap: int = 1,
) -> list[Window]:
    """Pack sentences greedily into windows of at most ``max_tokens`` tokens.

    Consecutive windows share ``overlap`` sentences so that evidence spanning a boundary is
    seen whole by at least one window. A sentence longer than ``max_tokens`` forms its own window
    and is marked ``truncated`` (the model will cut it; the caller records that).
    """
    if max_tokens <= 0:
        raise ValueError("max_tokens must be positive")
    counts = [count_tokens(s) for s in sentences]
    windows: list[Window] = []
    start = 0
    n = len(sentences)
    while start < n:
        end, total = start, 0
        while end < n and (end == start or total + counts[end] <= max_tokens):
            total += counts[end]
            end += 1
        windows.append(
            Window(start, end, " ".join(sentences[start:end]), total, truncated=total > max_tokens)
        )
        if end >= n:
            break
        # Step back by the overlap but always make progress.
        start = max(end - overlap, start + 1)
    return windows


def relevant_sentences(
    sentences: Sequence[str],
    queries: Sequence[str],
    budget: int,
    count_tokens: Callable[[str], int],
) -> list[int]:
    """Indices, ascending, of the ``sentences`` most relevant to ``queries`` that fit together
    in ``budget`` tokens: the evidence of a long source for a summary's sentences.

    Relevance is the TF-IDF cosine of a query to a sentence (scikit-learn; sublinear term
    frequency, idf over the sentences and queries). LongDocFACTScore (Bishop et al., 2024)
    feeds a short-context scorer each summary sentence's most similar source sentences the same
    way, ranked by embedding cosine; TF-IDF needs no second model.
    Queries take turns down their rankings, so every summary sentence gets evidence before any
    gets its second-best, and each pick brings the sentence before it when that fits too
    (where its pronouns' antecedents usually are). A sentence that does not fit in what is left
    is skipped. A query
    with no word in any sentence ranks the sentences in order, so it gets the lead. Empty when
    no sentence fits at all.
    """
    import numpy as np

    counts = [count_tokens(s) for s in sentences]
    asks = [q for q in queries if q.strip()] or [""]
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectors = TfidfVectorizer(sublinear_tf=True).fit(list(sentences) + asks)
        similarity = (vectors.transform(asks) @ vectors.transform(sentences).T).toarray()
    except ValueError:  # no word at all (symbols only): every ranking is the source order
        similarity = np.zeros((len(asks), len(sentences)))
    rankings = [np.argsort(-row, kind="stable") for row in similarity]
    chosen: set[int] = set()
    used = 0
    for depth in range(len(sentences)):
        for ranking in rankings:
            j = int(ranking[depth])
            if j not in chosen:
                if used + counts[j] > budget:
                    continue
                chosen.add(j)
                used += counts[j]
            if j > 0 and j - 1 not in chosen and used + counts[j - 1] <= budget:
                chosen.add(j - 1)
                used += counts[j - 1]
        if used >= budget or len(chosen) == len(sentences):
            break
    return sorted(chosen)
