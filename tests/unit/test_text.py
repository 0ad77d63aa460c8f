"""Text handling: sentence splitting (one spaCy load per process), sentence windows, token
windows of long texts and their stitching (no token lost, none cut silently)."""

from __future__ import annotations

import numpy as np
import pytest

from faithgate import text as textmod
from faithgate.backends.windowing import stitch_windows, token_windows
from faithgate.types import normalized


def count_words(s: str) -> int:
    return len(s.split())


def test_window_sentences_packs_with_overlap():
    sents = ["a b c", "d e", "f g h", "i", "j k l m"]  # 3, 2, 3, 1, 4 tokens
    windows = textmod.window_sentences(sents, max_tokens=6, count_tokens=count_words, overlap=1)
    assert [(w.start, w.end, w.n_tokens) for w in windows] == [
        (0, 2, 5),  # a..e; adding f g h would make 8
        (1, 4, 6),  # starts one sentence back: d e / f g h / i
        (3, 5, 5),  # i / j k l m
    ]
    assert windows[0].text == "a b c d e"
    assert not any(w.truncated for w in windows)


def test_window_sentences_marks_a_sentence_longer_than_the_limit():
    windows = textmod.window_sentences(["a b c d e f g", "h"], 4, count_words, overlap=1)
    assert windows[0].truncated and (windows[0].start, windows[0].end) == (0, 1)
    assert (windows[-1].start, windows[-1].end) == (1, 2)
    with pytest.raises(ValueError):
        textmod.window_sentences(["a"], 0, count_words)


SOURCE = [
    "The council met on Monday.",  # 0
    "It approved a new park for the harbour district.",  # 1
    "The weather was mild.",  # 2
    "A storm closed the harbour on Friday.",  # 3
    "Ships waited outside for two days.",  # 4
    "Fishermen lost a week of income.",  # 5
]


def test_relevant_sentences_keeps_everything_that_fits():
    assert textmod.relevant_sentences(SOURCE, ["anything"], 100, count_words) == [0, 1, 2, 3, 4, 5]


def test_relevant_sentences_gives_each_summary_sentence_its_evidence_first():
    queries = ["Ships waited for two days.", "The council approved a park."]
    # Query 1's best is 4 (6 words), with 3 before it (7); query 2's is 1 (9): 22 of 23 words.
    # Sentence 0, before 1, would not fit too.
    assert textmod.relevant_sentences(SOURCE, queries, 23, count_words) == [1, 3, 4]
    # Room for one query's evidence only: the first query's comes first.
    assert textmod.relevant_sentences(SOURCE, queries, 13, count_words) == [3, 4]


def test_relevant_sentences_skips_what_does_not_fit_and_falls_back_to_the_lead():
    # The best sentence (1, 9 words) cannot fit in 8, so it is skipped, and 0 is not its context.
    # Then the next in rank (all unrelated, so in source order) that fit: 0 (5); 2 (4) would not.
    assert textmod.relevant_sentences(SOURCE, ["a new park"], 8, count_words) == [0]
    # No word in common with any sentence: the lead, in order.
    assert textmod.relevant_sentences(SOURCE, ["zzz qqq"], 9, count_words) == [0, 2]
    # Symbols only (no vocabulary at all): the lead too.
    assert textmod.relevant_sentences(["!!!", "???"], ["..."], 1, count_words) == [0]
    # Nothing fits at all.
    assert textmod.relevant_sentences(["a b c"], ["a"], 2, count_words) == []


def test_token_windows_cover_everything():
    assert token_windows(5, 8, 2) == [(0, 5)]
    assert token_windows(7, 4, 2) == [(0, 4), (2, 6), (4, 7)]
    # A stride of the window or more is no overlap: it once silently stepped one token.
    for stride in (4, 5):
        with pytest.raises(ValueError, match="stride"):
            token_windows(7, 4, stride)


def test_stitch_takes_each_token_once_from_the_window_where_it_is_central():
    spans = token_windows(7, 4, 2)
    # window w's vector for global token t is (t, w): tells which window each token came from
    outputs = [
        np.array([[t, w] for t in range(a, b)], dtype=float) for w, (a, b) in enumerate(spans)
    ]
    stitched = stitch_windows(spans, outputs)
    assert stitched[:, 0].tolist() == list(range(7))  # every token once, in order
    assert stitched[:, 1].tolist() == [0, 0, 0, 1, 1, 2, 2]  # overlaps split at the middle


