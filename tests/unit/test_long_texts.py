"""Long texts: refused past the documented limit before scoring, scored in bounded memory under
it, with the same scores as before for ordinary texts (issue 49).

A 5 MB summary made ``overlap`` allocate 12 GB (spaCy's parser given all 50 pieces of the text in
one batch, then rouge-score's LCS table of summary x source Python integers) and fail after
minutes; a 5 MB source, 16.8 GB.
"""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner
from fake_encoder import regex_split

from faithgate import text as textmod
from faithgate.cli import cli
from faithgate.errors import InputError
from faithgate.metrics import embedding, overlap
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.scoring import scorer as scorer_module
from faithgate.types import Example


def test_a_text_over_the_limit_is_refused_before_scoring(monkeypatch, tmp_path):
    monkeypatch.setattr(scorer_module, "MAX_TEXT_CHARS", 1000)
    (tmp_path / "src.txt").write_text("The cat sat on the mat.", encoding="utf-8")
    summary = "The cat sat. " * 100  # 1,300 characters

    def never(*args, **kwargs):
        raise AssertionError("scored a text over the limit")

    monkeypatch.setattr(overlap.Overlap, "score_batch", never)
    res = CliRunner().invoke(
        cli,
        [
            "score",
            "--metric",
            "overlap",
            "--source",
            str(tmp_path / "src.txt"),
            "--summary",
            summary,
        ],
    )
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.splitlines()
    assert "summary is 1,299 characters, over the limit of 1,000 characters" in line


def test_the_scorer_refuses_a_long_source_with_the_cache_too(monkeypatch, tmp_path):
    monkeypatch.setattr(scorer_module, "MAX_TEXT_CHARS", 50)
    s = scorer_module.Scorer(["overlap"], cache=tmp_path / "c.sqlite")
    with pytest.raises(InputError, match=r"example long\b.*its source is 60 characters"):
        s.score([Example("ok", "short", "short"), Example("long", "x" * 60, "short")])
    with pytest.raises(InputError, match="its source is 60 characters"):
        s.compute([Example("long", "x" * 60, "short")])


def test_rouge_l_and_n_equal_rouge_score_on_random_token_lists():
    from rouge_score import rouge_scorer as rs

    rnd = random.Random(7)
    for trial in range(150):
        vocab = rnd.randint(1, 6)
        a = [str(rnd.randint(0, vocab)) for _ in range(rnd.randint(0, 25))]
        b = [
            str(rnd.randint(0, vocab))
            for _ in range(rnd.randint(0, 600 if trial % 10 == 0 else 25))
        ]
        assert overlap.rouge_l_precision(a, overlap.TokenBits(b)) == float(
            rs._score_lcs(b, a).precision
        )
        for n in (1, 2):
            expected = rs._score_ngrams(rs._create_ngrams(b, n), rs._create_ngrams(a, n))
            got = overlap.rouge_n_precision(overlap.ngram_counts(a, n), overlap.ngram_counts(b, n))
            assert got == float(expected.precision)


def test_overlap_on_a_long_summary_and_source_stays_in_bounded_memory(monkeypatch):
    """2,000 words against 2,000: rouge-score's LCS table alone was 4 million list cells
    (32 MB of pointers); now a bit per source token."""
    monkeypatch.setattr(textmod, "split_sentences", regex_split)
    rnd = random.Random(0)
    words = [f"w{i}" for i in range(300)]
    source = " ".join(rnd.choice(words) for _ in range(2000))
    summary = " ".join(rnd.choice(words) for _ in range(2000))
    metric = get_metric("overlap", use_stemmer=False, component="rougeL")
    tracemalloc.start()
    try:
        (score,) = metric.score_batch([Example("1", source, summary)], ScoringContext())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert score.error is None and 0 < score.value <= 1
    assert peak < 12 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_a_long_text_is_split_piece_by_piece_without_a_whole_doc(monkeypatch):
    """The sentences of a text over ``PARSE_PIECE_CHARS`` come from its pieces, parsed one per
    batch; no Doc of the whole text is built (for 5 MB it held a gigabyte)."""
    nlp = textmod.load_spacy(None)
    sizes: list[int] = []
    real_pipe = type(nlp).pipe

    def pipe(self, texts, **kwargs):
        sizes.append(kwargs.get("batch_size"))
        return real_pipe(self, texts, **kwargs)

    def whole(*args, **kwargs):
        raise AssertionError("a Doc of the whole text was built")

    text = " ".join(f"Sentence number {i} is here." for i in range(60))  # ~1,800 characters
    short = [textmod._sentences_alone.__wrapped__(p, None) for p in textmod.pieces(text, 300)]
    monkeypatch.setattr(textmod, "PARSE_PIECE_CHARS", 300)
    monkeypatch.setattr(type(nlp), "pipe", pipe)
    monkeypatch.setattr(textmod, "parse", whole)  # (it joined the pieces' Docs into one)
    sentences = textmod._sentences_alone.__wrapped__(text, None)
    assert list(sentences) == [s for part in short for s in part]
    assert sizes == [1]


@pytest.mark.parametrize("rows", [3, 5000])
def test_embedding_matches_computed_in_blocks_equal_the_whole_matrix(monkeypatch, rows):
    rnd = np.random.default_rng(0)
    x, y = rnd.standard_normal((rows, 8)), rnd.standard_normal((37, 8))
    whole = x @ y.T
    monkeypatch.setattr(embedding, "MAX_BLOCK_CELLS", 37 * 64)  # blocks of 64 rows
    best, where, column = embedding.best_matches(rows, 37, lambda a, b: x[a:b] @ y.T)
    assert np.array_equal(best, whole.max(axis=1))
    assert np.array_equal(where, whole.argmax(axis=1))
    assert np.array_equal(column, whole.max(axis=0))
