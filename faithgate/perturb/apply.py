"""From a rule's candidate to a variant: tidy the text around it, and drop an edit that the
source still supports or that breaks the sentence."""

from __future__ import annotations

import re
from dataclasses import replace

from faithgate.perturb.context import Context
from faithgate.perturb.edits import TYPES, Candidate, Perturbation
from faithgate.perturb.lexicon import NEGATORS, is_content, is_negated, norm_text, synonyms

# Predicate edits whose truth depends on the replacement's meaning (negation flips polarity,
# so it is never a synonym of the original).
_MEANING_EDITS = {"predicate_antonym", "predicate_verb_intrinsic", "predicate_verb_extrinsic"}


def _still_true(ctx: Context, cand: Candidate) -> bool:
    """Would this predicate edit leave the sentence true? Either the new word is a synonym of
    the old, or one source sentence of the same polarity holds every content word of the
    edited sentence (text or lemma), so the source says it in its own words."""
    if cand.type not in _MEANING_EDITS and cand.detail != "antonym":
        return False  # an antonym filed under circumstance or number (rules 3) is checked too
    edited_tokens = [t for t in ctx.doc if cand.start <= t.idx < cand.end]
    if cand.lemma and any(synonyms(t.lemma_, cand.lemma) for t in edited_tokens):
        return True
    sent = next((s for s in ctx.doc.sents if s.start_char <= cand.start < s.end_char), None)
    if sent is None:
        return False
    words = {
        (t.text.lower(), t.lemma_.lower())
        for t in sent
        if is_content(t) and not cand.start <= t.idx < cand.end
    }
    words |= {
        (w.lower(), (cand.lemma or w).lower())
        for w in re.findall(r"[\w']+", cand.replacement)
        if w.lower() not in NEGATORS
    }
    polarity = is_negated(sent)
    for negated, forms in ctx.src_sent_forms():
        if negated != polarity:
            continue
        if all(text in forms or lemma in forms for text, lemma in words):
            return True
    return False


def _tidy(ctx: Context, cand: Candidate, original: str) -> Candidate:
    """Keep the text around a name swap intact (rules 2): the sentence's final period that
    ends 'U.S.', one article ('The BBC' -> 'The World Bank', not 'The the World Bank') and a
    lower-case 'the' inside a sentence ('on the United States')."""
    rep, start = cand.replacement, cand.start
    if cand.type.startswith(("entity", "circumstance")) and cand.detail != "antonym":
        det = next(
            (
                t
                for t in ctx.doc
                if t.idx + len(t.text) < cand.start
                and t.lower_ == "the"
                and t.dep_ == "det"
                and cand.start <= t.head.idx < cand.end
                and not ctx.summary[t.idx + len(t.text) : cand.start].strip()
            ),
            None,
        )
        if det is not None and not re.match(r"the\s", rep, flags=re.IGNORECASE):
            # 'in the U.S.' -> 'in Mumbai', not 'in the Mumbai': the article goes with the name
            start = det.idx
            if rep[:1].islower() and det.text[:1].isupper():
                rep = rep[:1].upper() + rep[1:]
        before = ctx.summary[:start]
        sentence_start = not before.strip() or before.rstrip()[-1:] in ".!?\"'"
        if re.match(r"the\s", rep, flags=re.IGNORECASE):
            if re.search(r"\b(the|a|an|this|that|these|those)\s+$", before, flags=re.I):
                rep = rep[4:].lstrip()
            elif not sentence_start:
                rep = "t" + rep[1:]
            else:
                rep = "T" + rep[1:]
        if original.endswith(".") and not rep.endswith("."):
            rest = ctx.summary[cand.end :]
            if not rest.strip() or re.match(r"\s+[A-Z\"'“‘(]", rest):
                rep += "."  # 'in the U.S.' ends the sentence: its period is the sentence's
    if rep == cand.replacement and start == cand.start:
        return cand
    return replace(cand, replacement=rep, start=start)


def apply_candidate(ctx: Context, cand: Candidate) -> Perturbation | None:
    original = ctx.summary[cand.start : cand.end]
    if not original or cand.replacement == original:
        return None
    if ctx.rules >= 2:
        cand = _tidy(ctx, cand, original)
        original = ctx.summary[cand.start : cand.end]
        if cand.replacement == original:
            return None
    if ctx.drop_still_true and _still_true(ctx, cand):
        return None
    edited = ctx.summary[: cand.start] + cand.replacement + ctx.summary[cand.end :]
    if edited == ctx.summary:
        return None
    # 'a new deal' -> 'a old deal' would be ungrammatical: keep the article in agreement.
    article = re.search(r"\b(a|an)\s+$", ctx.summary[: cand.start], flags=re.IGNORECASE)
    if article:
        vowel = cand.replacement[:1].lower() in "aeiou"
        if vowel != (article.group(1).lower() == "an"):
            return None
    # An edited sentence that the source states verbatim is not an error.
    new_end = cand.start + len(cand.replacement)
    for sent in ctx.doc.sents:
        if sent.start_char <= cand.start < sent.end_char:
            new_sentence = edited[sent.start_char : sent.end_char + new_end - cand.end]
            if len(new_sentence) > 20 and norm_text(new_sentence) in ctx.src_lower:
                return None
    return Perturbation(
        type=cand.type,
        error_type=cand.error_type or TYPES[cand.type],
        summary=edited,
        original=original,
        replacement=cand.replacement,
        start=cand.start,
        end=cand.end,
        detail=cand.detail,
    )