def test_tiny_bert_encoder_windows_long_texts(tmp_path):
    """A tiny random BERT with a 32-token context: a 50-token text is embedded in two windows
    and each kept token equals that token's vector from its own window."""
    torch = pytest.importorskip("torch")
    from transformers import BertConfig, BertModel

    from faithgate import models
    from faithgate.backends.torch_backend import TorchTextEncoder

    tok_dir = models.resolve("embedder").location
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    BertModel(cfg).save_pretrained(tmp_path / "tiny")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tok_dir)
    tok.model_max_length = 32
    tok.save_pretrained(tmp_path / "tiny")
    spec = models.resolve("embedder", str(tmp_path / "tiny"))
    enc = TorchTextEncoder(spec, stride=8)
    assert enc.max_length == 32
    text = " ".join(f"w{i}" for i in range(25))  # "w0 w1 ..." -> 2 word pieces each = 50
    n = enc.count_tokens(text)
    (emb,) = enc.token_embeddings([text])
    assert emb.windowed and emb.vectors.shape == (n, 16) and len(emb.tokens) == n
    ids = tok(text, add_special_tokens=False)["input_ids"]
    spans = token_windows(n, 30, 8)
    first = enc._forward([tok.build_inputs_with_special_tokens(ids[: spans[0][1]])], None)[0]
    keep = (spans[1][0] + spans[0][1]) // 2
    np.testing.assert_allclose(emb.vectors[:keep], first[1 : keep + 1], atol=1e-5)
    (short,) = enc.token_embeddings(["w1 w2"])
    assert not short.windowed


@pytest.mark.slow
def test_split_sentences_with_spacy_loaded_once():
    assert textmod.split_sentences("Cats sleep. Dogs bark.") == ["Cats sleep.", "Dogs bark."]
    assert textmod.load_spacy() is textmod.load_spacy()


def test_a_pipeline_that_cannot_split_sentences_is_refused_when_it_loads(tmp_path):
    # spaCy's E030 came from deep inside scoring ("internal error", exit 1) for each text.
    import spacy

    from faithgate.errors import ModelNotFoundError

    spacy.blank("en").to_disk(tmp_path / "blank")
    with pytest.raises(ModelNotFoundError, match="cannot split sentences.*'sentencizer'"):
        textmod.load_spacy(str(tmp_path / "blank"))
    splitting = spacy.blank("en")
    splitting.add_pipe("sentencizer")
    splitting.to_disk(tmp_path / "sentencizer")
    assert textmod.load_spacy(str(tmp_path / "sentencizer")).pipe_names == ["sentencizer"]


def test_sentence_boundaries_from_a_component_that_does_not_declare_them_are_enough():
    import spacy
    from spacy.language import Language

    @Language.component("faithgate_test_splitter")  # declares no "assigns"
    def splitter(doc):
        for token in doc:
            token.is_sent_start = token.i == 0 or doc[token.i - 1].text == "."
        return doc

    nlp = spacy.blank("en")
    nlp.add_pipe("faithgate_test_splitter")
    textmod._refuse_without_sentences(nlp, "custom")  # no error


# CNN/DailyMail highlights, bullet lists and headlines end lines without a full stop; spaCy
# merged such lines, so a metric scored two claims as one sentence and a report could not name
# the unsupported line.
HIGHLIGHTS = (
    "Police arrested two men in Leeds on Monday\n"
    "The victims were taken to hospital in London\n"
    "A third suspect is still at large"
)
WRAPPED = (
    "The mayor of the city said on Monday that the new bridge over the river\n"
    "would open in the spring of next year, after two years of delays caused by\n"
    "the collapse of the main contractor and a dispute over the design of the\n"
    "southern ramp. Residents welcomed the news.\n"
    "\n"
    "Work starts in May.\n"
    "- a bullet about costs\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HIGHLIGHTS, HIGHLIGHTS.split("\n")),
        (
            "- first point\n- second point\n\n- third",
            ["- first point", "- second point", "- third"],
        ),
        ("Headline one\n\n\nHeadline two", ["Headline one", "Headline two"]),
        (
            "The cat sat.\nThe dog barked. It was late.",
            ["The cat sat.", "The dog barked.", "It was late."],
        ),
        ("Cats sleep. Dogs bark.", ["Cats sleep.", "Dogs bark."]),
    ],
)
def test_a_line_break_ends_a_sentence(text, expected):
    assert textmod.split_sentences(text) == expected


