"""Word tokens in any language with word boundaries: what the lexical metrics count.

rouge-score's tokenizer keeps only ``[a-z0-9]+`` runs, so Chinese, Russian or Hindi text had no
tokens at all and Arabic was scored on its digits. ``words`` finds words by the Unicode
default word boundaries (UAX #29, through the ``regex`` package's ``(?w)`` mode): Latin,
Cyrillic, Greek, Arabic, Hebrew, Devanagari and other space-separated scripts give their
words; Chinese and Japanese ideographs and hiragana are one token per character (the usual
unit of ROUGE for these languages), and a run of katakana is one token (UAX #29 keeps it
together: ``"コンピュータを使う"`` -> ``コンピュータ``, ``を``, ``使``, ``う``). Inside a
word only letters, marks and digits are kept, and each run of them is a token, so for ASCII
text the tokens are rouge-score's (``"cat's"`` -> ``cat``, ``s``); text is lower-cased.

Scripts written without spaces whose words need a dictionary to find (Thai, Lao, Khmer,
Myanmar, Tibetan) have no UAX #29 boundaries: ``unsupported_script`` names them, and metrics
refuse such text with a plain message instead of scoring characters as words.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import regex

_BOUNDARY = regex.compile(r"(?wV1)\b")
_WORD_CHARS = regex.compile(r"[\p{L}\p{M}\p{N}]+")
_ASCII_WORD = regex.compile(r"[a-z0-9]+")
# Scripts without word separators that UAX #29 cannot segment (a dictionary is needed).
UNSEGMENTED_SCRIPTS = ("Thai", "Lao", "Khmer", "Myanmar", "Tibetan")
# Letters only (``\p{L}``), as the share's denominator counts: a script's combining marks
# (Thai vowel and tone signs, Devanagari matras) counted too made a mostly-Latin text "Thai".
_UNSEGMENTED = regex.compile(
    "(?=" + "|".join(rf"\p{{Script={s}}}" for s in UNSEGMENTED_SCRIPTS) + r")\p{L}"
)
_LETTER = regex.compile(r"\p{L}")
# Scripts ``main_script`` can name: the common ones of written languages.
NAMED_SCRIPTS = (
    "Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Bengali", "Tamil", "Han",
    "Hiragana", "Katakana", "Hangul", "Thai", "Georgian", "Armenian", "Ethiopic",
)  # fmt: skip
_SCRIPT = {name: regex.compile(rf"(?=\p{{Script={name}}})\p{{L}}") for name in NAMED_SCRIPTS}


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (see the module docstring)."""
    tokens: list[str] = []
    for segment in _BOUNDARY.split(text.lower()):
        if segment and not segment.isspace():
            tokens.extend(_WORD_CHARS.findall(segment))
    return tokens


def stemmed_words(text: str) -> list[str]:
    """``words`` with the Porter stemmer applied to ASCII words longer than three letters,
    as rouge-score stems (other scripts are left as they are: Porter is for English)."""
    stem = _porter()
    return [stem(t) if len(t) > 3 and _ASCII_WORD.fullmatch(t) else t for t in words(text)]


@lru_cache(maxsize=1)
def _porter():  # noqa: ANN202 - a bound method
    from nltk.stem import porter

    # A word's stem depends on the word alone: memoised, since texts repeat their words
    # (stemming was a third of overlap's time on short examples once parsing was batched).
    return lru_cache(maxsize=1 << 16)(porter.PorterStemmer().stem)


def main_script(text: str) -> str | None:
    """The script most of the letters of ``text`` are in (more than half of them; e.g.
    ``"Latin"``, ``"Han"``), None when it has no letters, no script holds a majority, or the
    majority is a script not in ``NAMED_SCRIPTS``."""
    return next((n for n in NAMED_SCRIPTS if (script_share(text, n) or 0) > 0.5), None)


def unsupported_script_error(texts: Sequence[str], metric: str) -> str | None:
    """The one-line reason ``metric`` cannot count the words of the first of ``texts`` whose
    script ``words`` cannot split (``unsupported_script``), else None."""
    for text in texts:
        script = unsupported_script(text)
        if script is not None:
            return (
                f"{script} text is not supported: {script} is written without spaces and "
                f"{metric} cannot split it into words"
            )
    return None


def script_share(text: str, script: str) -> float | None:
    """The share of the letters of ``text`` in ``script`` (a Unicode script name, e.g.
    ``"Latin"``), None when it has no letters."""
    letters = len(_LETTER.findall(text))
    if not letters:
        return None
    pattern = _SCRIPT.get(script) or regex.compile(rf"(?=\p{{Script={script}}})\p{{L}}")
    return len(pattern.findall(text)) / letters  # letters of the script only: shares sum to <= 1


def unsupported_script(text: str) -> str | None:
    """The name of a script ``words`` cannot split when most of the letters of ``text`` are
    in it (e.g. ``"Thai"``), else None."""
    letters = _LETTER.findall(text)
    if not letters:
        return None
    found = _UNSEGMENTED.findall(text)
    if len(found) * 2 <= len(letters):
        return None
    for script in UNSEGMENTED_SCRIPTS:
        if regex.match(rf"\p{{Script={script}}}", found[0]):
            return script
    return None