def test_hard_wrapped_prose_keeps_its_sentences_across_lines():
    assert textmod.hard_wrapped(WRAPPED) and not textmod.hard_wrapped(HIGHLIGHTS)
    sents = textmod.split_sentences(WRAPPED)
    assert sents[0].startswith("The mayor") and sents[0].endswith("southern ramp.")
    assert sents[1:] == [
        "Residents welcomed the news.",
        "Work starts in May.",
        "- a bullet about costs",
    ]
    assert textmod.line_breaks("one line\n") == []  # a trailing newline is not a break


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # One sentence wrapped once (a triple-quoted string in a test, 80-column output).
        (
            "The company reported a 10% rise in revenue on Thursday,\n"
            "driven by strong iPhone sales in China.",
            [
                "The company reported a 10% rise in revenue on Thursday,\n"
                "driven by strong iPhone sales in China."
            ],
        ),
        # Wrapped narrower than the 40 columns hard_wrapped needs, lines cut after "its", "a".
        (
            "The central bank raised its\nbenchmark rate by a\nquarter point.",
            ["The central bank raised its\nbenchmark rate by a\nquarter point."],
        ),
        # News prose wraps before names and numbers: the other paragraph's width tells.
        (
            "The Commission said 2,000 jobs could be created in\nPoland, Hungary and Slovakia. "
            "BMW and Renault\ndeclined to comment when asked by Reuters on\nMonday.\n\n"
            "Volkswagen said it welcomed the plan, which was\ndrawn up by officials in the "
            "capital over the\nsummer and presented to the member states on\nTuesday in a "
            "closed meeting of the committee.",
            [
                "The Commission said 2,000 jobs could be created in\nPoland, Hungary and Slovakia.",
                "BMW and Renault\ndeclined to comment when asked by Reuters on\nMonday.",
                "Volkswagen said it welcomed the plan, which was\ndrawn up by officials in the "
                "capital over the\nsummer and presented to the member states on\nTuesday in a "
                "closed meeting of the committee.",
            ],
        ),
        # A bullet's text going on, indented, on its next lines (one opening with a digit).
        (
            "- The company cut 2,000 jobs and closed\n  50 stores in Europe\n- The CEO resigned",
            [
                "- The company cut 2,000 jobs and closed\n  50 stores in Europe",
                "- The CEO resigned",
            ],
        ),
        # The parser's "2." stays with its item.
        (
            "1. Shares fell on Monday.\n2. The CEO resigned.",
            ["1. Shares fell on Monday.", "2. The CEO resigned."],
        ),
        # Lines opening with a digit, a capital or "iPhone" are new claims, not continuations.
        (
            "Revenue rose 10% to $90 billion in the first quarter of the year 2024\n"
            "2,000 jobs will be cut across the company's European offices next year\n"
            "50 stores in China will close by the end of the month, the firm said\n"
            "iPhone sales fell 3% in China and India over the same quarter of 2024",
            [
                "Revenue rose 10% to $90 billion in the first quarter of the year 2024",
                "2,000 jobs will be cut across the company's European offices next year",
                "50 stores in China will close by the end of the month, the firm said",
                "iPhone sales fell 3% in China and India over the same quarter of 2024",
            ],
        ),
        # Lower-cased highlights (case tells nothing) with a tokeniser's leading space, and
        # with a stray capital (a terminal escape left in a Polytope summary).
        (
            "floods hit western sydney on saturday\n the ses warned of more rain",
            ["floods hit western sydney on saturday", "the ses warned of more rain"],
        ),
        (
            "\x1b[Asent letter : prime minister david cameron has written to first great "
            "western to request it reviews plans to increase fares on trains in his constituency"
            "\npassengers travelling from charlbury can buy an off-peak return to london",
            [
                "\x1b[Asent letter : prime minister david cameron has written to first great "
                "western to request it reviews plans to increase fares on trains in his "
                "constituency",
                "passengers travelling from charlbury can buy an off-peak return to london",
            ],
        ),
    ],
)
def test_a_line_break_inside_a_sentence_does_not_end_it(text, expected):
    assert textmod.split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Short claims in lower case without full stops stay a list (in cased text too).
        (
            "Key points\nrevenue rose 5% in March\nprofit fell 3% in April\nthe CEO resigned",
            [
                "Key points",
                "revenue rose 5% in March",
                "profit fell 3% in April",
                "the CEO resigned",
            ],
        ),
        # Capitalised lines under a bullet that was not cut off are claims of their own.
        (
            "- Key findings\n  The drug reduced mortality by 20%\n  Side effects were rare\n- Costs fell",
            [
                "- Key findings",
                "The drug reduced mortality by 20%",
                "Side effects were rare",
                "- Costs fell",
            ],
        ),
        # A number on a line of its own is not joined to the next sentence.
        ("Steps:\n1.\nOpen the box.", ["Steps:", "1.", "Open the box."]),
        # A comma or a word no sentence ends on carries a sentence over a capital.
        (
            "The report cites Paris, London,\nBerlin and Rome as hubs.",
            ["The report cites Paris, London,\nBerlin and Rome as hubs."],
        ),
    ],
)
def test_a_line_break_ends_a_claim_that_is_not_cut_off(text, expected):
    assert textmod.split_sentences(text) == expected


@pytest.mark.parametrize("end", ["\r\n", "\r", "\u2028", "\x85"])
def test_every_kind_of_line_end_ends_a_sentence_as_newline_does(end):
    text = HIGHLIGHTS.replace("\n", end)
    assert [s.strip() for s in textmod.split_sentences(text)] == HIGHLIGHTS.split("\n")
    assert normalized(text) == HIGHLIGHTS
    wrapped = WRAPPED.replace("\n", end)
    assert textmod.hard_wrapped(wrapped)
    assert len(textmod.split_sentences(wrapped)) == len(textmod.split_sentences(WRAPPED))


def test_wrapping_is_decided_per_paragraph():
    # A wrapped paragraph does not make the highlights of another paragraph one sentence.
    text = WRAPPED.split("\n\n")[0] + "\n\n" + HIGHLIGHTS
    assert textmod.split_sentences(text)[-3:] == HIGHLIGHTS.split("\n")


def test_a_paragraph_separator_is_a_blank_line():
    assert normalized("One.\u2029Two.") == "One.\n\nTwo."
